#include "bench/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>

#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

namespace tollgate::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The pids of the children that run, for KillEveryChild.
std::mutex& LiveMutex() {
  static std::mutex mu;
  return mu;
}
std::set<pid_t>& Live() {
  static std::set<pid_t> pids;
  return pids;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Tail(const std::string& text, size_t n = 3000) {
  return text.size() <= n ? text : "…" + text.substr(text.size() - n);
}

std::string DescribeWaitStatus(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("signal ") + strsignal(WTERMSIG(st));
  return "status " + std::to_string(st);
}

}  // namespace

Status ChildProcess::Start(const std::vector<std::string>& argv, const std::string& log_base) {
  Kill();
  status_.reset();
  argv_ = argv;
  out_path_ = log_base + ".out";
  err_path_ = log_base + ".err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  Status s = SpawnChild(argv_, &fa, &pid_);
  posix_spawn_file_actions_destroy(&fa);
  return s;
}

Status SpawnChild(const std::vector<std::string>& argv, const posix_spawn_file_actions_t* fa, pid_t* pid) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  int rc;
  {
    std::lock_guard<std::mutex> lock(LiveMutex());
    rc = posix_spawn(pid, args[0], fa, &attr, args.data(), environ);
    if (rc == 0) Live().insert(*pid);
  }
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    *pid = -1;
    return Status::Error("E_BENCH", "posix_spawn " + argv[0] + ": " + strerror(rc));
  }
  return Status::Ok();
}

pid_t ReapChild(pid_t pid, int* status, int options) {
  std::lock_guard<std::mutex> lock(LiveMutex());
  const pid_t r = waitpid(pid, status, options);
  if (r == pid) Live().erase(pid);
  return r;
}

std::string ChildProcess::Out() const { return ReadAll(out_path_); }

std::string ChildProcess::Describe() const {
  std::string cmd;
  for (const auto& a : argv_) cmd += (cmd.empty() ? "" : " ") + a;
  return cmd + "\n--- stdout:\n" + Tail(Out()) + "\n--- stderr:\n" + Tail(ReadAll(err_path_));
}

std::optional<int> ChildProcess::Poll() {
  if (pid_ <= 0) return status_;
  int st = 0;
  if (ReapChild(pid_, &st, WNOHANG) == pid_) {
    pid_ = -1;
    status_ = st;
  }
  return status_;
}

Status ChildProcess::WaitForOutput(const std::string& marker, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (Out().find(marker) != std::string::npos) return Status::Ok();
    if (auto st = Poll()) {
      return Status::Error("E_BENCH", "exited (" + DescribeWaitStatus(*st) + ") before printing '" + marker +
                                          "': " + Describe());
    }
    if (Clock::now() >= deadline) {
      return Status::Error("E_BENCH", "did not print '" + marker + "' within " +
                                          std::to_string(timeout.count() / 1000) + " s: " + Describe());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status ChildProcess::WaitForExit(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::optional<int> st;
  while (!(st = Poll()) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!st) {
    Kill();
    return Status::Error(
        "E_BENCH", "did not exit within " + std::to_string(timeout.count() / 1000) + " s: " + Describe());
  }
  if (WIFEXITED(*st) && WEXITSTATUS(*st) == 0) return Status::Ok();
  return Status::Error("E_BENCH", DescribeWaitStatus(*st) + ": " + Describe());
}

void ChildProcess::Stop(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + timeout;
  while (!Poll() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Kill();
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);  // not reaped yet: the pid is still this child's
  int st = 0;
  ReapChild(pid_, &st, 0);
  pid_ = -1;
  status_ = st;
}

void KillEveryChild() {
  std::lock_guard<std::mutex> lock(LiveMutex());
  for (pid_t pid : Live()) kill(pid, SIGKILL);
}

}  // namespace tollgate::bench
