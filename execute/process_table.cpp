#include "execute/process_table.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <regex>

#include "core/event.h"
#include "execute/tool.h"

namespace tollgate {

namespace {

constexpr const char* kNotFound = "E_NOT_FOUND";
constexpr const char* kLimit = "E_LIMIT_EXCEEDED";
constexpr const char* kExited = "E_PROCESS_EXITED";
constexpr size_t kReadPerTick = 1 << 20;  // per process, so one flood cannot starve the others
constexpr auto kWatchBudget = std::chrono::milliseconds(20);  // regex time per process per read

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The output kept: the last `cap` bytes of the stream (trimmed in steps of
// `cap`, so appending stays amortised O(1)).
struct Ring {
  std::string buf;
  uint64_t start = 0;  // stream offset of buf[0]
  size_t cap = 1 << 20;
  void Append(const char* p, size_t n) {
    buf.append(p, n);
    if (buf.size() > 2 * cap) {
      const size_t cut = buf.size() - cap;
      buf.erase(0, cut);
      start += cut;
    }
  }
  uint64_t end() const { return start + buf.size(); }
  uint64_t first() const { return end() - std::min<uint64_t>(buf.size(), cap); }  // = dropped bytes
  // Stream bytes [from, to), both within [first(), end()].
  std::string Slice(uint64_t from, uint64_t to) const { return buf.substr(from - start, to - from); }
};

// A line without escape sequences and control characters (what a watch sees).
std::string StripEscapes(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    if (c == 0x1b && i + 1 < s.size()) {
      const char k = s[++i];
      if (k == '[') {  // CSI: parameters, then a final byte 0x40-0x7e
        while (i + 1 < s.size() && !(s[i + 1] >= 0x40 && s[i + 1] <= 0x7e)) ++i;
        ++i;
      } else if (k == ']') {  // OSC: up to BEL or ESC '\'
        while (i + 1 < s.size() && s[i + 1] != '\a' && s[i + 1] != 0x1b) ++i;
        ++i;
        if (i < s.size() && s[i] == 0x1b) ++i;
      }
      continue;
    }
    if (c < 0x20 && c != '\t') continue;
    if (c == 0x7f) continue;
    out.push_back(static_cast<char>(c));
  }
  return out;
}

// What a terminal would show of `s`, line by line, roughly: printable bytes
// overwrite at the cursor; \r, \b, \t, erase-line (CSI K), clear-screen
// (CSI 2J), cursor forward/back (CSI C/D) applied; other sequences dropped.
std::vector<std::string> Screen(std::string_view s, size_t keep_lines) {
  std::deque<std::string> lines{""};
  size_t col = 0;
  constexpr size_t kMaxCols = 4096;
  auto put = [&](char c) {
    std::string& l = lines.back();
    if (col >= kMaxCols) return;
    if (col < l.size()) {
      l[col] = c;
    } else {
      l.append(col - l.size(), ' ');
      l.push_back(c);
    }
    ++col;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    if (c == '\n') {
      lines.emplace_back();
      col = 0;
      if (lines.size() > keep_lines + 1) lines.pop_front();
    } else if (c == '\r') {
      col = 0;
    } else if (c == '\b') {
      col = col > 0 ? col - 1 : 0;
    } else if (c == '\t') {
      do put(' ');
      while (col % 8 != 0 && col < kMaxCols);
    } else if (c == 0x1b && i + 1 < s.size()) {
      const char k = s[++i];
      if (k == '[') {
        size_t j = i + 1;
        while (j < s.size() && !(s[j] >= 0x40 && s[j] <= 0x7e)) ++j;
        if (j >= s.size()) break;
        const std::string params(s.substr(i + 1, j - i - 1));
        const long n = std::max(1L, std::strtol(params.c_str(), nullptr, 10));
        if (s[j] == 'K' && (params.empty() || params == "0")) {
          if (col < lines.back().size()) lines.back().resize(col);
        } else if (s[j] == 'J' && (params == "2" || params == "3")) {
          lines.assign(1, "");
          col = 0;
        } else if (s[j] == 'C') {
          col = std::min<size_t>(col + static_cast<size_t>(std::min(n, 4096L)), kMaxCols);
        } else if (s[j] == 'D') {
          col = col > static_cast<size_t>(n) ? col - static_cast<size_t>(n) : 0;
        }
        i = j;
      } else if (k == ']') {
        while (i + 1 < s.size() && s[i + 1] != '\a' && s[i + 1] != 0x1b) ++i;
        ++i;
        if (i < s.size() && s[i] == 0x1b) ++i;
      }
    } else if (c >= 0x20 && c != 0x7f) {
      put(static_cast<char>(c));
    }
  }
  while (lines.size() > 1 && lines.back().empty()) lines.pop_back();
  while (lines.size() > keep_lines) lines.pop_front();
  return {lines.begin(), lines.end()};
}

// Every process below the sandbox's init (the sandbox's pid is bwrap's,
// whose only child is the PID namespace's init): the program and all it
// started. Host pids, read from /proc.
std::vector<pid_t> ProgramProcesses(pid_t sandbox) {
  std::multimap<pid_t, pid_t> children;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
      const int fd = open((std::string("/proc/") + e->d_name + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      char buf[512];
      const ssize_t n = read(fd, buf, sizeof buf - 1);
      close(fd);
      if (n <= 0) continue;
      buf[n] = '\0';
      const char* paren = std::strrchr(buf, ')');
      if (paren == nullptr || paren[1] == '\0') continue;
      char state = 0;
      int ppid = 0;
      if (std::sscanf(paren + 2, "%c %d", &state, &ppid) == 2) children.emplace(ppid, std::atoi(e->d_name));
    }
    closedir(d);
  }
  std::vector<pid_t> level{sandbox}, out;
  for (int depth = 0; !level.empty() && depth < 64; ++depth) {
    std::vector<pid_t> next;
    for (pid_t p : level) {
      for (auto [it, end] = children.equal_range(p); it != end; ++it) next.push_back(it->second);
    }
    if (depth >= 1) out.insert(out.end(), next.begin(), next.end());
    level = std::move(next);
  }
  return out;
}

}  // namespace

struct ProcessTable::Proc {
  ProcessOwner owner;
  std::string id, command;
  int64_t started_us = 0, ended_us = 0;
  std::string status = "running";  // running | exited | killed
  std::string reason;              // why it was killed: kill, lifetime, shutdown
  int exit_code = -1, signal = 0;
  SandboxedChild child;
  int master = -1;
  bool reading = true;  // the terminal still gives output
  Ring out;
  std::string partial;  // the line being written, up to kMaxWatchLine bytes
  std::shared_ptr<const std::regex> watch;
  std::string watch_pattern;
  Json watch_match;  // null until the first match
  uint64_t watch_unchecked = 0;
  std::chrono::steady_clock::time_point deadline, kill_at = std::chrono::steady_clock::time_point::max();
  ~Proc() {
    if (master >= 0) close(master);
  }
  bool running() const { return status == "running"; }
  Json Info() const {
    Json j{{"process_id", id},
           {"command", ToValidUtf8(command)},
           {"status", status},
           {"exit_code", status == "exited" && signal == 0 ? Json(exit_code) : Json(nullptr)},
           {"started_at", FormatTime(started_us)},
           {"ended_at", ended_us ? Json(FormatTime(ended_us)) : Json(nullptr)},
           {"output_bytes", out.end()},
           {"dropped_bytes", out.first()}};
    if (signal != 0) j["signal"] = signal;
    if (!reason.empty() && status == "killed") j["reason"] = reason;
    if (!watch_pattern.empty() || !watch_match.is_null()) {
      j["watch"] = {{"pattern", ToValidUtf8(watch_pattern)}, {"matched", !watch_match.is_null()}};
      if (!watch_match.is_null()) j["watch"]["match"] = watch_match;
      if (watch_unchecked) j["watch"]["unchecked_lines"] = watch_unchecked;
    }
    return j;
  }
  // New output: kept, and each complete line shown to the watch. mu_ held.
  void Take(const char* p, size_t n) {
    out.Append(p, n);
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i) {
      if (p[i] != '\n') {
        if (partial.size() < kMaxWatchLine) partial.push_back(p[i]);
        continue;
      }
      if (watch && watch_match.is_null()) {
        if (std::chrono::steady_clock::now() - t0 > kWatchBudget) {
          ++watch_unchecked;  // a pattern this slow does not get to stall the monitor
        } else {
          const std::string line = StripEscapes(partial);
          bool hit = false;
          try {
            hit = std::regex_search(line, *watch, std::regex_constants::match_continuous);
          } catch (const std::regex_error&) {
            ++watch_unchecked;
          }
          if (hit) watch_match = {{"line", ToValidUtf8(line)}, {"at", FormatTime(NowUs())}};
        }
      }
      partial.clear();
    }
  }
};

