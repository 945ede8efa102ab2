// Pending approvals as the log records them: requests with an
// approval.requested that is not yet settled (RequestState's quorum rule) and
// not otherwise finished. Derived from the log alone, so the approve stage
// (rebuilding its deadlines at start), the HTTP API and `tollgate approvals
// list` agree, and a restart loses none. Thread-safe like get_audit_log.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "audit/log_store.h"
#include "core/event.h"
#include "core/request_state.h"

namespace tollgate {

struct PendingApproval {
  std::string request_id, org_id, agent_id, session_id, tool;
  std::string args_hash;
  int approvers_needed = 1;
  std::vector<std::string> approvers;  // who may answer; empty = any approver of the org
  std::vector<std::string> granted_by;  // distinct approvers so far
  int64_t deadline_us = 0;
  int64_t requested_us = 0;
  uint64_t requested_seq = 0;
  Json decision;  // decision.made data without its source
  Json request;   // the request as logged (secrets redacted)
  Json ToJson() const;
};

// The pending approval of a request's events, or false when it has none.
bool PendingFromState(const RequestState& state, PendingApproval* out);

struct PendingFilter {
  std::string org_id;    // empty = every org
  std::string agent_id;  // empty = every agent
};

// Every pending approval matching `filter`, oldest request first.
Status ListPendingApprovals(const LogStore& store, const PendingFilter& filter,
                            std::vector<PendingApproval>* out);

}  // namespace tollgate
