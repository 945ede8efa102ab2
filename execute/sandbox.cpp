#include "execute/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "execute/tool.h"

namespace tollgate {
namespace {

void SetLimit(int resource, rlim_t v) {
  rlimit r{v, v};
  setrlimit(resource, &r);
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Appends what is readable on `fd`; false at EOF or error.
bool Drain(int fd, std::string* out, bool* truncated, size_t cap) {
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      size_t room = out->size() < cap ? cap - out->size() : 0;
      if (static_cast<size_t>(n) > room) *truncated = true;
      out->append(buf, std::min(room, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    return false;
  }
}

// Field 22 of /proc/<pid>/stat (start time in clock ticks) and field 5
// (process group); false when the process is gone.
bool ProcStat(const std::string& pid, unsigned long long* start, long* pgrp) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return false;
  std::istringstream rest(text.substr(close_paren + 2));
  std::string field;
  std::vector<std::string> f;
  while (rest >> field) f.push_back(field);
  if (f.size() < 20) return false;  // f[0] is field 3 (state)
  *pgrp = std::stol(f[2]);
  *start = std::stoull(f[19]);
  return true;
}

}  // namespace

int KillLeftovers(const std::string& run_dir) {
  int killed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::ifstream in(entry.path());
    unsigned long long leader_start = 0;
    in >> leader_start;
    const long pgid = std::strtol(name.c_str(), nullptr, 10);
    if (pgid > 1 && in) {
      for (const auto& p : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string pid = p.path().filename().string();
        if (pid.empty() || !std::isdigit(static_cast<unsigned char>(pid[0]))) continue;
        unsigned long long start = 0;
        long pgrp = 0;
        if (ProcStat(pid, &start, &pgrp) && pgrp == pgid && start >= leader_start) {
          killed += kill(static_cast<pid_t>(std::stol(pid)), SIGKILL) == 0;
        }
      }
    }
    std::filesystem::remove(entry.path(), ec);
  }
  return killed;
}

std::string FindProgram(const std::string& name) {
  auto executable = [](const std::string& p) {
    struct stat st{};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
  };
  if (name.empty()) return "";
  if (name[0] == '/') return executable(name) ? name : "";
  if (name.find('/') != std::string::npos) return "";
  std::string dirs = kSafePath;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string p = dirs.substr(start, end - start) + "/" + name;
    if (executable(p)) return p;
    start = end + 1;
  }
  return "";
}