struct ProcessTable::SpawnRequest {
  ProcessOwner owner;
  std::string id, command;
  ProcessSpec spec;
  ExecutePolicy::BackgroundLimits limits;
  Json info;
  std::promise<Status> done;
};

ProcessTable::ProcessTable() {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  monitor_ = std::thread([this] { Monitor(); });
}

ProcessTable::~ProcessTable() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  Wake();
  monitor_.join();
  for (int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

void ProcessTable::Wake() {
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
}

std::shared_ptr<ProcessTable::Proc> ProcessTable::Find(const ProcessOwner& owner,
                                                       const std::string& id) const {
  auto it = procs_.find(owner);
  if (it == procs_.end()) return nullptr;
  for (const auto& p : it->second) {
    if (p->id == id) return p;
  }
  return nullptr;
}

Status ProcessTable::Spawn(const ProcessOwner& owner, const std::string& id, const std::string& command,
                           ProcessSpec spec, const ExecutePolicy::BackgroundLimits& limits, Json* info) {
  SpawnRequest r{owner, id, command, std::move(spec), limits, {}, {}};
  auto done = r.done.get_future();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return Status::Error(errc::kToolExec, "the process table is shutting down");
    spawns_.push_back(&r);
  }
  Wake();
  Status s = done.get();  // the monitor thread forks it (see the header)
  if (s.ok()) *info = std::move(r.info);
  return s;
}

