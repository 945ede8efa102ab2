// Shared shape of the stages after ingest (decide, approve, execute): each
// reads a Flow message about one request, looks the request up in the log,
// and either re-emits what it did before (the same Kafka message read again
// after a crash), ignores a re-sent copy (the step is already in the log), or
// does its step. This header holds the common parsing and the
// "already done?" test so each stage states only its own step.
#pragma once

#include <string>
#include <vector>

#include "core/messages.h"
#include "core/redact.h"
#include "core/request_state.h"
#include "core/stage.h"

namespace tollgate {

// A message the stage will not act on is recorded as request.rejected with
// `code` (E_INVALID_REQUEST, E_NOT_IN_LOG, E_FLOW_MISMATCH) and a rejected
// result, so nothing vanishes even if an outside client writes to an
// internal topic. It is filed under org "unknown" and an id derived from the
// message's bytes (core/unproven.h), never under the request it claims, and
// so is its result: a forged message must not end, or write into, another
// request's history. What it claimed is kept in data.claimed.
StageResult RejectMalformedFlow(const std::string& stage, const Topics& topics, const Message& in,
                                const StageContext& ctx, const std::string& why,
                                const char* code = errc::kInvalidRequest, const Json& claimed = nullptr);

// What a stage reads before its step: the flow, its request's history (the
// log's events of the request, in seq order) and what they say (state
// points into history: moving a FlowInput keeps it valid, copying would
// not, so it is not copyable).
struct FlowInput {
  FlowInput() = default;
  FlowInput(FlowInput&&) = default;
  FlowInput& operator=(FlowInput&&) = default;
  FlowInput(const FlowInput&) = delete;
  FlowInput& operator=(const FlowInput&) = delete;

  Flow flow;
  std::vector<Event> history;
  RequestState state;
};

// The prelude of every stage after ingest. Reads `in` as a Flow and its
// request's history (by the flow's org and request_id), and checks it
// against the log (docs/trust.md): the request's request.received must be
// there (else E_NOT_IN_LOG), and the flow's request must hash to its
// content_hash, with the same received_at and args_hash; a flow that
// carries a decision must carry exactly the log's decision.made, or the
// decision whose redacted form the log holds (by its unredacted_sha256;
// docs/redaction.md) (else E_FLOW_MISMATCH). So what moves on is what ingest
// authenticated and decide decided, whoever wrote the message. On failure
// fills *rejected: the outputs of a refused message, or only its error when
// the log could not be read (the runner retries).
bool ReadFlow(const std::string& stage, const Topics& topics, const Message& in, const StageContext& ctx,
              const LogView& log, FlowInput* out, StageResult* rejected);

// decision.made's data for `decision` (without "source"): the decision with
// the secrets in its request-derived fields redacted (RedactDecision) and,
// when something was, "redacted" (the pointers) and "unredacted_sha256"
// (SHA-256 of the canonical bytes of `decision` as decided), by which
// ReadFlow recognises the unredacted copy a flow carries.
Json LoggedDecision(const Json& decision, const Redactor& redactor);
// The decision as decided from decision.made's data: its provenance
// (WithoutProvenance), "redacted" and "unredacted_sha256" removed (its
// secrets stay redacted).
Json DecisionFromLog(Json data);

// A result for the results topic with its secrets redacted, as the log has
// them (docs/redaction.md): result.data/error by key and value, the
// decision's request-derived fields by value.
void RedactResult(Json* result, const Redactor& redactor);

// The envelope of an event about `flow`'s request.
Event FlowEvent(const Flow& flow, const std::string& type, int64_t time_us, Json data,
                const std::string& discriminator = "");

}  // namespace tollgate
