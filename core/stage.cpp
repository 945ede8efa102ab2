#include "core/stage.h"

#include <iostream>

#include "core/flow_stage.h"
#include "core/messages.h"

namespace tollgate {

StageResult Stage::Refuse(const Message& in, const StageContext& ctx, const std::string& why,
                          const char* code) const {
  Topics topics;
  TopicsOf(in.topic, &topics);  // an unknown topic keeps the default prefix
  return RejectMalformedFlow(name(), topics, in, ctx, why, code);
}

StageResult Stage::RefuseOversize(const Message& in, const StageContext& ctx, StageResult made,
                                  const Message& output, size_t limit) const {
  Topics topics;
  TopicsOf(in.topic, &topics);
  Event e;
  Message result;
  if (!EndRequestForOversizeOutput(output, topics, name(), ctx.source, ctx.now_us, &e, &result, limit)) {
    return Refuse(in, ctx, "an output to " + output.topic + " is over " + std::to_string(limit) + " bytes",
                  errc::kOutputTooLarge);
  }
  // The events the stage made are kept (they happened); the error result
  // replaces the outputs.
  made.outputs.clear();
  made.events.push_back(std::move(e));
  Json value;
  (void)ParseJson(result.value, &value);  // our own result: an object
  made.outputs.push_back({std::move(result), static_cast<int>(made.events.size()) - 1, std::move(value)});
  return made;
}

}  // namespace tollgate
