// The approve stage (pipeline slice): requests that decide answered `ask`.
// Until human approvals land (the approve issue), no approver exists, so
// every such request is denied with E_APPROVAL_DENIED and says why.
#pragma once

#include "core/flow_stage.h"

namespace tollgate {

struct ApproveConfig {
  Topics topics;
};

class ApproveStage : public Stage {
 public:
  explicit ApproveStage(ApproveConfig config) : config_(std::move(config)) {}
  std::string name() const override { return "approve"; }
  std::vector<std::string> input_topics() const override { return {config_.topics.approve()}; }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;

 private:
  ApproveConfig config_;
};

}  // namespace tollgate