Status RunSandboxed(const ProcessSpec& spec, ProcessResult* res) {
  // A tool that exits without reading its stdin makes our write to it fail
  // with EPIPE, which the loop below handles; the default SIGPIPE would
  // instead kill the whole process (every stage with it).
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { signal(SIGPIPE, SIG_IGN); });
  *res = ProcessResult{};
  uid_t uid = 0;
  gid_t gid = 0;
  bool switch_user = geteuid() == 0 && !spec.run_as.empty();
  if (switch_user) {
    passwd pw{};
    passwd* found = nullptr;
    char buf[4096];
    if (getpwnam_r(spec.run_as.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
      return Status::Error(errc::kSandbox, "run_as user '" + spec.run_as + "' does not exist");
    }
    uid = pw.pw_uid;
    gid = pw.pw_gid;
  }
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const SandboxLimits& l = spec.limits;

  int in[2], out[2], err[2], report[2];
  if (pipe2(in, O_CLOEXEC) != 0) return Status::Error(errc::kToolExec, "pipe failed");
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    return Status::Error(errc::kToolExec, "pipe failed");
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    return Status::Error(errc::kToolExec, "pipe failed");
  }
  if (pipe2(report, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]), close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    return Status::Error(errc::kToolExec, "pipe failed");
  }
  const pid_t parent = getpid();
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1], report[0], report[1]}) close(fd);
    return Status::Error(errc::kToolExec, std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    auto fail = [&](int code) {
      int e[2] = {code, errno};
      (void)!write(report[1], e, sizeof e);
      _exit(127);
    };
    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);  // the tool gets the usual default, not our SIG_IGN
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) fail(1);
    if (spec.cwd_fd >= 0 && fchdir(spec.cwd_fd) != 0) fail(2);
    SetLimit(RLIMIT_CPU, static_cast<rlim_t>(l.cpu_seconds));
    SetLimit(RLIMIT_AS, static_cast<rlim_t>(l.memory_mb) << 20);
    SetLimit(RLIMIT_FSIZE, static_cast<rlim_t>(l.file_size_mb) << 20);
    SetLimit(RLIMIT_NOFILE, static_cast<rlim_t>(l.open_files));
    SetLimit(RLIMIT_NPROC, static_cast<rlim_t>(l.processes));
    SetLimit(RLIMIT_CORE, 0);
    if (switch_user) {
      if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) fail(3);
    }
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    // Every inherited descriptor but 0-2 and the report pipe (CLOEXEC) goes.
    syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);
    execve(spec.path.c_str(), argv.data(), envp.data());
    fail(4);
  }
  setpgid(pid, pid);  // also here: no window where a kill(-pid) misses
  std::string record;
  if (!spec.run_dir.empty()) {
    unsigned long long start = 0;
    long pgrp = 0;
    if (ProcStat(std::to_string(pid), &start, &pgrp)) {
      std::error_code ec;
      std::filesystem::create_directories(spec.run_dir, ec);
      record = spec.run_dir + "/" + std::to_string(pid);
      std::ofstream(record) << start << "\n";
    }
  }
  close(in[0]), close(out[1]), close(err[1]), close(report[1]);
  int started[2] = {0, 0};
  ssize_t rn;
  do rn = read(report[0], started, sizeof started);
  while (rn < 0 && errno == EINTR);
  close(report[0]);
  if (rn == static_cast<ssize_t>(sizeof started)) {
    kill(-pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(in[1]), close(out[0]), close(err[0]);
    const std::string step = started[0] == 1   ? "redirect stdio"
                             : started[0] == 2 ? "enter the workspace"
                             : started[0] == 3 ? "switch to user " + spec.run_as
                                               : "exec";
    return Status::Error(errc::kToolExec, "cannot " + step + " for " + spec.path + ": " + std::strerror(started[1]));
  }
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  size_t written = 0;
  if (spec.stdin_data.empty()) CloseFd(in[1]);
  const auto deadline = t0 + std::chrono::milliseconds(l.timeout_ms);
  bool exited = false;
  int status = 0;
  for (;;) {
    pollfd fds[3];
    int n = 0;
    if (out[0] >= 0) fds[n++] = {out[0], POLLIN, 0};
    if (err[0] >= 0) fds[n++] = {err[0], POLLIN, 0};
    if (in[1] >= 0) fds[n++] = {in[1], POLLOUT, 0};
    poll(fds, n, 20);
    if (in[1] >= 0) {
      ssize_t w = write(in[1], spec.stdin_data.data() + written, spec.stdin_data.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == spec.stdin_data.size()) CloseFd(in[1]);
    }
    if (out[0] >= 0 && !Drain(out[0], &res->out, &res->out_truncated, l.max_output_bytes)) CloseFd(out[0]);
    if (err[0] >= 0 && !Drain(err[0], &res->err, &res->err_truncated, l.max_output_bytes)) CloseFd(err[0]);
    // Exited? Look without reaping: the leader's pid (= the group id) stays
    // ours until waitpid, so the kill below cannot hit a recycled group.
    siginfo_t si{};
    if (waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) exited = true;
    if (exited && out[0] < 0 && err[0] < 0) break;
    if (exited) {
      // Output pipes held open by a leftover descendant: end it.
      kill(-pid, SIGKILL);
      if (std::chrono::steady_clock::now() > deadline + std::chrono::milliseconds(500)) break;
    }
    if (!exited && std::chrono::steady_clock::now() >= deadline) {
      res->timed_out = true;
      kill(-pid, SIGKILL);
    }
  }
  kill(-pid, SIGKILL);  // whatever of the group is left
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!record.empty()) {
    std::error_code ec;
    std::filesystem::remove(record, ec);
  }
  CloseFd(in[1]);
  if (out[0] >= 0) Drain(out[0], &res->out, &res->out_truncated, l.max_output_bytes), CloseFd(out[0]);
  if (err[0] >= 0) Drain(err[0], &res->err, &res->err_truncated, l.max_output_bytes), CloseFd(err[0]);
  if (WIFEXITED(status)) res->exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) res->signal = WTERMSIG(status);
  res->duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

}  // namespace tollgate
