// What the log says about one request: which steps happened and whether it
// is finished. Pure; used by stages to recognise re-sent messages, by the
// reconciler to re-drive unfinished requests, and by replay.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/event.h"

namespace tollgate {

struct RequestState {
  const Event* received = nullptr;  // request.received
  // The request.rejected that ended this request: the last one not followed
  // by a request.received, ignoring E_DUPLICATE_REQUEST refusals (which turn
  // away a conflicting copy, not the original); after a request.received,
  // only E_REQUEST_LOST or E_OUTPUT_TOO_LARGE (the pipeline giving up on
  // it) ends it.
  const Event* rejected = nullptr;
  const Event* decision = nullptr;  // decision.made
  const Event* approval_requested = nullptr;
  // The event that settled the approval, following the quorum: the
  // approval.granted that brought the distinct granters to approvers_needed,
  // the first approval.denied, or approval.expired, whichever comes first;
  // later approval events change nothing.
  const Event* approval_settled = nullptr;
  // approval.requested's approvers_needed (1 when it says nothing, or for a
  // grant without a request); 0 without approval events.
  int approvers_needed = 0;
  // The counted grants, one per distinct approver (the first of each), in
  // log order, up to the one that settled the approval.
  std::vector<const Event*> grants;
  const Event* started = nullptr;    // the last execution.started
  const Event* completed = nullptr;  // execution.completed
  int attempts = 0;                  // execution.started count

  // Finished: rejected, denied, approval denied/expired, or completed.
  bool terminal() const;
  // Waiting for approvers: approval.requested, not settled, not finished.
  bool approval_pending() const { return approval_requested && !approval_settled && !terminal(); }
  // May run: decide allowed it, or asked and the approval quorum granted it.
  bool cleared() const;
  std::string verdict() const;  // of the decision, "" without one
};

// `events` must outlive the result (it points into them).
RequestState Summarize(const std::vector<Event>& events);

// The result of a finished request as the log records it (tool results as
// logged, i.e. with secrets redacted), for re-sending to an agent that asks
// again. Null when the request is not finished.
Json ResultFromLog(const RequestState& state);

// What a result says about a settled approval (approvers, scope, comment,
// deadline); null when the approval is not settled.
Json ApprovalOf(const RequestState& state);

// The source ("incarnation/topic/partition/offset") an event was made from,
// "" when it has none.
std::string SourceOf(const Event* e);

}  // namespace tollgate
