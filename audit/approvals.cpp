#include "audit/approvals.h"

#include <algorithm>

#include "audit/audit_query.h"
#include "audit/log_sink.h"
#include "audit/open_requests.h"

namespace tollgate {
namespace {

// Calls `each` with the events of every request of `filter` that may have
// a pending approval, oldest request first: the open requests with an
// approval.requested (audit/open_requests.h), or, in a log without that
// index, every request with an approval.requested.
Status ForEachApprovalHistory(const LogStore& store, const PendingFilter& filter,
                              const std::function<void(const std::vector<Event>&)>& each) {
  StoreLogView view(store);
  std::vector<OpenRequest> open;
  Status s = ListOpenRequests(store, &open);
  if (s.ok()) {
    std::vector<Event> events;
    for (const OpenRequest& r : open) {
      if (!filter.org_id.empty() && r.org_id != filter.org_id) continue;
      if (!(s = view.EventsOfRequest(r.org_id, r.request_id, &events)).ok()) return s;
      if (!filter.agent_id.empty() && (events.empty() || events.front().agent_id != filter.agent_id)) continue;
      const bool asked = std::any_of(events.begin(), events.end(),
                                     [](const Event& e) { return e.type == "approval.requested"; });
      if (asked) each(events);
    }
    return Status::Ok();
  }
  if (s.code() != errc::kNotFound) return s;
  AuditQuery q;
  q.types = {"approval.requested"};
  q.org_id = filter.org_id;
  q.agent_id = filter.agent_id;
  Status failed = Status::Ok();
  s = ForEachEvent(store, q, [&](Event& requested) {
    if (!failed.ok()) return;
    std::vector<Event> events;
    failed = view.EventsOfRequest(requested.org_id, requested.request_id, &events);
    if (failed.ok()) each(events);
  });
  return s.ok() ? failed : s;
}

}  // namespace

Status ListPendingApprovals(const LogStore& store, const PendingFilter& filter, std::vector<PendingApproval>* out) {
  out->clear();
  return ForEachApprovalHistory(store, filter, [out](const std::vector<Event>& events) {
    PendingApproval p;
    if (PendingFromState(Summarize(events), &p)) out->push_back(std::move(p));
  });
}

std::function<Status(const std::function<void(const Event&)>&)> ApprovalEvents(const LogStore& store) {
  return [&store](const std::function<void(const Event&)>& visit) {
    return ForEachApprovalHistory(store, {}, [&visit](const std::vector<Event>& events) {
      for (const Event& e : events) visit(e);
    });
  };
}

}  // namespace tollgate
