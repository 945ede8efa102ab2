// The execute stage: runs the calls decide allowed (or an approver granted),
// through the tool registry, with one result contract for every tool.
//
// Side effects never twice. For each request it:
// 1. appends execution.started (attempt n) — the runner makes it durable
//    before anything else happens;
// 2. runs the tool as DeferredWork on the runner's worker pool (a pure, fast
//    tool — echo, current_time, calculate — runs inline instead, its
//    started and completed in the same group commit);
// 3. appends execution.completed with the ToolResult and produces the
//    result, both with secrets redacted (docs/redaction.md): the tool got
//    the real values, the log and the results topic never hold them.
// Meeting a request whose execution started but never completed (a crash,
// or the reconciler re-driving it): it is not run again, since it may be
// what stopped the process. A read-only call (Tool::ReadOnly) completes with
// E_EXECUTION_INTERRUPTED (recoverable: retry as a new request), a mutating
// one with E_OUTCOME_UNKNOWN. A copy of a request whose work is running in
// this process is ignored (its work will answer).
//
// The policy in force (docs/policy.md, "Live edits"): OnAppended folds
// policy.updated (tier file) and swaps in the new ExecutePolicy for every
// later call; a call already running keeps the one it started with. Decide
// only logs a file whose execute section loads (DecideConfig::validate), so
// what the log says is in force is what execute enforces.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>

#include "core/audit_reader.h"
#include "core/flow_stage.h"
#include "core/redact.h"
#include "execute/config.h"
#include "execute/invocation_check.h"
#include "execute/mcp_upstream.h"
#include "execute/registry.h"

namespace tollgate {

struct ExecuteConfig {
  Topics topics;
  // Null: DefaultExecutePolicy("tollgate-data").
  std::shared_ptr<const ExecutePolicy> policy;
  // Builds the ExecutePolicy of a policy document (a policy.updated's
  // data.policy); null: `policy` stays for the stage's life.
  std::function<Status(const Json& policy_doc, ExecutePolicy* out)> policy_from_doc;
  // The redaction rules in force; null: the built-in rules.
  std::shared_ptr<RedactorInForce> redactor;
  AuditReader* audit = nullptr;  // for get_audit_log; not owned; may be null
  // How often Tick() rescans the CLI tools dir.
  std::chrono::milliseconds reload_interval{5000};
};

class ExecuteStage : public Stage {
 public:
  explicit ExecuteStage(ExecuteConfig config);
  std::string name() const override { return "execute"; }
  std::vector<std::string> input_topics() const override { return {config_.topics.execute()}; }
  std::vector<std::string> output_topics() const override { return {config_.topics.results()}; }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;
  // Rescans the CLI tools every reload_interval; no events.
  StageResult Tick(const StageContext& ctx, const LogView& log) override;

  // policy.updated (tier file) -> the new policy.
  void OnAppended(const std::vector<Event>& events) override;

  ToolRegistry& registry() { return registry_; }
  // The policy in force now (calls started earlier may hold an older one).
  std::shared_ptr<const ExecutePolicy> policy() const;
  // Runs `call` (ResolveCall of `request`) now, on this thread (the
  // deferred work): the ToolResult with meta.duration_ms. Null `policy`:
  // the one in force.
  Json RunTool(const Json& request, const ResolvedCall& call, const Json& decision, int64_t now_us,
               std::shared_ptr<const ExecutePolicy> policy = nullptr) const;

 private:
  struct InFlight {
    std::mutex mu;
    std::set<std::string> ids;  // request ids whose work is queued or running
  };
  std::shared_ptr<const Redactor> redactor() const;
  // Process's pieces. ResendCompleted: the result of a request that
  // completed, again, from the log. Defer: marks `rid` in flight and gives
  // *r the deferred work that runs the call and completes it.
  void ResendCompleted(const Flow& flow, const RequestState& state, const Json& approval,
                       StageResult* r) const;
  void Defer(const Flow& flow, const ResolvedCall& call, const Json& decision, const Json& approval,
             const StageContext& ctx, std::shared_ptr<const ExecutePolicy> pol, const std::string& rid,
             StageResult* r);

  ExecuteConfig config_;
  mutable std::mutex policy_mu_;  // guards config_.policy (swapped by OnAppended)
  // Before registry_: the registry's mcp: tools hold it.
  std::shared_ptr<McpUpstreams> upstreams_ = std::make_shared<McpUpstreams>();
  ToolRegistry registry_;
  std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
  std::chrono::steady_clock::time_point last_reload_ = std::chrono::steady_clock::now();
  // What it announces (ToolRegistry::OperatorCliNames), as of the last rescan.
  std::vector<std::string> operator_cli_;
  bool operator_cli_known_ = false;
  // The tools.available this executor last saw appended (its CLI tools, as
  // decide knows them); Tick appends a new one when the directory differs.
  std::mutex announced_mu_;
  std::string executor_id_;
  std::vector<std::string> announced_;  // guarded by announced_mu_
  bool announced_any_ = false;          // guarded by announced_mu_
};

}  // namespace tollgate
