#include "observe/approval_webhooks.h"

#include <algorithm>

#include "core/request_state.h"

namespace tollgate {

namespace {
// As the approve stage reads it (approve/pending_approvals.cpp): 1 unless
// the event says more.
int ApproversNeeded(const Json& data) {
  auto n = data.find("approvers_needed");
  return n != data.end() && n->is_number_integer() ? std::max(1, n->get<int>()) : 1;
}
}  // namespace

ApprovalWebhooks::ApprovalWebhooks(WebhookOptions options, const LogView* view)
    : poster_(std::move(options)), view_(view) {}

ApprovalWebhooks::Decided ApprovalWebhooks::DecidedOf(const Json& decision) {
  Decided d;
  auto flag = decision.find("notify");
  d.notify = flag != decision.end() && flag->is_array() ? *flag : Json::array();
  d.rule = decision.value("rule", "");
  d.reason = decision.value("reason", "");
  d.danger_level = decision.value("danger_level", "");
  return d;
}

Json ApprovalWebhooks::RequestedNotice(const Event& e) const {
  Json n{{"event", ev::kApprovalRequested},
         {"request_id", e.request_id},
         {"org_id", e.org_id},
         {"agent_id", e.agent_id},
         {"session_id", e.session_id},
         {"tool", e.tool},
         {"approvers_needed", ApproversNeeded(e.data)},
         {"approvers", e.data.value("approvers", Json::array())},
         {"deadline", e.data.value("deadline", "")},
         {"args_hash", e.data.value("args_hash", "")},
         {"log_seq", e.seq}};
  if (auto d = decided_.find(RequestKey(e.org_id, e.request_id)); d != decided_.end()) {
    n["reason"] = d->second.reason;
    n["danger_level"] = d->second.danger_level;
  }
  return n;
}

Json ApprovalWebhooks::CompletedNotice(const Event& e, const Decided& d) {
  const Json result = e.data.value("result", Json::object());
  Json n{{"event", ev::kExecutionCompleted},
         {"request_id", e.request_id},
         {"org_id", e.org_id},
         {"agent_id", e.agent_id},
         {"session_id", e.session_id},
         {"tool", e.tool},
         {"success", result.value("success", false)},
         {"rule", d.rule},
         {"reason", d.reason},
         {"notify", d.notify},
         {"log_seq", e.seq}};
  if (auto err = result.find("error"); err != result.end() && err->is_object())
    n["error_code"] = err->value("code", "");
  return n;
}

void ApprovalWebhooks::OnAppended(const std::vector<Event>& events) {
  std::vector<Json> notices;
  std::vector<const Event*> unknown;  // completed calls decided before this process
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Event& e : events) {
      const std::string key = RequestKey(e.org_id, e.request_id);
      if (e.type == ev::kDecisionMade) {
        if (e.data.value("verdict", "") != "deny") decided_[key] = DecidedOf(e.data);
      } else if (e.type == ev::kApprovalRequested) {
        if (notified_.insert(e.id)) notices.push_back(RequestedNotice(e));
      } else if (e.type == ev::kApprovalDenied || e.type == ev::kApprovalExpired) {
        decided_.erase(key);  // never executes
      } else if (e.type == ev::kExecutionCompleted && !notified_.count(e.id)) {
        auto d = decided_.find(key);
        if (d == decided_.end()) {
          if (view_ != nullptr) unknown.push_back(&e);
          continue;
        }
        if (!d->second.notify.empty() && notified_.insert(e.id))
          notices.push_back(CompletedNotice(e, d->second));
        decided_.erase(d);
      }
    }
  }
  // Outside the lock: the log read of a decision this observer did not see.
  for (const Event* e : unknown) {
    std::vector<Event> history;
    ++history_reads_;
    if (!view_->EventsOfRequest(e->org_id, e->request_id, &history).ok()) continue;
    RequestState st = Summarize(history);
    if (!st.decision) continue;
    const Decided d = DecidedOf(st.decision->data);
    if (d.notify.empty()) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (notified_.insert(e->id)) notices.push_back(CompletedNotice(*e, d));
  }
  for (const Json& n : notices) poster_.Enqueue(n);
}

}  // namespace tollgate
