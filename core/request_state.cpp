#include "core/request_state.h"

#include <algorithm>

#include "core/messages.h"

namespace tollgate {

bool RequestState::terminal() const {
  if (rejected || completed) return true;
  if (decision && verdict() == "deny") return true;
  if (approval_settled && approval_settled->type != ev::kApprovalGranted) return true;
  return false;
}

bool RequestState::cleared() const {
  const std::string v = verdict();
  if (v == "allow") return true;
  return v == "ask" && approval_settled && approval_settled->type == ev::kApprovalGranted;
}

std::string RequestState::verdict() const {
  if (!decision) return "";
  auto v = decision->data.find("verdict");
  return v != decision->data.end() && v->is_string() ? v->get<std::string>() : "";
}

RequestState Summarize(const std::vector<Event>& events) {
  RequestState s;
  for (const Event& e : events) {
    if (e.type == ev::kRequestReceived) {
      s.received = &e;
      s.rejected = nullptr;  // an id rejected as invalid, then sent valid, is live again
    } else if (e.type == ev::kRequestRejected) {
      // Once received, a request ends by rejection only when the pipeline
      // itself gives up on it (E_REQUEST_LOST). Ingest's refusals after that
      // refuse a message, not the request: another agent of the org re-using
      // the id with a bad body, a conflicting copy (E_DUPLICATE_REQUEST), an
      // unproven sender. Otherwise anyone able to send one message under the
      // id could end a request that is not theirs.
      auto err = e.data.find("error");
      const std::string code = err != e.data.end() && err->is_object() ? err->value("code", "") : "";
      if (code != errc::kDuplicateRequest &&
          (s.received == nullptr || code == errc::kRequestLost || code == errc::kOutputTooLarge)) {
        s.rejected = &e;
      }
    } else if (e.type == ev::kDecisionMade)
      s.decision = &e;
    else if (e.type == ev::kApprovalRequested) {
      s.approval_requested = &e;
      auto n = e.data.find("approvers_needed");
      s.approvers_needed = n != e.data.end() && n->is_number_integer() ? std::max(1, n->get<int>()) : 1;
    } else if (e.type == ev::kApprovalGranted || e.type == ev::kApprovalDenied ||
               e.type == ev::kApprovalExpired) {
      if (s.approval_settled) continue;  // the first settlement stands
      if (s.approvers_needed == 0) s.approvers_needed = 1;
      if (e.type != ev::kApprovalGranted) {
        s.approval_settled = &e;
        continue;
      }
      // Quorum: distinct approvers; the same approver twice counts once.
      const std::string who = e.data.value("approver", "");
      bool seen = false;
      for (const Event* g : s.grants) seen = seen || g->data.value("approver", "") == who;
      if (seen) continue;
      s.grants.push_back(&e);
      if (static_cast<int>(s.grants.size()) >= s.approvers_needed) s.approval_settled = &e;
    } else if (e.type == ev::kExecutionStarted) {
      s.started = &e;
      ++s.attempts;
    } else if (e.type == ev::kExecutionCompleted)
      s.completed = &e;
  }
  return s;
}

Json ResultFromLog(const RequestState& st) {
  if (!st.terminal()) return nullptr;
  const Event* any = st.received ? st.received : st.rejected;
  Json request = st.received ? st.received->data.value("request", Json::object())
                             : Json{{"request_id", any->request_id},
                                    {"org_id", any->org_id},
                                    {"agent_id", any->agent_id},
                                    {"session_id", any->session_id},
                                    {"tool", any->tool}};
  auto clean = [](Json d) { return WithoutProvenance(std::move(d)); };
  Json decision = st.decision ? clean(st.decision->data) : Json();
  Json approval = st.approval_settled ? clean(st.approval_settled->data) : Json();
  Json result;
  const Event* last = nullptr;
  if (st.rejected) {
    auto err = st.rejected->data.value("error", Json::object());
    const std::string code = err.value("code", errc::kInvalidRequest);
    const bool gave_up = code == errc::kRequestLost || code == errc::kOutputTooLarge;
    result = MakeResult(request, gave_up ? "failed" : "rejected", decision, approval,
                        ToolResultError(code, err.value("message", ""), code == errc::kRequestLost));
    last = st.rejected;
  } else if (st.completed) {
    Json tr = st.completed->data.value("result", Json());
    result = MakeResult(request, tr.value("success", false) ? "completed" : "failed", decision, approval, tr);
    last = st.completed;
  } else if (st.approval_settled) {
    const bool expired = st.approval_settled->type == ev::kApprovalExpired;
    const bool withdrawn = st.approval_settled->data.value("withdrawn", false);
    result = MakeResult(
        request, expired ? "expired" : "denied", decision, approval,
        // A denial of the approve stage's own (the pending cap) names its code.
        ToolResultError(expired     ? std::string(errc::kApprovalExpired)
                        : withdrawn ? std::string(errc::kWithdrawn)
                                    : approval.value("code", std::string(errc::kApprovalDenied)),
                        approval.value("comment", "approval " + std::string(expired ? "expired" : "denied")),
                        !expired && !withdrawn && approval.contains("code")));
    last = st.approval_settled;
  } else {
    result = MakeResult(request, "denied", decision, nullptr,
                        ToolResultError(decision.value("error_code", errc::kPolicyDenied),
                                        decision.value("reason", "denied by policy"), false));
    last = st.decision;
  }
  result["log_seq"] = last->seq;
  return result;
}

std::string SourceOf(const Event* e) {
  if (!e) return "";
  auto it = e->data.find("source");
  return it != e->data.end() && it->is_string() ? it->get<std::string>() : "";
}

// What the result and the forwarded flow say about a settled approval.
Json ApprovalOf(const RequestState& st) {
  if (st.approval_settled == nullptr) return nullptr;
  const Event& s = *st.approval_settled;
  Json a = Json::object();
  if (s.type == ev::kApprovalExpired) {
    a["deadline"] = s.data.value("deadline", "");
    a["comment"] = "no decision before the deadline " + s.data.value("deadline", "");
    return a;
  }
  a["approver"] = s.data.value("approver", "");
  a["scope"] = s.data.value("scope", "once");
  if (auto c = s.data.find("comment"); c != s.data.end() && c->is_string()) a["comment"] = *c;
  if (s.type == ev::kApprovalGranted) {
    Json who = Json::array();
    bool always = true;
    for (const Event* g : st.grants) {
      who.push_back(g->data.value("approver", ""));
      always = always && g->data.value("scope", "") == "always";
    }
    a["approvers"] = who;
    a["scope"] = always ? "always" : "once";
  }
  if (st.approval_requested) a["deadline"] = st.approval_requested->data.value("deadline", "");
  return a;
}

}  // namespace tollgate
