// An upstream MCP server over stdio (execute/mcp_upstream.h): one
// supervisor thread starts it in the sandbox, reads its stdout line by line
// (newline-delimited JSON-RPC) and answers waiting callers; callers write
// their requests to its stdin under a lock.
//
// Each line is parsed as untrusted input (ParseUpstreamMessage). A line
// that is not JSON and does not open an object is a stray print, ignored.
// Any other line the parser refuses (nested too deep, longer than 16 MiB, a
// number out of range, a malformed object) may be the answer to any waiting
// call, so the stream is out of step: the server is stopped, every call
// waiting on it ends with E_UPSTREAM_PROTOCOL, and it is started again as
// after an exit (the handshake's tools/list included).
//
// The era (mcp_upstream_internal.h) is probed on the process that serves:
// server/discover is its first message. A v1 SDK server answers -32601 and
// takes initialize next; a v2 SDK server is pinned to 2026-07-28 by it. A
// server that does not answer within kProbeWaitMs is taken for a legacy one
// that ignores unknown methods; should it be a modern one merely slow to
// start, its answer to initialize (-32022 naming 2026-07-28) turns the
// connection modern after all. In the modern era, tool list changes are
// heard on a subscriptions/listen request kept open for the process's life
// (when discover advertised tools.listChanged).
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <map>

#include "core/log.h"
#include "core/messages.h"
#include "execute/mcp_upstream_internal.h"
#include "execute/net_pin.h"
#include "execute/sandbox.h"
#include "execute/tool.h"

namespace tollgate {
namespace {

constexpr size_t kMaxLine = kMaxUpstreamMessage;  // one JSON-RPC message from the server
constexpr size_t kStderrTail = 2048;              // kept to say why it died
constexpr int kReadyWaitMs = 5000;                // a call waits this long for a (re)start
constexpr int kProbeWaitMs = 3000;                // server/discover unanswered: a legacy server

class StdioUpstream : public McpUpstream {
 public:
  StdioUpstream(McpServerSpec spec, const ExecutePolicy& policy)
      : McpUpstream(std::move(spec)),
        run_dir_(policy.run_dir),
        run_as_(policy.run_as),
        workspace_(policy.mcp_dir + "/" + spec_.name) {
    supervisor_ = std::thread([this] { Supervise(); });
  }
  ~StdioUpstream() override { Stop(); }

  void Stop() override { StopSupervisor(); }

  Status Request(const std::string& method, const Json& params, int timeout_ms, Json* result) override {
    std::string why;
    if (!WaitReady(std::min(timeout_ms, kReadyWaitMs), &why))
      return Status::Error(errc::kUpstreamUnavailable, why);
    struct Slot {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      Json msg;
    };
    auto slot = std::make_shared<Slot>();
    // The era of the connection this request goes out on, not of a later one.
    const bool modern = Modern();
    const int64_t id = Send(method, modern ? McpWithEnvelope(params) : params, [slot](const Json& m) {
      {
        std::lock_guard<std::mutex> lock(slot->mu);
        slot->msg = m;
        slot->done = true;
      }
      slot->cv.notify_all();
    });
    if (id < 0)
      return Status::Error(errc::kUpstreamUnavailable,
                           "upstream MCP server '" + spec_.name + "' is not running");
    std::unique_lock<std::mutex> lock(slot->mu);
    if (!slot->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return slot->done; })) {
      lock.unlock();
      Forget(id);
      const Json cancel{{"requestId", id}, {"reason", "timed out in tollgate"}};
      Notify("notifications/cancelled", modern ? McpWithEnvelope(cancel) : cancel);
      return Status::Error(errc::kTimeout, "upstream MCP server '" + spec_.name + "' did not answer " +
                                               method + " within " + std::to_string(timeout_ms) + " ms");
    }
    Status st = McpAnswer(spec_.name, method, slot->msg, result);
    if (st.ok() && modern) st = McpModernResult(spec_.name, method, *result);
    return st;
  }

 private:
  using Callback = std::function<void(const Json&)>;

