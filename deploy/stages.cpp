#include "deploy/stages.h"

#include <algorithm>

#include "core/log.h"
#include "decide/decide_stage.h"
#include "deploy/pipeline.h"
#include "deploy/policy_source.h"
#include "execute/execute_stage.h"
#include "ingest/ingest_stage.h"
#include "replay/replay_stage.h"

namespace tollgate {

const std::vector<std::string>& StageNames() {
  static const std::vector<std::string> names{"ingest", "decide", "approve", "execute"};
  return names;
}

namespace {

using ExecutePolicyOf = std::function<Status(const Json& doc, ExecutePolicy* out)>;

// Execute's section of a policy document, with this deployment's
// overrides: what a policy.updated puts in force for execute.
ExecutePolicyOf ExecutePolicyMaker(const PipelineOptions& options) {
  return [data_dir = options.data_dir, tools_dir = options.tools_dir,
          workspace_root = options.workspace_root](const Json& doc, ExecutePolicy* out) {
    Status st = ExecutePolicyFromJson(doc, data_dir, out);
    if (!st.ok()) return st;
    if (!tools_dir.empty()) out->tools_dir = tools_dir;
    if (!workspace_root.empty()) out->workspace_root = workspace_root;
    return Status::Ok();
  };
}

std::unique_ptr<DecideStage> MakeDecide(const StageEnv& env, bool runs_here,
                                        const ExecutePolicyOf& execute_policy_of) {
  const PipelineOptions& options = *env.options;
  DecideConfig dc{env.topics, options.policy_path};
  dc.redactor = env.redactor;
  // Never log as in force a policy execute would not enforce.
  dc.validate = [execute_policy_of](const Json& doc) {
    ExecutePolicy unused;
    return execute_policy_of(doc, &unused);
  };
  if (runs_here) dc.snapshot_path = options.data_dir + "/decide-ledger.snapshot";
  return std::make_unique<DecideStage>(std::move(dc));
}

std::unique_ptr<Stage> MakeIngest(const StageEnv& env) {
  IngestConfig ic;
  ic.redactor = env.redactor;
  ic.topics = env.topics;
  ic.max_request_bytes = env.options->max_request_bytes;
  ic.credentials = env.local->credentials.get();
  ic.max_skew_us = env.options->max_signature_skew_us;
  return std::make_unique<IngestStage>(ic);
}

std::unique_ptr<ApproveStage> MakeApprove(const StageEnv& env) {
  ApproveConfig ac;
  ac.topics = env.topics;
  ac.authenticate = RegistryAuthenticator(env.local->credentials.get(), env.options->max_signature_skew_us);
  return std::make_unique<ApproveStage>(ac);
}

// Execute enforces the policy in force: the log's when it has one (the
// file's comes into force when decide logs it), else the file's.
Status MakeExecute(const StageEnv& env, const PolicyInForce& in_force,
                   const ExecutePolicyOf& execute_policy_of, std::unique_ptr<ExecuteStage>* out) {
  const PipelineOptions& options = *env.options;
  auto policy = std::make_shared<ExecutePolicy>();
  Status s;
  if (in_force.has_policy()) {
    s = execute_policy_of(in_force.file()->doc(), policy.get());
    if (!s.ok()) {
      log::Error({"execute"}) << "the execute section in force does not load (" << s.message()
                              << "); using the file's\n";
    }
  }
  if (!in_force.has_policy() || !s.ok()) {
    s = LoadDeploymentExecutePolicy(options.policy_path, options.data_dir, policy.get());
    if (!s.ok()) return s;
    if (!options.tools_dir.empty()) policy->tools_dir = options.tools_dir;
    if (!options.workspace_root.empty()) policy->workspace_root = options.workspace_root;
  }
  ExecuteConfig ec;
  ec.topics = env.topics;
  ec.policy = policy;
  ec.audit = env.audit;
  ec.policy_from_doc = execute_policy_of;
  ec.redactor = env.redactor;
  *out = std::make_unique<ExecuteStage>(ec);
  return Status::Ok();
}

}  // namespace

Status BuildStages(const std::vector<std::string>& names, StageEnv& env, BuiltStages* out) {
  const PipelineOptions& options = *env.options;
  auto wanted = [&names](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  for (const auto& n : names) {
    if (std::find(StageNames().begin(), StageNames().end(), n) == StageNames().end()) {
      return Status::Error(errc::kInvalidRequest, "no stage '" + n + "'");
    }
  }
  LogSink& sink = *env.local->sink;
  sink.AddListener([r = env.redactor](const std::vector<Event>& events) { r->OnAppended(events); });
  const ExecutePolicyOf execute_policy_of = ExecutePolicyMaker(options);

  // Decide's fold first, here, whether or not decide runs here: the other
  // stages are configured from the policy in force (the host's Restore of
  // decide is then a no-op).
  std::unique_ptr<DecideStage> decide = MakeDecide(env, wanted("decide"), execute_policy_of);
  Status s = decide->Restore(*env.local->history);
  if (!s.ok()) return s;
  const PolicyInForce in_force = decide->policy();
  DecideStage* d = decide.get();
  out->policy = [d] { return d->policy(); };
  if (wanted("decide")) out->decide = d;
  if (!wanted("decide")) {
    sink.Subscribe(d);
    out->policy_fold = std::move(decide);
  }

  for (const auto& name : names) {
    if (name == "ingest") {
      out->stages.push_back(MakeIngest(env));
    } else if (name == "decide") {
      out->stages.push_back(std::move(decide));
    } else if (name == "approve") {
      auto approve = MakeApprove(env);
      out->approve = approve.get();
      out->stages.push_back(std::move(approve));
    } else if (name == "execute" && !options.replay_from.empty()) {
      // Recorded-result replay: replay/'s stage takes execute's place (no
      // executor is built, so nothing can run a tool).
      out->stages.emplace_back();
      s = replay::MakeReplayStage(env.topics, options.replay_from, options.replay_session,
                                  env.local->log->store(), &out->stages.back());
      if (!s.ok()) return s;
    } else if (name == "execute") {
      std::unique_ptr<ExecuteStage> execute;
      s = MakeExecute(env, in_force, execute_policy_of, &execute);
      if (!s.ok()) return s;
      out->upstreams = execute->registry().upstreams();
      out->stages.push_back(std::move(execute));
    }
  }
  return Status::Ok();
}

}  // namespace tollgate
