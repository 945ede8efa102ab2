#include "execute/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "execute/seccomp_filter.h"
#include "execute/tool.h"
#include "execute/uid_table.h"

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

std::mutex sandbox_program_mu;
std::string sandbox_program = "/usr/bin/bwrap";

// Where the child (as root, before becoming run_as) mounts what bwrap must
// bind: bwrap runs as run_as and resolves its sources by path, and the data
// directory (mode 0700) is not reachable for that user. The child gets a
// private mount namespace, a tmpfs here, and each source (an fd opened as
// root) bound on <stage>/<i>; bwrap binds those. The tmpfs only hides this
// directory inside that namespace, never on the host.
constexpr const char* kStage = "/tmp";

// The system as programs see it: read-only, and only what running them needs.
// /etc is not bound whole (it can hold credentials); these files suffice for
// the dynamic loader, user and group names, the time zone and Debian's
// alternatives symlinks (/usr/bin/awk -> /etc/alternatives/awk).
constexpr const char* kEtcFiles[] = {"/etc/ld.so.cache", "/etc/ld.so.conf",    "/etc/passwd",
                                     "/etc/group",       "/etc/nsswitch.conf", "/etc/localtime",
                                     "/etc/alternatives"};

// /bin, /lib... as on the host: merged-usr symlinks become the same symlinks,
// real directories are bound read-only.
std::vector<std::string> SystemArgs() {
  std::vector<std::string> a{"--ro-bind", "/usr", "/usr"};
  for (const char* d : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    struct stat st {};
    if (lstat(d, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlink(d, target, sizeof target - 1);
      if (n <= 0) continue;
      a.insert(a.end(), {"--symlink", std::string(target, static_cast<size_t>(n)), d});
    } else if (S_ISDIR(st.st_mode)) {
      a.insert(a.end(), {"--ro-bind", d, d});
    }
  }
  for (const char* f : kEtcFiles) a.insert(a.end(), {"--ro-bind-try", f, f});
  return a;
}

// Whether `path` is visible through SystemArgs() without a bind of its own.
bool UnderSystem(const std::string& path) {
  for (const char* d : {"/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/"}) {
    if (path.rfind(d, 0) == 0) return true;
  }
  return false;
}

// One host path bound into the sandbox at the same path, opened (as
// tollgate's user) before fork.
struct Bind {
  int fd = -1;
  std::string dest;
  bool writable = false;
  bool dir = true;
  std::string staged;  // <kStage>/<i>
};

std::mutex uid_table_mu;
std::unique_ptr<UidTable> uid_table;  // kSandboxUidTable, opened on first use

}  // namespace

Status SandboxUid(const std::string& workspace, uid_t* uid) {
  std::lock_guard<std::mutex> l(uid_table_mu);
  if (!uid_table) {
    Status s = UidTable::Open(kSandboxUidTable, kSandboxUidBase, kSandboxUidRange, &uid_table);
    if (!s.ok()) return s;
  }
  return uid_table->Get(workspace, uid);
}

void SetSandboxProgram(const std::string& path) {
  std::lock_guard<std::mutex> l(sandbox_program_mu);
  sandbox_program = path;
}

std::string SandboxProgram() {
  std::lock_guard<std::mutex> l(sandbox_program_mu);
  return sandbox_program;
}

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
    struct stat st {};
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

// bwrap's command line, for both ways of reaching the binds: staged (as
// root dropping to run_as) or by fd (bwrap runs as tollgate's own user).
static std::vector<std::string> BwrapArgv(const ProcessSpec& spec, const std::string& bwrap,
                                          const std::vector<Bind>& binds, int status_fd, int seccomp_fd,
                                          bool staged) {
  std::vector<std::string> a{bwrap,
                             "--unshare-all",
                             "--unshare-user",
                             "--die-with-parent",
                             "--new-session",
                             "--cap-drop",
                             "ALL",
                             "--json-status-fd",
                             std::to_string(status_fd),
                             "--seccomp",
                             std::to_string(seccomp_fd)};
  if (spec.share_net) a.push_back("--share-net");
  for (auto& x : SystemArgs()) a.push_back(std::move(x));
  if (spec.share_net) {
    // What a networked program needs to resolve names and check TLS.
    for (const char* f : {"/etc/resolv.conf", "/etc/hosts", "/etc/ssl", "/etc/ca-certificates"}) {
      a.insert(a.end(), {"--ro-bind-try", f, f});
    }
  }
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"});
  for (const auto& b : binds) {
    if (staged) {
      a.insert(a.end(), {b.writable ? "--bind" : "--ro-bind", b.staged, b.dest});
    } else {
      a.insert(a.end(), {b.writable ? "--bind-fd" : "--ro-bind-fd", std::to_string(b.fd), b.dest});
    }
  }
  // The root (a tmpfs holding the mount points) read-only too: the
  // workspace and the private /tmp are all a program can write.
  a.insert(a.end(), {"--remount-ro", "/", "--chdir", spec.workspace, "--", spec.path});
  for (size_t i = 1; i < spec.argv.size(); ++i) a.push_back(spec.argv[i]);
  return a;
}

