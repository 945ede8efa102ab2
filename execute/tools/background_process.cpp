// background_process {action, command?, process_id?, keys?, input?, lines?,
// offset?, pattern?, signal?} (Duragent's, HIGH; docs/tools.md,
// "background_process"): long-running programs in the agent's sandbox, kept
// by this tool's ProcessTable (execute/process_table.h).
// - spawn: `command` read and checked exactly as bash's line
//   (PrepareCommand: parser, allowlist, blocklist, options, redirections),
//   started with a pty under the same sandbox; process_id is "bp-" + the
//   first 12 hex digits of sha256(request_id), so a request names one
//   process. Limits: execute.background.
// - list, status: this agent's processes; one spawned before tollgate last
//   restarted (its spawn is in the log, the table never held it) is `lost`:
//   it died with that run and is never started again.
// - log, capture, send_keys, write, kill, watch, unwatch: see ProcessTable.
// Org and agent come from the envelope: another agent's process_id is
// E_NOT_FOUND, as an unknown one is.
#include <signal.h>

#include <map>
#include <set>

#include "core/sha256.h"
#include "execute/process_table.h"
#include "execute/tools/execute_command.h"
#include "execute/tools/file_common.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

constexpr size_t kMaxInputBytes = 64 << 10;  // write / send_keys, per call
constexpr size_t kMaxKeys = 256;
constexpr int kLostPages = 20;  // of 200 events: how far back the log is read for lost spawns

// A key name's bytes (as an xterm sends them), or "" when `k` is not one.
std::string KeyBytes(const std::string& k) {
  static const std::map<std::string, std::string> kKeys = {
      {"Enter", "\r"},  {"Tab", "\t"},      {"Escape", "\x1b"},  {"Backspace", "\x7f"}, {"Space", " "},
      {"Up", "\x1b[A"}, {"Down", "\x1b[B"}, {"Right", "\x1b[C"}, {"Left", "\x1b[D"}};
  if (auto it = kKeys.find(k); it != kKeys.end()) return it->second;
  if (k.size() == 3 && k[0] == 'C' && k[1] == '-' && k[2] >= 'a' && k[2] <= 'z') {
    return std::string(1, static_cast<char>(k[2] - 'a' + 1));
  }
  return "";
}

Json Fail(const Status& s) {
  const std::string& c = s.code();
  return ToolFail(c, s.message(), c == "E_LIMIT_EXCEEDED" || c == errc::kTimeout);
}

class BackgroundProcess : public BuiltinTool {
 public:
  BackgroundProcess() : BuiltinTool("background_process"), table_(std::make_unique<ProcessTable>()) {}

