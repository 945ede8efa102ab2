#include "execute/execute_stage.h"

#include <chrono>

#include "core/redact.h"

namespace tollgate {

Json RunSliceTool(const std::string& tool, const Json& args, int64_t now_us) {
  if (tool == "echo") return ToolResultOk(args, 0);
  if (tool == "current_time") {
    return ToolResultOk({{"utc", FormatTime(now_us)}, {"unix_ms", now_us / 1000}}, 0);
  }
  return ToolResultError(errc::kToolExec, "tool '" + tool + "' is not available in this build", false);
}

StageResult ExecuteStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  Flow flow;
  std::vector<Event> history;
  StageResult r;
  if (!ReadFlow(name(), config_.topics, in, ctx, log, &flow, &history, &r)) return r;
  RequestState state = Summarize(history);
  if (flow.decision.is_null() || !state.cleared()) {
    // Only what decide allowed, or what approvers granted, as the log records it, runs.
    return RejectMalformedFlow(name(), config_.topics, in, ctx,
                               "request " + flow.request_id() + " has no allow decision or granted approval in the log");
  }
  Json tool_result;
  if (state.completed != nullptr) {
    if (SourceOf(state.completed) != ctx.source) return r;  // a re-sent copy: ran once already
    tool_result = state.completed->data["result"];
  } else {
    // Slice tools are read-only, so running again after a crash is safe.
    const int attempt = state.attempts + 1;
    r.events.push_back(FlowEvent(flow, "execution.started", ctx.now_us,
                                 {{"executor", "builtin"}, {"attempt", attempt}, {"source", ctx.source}},
                                 std::to_string(attempt)));
    auto t0 = std::chrono::steady_clock::now();
    tool_result = RunSliceTool(flow.request.value("tool", ""), flow.request.value("args", Json::object()), ctx.now_us);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    tool_result["meta"]["duration_ms"] = ms;
    // The agent gets the tool's output as is; the log gets it with secrets
    // redacted, like the request.
    Json logged = tool_result;
    auto redacted = RedactSecrets(logged, DefaultSecretKeyPatterns());
    r.events.push_back(FlowEvent(flow, "execution.completed", ctx.now_us,
                                 {{"result", logged}, {"duration_ms", ms}, {"cost_usd", 0},
                                  {"redacted", redacted}, {"source", ctx.source}}));
  }
  const bool ok = tool_result.value("success", false);
  Json result = MakeResult(flow.request, ok ? "completed" : "failed", flow.decision, nullptr, tool_result);
  if (state.completed != nullptr) result["log_seq"] = state.completed->seq;
  r.outputs.push_back({MessageFor(config_.topics.results(), flow.request, result), r.events.empty() ? -1 : 1});
  return r;
}

}  // namespace tollgate
