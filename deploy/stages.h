// Building the stages over a local log: one place for both deployments.
// `tollgate up` builds all four over its log; `tollgate stage NAME` builds
// one over its copy of the events topic (docs/deployments.md). Building is
// assembly only: each stage restores its own state and hears later appends
// through the stage contract, run by the host (runtime/stage_host.h). The
// one fold built here is decide's (the policy in force), which the other
// stages are configured from.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "approve/approve_stage.h"
#include "core/audit_reader.h"
#include "core/credentials.h"
#include "core/redact.h"
#include "core/stage.h"
#include "decide/decide_stage.h"
#include "decide/policy_in_force.h"
#include "deploy/local_log.h"
#include "execute/mcp_upstream.h"

namespace tollgate {

struct PipelineOptions;

// What the stages are built over. Everything outlives the stages.
struct StageEnv {
  const PipelineOptions* options = nullptr;  // policy_path resolved
  Topics topics;
  LocalLog* local = nullptr;                  // the local log (or copy)
  std::shared_ptr<RedactorInForce> redactor;  // set from the policy in force
  AuditReader* audit = nullptr;               // get_audit_log
};

struct BuiltStages {
  std::vector<std::unique_ptr<Stage>> stages;  // in `names` order; not yet restored but decide
  ApproveStage* approve = nullptr;             // owned by stages, if built
  DecideStage* decide = nullptr;               // owned by stages, if built
  // Execute's upstream MCP servers, when execute is built here (their
  // tools join the tool directory).
  std::shared_ptr<const McpUpstreams> upstreams;
  // The policy in force now (decide's fold, kept current by its listener
  // whether or not decide runs here): the tool directory reads it.
  std::function<PolicyInForce()> policy;
  // Decide's fold when decide is not among the stages (restored and
  // subscribed here).
  std::shared_ptr<Stage> policy_fold;
};

// The stage names, in pipeline order.
const std::vector<std::string>& StageNames();

// Builds the named stages (a subset of StageNames(); "execute" is replay's
// stage when options->replay_from is set). The policy in force (for the
// redactor and execute's section) is decide's fold of the log, restored
// here even when decide is not among `names`.
Status BuildStages(const std::vector<std::string>& names, StageEnv& env, BuiltStages* out);

}  // namespace tollgate
