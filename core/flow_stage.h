// Shared shape of the stages after ingest (decide, approve, execute): each
// reads a Flow message about one request, looks the request up in the log,
// and either re-emits what it did before (the same Kafka message read again
// after a crash), ignores a re-sent copy (the step is already in the log), or
// does its step. This header holds the common parsing and the
// "already done?" test so each stage states only its own step.
#pragma once

#include <string>

#include "core/messages.h"
#include "core/request_state.h"
#include "core/stage.h"

namespace tollgate {

// A message the stage will not act on is recorded as request.rejected with
// `code` (E_INVALID_REQUEST, E_NOT_IN_LOG, E_FLOW_MISMATCH) and a rejected
// result, so nothing vanishes even if an outside client writes to an
// internal topic. It is filed under org "unknown" and an id derived from the
// message's Kafka coordinates, never under the request it claims: a forged
// message must not end, or write into, another request's history. What it
// claimed is kept in data.claimed.
StageResult RejectMalformedFlow(const std::string& stage, const Topics& topics, const Message& in,
                                const StageContext& ctx, const std::string& why,
                                const char* code = errc::kInvalidRequest, const Json& claimed = nullptr);

// Reads `in` as a Flow and its request's history (by the flow's org and
// request_id), and checks it against the log (docs/trust.md): the request's
// request.received must be there (else E_NOT_IN_LOG), and the flow's request
// must hash to its content_hash, with the same received_at and args_hash;
// a flow that carries a decision must carry exactly the log's decision.made
// (else E_FLOW_MISMATCH). So what moves on is what ingest authenticated and
// decide decided, whoever wrote the message. On failure fills *rejected.
bool ReadFlow(const std::string& stage, const Topics& topics, const Message& in, const StageContext& ctx,
              const LogView& log, Flow* flow, std::vector<Event>* history, StageResult* rejected);

// The envelope of an event about `flow`'s request.
Event FlowEvent(const Flow& flow, const std::string& type, int64_t time_us, Json data,
                const std::string& discriminator = "");

}  // namespace tollgate
