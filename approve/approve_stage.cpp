#include "approve/approve_stage.h"

namespace tollgate {

StageResult ApproveStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  Flow flow;
  std::vector<Event> history;
  StageResult r;
  if (!ReadFlow(name(), config_.topics, in, ctx, log, &flow, &history, &r)) return r;
  RequestState state = Summarize(history);
  Json approval;
  if (state.approval_settled != nullptr) {
    if (SourceOf(state.approval_settled) != ctx.source) return r;
    approval = state.approval_settled->data;
  } else {
    approval = {{"approver", "system"}, {"scope", "once"},
                {"comment", "no approvers are configured; approvals arrive with the approve stage"},
                {"source", ctx.source}};
    r.events.push_back(FlowEvent(flow, "approval.denied", ctx.now_us, approval, "system"));
  }
  approval.erase("source");
  Json result = MakeResult(flow.request, "denied", flow.decision, approval,
                           ToolResultError(errc::kApprovalDenied, approval.value("comment", ""), false));
  if (state.approval_settled != nullptr) result["log_seq"] = state.approval_settled->seq;
  r.outputs.push_back({MessageFor(config_.topics.results(), flow.request, result), r.events.empty() ? -1 : 0});
  return r;
}

}  // namespace tollgate
