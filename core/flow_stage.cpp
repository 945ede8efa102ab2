#include "core/flow_stage.h"

#include "core/sha256.h"

namespace tollgate {

StageResult RejectMalformedFlow(const std::string& stage, const Topics& topics, const Message& in,
                                const StageContext& ctx, const std::string& why) {
  const std::string rid = "k-" + Sha256Hex(ctx.source).substr(0, 24);
  Json request{{"request_id", rid}, {"org_id", "unknown"}, {"agent_id", in.key.empty() ? "unknown" : in.key},
               {"session_id", "unknown"}, {"tool", ""}};
  Event e;
  e.type = "request.rejected";
  e.request_id = rid;
  e.id = MakeEventId(e.type, rid, ctx.source);
  e.time_us = ctx.now_us;
  e.org_id = "unknown";
  e.agent_id = "unknown";
  e.session_id = "unknown";
  const std::string msg = stage + " could not read its input: " + why;
  e.data = {{"error", {{"code", errc::kInvalidRequest}, {"message", msg}}}, {"source", ctx.source}};
  StageResult r;
  r.events.push_back(std::move(e));
  Json result = MakeResult(request, "rejected", nullptr, nullptr, ToolResultError(errc::kInvalidRequest, msg, false));
  Message out = MessageFor(topics.results(), request, result);
  out.key = in.key;
  r.outputs.push_back({std::move(out), 0});
  return r;
}

bool ReadFlow(const std::string& stage, const Topics& topics, const Message& in, const StageContext& ctx,
              const LogView& log, Flow* flow, std::vector<Event>* history, StageResult* rejected) {
  Json j;
  if (!ParseJson(in.value, &j).ok() || !Flow::FromJson(j, flow)) {
    *rejected = RejectMalformedFlow(stage, topics, in, ctx, "not a flow message");
    return false;
  }
  for (const char* k : {"request_id", "org_id", "agent_id", "session_id"}) {
    const std::string v = flow->request.value(k, "");
    if (v.empty() || v.size() > kMaxIdBytes) {
      *rejected = RejectMalformedFlow(stage, topics, in, ctx, std::string("bad ") + k);
      return false;
    }
  }
  Status s = log.EventsOfRequest(flow->request_id(), history);
  if (!s.ok()) {
    rejected->error = s;  // infrastructure, not the message: retried
    return false;
  }
  return true;
}

Event FlowEvent(const Flow& flow, const std::string& type, int64_t time_us, Json data,
                const std::string& discriminator) {
  Event e;
  e.type = type;
  e.request_id = flow.request_id();
  e.id = MakeEventId(type, e.request_id, discriminator);
  e.time_us = time_us;
  e.org_id = flow.request.value("org_id", "");
  e.agent_id = flow.request.value("agent_id", "");
  e.session_id = flow.request.value("session_id", "");
  e.tool = flow.request.value("tool", "");
  e.data = std::move(data);
  return e;
}

}  // namespace tollgate
