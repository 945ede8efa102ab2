// A child process of a benchmark (bench/distributed_bench.h): started with
// posix_spawn (argv[0] a path, no shell), stdin /dev/null, stdout and stderr
// to files, default signal dispositions and an empty signal mask whatever
// the parent blocks. The destructor kills (SIGKILL) and reaps it if it still
// runs, so no child outlives the benchmark's return on any path; a process
// that is itself stopped by a signal ends its children with
// KillEveryChild() first (cli/bench_cmd.cpp).
#pragma once

#include <spawn.h>
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

// posix_spawn of `argv` (argv[0] a path, no shell) with the redirections of
// `fa`, default signal dispositions and an empty signal mask whatever this
// process blocks; registered for KillEveryChild until ReapChild reaps it.
// ChildProcess starts its children with it; so can a benchmark that needs
// other redirections (pipes: bench/mcp_bench.cpp).
Status SpawnChild(const std::vector<std::string>& argv, const posix_spawn_file_actions_t* fa, pid_t* pid);
// waitpid(pid, status, options); a child it reaps is unregistered under the
// same lock, so KillEveryChild never signals a pid handed to another process.
pid_t ReapChild(pid_t pid, int* status, int options);

// SIGKILL to every child SpawnChild started that still runs. For the
// last moments of a process stopped by a signal (thread-safe).
void KillEveryChild();

}  // namespace tollgate::bench
