// A child process of a benchmark (bench/distributed_bench.h): started with
// posix_spawn (argv[0] a path, no shell), stdin /dev/null, stdout and stderr
// to files, default signal dispositions and an empty signal mask whatever
// the parent blocks. The destructor kills (SIGKILL) and reaps it if it still
// runs, so no child outlives the benchmark's return on any path; a process
// that is itself stopped by a signal ends its children with
// KillEveryChild() first (cli/bench_cmd.cpp).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tollgate::bench {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() { Kill(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts `argv`; its output goes to `log_base`.out and `log_base`.err.
  Status Start(const std::vector<std::string>& argv, const std::string& log_base);
  // What it printed so far.
  std::string Out() const;
  // Its command line and the tails of its stdout and stderr, for errors.
  std::string Describe() const;

  // Waits until its stdout holds `marker`; fails when it exits first or at
  // `timeout`.
  Status WaitForOutput(const std::string& marker, std::chrono::milliseconds timeout);
  // Waits until it exits: ok on exit status 0, else the status and Describe().
  Status WaitForExit(std::chrono::milliseconds timeout);
  // SIGTERM, then up to `timeout` for it to exit (a stage drains), then
  // SIGKILL. Reaped either way.
  void Stop(std::chrono::milliseconds timeout);
  // SIGKILL and reap, if it runs.
  void Kill();

 private:
  // Reaps it if it has exited; its wait status once it has.
  std::optional<int> Poll();

  pid_t pid_ = -1;
  std::optional<int> status_;
  std::vector<std::string> argv_;
  std::string out_path_, err_path_;
};

// SIGKILL to every ChildProcess of this process that still runs. For the
// last moments of a process stopped by a signal (thread-safe).
void KillEveryChild();

}  // namespace tollgate::bench