// What the sandbox binds, each opened now (as root when root: the data
// directory is 0700), so that neither bwrap nor the child resolves those
// paths as run_as. On failure nothing stays open.
static Status OpenBinds(const ProcessSpec& spec, std::vector<Bind>* out) {
  std::vector<Bind>& binds = *out;
  {
    Bind ws;
    ws.fd = fcntl(spec.cwd_fd, F_DUPFD_CLOEXEC, 3);
    ws.dest = spec.workspace;
    ws.writable = true;
    binds.push_back(ws);
  }
  std::vector<std::pair<std::string, bool>> extra;  // path, is a directory
  for (const auto& p : spec.read_only) extra.push_back({p, true});
  bool program_visible = UnderSystem(spec.path);
  for (const auto& p : spec.read_only) program_visible = program_visible || spec.path.rfind(p + "/", 0) == 0;
  if (!program_visible) extra.push_back({spec.path, false});
  for (const auto& [path, dir] : extra) {
    Bind b;
    b.fd = open(path.c_str(), O_PATH | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    b.dest = path;
    b.dir = dir;
    binds.push_back(b);
  }
  for (size_t i = 0; i < binds.size(); ++i) {
    if (binds[i].fd < 0) {
      const int e = errno;
      const std::string what = binds[i].dest;
      for (auto& b : binds) CloseFd(b.fd);
      binds.clear();
      return Status::Error(errc::kToolExec, "cannot open " + what + " for the sandbox: " + std::strerror(e));
    }
    binds[i].staged = std::string(kStage) + "/" + std::to_string(i);
  }
  return Status::Ok();
}

// What the child needs after fork, all built before it.
struct ChildPlan {
  const std::string& bwrap;
  const std::vector<Bind>& binds;
  std::vector<char*>& argv;
  std::vector<char*>& envp;
  int in_fd, out_fd, err_fd, report_fd, status_fd, seccomp_fd;
  bool switch_user;
  uid_t uid;
  gid_t gid;
  pid_t parent;
};

// The child between fork and exec: only async-signal-safe calls, no
// allocation. A failure is reported on report_fd as {step, errno}.
[[noreturn]] static void ExecChild(const ProcessSpec& spec, const ChildPlan& c) {
  const SandboxLimits& l = spec.limits;
  auto fail = [&](int code) {
    int e[2] = {code, errno};
    (void)!write(c.report_fd, e, sizeof e);
    _exit(127);
  };
  setpgid(0, 0);
  // The tool gets the usual dispositions and mask, not ours nor what `up`
  // inherited (a shell starting it in the background ignores SIGINT and
  // SIGQUIT, and exec keeps an ignored signal ignored: C-c would do nothing).
  for (int sig : {SIGPIPE, SIGINT, SIGQUIT}) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (spec.terminal >= 0) {
    if (dup2(spec.terminal, 0) < 0 || dup2(spec.terminal, 1) < 0 || dup2(spec.terminal, 2) < 0) fail(1);
  } else if (dup2(c.in_fd, 0) < 0 || dup2(c.out_fd, 1) < 0 || dup2(c.err_fd, 2) < 0) {
    fail(1);
  }
  if (fchdir(spec.cwd_fd) != 0) fail(2);
  if (c.switch_user) {
    // The stage (see kStage): a private mount namespace, so nothing here
    // is seen on the host, and each bind's fd mounted on <stage>/<i>.
    if (unshare(CLONE_NEWNS) != 0) fail(5);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail(5);
    // A bind's source must be a mount of this namespace, so each path is
    // opened again here (before the stage hides /tmp) and must be the
    // very inode opened before fork: a path swapped since fails closed.
    int local[64];
    if (c.binds.size() > 64) fail(5);
    for (size_t i = 0; i < c.binds.size(); ++i) {
      local[i] = open(c.binds[i].dest.c_str(), O_PATH | O_CLOEXEC | (c.binds[i].writable ? O_NOFOLLOW : 0));
      struct stat a {
      }, b{};
      if (local[i] < 0 || fstat(local[i], &a) != 0 || fstat(c.binds[i].fd, &b) != 0 || a.st_dev != b.st_dev ||
          a.st_ino != b.st_ino) {
        fail(5);
      }
    }
    if (mount("tollgate-stage", kStage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") != 0) fail(5);
    for (size_t i = 0; i < c.binds.size(); ++i) {
      const Bind& b = c.binds[i];
      if (b.dir) {
        if (mkdir(b.staged.c_str(), 0755) != 0) fail(5);
      } else {
        int f = open(b.staged.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (f < 0) fail(5);
        close(f);
      }
      // "/proc/self/fd/<n>", formatted without allocating.
      char src[32] = "/proc/self/fd/";
      char digits[12];
      int nd = 0;
      for (int v = local[i]; nd == 0 || v > 0; v /= 10) digits[nd++] = static_cast<char>('0' + v % 10);
      size_t k = std::strlen(src);
      while (nd > 0) src[k++] = digits[--nd];
      src[k] = '\0';
      if (mount(src, b.staged.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) fail(5);
    }
  }
  SetLimit(RLIMIT_CPU, static_cast<rlim_t>(l.cpu_seconds));
  if (l.memory_mb > 0) SetLimit(RLIMIT_AS, static_cast<rlim_t>(l.memory_mb) << 20);
  SetLimit(RLIMIT_FSIZE, static_cast<rlim_t>(l.file_size_mb) << 20);
  SetLimit(RLIMIT_NOFILE, static_cast<rlim_t>(l.open_files));
  SetLimit(RLIMIT_CORE, 0);
  if (c.switch_user) {
    if (setgroups(0, nullptr) != 0 || setgid(c.gid) != 0 || setuid(c.uid) != 0) fail(3);
  }
  // After setuid: a limit already exceeded when the uid changes makes
  // execve fail (EAGAIN); set now, it bounds the program's own forks.
  SetLimit(RLIMIT_NPROC, static_cast<rlim_t>(l.processes));
  // After setuid, which clears the parent-death signal; then check the
  // parent did not die before it was set (we would be orphaned already).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != c.parent) _exit(127);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  // Every inherited descriptor but 0-2 and those bwrap is told about goes
  // at exec (bwrap itself keeps none of them for the program).
  syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);
  if (fcntl(c.status_fd, F_SETFD, 0) != 0 || fcntl(c.seccomp_fd, F_SETFD, 0) != 0) fail(4);
  if (!c.switch_user) {
    for (const auto& b : c.binds) {
      if (fcntl(b.fd, F_SETFD, 0) != 0) fail(4);
    }
  }
  execve(c.bwrap.c_str(), c.argv.data(), c.envp.data());
  fail(4);
}

// Where a started sandbox is recorded (run_dir/<pid> holding its start
// time), so a restarted process can find and kill what it left. "" when
// there is no run_dir or the process is already gone.
static std::string RecordRunning(const std::string& run_dir, pid_t pid) {
  if (run_dir.empty()) return "";
  unsigned long long start = 0;
  long pgrp = 0;
  if (!ProcStat(std::to_string(pid), &start, &pgrp)) return "";
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  const std::string record = run_dir + "/" + std::to_string(pid);
  std::ofstream(record) << start << "\n";
  return record;
}

// The error for a child that reported failing at `step` (ExecChild's codes).
static Status ChildFailure(const ProcessSpec& spec, const std::string& bwrap, int step, int error) {
  const std::string what = step == 1   ? "redirect stdio"
                           : step == 2 ? "enter the workspace"
                           : step == 3 ? "switch to user " + spec.run_as
                           : step == 5 ? "stage the sandbox's mounts"
                                       : "exec " + bwrap;
  return Status::Error(step == 5 || step == 4 ? errc::kSandbox : errc::kToolExec,
                       "cannot " + what + " for " + spec.path + ": " + std::strerror(error));
}

// One function on purpose: it owns a dozen descriptors across fork, and
// each early return closes exactly those open at that point, which is
// reviewed best in one place.
Status StartSandboxed(const ProcessSpec& spec, SandboxedChild* child) {
  // A tool that exits without reading its stdin makes our write to it fail
  // with EPIPE, which the callers handle; the default SIGPIPE would instead
  // kill the whole process (every stage with it).
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { signal(SIGPIPE, SIG_IGN); });
  *child = SandboxedChild{};
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
    gid = pw.pw_gid;
    if (Status s = SandboxUid(spec.workspace, &uid); !s.ok()) return s;
  }
  const std::string bwrap = SandboxProgram();
  if (access(bwrap.c_str(), X_OK) != 0) {
    return Status::Error(errc::kSandbox, "the sandbox program " + bwrap +
                                             " is missing (install bubblewrap); "
                                             "commands and CLI tools never run unconfined");
  }
  if (spec.cwd_fd < 0 || spec.workspace.empty() || spec.workspace[0] != '/') {
    return Status::Error(errc::kSandbox, "no workspace to run " + spec.path + " in");
  }

  // The workspace directory belongs to run_as, so the program can create
  // files in it (files the file tools wrote stay tollgate's: read-only to it).
  if (switch_user) {
    struct stat st {};
    if (fstat(spec.cwd_fd, &st) == 0 && (st.st_uid != uid || st.st_gid != gid) &&
        fchownat(spec.cwd_fd, "", uid, gid, AT_EMPTY_PATH) != 0) {
      return Status::Error(errc::kSandbox, "cannot give the workspace " + spec.workspace + " to " +
                                               spec.run_as + ": " + std::strerror(errno));
    }
  }
  std::vector<Bind> binds;
  int seccomp_fd = -1;  // bwrap --seccomp; closed with the binds
  auto close_binds = [&] {
    for (auto& b : binds) CloseFd(b.fd);
    CloseFd(seccomp_fd);
  };
  if (Status s = OpenBinds(spec, &binds); !s.ok()) return s;
  if (Status s = SeccompProgramFd(&seccomp_fd); !s.ok()) {
    close_binds();
    return s;
  }
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    close_binds();
    return Status::Error(errc::kToolExec, "pipe failed");
  }

  const std::vector<std::string> args =
      BwrapArgv(spec, bwrap, binds, status_pipe[1], seccomp_fd, switch_user);
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int in[2], out[2], err[2], report[2];
  auto fail_early = [&](std::initializer_list<int> fds) {
    for (int fd : fds) close(fd);
    close(status_pipe[0]), close(status_pipe[1]);
    close_binds();
    return Status::Error(errc::kToolExec, "pipe failed");
  };
  if (pipe2(in, O_CLOEXEC) != 0) return fail_early({});
  if (pipe2(out, O_CLOEXEC) != 0) return fail_early({in[0], in[1]});
  if (pipe2(err, O_CLOEXEC) != 0) return fail_early({in[0], in[1], out[0], out[1]});
  if (pipe2(report, O_CLOEXEC) != 0) return fail_early({in[0], in[1], out[0], out[1], err[0], err[1]});
  const pid_t parent = getpid();
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1], report[0], report[1], status_pipe[0],
                   status_pipe[1]}) {
      close(fd);
    }
    close_binds();
    return Status::Error(errc::kToolExec, std::string("fork failed: ") + std::strerror(e));
  }
  if (pid == 0) {
    ExecChild(spec, ChildPlan{bwrap, binds, argv, envp, in[0], out[1], err[1], report[1], status_pipe[1],
                              seccomp_fd, switch_user, uid, gid, parent});
  }
  setpgid(pid, pid);  // also here: no window where a kill(-pid) misses
  close_binds();
  close(status_pipe[1]);
  const std::string record = RecordRunning(spec.run_dir, pid);
  close(in[0]), close(out[1]), close(err[1]), close(report[1]);
  int started[2] = {0, 0};
  ssize_t rn;
  do rn = read(report[0], started, sizeof started);
  while (rn < 0 && errno == EINTR);
  close(report[0]);
  if (rn == static_cast<ssize_t>(sizeof started)) {
    kill(-pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(in[1]), close(out[0]), close(err[0]), close(status_pipe[0]);
    if (!record.empty()) {
      std::error_code ec;
      std::filesystem::remove(record, ec);
    }
    return ChildFailure(spec, bwrap, started[0], started[1]);
  }
  if (spec.terminal >= 0) {  // the program talks through its terminal only
    CloseFd(in[1]), CloseFd(out[0]), CloseFd(err[0]);
  }
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  fcntl(status_pipe[0], F_SETFL, O_NONBLOCK);
  child->pid = pid;
  child->in = in[1], child->out = out[0], child->err = err[0], child->status = status_pipe[0];
  child->record = record;
  child->started = t0;
  return Status::Ok();
}

