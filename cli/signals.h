// Stopping long-running subcommands (up, broker, stage) on SIGINT/SIGTERM.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace tollgate::cli {

// Blocks SIGINT/SIGTERM in this thread and every thread started after this
// call, so WaitForSignal is the one place that receives them.
inline void BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Waits for SIGINT or SIGTERM (blocked by BlockStopSignals) and returns it.
inline int WaitForSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace tollgate::cli