// On the monitor thread.
void ProcessTable::StartOne(SpawnRequest* r) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto p = Find(r->owner, r->id)) {
      r->info = p->Info();
      r->done.set_value(Status::Ok());
      return;
    }
    int live = 0;
    for (const auto& p : procs_[r->owner]) live += p->running();
    if (live >= r->limits.max_per_agent) {
      r->done.set_value(
          Status::Error(kLimit, "this agent already runs " + std::to_string(live) +
                                    " background processes (execute.background.max_per_agent: " +
                                    std::to_string(r->limits.max_per_agent) + "); kill one first"));
      return;
    }
  }
  auto fail = [&](const std::string& what) {
    r->done.set_value(Status::Error(errc::kToolExec, what + ": " + std::strerror(errno)));
  };
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return fail("cannot open a pseudo-terminal");
  char name[128];
  int slave = -1;
  if (grantpt(master) != 0 || unlockpt(master) != 0 || ptsname_r(master, name, sizeof name) != 0 ||
      (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
    close(master);
    return fail("cannot open a pseudo-terminal");
  }
  winsize ws{24, 80, 0, 0};
  ioctl(master, TIOCSWINSZ, &ws);
  auto p = std::make_shared<Proc>();
  r->spec.terminal = slave;
  Status s = StartSandboxed(r->spec, &p->child);
  close(slave);
  if (!s.ok()) {
    close(master);
    r->done.set_value(s);
    return;
  }
  fcntl(master, F_SETFL, O_NONBLOCK);
  p->owner = r->owner;
  p->id = r->id;
  p->command = r->command;
  p->started_us = NowUs();
  p->master = master;
  p->out.cap = r->limits.output_bytes;
  p->deadline = std::chrono::steady_clock::now() + std::chrono::seconds(r->limits.max_lifetime_s);
  std::lock_guard<std::mutex> l(mu_);
  auto& mine = procs_[r->owner];
  // Ended processes beyond max_per_agent are forgotten, oldest first.
  int ended = 0;
  for (const auto& q : mine) ended += !q->running();
  for (auto it = mine.begin(); it != mine.end() && ended >= r->limits.max_per_agent;) {
    if (!(*it)->running()) {
      it = mine.erase(it);
      --ended;
    } else {
      ++it;
    }
  }
  mine.push_back(p);
  known_.insert({r->owner, r->id});
  r->info = p->Info();
  r->done.set_value(Status::Ok());
}

