#include "replay/replay_stage.h"

#include "replay/log_source.h"

namespace tollgate::replay {

CallKey ReplayExecuteStage::RecordedKey(const CallKey& live) const {
  CallKey k = live;
  if (!config_.map_to_session.empty()) k.session_id = config_.map_to_session;
  return k;
}

void ReplayExecuteStage::Restore(const std::vector<Event>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Event& e : events) {
    if (e.type != ev::kExecutionCompleted || e.data.value("executor", "") != "replay") continue;
    const Json r = e.data.value("replay", Json::object());
    if (!r.contains("index") || !r["index"].is_number_unsigned()) continue;
    const size_t index = r["index"].get<size_t>();
    const CallKey key{e.session_id, e.tool, r.value("args_hash", "")};
    assigned_[OrgRequestKey(e.org_id, e.request_id)] = index;
    size_t& next = next_[key];
    next = std::max(next, index + 1);
  }
}

StageResult ReplayExecuteStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  FlowInput input;
  StageResult r;
  if (!ReadFlow(name(), config_.topics, in, ctx, log, &input, &r)) return r;
  const Flow& flow = input.flow;
  const RequestState& state = input.state;
  const bool granted =
      state.approval_settled != nullptr && state.approval_settled->type == ev::kApprovalGranted;
  if (flow.decision.is_null() || !(state.verdict() == "allow" || (state.verdict() == "ask" && granted))) {
    // As execute: only what the log shows allowed (or approved) gets a result.
    return RejectMalformedFlow(
        name(), config_.topics, in, ctx,
        "request " + flow.request_id() + " has no allow decision or granted approval in the log");
  }
  Json tool_result;
  if (state.completed != nullptr) {
    if (SourceOf(state.completed) != ctx.source) return r;  // a re-sent copy: answered once already
    tool_result = state.completed->data["result"];
  } else {
    const CallKey live{flow.request.value("session_id", ""), flow.request.value("tool", ""), flow.args_hash};
    size_t index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const std::string request_key = OrgRequestKey(flow.request.value("org_id", ""), flow.request_id());
      auto a = assigned_.find(request_key);
      if (a != assigned_.end()) {
        index = a->second;  // a retried batch: the same call gets the same index
      } else {
        index = next_[live]++;
        assigned_[request_key] = index;
      }
    }
    const CallKey rec_key = RecordedKey(live);
    const RecordedCall* call = config_.recording->Find(rec_key, index);
    Json replay{
        {"key",
         {{"session_id", rec_key.session_id}, {"tool", rec_key.tool}, {"args_hash", rec_key.args_hash}}},
        {"args_hash", live.args_hash},
        {"index", index},
        {"matched", call != nullptr}};
    if (call != nullptr) {
      tool_result = call->result;
      tool_result["meta"]["replayed"] = {{"from_request_id", call->request_id},
                                         {"from_seq", call->completed_seq}};
      replay["from_request_id"] = call->request_id;
      replay["from_seq"] = call->completed_seq;
    } else {
      const size_t recorded = config_.recording->Count(rec_key);
      const std::string msg = recorded == 0 ? "the recording has no call of " + rec_key.tool +
                                                  " with these args in session " + rec_key.session_id
                                            : "call " + std::to_string(index + 1) + " of " + rec_key.tool +
                                                  " with these args in session " + rec_key.session_id +
                                                  ", but the recording has only " + std::to_string(recorded);
      tool_result = ToolResultError(kReplayMismatch, msg + "; not executed (replay mode)", false);
    }
    r.events.push_back(FlowEvent(flow, ev::kExecutionCompleted, ctx.now_us,
                                 {{"result", tool_result},
                                  {"duration_ms", 0},
                                  {"cost_usd", 0},
                                  {"executor", "replay"},
                                  {"replay", replay},
                                  {"source", ctx.source}}));
  }
  const bool ok = tool_result.value("success", false);
  Json result = MakeResult(flow.request, ok ? "completed" : "failed", flow.decision, nullptr, tool_result);
  if (state.completed != nullptr) result["log_seq"] = state.completed->seq;
  r.outputs.push_back(
      {MessageFor(config_.topics.results(), flow.request, result), r.events.empty() ? -1 : 0, result});
  return r;
}

Status MakeReplayStage(const Topics& topics, const std::string& from, const std::string& session,
                       const LogStore& live, std::unique_ptr<Stage>* out) {
  auto recording = std::make_shared<Recording>();
  Status s = LoadRecording(from, session, recording.get());
  if (!s.ok()) return s;
  std::vector<Event> served;
  s = ReadTypes(live, {ev::kExecutionCompleted}, 0, &served);
  if (!s.ok()) return s;
  auto stage = std::make_unique<ReplayExecuteStage>(ReplayStageConfig{topics, recording, session});
  stage->Restore(served);
  *out = std::move(stage);
  return Status::Ok();
}

}  // namespace tollgate::replay
