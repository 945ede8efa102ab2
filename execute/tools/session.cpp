// session (Duragent's; docs/tools.md, "session") {action: list | read}:
// an agent peeks at its other sessions, from the log (ToolContext::audit).
//
// Scope, execute.session.scope: "agent" (default) is the calling agent's
// own sessions; "org" is every agent's of its org. Never another org's:
// the reader is scoped to the caller's org whatever the query says. A
// session outside the scope is answered exactly as one that does not
// exist (E_SESSION_NOT_FOUND), so an agent cannot learn which session ids
// other agents or orgs use.
//
// list {limit?}: sessions newest first, from the newest kMaxScan
// request.received events: session_id, agent_id, first_time, last_time,
// requests, tools (each once), current (the calling session).
// read {session_id, limit?}: its last `limit` (default 50) requests, oldest
// first: request_id, time, tool, action, args as logged (secrets already
// redacted; a large one cut to args_preview), verdict, reason, status
// (completed, failed, denied, rejected, expired, pending_approval,
// running) and a result summary (success, error code and message, the
// data's JSON cut to kSummaryChars). Both bounded by kMaxScan events read.
#include <map>
#include <set>

#include "execute/tools/audit_scan.h"
#include "execute/tools/tools.h"

namespace tollgate {
namespace {

constexpr size_t kMaxScan = 5000;
constexpr size_t kSummaryChars = 500;
constexpr size_t kMaxArgsBytes = 4096;
constexpr size_t kMaxTools = 50;
constexpr const char* kSessionNotFound = "E_SESSION_NOT_FOUND";

// The first `max` bytes of UTF-8 `s`, never splitting a character.
std::string Cut(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t k = max;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  return s.substr(0, k) + "...";
}

std::string Str(const Json& o, const char* k) {
  return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : "";
}

class Session : public BuiltinTool {
 public:
  Session() : BuiltinTool("session") {}

  Json Run(const Json& args, const ToolContext& ctx) const override {
    std::string action;
    if (!StringArg(args, "action", &action))
      return ToolFail(errc::kInvalidArgs, "action must be list or read");
    int64_t limit = 50;
    if (args.contains("limit")) {
      if (!args["limit"].is_number_integer() || args["limit"].get<int64_t>() < 1 ||
          args["limit"].get<int64_t>() > 1000) {
        return ToolFail(errc::kInvalidArgs, "limit must be an integer from 1 to 1000");
      }
      limit = args["limit"].get<int64_t>();
    }
    Json q{{"types", Json::array({ev::kRequestReceived})}};
    const bool org_scope = ctx.policy->session_scope == "org";
    if (!org_scope) q["agent_id"] = ctx.agent_id;
    if (action == "list") return List(q, static_cast<size_t>(limit), org_scope, ctx);
    if (action == "read") {
      std::string sid;
      if (!StringArg(args, "session_id", &sid) || sid.empty()) {
        return ToolFail(errc::kInvalidArgs, "read needs session_id, a non-empty string");
      }
      return Read(sid, static_cast<size_t>(limit), org_scope, ctx);
    }
    return ToolFail(errc::kInvalidArgs, "action must be list or read");
  }

 private:
  struct Seen {
    std::string session_id, agent_id, first, last;
    int64_t requests = 0;
    std::set<std::string> tools;
  };

  Json List(const Json& q, size_t limit, bool org_scope, const ToolContext& ctx) const {
    std::vector<Seen> order;  // newest first: the order of first sight
    std::map<std::string, size_t> index;
    bool capped = false;
    Json err = ScanAudit(
        ctx, q, kMaxScan,
        [&](const Json& e) {
          const std::string key = Str(e, "agent_id") + '\n' + Str(e, "session_id");
          auto [it, fresh] = index.emplace(key, order.size());
          if (fresh) {
            order.push_back(
                {Str(e, "session_id"), Str(e, "agent_id"), Str(e, "time"), Str(e, "time"), 0, {}});
          }
          Seen& s = order[it->second];
          s.first = Str(e, "time");  // older with every record
          ++s.requests;
          if (s.tools.size() < kMaxTools) s.tools.insert(Str(e, "tool"));
          return true;
        },
        &capped);
    if (!err.is_null()) return err;
    Json sessions = Json::array();
    for (const auto& s : order) {
      if (sessions.size() >= limit) break;
      sessions.push_back({{"session_id", s.session_id},
                          {"agent_id", s.agent_id},
                          {"first_time", s.first},
                          {"last_time", s.last},
                          {"requests", s.requests},
                          {"tools", Json(s.tools)},
                          {"current", s.session_id == ctx.session_id && s.agent_id == ctx.agent_id}});
    }
    return ToolOk({{"scope", org_scope ? "org" : "agent"},
                   {"sessions", sessions},
                   {"count", sessions.size()},
                   {"truncated", capped || order.size() > limit}});
  }

  struct Entry {
    Json received, decision, approval, completed, rejected;
    std::string tool, time;
    size_t pos = 0;  // in `order`
  };

