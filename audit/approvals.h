// Pending approvals as the log records them (core/pending_approval.h),
// listed from a LogStore: requests with an approval.requested that is not
// yet settled (RequestState's quorum rule) and not otherwise finished.
// Derived from the log alone, so the approve stage (rebuilding its
// deadlines at start), the HTTP API and `tollgate approvals list` agree,
// and a restart loses none. Thread-safe like get_audit_log.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "audit/log_store.h"
#include "core/event.h"
#include "core/pending_approval.h"

namespace tollgate {

struct PendingFilter {
  std::string org_id;    // empty = every org
  std::string agent_id;  // empty = every agent
};

// Every pending approval matching `filter`, oldest request first.
Status ListPendingApprovals(const LogStore& store, const PendingFilter& filter,
                            std::vector<PendingApproval>* out);

// A walk over the events of every unfinished request that has an
// approval.requested (audit/open_requests.h; oldest first), each request's
// in log order:
// what the approve stage folds at start (ApproveStage::Load), without
// reading the rest of the log. `store` must outlive the walk.
std::function<Status(const std::function<void(const Event&)>& visit)> ApprovalEvents(const LogStore& store);

}  // namespace tollgate