int StopSandboxed(SandboxedChild* child) {
  int status = 0;
  if (child->pid > 0) {
    kill(-child->pid, SIGKILL);
    while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (!child->record.empty()) {
    std::error_code ec;
    std::filesystem::remove(child->record, ec);
  }
  for (int* fd : {&child->in, &child->out, &child->err, &child->status}) CloseFd(*fd);
  child->pid = -1;
  child->record.clear();
  return status;
}

Status RunSandboxed(const ProcessSpec& spec, ProcessResult* res) {
  *res = ProcessResult{};
  SandboxedChild child;
  if (Status s = StartSandboxed(spec, &child); !s.ok()) return s;
  const pid_t pid = child.pid;
  const auto t0 = child.started;
  const SandboxLimits& l = spec.limits;
  // The loop below closes each end once it is done with it.
  int in[2] = {-1, child.in}, out[2] = {child.out, -1}, err[2] = {child.err, -1},
      status_pipe[2] = {child.status, -1};
  child.in = child.out = child.err = child.status = -1;
  size_t written = 0;
  if (spec.stdin_data.empty()) CloseFd(in[1]);
  const auto deadline = t0 + std::chrono::milliseconds(l.timeout_ms);
  bool exited = false;
  int status = 0;
  std::string bwrap_status;
  bool status_truncated = false;
  for (;;) {
    pollfd fds[4];
    int n = 0;
    if (out[0] >= 0) fds[n++] = {out[0], POLLIN, 0};
    if (err[0] >= 0) fds[n++] = {err[0], POLLIN, 0};
    if (in[1] >= 0) fds[n++] = {in[1], POLLOUT, 0};
    if (status_pipe[0] >= 0) fds[n++] = {status_pipe[0], POLLIN, 0};
    poll(fds, n, 20);
    if (in[1] >= 0) {
      ssize_t w = write(in[1], spec.stdin_data.data() + written, spec.stdin_data.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == spec.stdin_data.size()) CloseFd(in[1]);
    }
    if (out[0] >= 0 && !Drain(out[0], &res->out, &res->out_truncated, l.max_output_bytes)) CloseFd(out[0]);
    if (err[0] >= 0 && !Drain(err[0], &res->err, &res->err_truncated, l.max_output_bytes)) CloseFd(err[0]);
    if (status_pipe[0] >= 0 && !Drain(status_pipe[0], &bwrap_status, &status_truncated, 4096))
      CloseFd(status_pipe[0]);
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
  status = StopSandboxed(&child);  // whatever of the group is left
  CloseFd(in[1]);
  if (out[0] >= 0) Drain(out[0], &res->out, &res->out_truncated, l.max_output_bytes), CloseFd(out[0]);
  if (err[0] >= 0) Drain(err[0], &res->err, &res->err_truncated, l.max_output_bytes), CloseFd(err[0]);
  if (status_pipe[0] >= 0)
    Drain(status_pipe[0], &bwrap_status, &status_truncated, 4096), CloseFd(status_pipe[0]);
  res->duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // bwrap reports {"exit-code": N} only once the program ran (its setup
  // finished); without it, bwrap itself failed to build the sandbox.
  const auto at = bwrap_status.find("\"exit-code\":");
  if (at != std::string::npos) {
    const int code = static_cast<int>(std::strtol(bwrap_status.c_str() + at + 12, nullptr, 10));
    // The sandbox's init reports a program killed by signal S as 128 + S.
    if (code > 128 && code <= 128 + 64) {
      res->signal = code - 128;
    } else {
      res->exit_code = code;
    }
    return Status::Ok();
  }
  if (res->timed_out) return Status::Ok();
  if (WIFSIGNALED(status)) {
    res->signal = WTERMSIG(status);
    return Status::Ok();
  }
  std::string why = res->err.substr(0, res->err.find('\n'));
  return Status::Error(errc::kSandbox, "the sandbox could not be set up for " + spec.path +
                                           (why.empty() ? std::string() : ": " + why));
}

}  // namespace tollgate
