// The execute stage (pipeline slice): runs the calls decide allowed. The
// slice has two read-only built-ins, echo (returns its args) and
// current_time; the tool registry, sandboxing and the started-before-run
// guarantee for mutating tools are the execute issue's.
#pragma once

#include "core/flow_stage.h"

namespace tollgate {

struct ExecuteConfig {
  Topics topics;
};

// Runs a slice built-in; a ToolResult.
Json RunSliceTool(const std::string& tool, const Json& args, int64_t now_us);

class ExecuteStage : public Stage {
 public:
  explicit ExecuteStage(ExecuteConfig config) : config_(std::move(config)) {}
  std::string name() const override { return "execute"; }
  std::vector<std::string> input_topics() const override { return {config_.topics.execute()}; }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;

 private:
  ExecuteConfig config_;
};

}  // namespace tollgate
