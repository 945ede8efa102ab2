// A child process for tests that run the real `tollgate` binary (or any
// program) beside an in-process pipeline: stdout and stderr go to files the
// test reads while it runs. Killed and reaped on destruction.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tollgate::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (pid_ > 0 && !exit_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Starts argv[0] (a path); stdout to `out_path`, stderr to `err_path`.
  bool Start(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path) {
    out_path_ = out_path;
    err_path_ = err_path;
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    const int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) pid_ = -1;
    return pid_ > 0;
  }

  // The exit code once it has exited (-1 when killed by a signal), or
  // nullopt while it runs.
  std::optional<int> Poll() {
    if (exit_ || pid_ <= 0) return exit_;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exit_;
  }
  // Waits for the exit at most `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!Poll() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Poll();
  }
  std::string out() const { return Read(out_path_); }
  std::string err() const { return Read(err_path_); }

 private:
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  pid_t pid_ = -1;
  std::optional<int> exit_;
  std::string out_path_, err_path_;
};

// Polls `cond` every 20 ms until it holds or `timeout` passes.
inline bool WaitUntil(const std::function<bool()>& cond,
                      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace tollgate::testing
