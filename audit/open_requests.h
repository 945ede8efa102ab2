// The open-request index: which requests the log shows unfinished, kept in
// the log's meta family by the writer, in the same WriteBatch as the events
// (docs/log_format.md, "Open requests"). What start-up needs (the
// reconciler's re-drive, the approve stage's pending approvals) and what
// `approvals list` shows are unfinished work, so reading this index makes
// them cost O(unfinished), not O(history).
//
// The rule (logfmt::OpenIndexOp) is per event, with no history: a
// request.received opens (org_id, request_id); execution.completed, a deny
// decision.made, approval.denied, approval.expired and a request.rejected
// with E_REQUEST_LOST or E_OUTPUT_TOO_LARGE close it. It agrees with
// RequestState::terminal() because the approve stage appends an
// approval.denied or approval.expired only while the approval is pending
// (an answer to a settled approval is refused, not logged).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "audit/log_store.h"

namespace tollgate {

struct OpenRequest {
  std::string org_id, request_id;
  uint64_t received_seq = 0;  // its request.received
};

// True when the log carries the index (a log written before it existed
// gets it when first opened for writing: BuildOpenIndex).
bool HasOpenIndex(const LogStore& store);

// Primary only, before the first append: builds the index of a log that
// lacks it, by one walk over its request.received events and each
// request's history, and marks it built. Nothing when it is built.
Status BuildOpenIndex(LogStore& store);

// Every open request, oldest request.received first. E_NOT_FOUND when the
// log has no index (a read-only copy of an older log).
Status ListOpenRequests(const LogStore& store, std::vector<OpenRequest>* out);

// The same from the index, or, in a log without one, by the walk
// BuildOpenIndex does (O(history)): what readers that must work on any log
// call (the reconciler, pending approvals).
Status UnfinishedRequests(const LogStore& store, std::vector<OpenRequest>* out);

}  // namespace tollgate