void ProcessTable::Monitor() {
  for (;;) {
    std::vector<std::shared_ptr<Proc>> live;
    std::deque<SpawnRequest*> todo;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) break;
      todo.swap(spawns_);
      for (const auto& [owner, list] : procs_) {
        for (const auto& p : list) {
          if (p->reading || p->running()) live.push_back(p);
        }
      }
    }
    for (SpawnRequest* r : todo) StartOne(r);
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}};
    for (const auto& p : live) {
      if (p->reading) fds.push_back({p->master, POLLIN, 0});
    }
    poll(fds.data(), fds.size(), 50);
    char sink[64];
    while (read(wake_[0], sink, sizeof sink) > 0) {
    }
    for (const auto& p : live) {
      // Output, bounded per round; EIO once no process holds the terminal.
      char buf[16384];
      for (size_t got = 0; p->reading && got < kReadPerTick;) {
        const ssize_t n = read(p->master, buf, sizeof buf);
        if (n > 0) {
          std::lock_guard<std::mutex> l(mu_);
          p->Take(buf, static_cast<size_t>(n));
          got += static_cast<size_t>(n);
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else {
          if (n == 0 || errno != EAGAIN) p->reading = false;
          break;
        }
      }
      std::lock_guard<std::mutex> l(mu_);
      if (!p->running()) continue;
      siginfo_t si{};
      const pid_t pid = p->child.pid;
      if (waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
        // bwrap reports {"exit-code": N} once the program ran; 128 + S is
        // a program killed by signal S.
        std::string st;
        char sb[512];
        ssize_t n;
        while (st.size() < 4096 && (n = read(p->child.status, sb, sizeof sb)) > 0)
          st.append(sb, static_cast<size_t>(n));
        const int ws = StopSandboxed(&p->child);  // reaps the leader: only now may its pid be reused
        const auto at = st.find("\"exit-code\":");
        if (at != std::string::npos) {
          const int code = static_cast<int>(std::strtol(st.c_str() + at + 12, nullptr, 10));
          if (code > 128 && code <= 128 + 64) {
            p->signal = code - 128;
          } else {
            p->exit_code = code;
          }
        } else if (WIFSIGNALED(ws)) {
          p->signal = WTERMSIG(ws);
        } else {
          p->exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
          if (p->reason.empty())
            p->reason = "sandbox";  // bwrap could not set it up: its message is the output
        }
        p->status = p->reason.empty() || p->reason == "sandbox" ? "exited" : "killed";
        p->ended_us = NowUs();
        ended_.notify_all();
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= p->deadline && p->reason != "lifetime") {
        p->reason = "lifetime";
        p->kill_at = now;
      }
      // SIGKILL to bwrap's group: --die-with-parent takes its init, and the
      // PID namespace with it, whatever the program did (setsid included).
      if (now >= p->kill_at) kill(-pid, SIGKILL);
    }
  }
  // Shutdown: nothing outlives the table.
  std::lock_guard<std::mutex> l(mu_);
  for (SpawnRequest* r : spawns_)
    r->done.set_value(Status::Error(errc::kToolExec, "the process table is shutting down"));
  spawns_.clear();
  for (auto& [owner, list] : procs_) {
    for (auto& p : list) {
      if (!p->running()) continue;
      StopSandboxed(&p->child);
      p->status = "killed";
      p->reason = "shutdown";
      p->ended_us = NowUs();
    }
  }
  ended_.notify_all();
}

bool ProcessTable::Knows(const ProcessOwner& owner, const std::string& id) const {
  std::lock_guard<std::mutex> l(mu_);
  return known_.count({owner, id}) > 0;
}

