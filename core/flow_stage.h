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

// A message the stage cannot read as a Flow is recorded as request.rejected
// (E_INVALID_REQUEST, under "unknown" ids when none can be read) with a
// rejected result, so nothing vanishes even if an outside client writes to
// an internal topic.
StageResult RejectMalformedFlow(const std::string& stage, const Topics& topics, const Message& in,
                                const StageContext& ctx, const std::string& why);

// Reads `in` as a Flow and the request's history; on failure fills *rejected.
bool ReadFlow(const std::string& stage, const Topics& topics, const Message& in, const StageContext& ctx,
              const LogView& log, Flow* flow, std::vector<Event>* history, StageResult* rejected);

// The envelope of an event about `flow`'s request.
Event FlowEvent(const Flow& flow, const std::string& type, int64_t time_us, Json data,
                const std::string& discriminator = "");

}  // namespace tollgate