  Json Read(const std::string& sid, size_t limit, bool org_scope, const ToolContext& ctx) const {
    Json q{{"session_id", sid},
           {"types",
            Json::array({ev::kRequestReceived, ev::kRequestRejected, ev::kDecisionMade, ev::kApprovalGranted,
                         ev::kApprovalDenied, ev::kApprovalExpired, ev::kExecutionCompleted})}};
    if (!org_scope) q["agent_id"] = ctx.agent_id;
    std::vector<std::string> order;  // newest first
    std::map<std::string, Entry> entries;
    size_t received = 0;  // of the first `limit` requests
    bool capped = false, more = false;
    Json err = ScanAudit(
        ctx, q, kMaxScan,
        [&](const Json& e) {
          const std::string rid = Str(e, "request_id");
          auto [it, fresh] = entries.try_emplace(rid);
          if (fresh) {
            // All of the newest `limit` requests are complete once each one's
            // request.received was read; later (older) ones are not wanted.
            if (order.size() >= limit && received >= limit) {
              more = true;
              return false;
            }
            it->second.pos = order.size();
            order.push_back(rid);
          }
          Entry& en = it->second;
          const std::string type = Str(e, "type");
          const Json& data = e.contains("data") ? e["data"] : Json();
          if (en.tool.empty()) en.tool = Str(e, "tool");
          if (type == ev::kRequestReceived) {
            en.received = data;
            en.time = Str(e, "time");
            if (en.pos < limit) ++received;
          } else if (type == ev::kRequestRejected) {
            en.rejected = data;
            if (en.time.empty()) en.time = Str(e, "time");
          } else if (type == ev::kDecisionMade) {
            en.decision = data;
          } else if (type == ev::kExecutionCompleted) {
            en.completed = data;
          } else if (en.approval.is_null()) {  // the newest approval outcome
            en.approval = {{"type", type}};
          }
          return true;
        },
        &capped);
    if (!err.is_null()) return err;
    if (order.empty()) {
      return ToolFail(kSessionNotFound,
                      "no session '" + sid + "' " + (org_scope ? "in this org" : "of this agent") +
                          " in the log (sessions outside the scope, execute.session.scope, are not shown)");
    }
    Json out = Json::array();
    const size_t n = std::min(order.size(), limit);
    for (size_t i = n; i-- > 0;) out.push_back(Describe(order[i], entries[order[i]]));
    return ToolOk({{"session_id", sid},
                   {"scope", org_scope ? "org" : "agent"},
                   {"entries", out},
                   {"count", out.size()},
                   {"truncated", capped || more || order.size() > limit}});
  }

  static Json Describe(const std::string& rid, const Entry& en) {
    Json j{{"request_id", rid}, {"time", en.time}, {"tool", en.tool}};
    const Json& req =
        en.received.is_object() && en.received.contains("request") ? en.received["request"] : Json();
    if (req.is_object()) {
      j["agent_id"] = Str(req, "agent_id");
      const Json& args = req.contains("args") ? req["args"] : Json::object();
      if (const std::string a = Str(args, "action"); !a.empty()) j["action"] = a;
      const std::string dumped = args.dump();
      if (dumped.size() <= kMaxArgsBytes) {
        j["args"] = args;
      } else {
        j["args_preview"] = Cut(dumped, kMaxArgsBytes);
      }
    }
    std::string status;
    if (!en.rejected.is_null()) status = "rejected";
    const std::string verdict = Str(en.decision, "verdict");
    if (!verdict.empty()) {
      j["verdict"] = verdict;
      j["reason"] = Cut(Str(en.decision, "reason"), kSummaryChars);
    }
    const std::string approval = en.approval.is_null() ? "" : Str(en.approval, "type");
    if (!en.completed.is_null()) {
      const Json& r = en.completed.contains("result") ? en.completed["result"] : Json();
      const bool ok = r.is_object() && r.value("success", false);
      status = ok ? "completed" : "failed";
      Json summary{{"success", ok}};
      if (r.is_object() && r.contains("error") && r["error"].is_object()) {
        summary["error_code"] = Str(r["error"], "code");
        summary["error_message"] = Cut(Str(r["error"], "message"), kSummaryChars);
      }
      if (r.is_object() && r.contains("data") && !r["data"].is_null()) {
        summary["summary"] = Cut(r["data"].dump(), kSummaryChars);
      }
      j["result"] = summary;
    } else if (status.empty()) {
      if (verdict == "deny" || approval == ev::kApprovalDenied) {
        status = "denied";
      } else if (approval == ev::kApprovalExpired) {
        status = "expired";
      } else if (verdict == "ask" && approval.empty()) {
        status = "pending_approval";
      } else {
        status = verdict.empty() ? "received" : "running";
      }
    }
    j["status"] = status;
    return j;
  }
};

}  // namespace

std::unique_ptr<Tool> MakeSession() { return std::make_unique<Session>(); }

}  // namespace tollgate
