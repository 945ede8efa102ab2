#include "replay/timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/request_state.h"
#include "replay/log_source.h"
#include "replay/recording.h"

namespace tollgate::replay {
namespace {

// Display width of UTF-8 text (one column per code point).
size_t Columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string Str(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

double Num(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}

// Arguments are shown up to this many columns on a step's line.
constexpr size_t kArgsColumns = 160;

// The call's arguments as the log holds them (secrets already redacted,
// docs/redaction.md), on one line and cut at kArgsColumns; the hash when
// the event carries no request.
std::string ArgsText(const Json& d) {
  auto req = d.find("request");
  auto args = req != d.end() && req->is_object() ? req->find("args") : req;
  if (req == d.end() || !req->is_object() || args == req->end()) {
    return "args_hash " + Str(d, "args_hash").substr(0, 12);
  }
  std::string text = args->dump(-1, ' ', false, Json::error_handler_t::replace);
  if (Columns(text) <= kArgsColumns) return text;
  size_t cut = 0;
  for (size_t n = 0; cut < text.size() && n < kArgsColumns - 1; ++cut) n += (text[cut] & 0xC0) != 0x80;
  while (cut < text.size() && (text[cut] & 0xC0) == 0x80) ++cut;  // not inside a code point
  return text.substr(0, cut) + "…";
}

// One line for people about one event of a request.
std::string Summary(const Event& e, const RequestTimeline& r) {
  const Json& d = e.data;
  std::ostringstream o;
  if (e.type == ev::kRequestReceived) {
    o << "received " << e.tool << " " << ArgsText(d);
  } else if (e.type == ev::kRequestRejected) {
    const Json err = d.value("error", Json::object());
    o << "rejected " << Str(err, "code") << ": " << Str(err, "message");
  } else if (e.type == ev::kDecisionMade) {
    o << "decision " << Str(d, "verdict") << "  rule " << Str(d, "rule") << "  policy "
      << Str(d, "policy_version");
    if (!Str(d, "error_code").empty()) o << "  " << Str(d, "error_code");
    o << "  — " << Str(d, "reason");
  } else if (e.type == ev::kApprovalRequested) {
    o << "approval requested";
    if (d.contains("approvers_needed")) o << ", quorum " << d["approvers_needed"].dump();
    if (!Str(d, "deadline").empty()) o << ", deadline " << Str(d, "deadline");
  } else if (e.type == ev::kApprovalGranted || e.type == ev::kApprovalDenied) {
    o << (e.type == ev::kApprovalGranted ? "approved by " : "denied by ") << Str(d, "approver");
    if (!Str(d, "scope").empty()) o << " (" << Str(d, "scope") << ")";
    if (r.approval_requested) o << " after " << FormatDuration(e.time_us - r.approval_requested_us);
    if (!Str(d, "comment").empty()) o << ": " << Str(d, "comment");
  } else if (e.type == ev::kApprovalExpired) {
    o << "approval expired";
    if (r.approval_requested) o << " after " << FormatDuration(e.time_us - r.approval_requested_us);
  } else if (e.type == ev::kExecutionStarted) {
    o << "execution started (" << Str(d, "executor") << ", attempt " << d.value("attempt", Json(1)).dump()
      << ")";
  } else if (e.type == ev::kExecutionCompleted && Str(d, "executor") == "replay") {
    // Recorded-result replay (replay/replay_stage.h): nothing ran.
    const Json rp = d.value("replay", Json::object());
    if (rp.value("matched", false))
      o << "served the recorded result of " << Str(rp, "from_request_id") << " (replay)";
    else
      o << "replay mismatch: no recorded result, not executed (" << kReplayMismatch << ")";
  } else if (e.type == ev::kExecutionCompleted) {
    const Json res = d.value("result", Json::object());
    const bool ok = res.value("success", false);
    o << "execution " << (ok ? "succeeded" : "failed");
    if (!ok && res.contains("error") && res["error"].is_object()) o << " " << Str(res["error"], "code");
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", Num(d, "duration_ms"));
    o << " in " << ms << " ms";
    if (Num(d, "cost_usd") > 0) o << ", cost $" << Num(d, "cost_usd");
    if (!Str(d, "executor").empty()) o << " (" << Str(d, "executor") << ")";
  } else {
    o << e.type;
  }
  return o.str();
}

void Apply(const Event& e, RequestTimeline& r) {
  const Json& d = e.data;
  if (e.type == ev::kRequestReceived) {
    r.request = d.value("request", Json());
    r.args_hash = Str(d, "args_hash");
    int64_t t;
    if (ParseTime(Str(d, "received_at"), &t)) r.received_us = t;
  } else if (e.type == ev::kDecisionMade) {
    r.decision = WithoutProvenance(d);
    r.verdict = Str(d, "verdict");
    r.rule = Str(d, "rule");
    r.reason = Str(d, "reason");
    r.policy_version = Str(d, "policy_version");
    r.danger_level = Str(d, "danger_level");
    r.decision_error = Str(d, "error_code");
  } else if (e.type == ev::kApprovalRequested) {
    r.approval_requested = true;
    r.approval_requested_us = e.time_us;
    r.approval_request = WithoutProvenance(d);
  } else if (e.type.rfind("approval.", 0) == 0) {
    ApprovalStep a;
    a.type = e.type;
    a.approver = Str(d, "approver");
    a.scope = Str(d, "scope");
    a.comment = Str(d, "comment");
    a.time_us = e.time_us;
    if (r.approval_requested) a.waited_us = e.time_us - r.approval_requested_us;
    r.approvals.push_back(std::move(a));
  } else if (e.type == ev::kExecutionStarted) {
    ++r.attempts;
  } else if (e.type == ev::kExecutionCompleted) {
    const Json res = d.value("result", Json::object());
    r.executed = true;
    r.duration_ms = Num(d, "duration_ms");
    r.cost_usd = Num(d, "cost_usd");
    r.success = res.value("success", false);
    r.error_code = res.contains("error") && res["error"].is_object() ? Str(res["error"], "code") : "";
  }
}

}  // namespace

std::string FormatDuration(int64_t us) {
  char buf[48];
  const double a = static_cast<double>(us < 0 ? -us : us);
  const char* sign = us < 0 ? "-" : "";
  if (a < 1000)
    std::snprintf(buf, sizeof buf, "%s%lld µs", sign, static_cast<long long>(a));
  else if (a < 1e6)
    std::snprintf(buf, sizeof buf, "%s%.1f ms", sign, a / 1e3);
  else if (a < 120e6)
    std::snprintf(buf, sizeof buf, "%s%.2f s", sign, a / 1e6);
  else if (a < 7200e6)
    std::snprintf(buf, sizeof buf, "%s%.1f min", sign, a / 60e6);
  else
    std::snprintf(buf, sizeof buf, "%s%.1f h", sign, a / 3600e6);
  return buf;
}

SessionTimeline BuildTimeline(const std::string& session_id, std::vector<Event> events) {
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.seq < b.seq; });
  SessionTimeline t;
  t.session_id = session_id;
  // Group by request, keeping each request's events in seq order. A
  // request is (org, request_id): two orgs sharing a session id may use the
  // same request ids.
  std::map<std::string, size_t> index;
  std::vector<std::vector<const Event*>> groups;
  for (const Event& e : events) {
    if (e.request_id.empty()) continue;
    auto [it, fresh] = index.emplace(OrgRequestKey(e.org_id, e.request_id), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(&e);
    ++t.events;
    if (t.first_us == 0 || e.time_us < t.first_us) t.first_us = e.time_us;
    t.last_us = std::max(t.last_us, e.time_us);
    if (t.org_id.empty()) t.org_id = e.org_id;
    if (t.agent_id.empty()) t.agent_id = e.agent_id;
  }
  for (const auto& g : groups) {
    RequestTimeline r;
    r.org_id = g.front()->org_id;
    r.request_id = g.front()->request_id;
    r.tool = g.front()->tool;
    r.first_seq = g.front()->seq;
    r.received_us = g.front()->time_us;
    std::vector<Event> copies;
    copies.reserve(g.size());
    int64_t prev = g.front()->time_us;
    for (const Event* e : g) {
      Apply(*e, r);
      TimelineStep s;
      s.seq = e->seq;
      s.time_us = e->time_us;
      s.type = e->type;
      s.summary = Summary(*e, r);
      s.since_prev_us = e->time_us - prev;
      s.since_start_us = e->time_us - g.front()->time_us;
      prev = e->time_us;
      r.steps.push_back(std::move(s));
      copies.push_back(*e);
    }
    RequestState st = Summarize(copies);
    r.result = ResultFromLog(st);
    r.status = r.result.is_null() ? "pending" : r.result.value("status", "pending");
    t.counts[r.status] = t.counts.value(r.status, 0) + 1;
    t.cost_usd += r.cost_usd;
    t.requests.push_back(std::move(r));
  }
  return t;
}

Json TimelineToJson(const SessionTimeline& t) {
  Json requests = Json::array();
  for (const RequestTimeline& r : t.requests) {
    Json steps = Json::array();
    for (const TimelineStep& s : r.steps) {
      steps.push_back({{"seq", s.seq},
                       {"time", FormatTime(s.time_us)},
                       {"type", s.type},
                       {"summary", s.summary},
                       {"since_prev_us", s.since_prev_us},
                       {"since_start_us", s.since_start_us}});
    }
    Json approvals = Json::array();
    for (const ApprovalStep& a : r.approvals) {
      Json j{{"type", a.type}, {"time", FormatTime(a.time_us)}};
      if (!a.approver.empty()) j["approver"] = a.approver;
      if (!a.scope.empty()) j["scope"] = a.scope;
      if (!a.comment.empty()) j["comment"] = a.comment;
      if (a.waited_us >= 0) j["waited_us"] = a.waited_us;
      approvals.push_back(std::move(j));
    }
    Json j{{"org_id", r.org_id},
           {"request_id", r.request_id},
           {"tool", r.tool},
           {"args_hash", r.args_hash},
           {"request", r.request},
           {"status", r.status},
           {"received_at", FormatTime(r.received_us)},
           {"steps", steps}};
    if (!r.decision.is_null()) {
      j["decision"] = {{"verdict", r.verdict},
                       {"rule", r.rule},
                       {"reason", r.reason},
                       {"policy_version", r.policy_version},
                       {"danger_level", r.danger_level}};
      if (!r.decision_error.empty()) j["decision"]["error_code"] = r.decision_error;
      if (auto h = r.decision.find("history"); h != r.decision.end()) j["decision"]["history"] = *h;
    }
    if (r.approval_requested || !r.approvals.empty()) {
      j["approval"] = {{"requested", r.approval_request}, {"responses", approvals}};
      if (r.approval_requested) j["approval"]["requested_at"] = FormatTime(r.approval_requested_us);
    }
    if (r.attempts > 0 || r.executed) {
      Json ex{{"attempts", r.attempts}, {"completed", r.executed}};
      if (r.executed) {
        ex["duration_ms"] = r.duration_ms;
        ex["success"] = r.success;
        ex["cost_usd"] = r.cost_usd;
        if (!r.error_code.empty()) ex["error_code"] = r.error_code;
      }
      j["execution"] = std::move(ex);
    }
    j["result"] = r.result;
    requests.push_back(std::move(j));
  }
  return {{"session_id", t.session_id},
          {"org_id", t.org_id},
          {"agent_id", t.agent_id},
          {"events", t.events},
          {"first", t.first_us ? FormatTime(t.first_us) : ""},
          {"last", t.last_us ? FormatTime(t.last_us) : ""},
          {"span_us", t.last_us - t.first_us},
          {"counts", t.counts},
          {"cost_usd", t.cost_usd},
          {"requests", requests}};
}

std::string FormatTimeline(const SessionTimeline& t) {
  std::ostringstream o;
  o << "session " << t.session_id << "  agent " << t.agent_id << "  org " << t.org_id << "\n"
    << "  " << t.requests.size() << " requests, " << t.events << " events";
  if (t.events) {
    o << ", " << FormatTime(t.first_us) << " → " << FormatTime(t.last_us) << " ("
      << FormatDuration(t.last_us - t.first_us) << ")";
  }
  o << "\n  outcomes";
  for (const auto& [status, n] : t.counts.items()) o << "  " << status << " " << n.get<int>();
  if (t.cost_usd > 0) o << "  cost $" << t.cost_usd;
  o << "\n";
  int64_t prev_request_us = 0;
  int n = 0;
  for (const RequestTimeline& r : t.requests) {
    o << "\n#" << ++n << " " << r.request_id << "  " << r.tool << "  → " << r.status;
    if (prev_request_us)
      o << "  (" << FormatDuration(r.received_us - prev_request_us) << " after the previous request)";
    o << "\n";
    prev_request_us = r.received_us;
    for (const TimelineStep& s : r.steps) {
      std::string when = FormatTime(s.time_us);
      when = when.size() > 11 ? when.substr(11) : when;  // the time of day; the date is in the header
      // The first step has no predecessor: no delta.
      std::string delta = &s == &r.steps.front() ? "" : "+" + FormatDuration(s.since_prev_us);
      delta.append(std::max<size_t>(1, 12 - std::min<size_t>(12, Columns(delta))), ' ');
      o << "  " << when << "  " << delta << "seq " << s.seq << "  " << s.summary << "\n";
    }
    if (r.result.is_object() && r.result.contains("result")) {
      const Json& tr = r.result["result"];
      std::string shown =
          tr.value("success", false) ? tr.value("data", Json()).dump() : tr.value("error", Json()).dump();
      if (shown.size() > 160) shown = shown.substr(0, 157) + "...";
      o << "  result: " << shown << "\n";
    }
  }
  return o.str();
}

}  // namespace tollgate::replay
