// The execute stage: runs the calls decide allowed (or an approver granted),
// through the tool registry, with one result contract for every tool.
//
// Side effects never twice. For each request it:
// 1. appends execution.started (attempt n) — the runner makes it durable
//    before anything else happens;
// 2. runs the tool as DeferredWork on the runner's worker pool (a pure, fast
//    tool — echo, current_time, calculate — runs inline instead, its
//    started and completed in the same group commit);
// 3. appends execution.completed with the ToolResult (secrets redacted in
//    the log, intact for the agent) and produces the result.
// Meeting a request whose execution started but never completed (a crash,
// or the reconciler re-driving it): a read-only call (Tool::ReadOnly) runs
// again as attempt n+1; a mutating one is not run and completes with
// E_OUTCOME_UNKNOWN. A copy of a request whose work is running in this
// process is ignored (its work will answer).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <set>

#include "core/flow_stage.h"
#include "execute/audit_reader.h"
#include "execute/config.h"
#include "execute/registry.h"

namespace tollgate {

struct ExecuteConfig {
  Topics topics;
  // Null: DefaultExecutePolicy("tollgate-data").
  std::shared_ptr<const ExecutePolicy> policy;
  AuditReader* audit = nullptr;  // for get_audit_log; not owned; may be null
  // How often Tick() rescans the CLI tools dir.
  std::chrono::milliseconds reload_interval{5000};
};

// Runs a slice built-in (echo, current_time); a ToolResult. Kept for callers
// of the pipeline slice.
Json RunSliceTool(const std::string& tool, const Json& args, int64_t now_us);

class ExecuteStage : public Stage {
 public:
  explicit ExecuteStage(ExecuteConfig config);
  std::string name() const override { return "execute"; }
  std::vector<std::string> input_topics() const override { return {config_.topics.execute()}; }
  std::vector<std::string> output_topics() const override { return {config_.topics.results()}; }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;
  // Rescans the CLI tools every reload_interval; no events.
  StageResult Tick(const StageContext& ctx, const LogView& log) override;

  ToolRegistry& registry() { return registry_; }
  const ExecutePolicy& policy() const { return *config_.policy; }
  // Runs `tool` for `request` now, on this thread (the deferred work, and
  // tests): the ToolResult with meta.duration_ms.
  Json RunTool(const Json& request, const Json& decision, int64_t now_us) const;

 private:
  struct InFlight {
    std::mutex mu;
    std::set<std::string> ids;  // request ids whose work is queued or running
  };
  ExecuteConfig config_;
  ToolRegistry registry_;
  std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
  std::chrono::steady_clock::time_point last_reload_ = std::chrono::steady_clock::now();
};

}  // namespace tollgate
