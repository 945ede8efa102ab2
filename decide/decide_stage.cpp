#include "decide/decide_stage.h"

namespace tollgate {
namespace {

constexpr const char* kPolicyVersion = "slice-v0";

// Built-in tools execute will know (the execute issue); only the first two
// are SAFE and run in the slice.
const char* const kSafeBuiltins[] = {"echo", "current_time"};
const char* const kOtherBuiltins[] = {"calculate", "read_file", "write_file", "list_directory", "file_exists",
                                      "delete_file", "search_files", "http_request", "execute_command",
                                      "get_audit_log", "get_system_info"};

}  // namespace

Json SlicePolicyDecision(const std::string& tool) {
  for (const char* t : kSafeBuiltins) {
    if (tool == t) {
      return {{"verdict", "allow"}, {"reason", "'" + tool + "' is a SAFE built-in"}, {"rule", "slice:safe-builtins"},
              {"danger_level", "SAFE"}, {"policy_version", kPolicyVersion}};
    }
  }
  bool known = tool.rfind("cli:", 0) == 0;
  for (const char* t : kOtherBuiltins) known = known || tool == t;
  if (!known) {
    return {{"verdict", "deny"}, {"reason", "unknown tool '" + tool + "'"}, {"rule", "slice:unknown-tool"},
            {"danger_level", "CRITICAL"}, {"policy_version", kPolicyVersion}, {"error_code", errc::kUnknownTool}};
  }
  return {{"verdict", "deny"},
          {"reason", "'" + tool + "' is not a SAFE built-in; the slice policy allows only echo and current_time"},
          {"rule", "slice:deny-rest"}, {"danger_level", "HIGH"}, {"policy_version", kPolicyVersion},
          {"error_code", errc::kPolicyDenied}};
}

StageResult DecideStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  Flow flow;
  std::vector<Event> history;
  StageResult r;
  if (!ReadFlow(name(), config_.topics, in, ctx, log, &flow, &history, &r)) return r;
  RequestState state = Summarize(history);
  Json decision;
  if (state.decision != nullptr) {
    // Decided before. The same message read again after a crash re-emits the
    // recorded decision; any other copy is a duplicate and ends here.
    if (SourceOf(state.decision) != ctx.source) return r;
    decision = state.decision->data;
  } else {
    decision = SlicePolicyDecision(flow.request.value("tool", ""));
    decision["source"] = ctx.source;
    r.events.push_back(FlowEvent(flow, "decision.made", ctx.now_us, decision));
  }
  decision.erase("source");
  flow.decision = decision;
  if (decision["verdict"] == "allow") {
    r.outputs.push_back({MessageFor(config_.topics.execute(), flow.request, flow.ToJson()), -1});
  } else if (decision["verdict"] == "ask") {
    r.outputs.push_back({MessageFor(config_.topics.approve(), flow.request, flow.ToJson()), -1});
  } else {
    const std::string code = decision.value("error_code", errc::kPolicyDenied);
    Json result = MakeResult(flow.request, "denied", decision, nullptr,
                             ToolResultError(code, decision.value("reason", "denied by policy"), false));
    if (state.decision != nullptr) result["log_seq"] = state.decision->seq;
    r.outputs.push_back({MessageFor(config_.topics.results(), flow.request, result), r.events.empty() ? -1 : 0});
  }
  return r;
}

}  // namespace tollgate
