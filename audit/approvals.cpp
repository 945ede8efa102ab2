#include "audit/approvals.h"

#include <algorithm>

#include "audit/log_sink.h"
#include "audit/open_requests.h"

namespace tollgate {
namespace {

// Calls `each` with the events of every unfinished request of `filter`
// that has an approval.requested, oldest request first
// (audit/open_requests.h).
Status ForEachApprovalHistory(const LogStore& store, const PendingFilter& filter,
                              const std::function<void(const std::vector<Event>&)>& each) {
  StoreLogView view(store);
  std::vector<OpenRequest> open;
  Status s = UnfinishedRequests(store, &open);
  if (!s.ok()) return s;
  std::vector<Event> events;
  for (const OpenRequest& r : open) {
    if (!filter.org_id.empty() && r.org_id != filter.org_id) continue;
    if (!(s = view.EventsOfRequest(r.org_id, r.request_id, &events)).ok()) return s;
    if (!filter.agent_id.empty() && (events.empty() || events.front().agent_id != filter.agent_id)) continue;
    const bool asked = std::any_of(events.begin(), events.end(),
                                   [](const Event& e) { return e.type == ev::kApprovalRequested; });
    if (asked) each(events);
  }
  return Status::Ok();
}

}  // namespace

Status ListPendingApprovals(const LogStore& store, const PendingFilter& filter,
                            std::vector<PendingApproval>* out) {
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