  // Writes one message; -1 when the server is not running or the write fails.
  int64_t Send(const std::string& method, const Json& params, Callback cb) {
    std::lock_guard<std::mutex> lock(io_mu_);
    if (in_ < 0) return -1;
    const int64_t id = next_id_++;
    pending_[id] = std::move(cb);
    if (!WriteLine(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}})) {
      pending_.erase(id);
      return -1;
    }
    return id;
  }
  void Notify(const std::string& method, const Json& params) {
    std::lock_guard<std::mutex> lock(io_mu_);
    if (in_ >= 0) WriteLine(Json{{"jsonrpc", "2.0"}, {"method", method}, {"params", params}});
  }
  void Reply(const Json& msg) {
    std::lock_guard<std::mutex> lock(io_mu_);
    if (in_ >= 0) WriteLine(msg);
  }
  void Forget(int64_t id) {
    std::lock_guard<std::mutex> lock(io_mu_);
    pending_.erase(id);
  }
  // Under io_mu_. The pipe is non-blocking: wait for room, up to 5 s (a
  // server that stops reading its stdin is as good as dead).
  bool WriteLine(const Json& msg) {
    const std::string line = msg.dump() + "\n";
    size_t off = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (off < line.size()) {
      const ssize_t w = write(in_, line.data() + off, line.size() - off);
      if (w > 0) {
        off += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno != EAGAIN && errno != EINTR) return false;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      pollfd p{in_, POLLOUT, 0};
      poll(&p, 1, 50);
    }
    return true;
  }

  void Supervise() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        state_ = State::kStarting;
      }
      const auto up_since = std::chrono::steady_clock::now();
      RunOnce();
      if (!Backoff(up_since)) return;
    }
  }

  // One life of the server: start, handshake, serve until it exits or Stop.
  void RunOnce() {
    ProcessSpec p;
    int cwd = -1;
    if (!PrepareSpec(p, &cwd)) return;
    SandboxedChild child;
    const Status st = StartSandboxed(p, &child);
    close(cwd);
    if (!st.ok()) return SetState(State::kDown, st.message());
    SetEra("");
    {
      std::lock_guard<std::mutex> lock(io_mu_);
      in_ = child.in;
    }
    // The handshake runs through the same reader as every call.
    Probe();
    std::string err_tail;
    const std::string refused = Serve(child, &err_tail);
    EndLife(&child, refused, std::move(err_tail));
  }

  // The sandboxed process of the server; *cwd_out: its directory, open
  // (the caller closes it). False, the state down and why, when it cannot
  // be started.
  bool PrepareSpec(ProcessSpec& p, int* cwd_out) {
    p.path = FindProgram(spec_.command[0]);
    if (p.path.empty()) {
      SetState(State::kDown, "program " + spec_.command[0] + " not found in " + kSafePath);
      return false;
    }
    p.argv = spec_.command;
    std::error_code ec;
    std::filesystem::create_directories(workspace_, ec);
    const int cwd = open(workspace_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0) {
      SetState(State::kDown, "cannot open its directory " + workspace_);
      return false;
    }
    p.cwd_fd = cwd;
    p.workspace = workspace_;
    p.env = {std::string("PATH=") + kSafePath, "HOME=" + workspace_, "LANG=C.UTF-8"};
    for (const auto& [k, v] : spec_.env) {
      std::string val, missing;
      if (!ExpandEnv(v, &val, &missing)) {
        close(cwd);
        SetState(State::kDown, "env " + k + " needs the unset variable " + missing);
        return false;
      }
      p.env.push_back(k + "=" + val);
    }
    p.read_only = spec_.read_only;
    p.limits = spec_.limits;
    p.run_as = run_as_;
    p.run_dir = run_dir_;
    p.share_net = spec_.network;
    *cwd_out = cwd;
    return true;
  }

  // Reads the server's stdout line by line (each line handled) and keeps
  // the tail of its stderr, until it exits, Stop, or a line it sent is
  // refused. Returns why it was refused, empty when it was not.
  std::string Serve(const SandboxedChild& child, std::string* err_tail_out) {
    std::string buf;
    std::string& err_tail = *err_tail_out;
    std::string refused;  // why its stdout can no longer be trusted
    size_t scanned = 0;   // buf holds no newline before this
    bool eof = false;
    while (!eof && refused.empty()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) break;
      }
      pollfd fds[2] = {{child.out, POLLIN, 0}, {child.err, POLLIN, 0}};
      poll(fds, 2, 200);
      char chunk[65536];
      // Never more than one message's worth ahead of the lines handled.
      while (buf.size() <= kMaxLine) {
        const ssize_t n = read(child.out, chunk, sizeof chunk);
        if (n > 0) {
          buf.append(chunk, static_cast<size_t>(n));
          continue;
        }
        if (n == 0) eof = true;
        break;
      }
      size_t start = 0;
      for (size_t nl; refused.empty() && (nl = buf.find('\n', std::max(start, scanned))) != std::string::npos;
           start = nl + 1) {
        refused = HandleLine(std::string_view(buf).substr(start, nl - start));
      }
      buf.erase(0, start);
      scanned = buf.size();
      if (refused.empty() && buf.size() > kMaxLine) refused = "a line longer than 16 MiB";
      if (refused.empty()) ExpireProbe();
      for (ssize_t n; (n = read(child.err, chunk, sizeof chunk)) > 0;) {
        err_tail.append(chunk, static_cast<size_t>(n));
        if (err_tail.size() > 2 * kStderrTail) err_tail.erase(0, err_tail.size() - kStderrTail);
      }
      siginfo_t si{};
      if (waitid(P_PID, child.pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == child.pid)
        eof = true;
    }
    return refused;
  }

  // The server stopped; its waiting calls answered with why it went, which
  // is logged and becomes its state.
  void EndLife(SandboxedChild* child_ptr, const std::string& refused, std::string err_tail) {
    SandboxedChild& child = *child_ptr;
    std::map<int64_t, Callback> orphans;
    {
      std::lock_guard<std::mutex> lock(io_mu_);
      in_ = -1;
      orphans.swap(pending_);
    }
    const int status = StopSandboxed(&child);
    if (err_tail.size() > kStderrTail) err_tail.erase(0, err_tail.size() - kStderrTail);
    while (!err_tail.empty() && (err_tail.back() == '\n' || err_tail.back() == '\r')) err_tail.pop_back();
    err_tail = ToValidUtf8(err_tail);  // its bytes go into results and events
    Json gone;
    std::string why;
    if (!refused.empty()) {
      why = "sent a message tollgate refuses (" + refused + "), so it was stopped and is started again";
      gone = {{"x-protocol", "upstream MCP server '" + spec_.name + "' " + why}};
    } else {
      // bwrap exits as its program did (128 + S when killed by signal S).
      const std::string how = WIFEXITED(status) && WEXITSTATUS(status) > 128
                                  ? "was killed by signal " + std::to_string(WEXITSTATUS(status) - 128)
                              : WIFEXITED(status)
                                  ? "exited with code " + std::to_string(WEXITSTATUS(status))
                                  : "was killed by signal " + std::to_string(WTERMSIG(status));
      why = how + (err_tail.empty() ? std::string() : "; its last words: " + err_tail);
      gone = {{"x-unavailable", "upstream MCP server '" + spec_.name + "' " + why}};
    }
    for (auto& [id, cb] : orphans) cb(gone);
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stop_;
    }
    if (!stopping) log::Warn({"execute"}) << "upstream MCP server '" << spec_.name << "' " << why;
    SetState(State::kDown, why);  // after the handshake's callbacks, which would say less
  }

  // The handshake's first step: server/discover, its answer deciding the
  // era. Unanswered, ExpireProbe ends the wait after kProbeWaitMs.
  void Probe() {
    const int64_t id = Send("server/discover", McpDiscoverParams(), [this](const Json& m) {
      if (Gone(m)) return;
      // A -32022 naming 2026-07-28 is modern too, with no result to read.
      if (McpProbeEra(m) == McpEra::kModern) return StartModern(m.contains("result") ? m["result"] : Json());
      Initialize();
    });
    std::lock_guard<std::mutex> lock(io_mu_);
    probe_id_ = id;
    probe_deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(kProbeWaitMs);
  }

  // The probe still unanswered at its deadline: forgotten (a late answer is
  // dropped as any late one is) and its callback told, which makes the
  // server a legacy one. Run by the reader, as callbacks are.
  void ExpireProbe() {
    Callback cb;
    {
      std::lock_guard<std::mutex> lock(io_mu_);
      if (probe_id_ < 0 || std::chrono::steady_clock::now() < probe_deadline_) return;
      auto it = pending_.find(probe_id_);
      probe_id_ = -1;
      if (it == pending_.end()) return;  // answered in time
      cb = std::move(it->second);
      pending_.erase(it);
    }
    cb(Json{{"x-probe", "no answer to server/discover within " + std::to_string(kProbeWaitMs) + " ms"}});
  }

  // An answer that stands for the server's end (EndLife answers every
  // waiting callback so): it says why itself, afterwards.
  static bool Gone(const Json& m) { return m.contains("x-unavailable") || m.contains("x-protocol"); }

  // The legacy handshake: initialize, notifications/initialized, tools/list.
  void Initialize() {
    Send("initialize", McpInitializeParams(), [this](const Json& m) {
      if (m.contains("result")) {
        SetEra(McpLegacyVersion(m["result"]));
        Notify("notifications/initialized", Json::object());
        return List(true);
      }
      // A modern-only server whose answer to the probe came too late
      // refuses initialize with -32022 naming 2026-07-28: speak that.
      if (McpProbeEra(m) == McpEra::kModern) return StartModern(Json::object());
      const std::string why = m.contains("error") ? m["error"].dump() : m.dump();
      SetState(State::kDown, "initialize failed: " + TruncateUtf8(why, 500));
    });
  }

  // The modern handshake: tools/list, and a subscription to its changes
  // when the discover result advertised them.
  void StartModern(const Json& discovered) {
    SetEra(kMcpModernVersion);
    List(true);
    const bool list_changes = discovered.is_object() && discovered.contains("capabilities") &&
                              discovered["capabilities"].is_object() &&
                              discovered["capabilities"].contains("tools") &&
                              discovered["capabilities"]["tools"].is_object() &&
                              discovered["capabilities"]["tools"].value("listChanged", false) == true;
    if (!list_changes) return;
    // Answered only when the server ends the subscription, or refused by
    // one that has none: either way nothing is left to do. Its
    // notifications/tools/list_changed re-list as on a legacy server.
    Send("subscriptions/listen", McpWithEnvelope({{"notifications", {{"toolsListChanged", true}}}}),
         [](const Json&) {});
  }

  void List(bool first) {
    const bool modern = Modern();
    Send("tools/list", modern ? McpWithEnvelope(Json::object()) : Json::object(),
         [this, first, modern](const Json& m) {
           Status st = Status::Ok();
           if (modern && m.contains("result")) st = McpModernResult(spec_.name, "tools/list", m["result"]);
           if (st.ok() && m.contains("result") && m["result"].is_object() && m["result"].contains("tools")) {
             SetTools(m["result"]["tools"]);
             if (first) SetState(State::kReady);
           } else if (first) {
             SetState(State::kDown,
                      st.ok() ? "tools/list failed: " + TruncateUtf8(m.dump(), 500) : st.message());
           }
         });
  }

  // One line of its stdout; returns why the stream can no longer be
  // trusted, or "" (the header comment has the rule).
  std::string HandleLine(std::string_view line) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) return "";
    Json m;
    if (Status parsed = ParseUpstreamMessage(line, &m); !parsed.ok()) {
      if (parsed.code() == errc::kInvalidJson && line[first] != '{') return "";  // a stray print
      return parsed.code() + ": " + TruncateUtf8(parsed.message(), 300);
    }
    if (!m.is_object()) return "";  // not JSON-RPC: ignored (a server's stray print)
    const bool has_method = m.contains("method") && m["method"].is_string();
    if (!has_method && m.contains("id") && m["id"].is_number_integer()) {
      Callback cb;
      {
        std::lock_guard<std::mutex> lock(io_mu_);
        auto it = pending_.find(m["id"].get<int64_t>());
        if (it == pending_.end()) return "";  // late (timed out) or never ours
        cb = std::move(it->second);
        pending_.erase(it);
      }
      cb(m);
      return "";
    }
    if (!has_method) return "";
    const std::string method = m["method"];
    if (m.contains("id")) {
      // The server asks something of us: only ping is answered.
      if (method == "ping") {
        Reply({{"jsonrpc", "2.0"}, {"id", m["id"]}, {"result", Json::object()}});
      } else {
        Reply({{"jsonrpc", "2.0"},
               {"id", m["id"]},
               {"error",
                {{"code", -32601},
                 {"message", "tollgate does not serve " + method + " to upstream servers"}}}});
      }
      return "";
    }
    if (method == "notifications/tools/list_changed") List(false);
    return "";
  }

  const std::string run_dir_, run_as_, workspace_;
  std::mutex io_mu_;  // in_, pending_, next_id_, probe_*; never held while waiting on mu_
  int in_ = -1;
  int64_t next_id_ = 1;
  std::map<int64_t, Callback> pending_;
  int64_t probe_id_ = -1;  // server/discover of this life, until its deadline passed
  std::chrono::steady_clock::time_point probe_deadline_;
};

}  // namespace

std::shared_ptr<McpUpstream> StartStdioUpstream(McpServerSpec spec, const ExecutePolicy& policy) {
  return std::make_shared<StdioUpstream>(std::move(spec), policy);
}

}  // namespace tollgate
