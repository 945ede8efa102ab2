// The decide stage (pipeline slice): turns each received request into allow
// or deny and records why. This is the placeholder policy the pipeline issue
// asks for — SAFE built-ins (echo, current_time) are allowed, every other
// known tool is denied (E_POLICY_DENIED), an unknown tool is denied with
// E_UNKNOWN_TOOL — to be replaced by the policy engine (the decide issue),
// not bypassed.
#pragma once

#include "core/flow_stage.h"

namespace tollgate {

struct DecideConfig {
  Topics topics;
};

// The verdict of the slice policy for `tool`, as decision.made data.
Json SlicePolicyDecision(const std::string& tool);

class DecideStage : public Stage {
 public:
  explicit DecideStage(DecideConfig config) : config_(std::move(config)) {}
  std::string name() const override { return "decide"; }
  std::vector<std::string> input_topics() const override { return {config_.topics.decide()}; }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;

 private:
  DecideConfig config_;
};

}  // namespace tollgate
