// A pending approval as the log records it: a request with an
// approval.requested that is not yet settled (RequestState's quorum rule)
// and not otherwise finished. Pure (the contract): the approve stage, the
// HTTP API and `tollgate approvals list` read the same thing from the
// request's events (audit/approvals.h lists them from the log).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/event.h"
#include "core/request_state.h"

namespace tollgate {

struct PendingApproval {
  std::string request_id, org_id, agent_id, session_id, tool;
  std::string args_hash;
  int approvers_needed = 1;
  std::vector<std::string> approvers;   // who may answer; empty = any approver of the org
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

}  // namespace tollgate