Json ProcessTable::List(const ProcessOwner& owner) const {
  std::lock_guard<std::mutex> l(mu_);
  Json out = Json::array();
  auto it = procs_.find(owner);
  if (it != procs_.end()) {
    for (const auto& p : it->second) out.push_back(p->Info());
  }
  return out;
}

namespace {
Status NotFound(const std::string& id) {
  return Status::Error(kNotFound, "no background process '" + ToValidUtf8(id) + "' of this agent");
}
}  // namespace

Status ProcessTable::Info(const ProcessOwner& owner, const std::string& id, Json* info) const {
  std::lock_guard<std::mutex> l(mu_);
  auto p = Find(owner, id);
  if (!p) return NotFound(id);
  *info = p->Info();
  return Status::Ok();
}

Status ProcessTable::Log(const ProcessOwner& owner, const std::string& id, int64_t offset, int64_t lines,
                         Json* out) const {
  std::lock_guard<std::mutex> l(mu_);
  auto p = Find(owner, id);
  if (!p) return NotFound(id);
  const Ring& r = p->out;
  uint64_t from, to = r.end();
  if (offset >= 0) {
    from = std::clamp<uint64_t>(static_cast<uint64_t>(offset), r.first(), r.end());
    to = std::min<uint64_t>(to, from + kMaxLogBytes);
  } else {
    // The last `lines` lines (a trailing newline ends the last one).
    from = std::max<uint64_t>(r.first(), to >= kMaxLogBytes ? to - kMaxLogBytes : 0);
    const std::string tail = r.Slice(from, to);
    size_t cut = tail.size();
    if (cut > 0 && tail[cut - 1] == '\n') --cut;
    int64_t seen = 0;
    while (cut > 0 && seen < lines) {
      const size_t nl = tail.rfind('\n', cut - 1);
      if (nl == std::string::npos) {
        cut = 0;
        break;
      }
      cut = nl;
      if (++seen < lines) continue;
      ++cut;  // after the newline that ends the line before
    }
    from += cut;
  }
  *out = p->Info();
  (*out)["output"] = ToValidUtf8(r.Slice(from, to));
  (*out)["offset"] = from;
  (*out)["next_offset"] = to;
  (*out)["more"] = to < r.end();
  return Status::Ok();
}

Status ProcessTable::Capture(const ProcessOwner& owner, const std::string& id, int64_t lines,
                             Json* out) const {
  std::string tail;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto p = Find(owner, id);
    if (!p) return NotFound(id);
    const Ring& r = p->out;
    tail = r.Slice(
        std::max<uint64_t>(r.first(), r.end() >= 4 * kMaxLogBytes ? r.end() - 4 * kMaxLogBytes : 0), r.end());
    *out = p->Info();
  }
  std::vector<std::string> shown = Screen(tail, static_cast<size_t>(lines));
  std::string text;
  for (size_t i = 0; i < shown.size(); ++i) text += (i ? "\n" : "") + shown[i];
  if (text.size() > kMaxLogBytes) text.erase(0, text.size() - kMaxLogBytes);
  (*out)["screen"] = ToValidUtf8(text);
  (*out)["lines"] = shown.size();
  return Status::Ok();
}

