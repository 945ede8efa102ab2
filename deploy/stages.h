// Building the stages over a local log: one place for both deployments.
// `tollgate up` builds all four over its log; `tollgate stage NAME` builds
// one over its copy of the events topic (docs/deployments.md). Each stage's
// state is folded from the log before it starts, and its listener is
// registered on the log's sink so every later group is folded in.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "approve/approve_stage.h"
#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "core/credentials.h"
#include "core/redact.h"
#include "core/stage.h"
#include "decide/decide_stage.h"
#include "decide/policy_in_force.h"
#include "execute/audit_reader.h"
#include "execute/mcp_upstream.h"

namespace tollgate {

struct PipelineOptions;

// What the stages are built over. Everything outlives the stages.
struct StageEnv {
  const PipelineOptions* options = nullptr;  // policy_path resolved
  Topics topics;
  EventLog* log = nullptr;              // the local log (or copy)
  LogSink* sink = nullptr;              // listeners are registered here
  const LogView* store_view = nullptr;  // reads the log itself
  const CredentialRegistry* credentials = nullptr;
  std::shared_ptr<RedactorInForce> redactor;  // set from the policy in force
  AuditReader* audit = nullptr;               // get_audit_log
};

struct BuiltStages {
  std::vector<std::unique_ptr<Stage>> stages;  // in `names` order
  ApproveStage* approve = nullptr;             // owned by stages, if built
  DecideStage* decide = nullptr;               // owned by stages, if built
  // Execute's upstream MCP servers, when execute is built here (their
  // tools join the tool directory).
  std::shared_ptr<const McpUpstreams> upstreams;
  // The policy in force now (decide's fold, kept current by its listener
  // whether or not decide runs here): the tool directory reads it.
  std::function<PolicyInForce()> policy;
  std::shared_ptr<Stage> policy_fold;  // decide's fold when decide is not among the stages
};

// The stage names, in pipeline order.
const std::vector<std::string>& StageNames();

// Builds the named stages (a subset of StageNames(); "execute" is replay's
// stage when options->replay_from is set). The policy in force (for the
// redactor and execute's section) is decide's fold of the log, made even
// when decide is not among `names`.
Status BuildStages(const std::vector<std::string>& names, StageEnv& env, BuiltStages* out);

}  // namespace tollgate