  Json Run(const Json& args, const ToolContext& ctx) const override {
    if (!args.is_object()) return ToolFail(errc::kInvalidArgs, "args must be an object");
    std::string action, id;
    if (!StringArg(args, "action", &action))
      return ToolFail(errc::kInvalidArgs, "action (string) is required");
    if (!StringArg(args, "process_id", &id, false))
      return ToolFail(errc::kInvalidArgs, "process_id must be a string");
    const ProcessOwner owner{ctx.org_id, ctx.agent_id};
    if (action == "spawn") return Spawn(args, ctx, owner);
    if (action == "list") {
      Json all = table_->List(owner);
      for (auto& lost : Lost(ctx, owner, "")) all.push_back(std::move(lost));
      const size_t count = all.size();
      return ToolOk({{"processes", std::move(all)}, {"count", count}});
    }
    if (id.empty()) return ToolFail(errc::kInvalidArgs, "process_id is required for " + ToValidUtf8(action));
    Json out;
    Status s;
    if (action == "status") {
      s = table_->Info(owner, id, &out);
    } else if (action == "log") {
      int64_t lines = 100, offset = -1;
      if (Json e = IntArg(args, "lines", 1, 10000, &lines); !e.is_null()) return e;
      if (Json e = IntArg(args, "offset", 0, INT64_MAX, &offset); !e.is_null()) return e;
      s = table_->Log(owner, id, offset, lines, &out);
    } else if (action == "capture") {
      int64_t lines = 50;
      if (Json e = IntArg(args, "lines", 1, 10000, &lines); !e.is_null()) return e;
      s = table_->Capture(owner, id, lines, &out);
    } else if (action == "send_keys" || action == "write") {
      std::string bytes;
      if (Json e = Input(args, action, &bytes); !e.is_null()) return e;
      s = table_->Write(owner, id, bytes, &out);
    } else if (action == "kill") {
      std::string name = "TERM";
      if (!StringArg(args, "signal", &name, false))
        return ToolFail(errc::kInvalidArgs, "signal must be a string");
      static const std::map<std::string, int> kSignals = {
          {"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT}, {"HUP", SIGHUP}};
      auto sig = kSignals.find(name);
      if (sig == kSignals.end()) return ToolFail(errc::kInvalidArgs, "signal must be TERM, KILL, INT or HUP");
      s = table_->Kill(owner, id, sig->second, &out);
    } else if (action == "watch") {
      std::string pattern;
      if (!StringArg(args, "pattern", &pattern) || pattern.empty()) {
        return ToolFail(errc::kInvalidArgs, "pattern (a regular expression) is required for watch");
      }
      s = table_->Watch(owner, id, pattern, &out);
    } else if (action == "unwatch") {
      s = table_->Unwatch(owner, id, &out);
    } else {
      return ToolFail(errc::kInvalidArgs,
                      "action must be spawn, list, status, log, capture, send_keys, write, "
                      "kill, watch or unwatch");
    }
    if (s.code() == "E_NOT_FOUND") {
      // Not this run's: lost if an earlier run spawned it.
      std::vector<Json> lost = Lost(ctx, owner, id);
      if (!lost.empty()) {
        if (action == "status") return ToolOk(lost[0]);
        Json r = ToolFail("E_PROCESS_EXITED",
                          "background process " + id +
                              " is lost: it was started before tollgate restarted and ended with "
                              "that run; its output is gone");
        r["data"] = lost[0];
        return r;
      }
    }
    if (!s.ok()) {
      Json r = Fail(s);
      if (out.is_object()) r["data"] = out;  // write: how much was taken
      return r;
    }
    return ToolOk(out);
  }

 private:
  Json Spawn(const Json& args, const ToolContext& ctx, const ProcessOwner& owner) const {
    std::string command;
    if (!StringArg(args, "command", &command) || command.empty()) {
      return ToolFail(errc::kInvalidArgs, "command (a command line, as bash takes) is required for spawn");
    }
    if (ctx.request_id.empty()) return ToolFail(errc::kInvalidArgs, "spawn needs the request's id");
    Workspace ws;
    ProcessSpec spec;
    if (Json refused = PrepareCommand(Json{{"command", command}}, ctx, &ws, &spec); !refused.is_null()) {
      return refused;
    }
    const auto& bg = ctx.policy->background;
    spec.limits.memory_mb = bg.memory_mb;
    spec.limits.processes = bg.pids;
    spec.limits.cpu_seconds = bg.max_lifetime_s;  // the lifetime bounds it; CPU is not the point here
    spec.env.push_back("TERM=xterm");
    const std::string id = "bp-" + Sha256Hex(ctx.request_id).substr(0, 12);
    Json info;
    if (Status s = table_->Spawn(owner, id, command, std::move(spec), bg, &info); !s.ok()) return Fail(s);
    info["action"] = "spawn";  // how a later run finds this spawn in the log (Lost)
    Json r = ToolOk(info);
    r["meta"] = {{"command", ToValidUtf8(command)}, {"sandbox", true}};
    return r;
  }

  // An optional integer arg within [lo, hi]; null, or the refusal.
  static Json IntArg(const Json& args, const char* key, int64_t lo, int64_t hi, int64_t* out) {
    if (!args.contains(key)) return nullptr;
    const Json& v = args[key];
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      return ToolFail(errc::kInvalidArgs, std::string(key) + " must be an integer from " +
                                              std::to_string(lo) +
                                              (hi == INT64_MAX ? " up" : " to " + std::to_string(hi)));
    }
    *out = v.get<int64_t>();
    return nullptr;
  }

  // write's `input` as given, or send_keys' `keys` (a key name or literal
  // text, or a list of them sent in order) as bytes.
  static Json Input(const Json& args, const std::string& action, std::string* bytes) {
    if (action == "write") {
      if (!StringArg(args, "input", bytes))
        return ToolFail(errc::kInvalidArgs, "input (a string) is required for write");
    } else {
      const Json& k = args.contains("keys") ? args["keys"] : Json();
      std::vector<std::string> keys;
      if (k.is_string()) {
        keys.push_back(k.get<std::string>());
      } else if (k.is_array() && !k.empty() && k.size() <= kMaxKeys) {
        for (const auto& x : k) {
          if (!x.is_string()) return ToolFail(errc::kInvalidArgs, "keys must be strings");
          keys.push_back(x.get<std::string>());
        }
      } else {
        return ToolFail(errc::kInvalidArgs, "keys (a key name or text, or a list of at most " +
                                                std::to_string(kMaxKeys) + ") is required for send_keys");
      }
      for (const auto& key : keys) {
        const std::string b = KeyBytes(key);
        *bytes += b.empty() ? key : b;
        if (bytes->size() > kMaxInputBytes) break;
      }
    }
    if (bytes->empty()) return ToolFail(errc::kInvalidArgs, "nothing to send");
    if (bytes->size() > kMaxInputBytes) {
      return ToolFail(errc::kTooLarge,
                      "at most " + std::to_string(kMaxInputBytes) + " bytes of input per call");
    }
    return nullptr;
  }

  // Spawns of this agent that the log holds and this table never held (all
  // of them, or `only`'s): each {process_id, command, started_at, status:
  // "lost"}. Reads the agent's latest background_process results, newest
  // first, at most kLostPages pages; none without a log reader.
  std::vector<Json> Lost(const ToolContext& ctx, const ProcessOwner& owner, const std::string& only) const {
    std::vector<Json> lost;
    if (ctx.audit == nullptr) return lost;
    std::set<std::string> seen;
    std::string cursor;
    for (int page = 0; page < kLostPages; ++page) {
      Json q{{"org_id", ctx.org_id},
             {"agent_id", ctx.agent_id},
             {"tool", "background_process"},
             {"types", Json::array({ev::kExecutionCompleted})},
             {"limit", 200},
             {"descending", true}};
      if (!cursor.empty()) q["cursor"] = cursor;
      Json events;
      if (!ctx.audit->Query(ctx.org_id, q, &events).ok() || !events.contains("events")) break;
      for (const auto& e : events["events"]) {
        const Json* d = &e;
        for (const char* k : {"data", "result", "data"}) {
          d = d->is_object() && d->contains(k) ? &(*d)[k] : nullptr;
          if (d == nullptr) break;
        }
        if (d == nullptr || !d->is_object() || d->value("action", "") != "spawn") continue;
        const std::string id = d->value("process_id", "");
        if (id.empty() || (!only.empty() && id != only) || !seen.insert(id).second ||
            table_->Knows(owner, id)) {
          continue;
        }
        lost.push_back({{"process_id", id},
                        {"command", d->value("command", "")},
                        {"started_at", d->value("started_at", "")},
                        {"status", "lost"},
                        {"exit_code", nullptr},
                        {"ended_at", nullptr}});
        if (!only.empty()) return lost;
      }
      cursor = events.value("next_cursor", "");
      if (cursor.empty()) break;
    }
    return lost;
  }

  std::unique_ptr<ProcessTable> table_;  // Run is const; the table is the tool's state
};

}  // namespace

std::unique_ptr<Tool> MakeBackgroundProcess() { return std::make_unique<BackgroundProcess>(); }

}  // namespace tollgate