Status ProcessTable::Write(const ProcessOwner& owner, const std::string& id, const std::string& bytes,
                           Json* out) {
  std::shared_ptr<Proc> p;
  {
    std::lock_guard<std::mutex> l(mu_);
    p = Find(owner, id);
    if (!p) return NotFound(id);
    if (!p->running()) return Status::Error(kExited, "background process " + id + " is " + p->status);
  }
  // The fd stays open while `p` is held (closed by ~Proc only).
  size_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (done < bytes.size()) {
    const ssize_t w = write(p->master, bytes.data() + done, bytes.size() - done);
    if (w > 0) {
      done += static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && errno == EAGAIN && std::chrono::steady_clock::now() < deadline) {
      pollfd f{p->master, POLLOUT, 0};
      poll(&f, 1, 50);
    } else {
      break;
    }
  }
  // What the line discipline would signal to a foreground process group.
  termios t{};
  if (tcgetattr(p->master, &t) == 0 && (t.c_lflag & ISIG)) {
    for (size_t i = 0; i < done; ++i) {
      const cc_t c = static_cast<cc_t>(bytes[i]);
      const int sig = c == t.c_cc[VINTR]   ? SIGINT
                      : c == t.c_cc[VQUIT] ? SIGQUIT
                      : c == t.c_cc[VSUSP] ? SIGTSTP
                                           : 0;
      if (sig == 0) continue;
      std::lock_guard<std::mutex> l(mu_);
      if (!p->running()) break;
      for (pid_t q : ProgramProcesses(p->child.pid)) kill(q, sig);
    }
  }
  *out = Json{{"process_id", id}, {"written", done}};
  if (done < bytes.size()) {
    return Status::Error(errc::kTimeout, "the process took " + std::to_string(done) + " of " +
                                             std::to_string(bytes.size()) + " bytes of input in 2 s");
  }
  return Status::Ok();
}

Status ProcessTable::Kill(const ProcessOwner& owner, const std::string& id, int sig, Json* info) {
  std::unique_lock<std::mutex> l(mu_);
  auto p = Find(owner, id);
  if (!p) return NotFound(id);
  if (p->running()) {
    if (p->reason.empty()) p->reason = "kill";
    const auto now = std::chrono::steady_clock::now();
    // Under mu_ and while running, the leader is unreaped: its group id is
    // still this sandbox's.
    // A program not started yet (bwrap still building the sandbox) has no
    // one to ask: its sandbox goes at once.
    const std::vector<pid_t> program = sig == SIGKILL ? std::vector<pid_t>{} : ProgramProcesses(p->child.pid);
    if (program.empty()) {
      p->kill_at = now;
      kill(-p->child.pid, SIGKILL);
    } else {
      p->kill_at = std::min(p->kill_at, now + std::chrono::milliseconds(kKillGraceMs));
      for (pid_t q : program) kill(q, sig);
    }
    Wake();
    ended_.wait_until(l, now + std::chrono::milliseconds(kKillGraceMs + 2000), [&] { return !p->running(); });
  }
  *info = p->Info();
  return Status::Ok();
}

Status ProcessTable::Watch(const ProcessOwner& owner, const std::string& id, const std::string& pattern,
                           Json* info) {
  if (pattern.empty() || pattern.size() > kMaxWatchPattern) {
    return Status::Error(errc::kInvalidArgs,
                         "pattern must be 1 to " + std::to_string(kMaxWatchPattern) + " characters");
  }
  std::shared_ptr<std::regex> re;
  try {
    // Checked alone (an unbalanced ')' is an error, not a way out of the
    // wrapper), then matched anywhere in a line in one pass: the polynomial
    // (Thompson) executor, so no pattern backtracks exponentially.
    std::regex alone(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
    re = std::make_shared<std::regex>("[\\s\\S]*(?:" + pattern + ")",
                                      std::regex::ECMAScript | std::regex_constants::__polynomial);
  } catch (const std::regex_error& e) {
    return Status::Error(errc::kInvalidArgs,
                         std::string("pattern is not a regular expression this watch runs "
                                     "(ECMAScript, no backreferences): ") +
                             e.what());
  }
  std::lock_guard<std::mutex> l(mu_);
  auto p = Find(owner, id);
  if (!p) return NotFound(id);
  if (!p->running()) return Status::Error(kExited, "background process " + id + " is " + p->status);
  p->watch = std::move(re);
  p->watch_pattern = pattern;
  p->watch_match = nullptr;
  p->watch_unchecked = 0;
  *info = p->Info();
  return Status::Ok();
}

Status ProcessTable::Unwatch(const ProcessOwner& owner, const std::string& id, Json* info) {
  std::lock_guard<std::mutex> l(mu_);
  auto p = Find(owner, id);
  if (!p) return NotFound(id);
  p->watch.reset();
  p->watch_pattern.clear();
  p->watch_match = nullptr;
  p->watch_unchecked = 0;
  *info = p->Info();
  return Status::Ok();
}

}  // namespace tollgate
