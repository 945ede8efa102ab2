#include "deploy/stages.h"

#include <algorithm>
#include <iostream>

#include "audit/approvals.h"
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

Status BuildStages(const std::vector<std::string>& names, StageEnv& env, BuiltStages* out) {
  const PipelineOptions& options = *env.options;
  auto wanted = [&names](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  for (const auto& n : names) {
    if (std::find(StageNames().begin(), StageNames().end(), n) == StageNames().end()) {
      return Status::Error(errc::kInvalidRequest, "no stage '" + n + "'");
    }
  }
  LogSink& sink = *env.sink;
  const Topics& topics = env.topics;
  sink.AddListener([r = env.redactor](const std::vector<Event>& events) { r->OnAppended(events); });
  // Execute's section of a policy document, with this deployment's
  // overrides: what a policy.updated puts in force for execute.
  const std::string data_dir = options.data_dir, tools_dir = options.tools_dir,
                    workspace_root = options.workspace_root;
  auto execute_policy_of = [data_dir, tools_dir, workspace_root](const Json& doc, ExecutePolicy* out) {
    Status st = ExecutePolicyFromJson(doc, data_dir, out);
    if (!st.ok()) return st;
    if (!tools_dir.empty()) out->tools_dir = tools_dir;
    if (!workspace_root.empty()) out->workspace_root = workspace_root;
    return Status::Ok();
  };

  // decide: fold the log (policy in force, budget ledger) before any runner
  // starts, then see every appended group through the listener. Folded
  // also when decide is not run here: it says which policy is in force.
  DecideConfig dc{topics, options.policy_path};
  dc.redactor = env.redactor;
  // Never log as in force a policy execute would not enforce.
  dc.validate = [execute_policy_of](const Json& doc) {
    ExecutePolicy unused;
    return execute_policy_of(doc, &unused);
  };
  auto decide = std::make_unique<DecideStage>(std::move(dc));
  {
    const LogStore& store = env.log->store();
    Status s = decide->Rebuild(
        env.log->head_seq(), [&store](uint64_t seq, Event* e) { return store.ReadEvent(seq, e); },
        wanted("decide") ? options.data_dir + "/decide-ledger.snapshot" : "");
    if (!s.ok()) return s;
    // Fail at start rather than hold every request: with no policy in the
    // log, the file must load now.
    PolicyPtr file_policy;
    Status fs = LoadPolicyFile(options.policy_path, &file_policy);
    if (!fs.ok() && !decide->policy().has_policy()) return fs;
    if (!fs.ok()) log::Warn({"decide"}) << fs.message() << "; keeping the policy in force from the log\n";
    std::shared_ptr<const Redactor> r;
    if (decide->policy().has_policy()) {
      if (Redactor::FromPolicy(decide->policy().file()->doc(), &r).ok()) env.redactor->set(r);
    } else if (fs.ok()) {
      if (Redactor::FromPolicy(file_policy->doc(), &r).ok()) env.redactor->set(r);
    }
  }
  const PolicyInForce in_force = decide->policy();
  {
    DecideStage* d = decide.get();
    out->policy = [d] { return d->policy(); };
    if (wanted("decide")) out->decide = d;
    sink.AddListener([d](const std::vector<Event>& events) { d->OnAppended(events); });
    // Not run here: kept anyway, for the policy in force.
    if (!wanted("decide")) out->policy_fold = std::move(decide);
  }

  for (const auto& name : names) {
    if (name == "ingest") {
      IngestConfig ic;
      ic.redactor = env.redactor;
      ic.topics = topics;
      ic.max_request_bytes = options.max_request_bytes;
      ic.credentials = env.credentials;
      ic.max_skew_us = options.max_signature_skew_us;
      out->stages.push_back(std::make_unique<IngestStage>(ic));
    } else if (name == "decide") {
      out->stages.push_back(std::move(decide));
    } else if (name == "approve") {
      ApproveConfig ac;
      ac.topics = topics;
      ac.webhooks.urls = options.webhooks;
      ac.authenticate = RegistryAuthenticator(env.credentials, options.max_signature_skew_us);
      auto approve = std::make_unique<ApproveStage>(ac);
      // Pending approvals (and their deadlines) are a fold over the log.
      Status s = approve->Load(ApprovalEvents(env.log->store()));
      if (!s.ok()) return s;
      ApproveStage* raw = approve.get();
      // Its listener reads the log itself: it runs before the cache has the group.
      raw->SetLogView(env.store_view);
      sink.AddListener([raw](const std::vector<Event>& events) { raw->OnAppended(events); });
      out->approve = raw;
      out->stages.push_back(std::move(approve));
    } else if (name == "execute" && !options.replay_from.empty()) {
      // Recorded-result replay: replay/'s stage takes execute's place (no
      // executor is built, so nothing can run a tool).
      out->stages.emplace_back();
      Status s = replay::MakeReplayStage(topics, options.replay_from, options.replay_session,
                                         env.log->store(), &out->stages.back());
      if (!s.ok()) return s;
    } else if (name == "execute") {
      // Execute enforces the policy in force: the log's when it has one (the
      // file's comes into force when decide logs it), else the file's.
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
      ec.topics = topics;
      ec.policy = policy;
      ec.audit = env.audit;
      ec.policy_from_doc = execute_policy_of;
      ec.redactor = env.redactor;
      auto execute = std::make_unique<ExecuteStage>(ec);
      ExecuteStage* x = execute.get();
      out->upstreams = x->registry().upstreams();
      sink.AddListener([x](const std::vector<Event>& events) { x->OnAppended(events); });
      out->stages.push_back(std::move(execute));
    }
  }
  return Status::Ok();
}

}  // namespace tollgate
