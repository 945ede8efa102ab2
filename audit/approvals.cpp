#include "audit/approvals.h"

#include "audit/audit_query.h"
#include "audit/log_sink.h"

namespace tollgate {
namespace {

// Calls `each` with the events of every request of `filter` that has an
// approval.requested, oldest request first.
Status ForEachApprovalHistory(const LogStore& store, const PendingFilter& filter,
                              const std::function<void(const std::vector<Event>&)>& each) {
  AuditQuery q;
  q.types = {"approval.requested"};
  q.org_id = filter.org_id;
  q.agent_id = filter.agent_id;
  StoreLogView view(store);
  Status failed = Status::Ok();
  Status s = ForEachEvent(store, q, [&](Event& requested) {
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
