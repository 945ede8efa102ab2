#include "deploy/stage_service.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "api/metrics.h"
#include "audit/credentials_log.h"
#include "audit/log_audit_reader.h"
#include "core/log.h"
#include "core/sha256.h"
#include "deploy/duragent_local_rules.h"
#include "deploy/gate_key.h"
#include "deploy/identity.h"
#include "deploy/observability.h"
#include "deploy/tool_directory.h"
#include "runtime/result_publisher.h"

namespace tollgate {

Status StageService::Start(const ServiceOptions& options, std::unique_ptr<StageService>* out) {
  std::unique_ptr<StageService> p(new StageService());
  p->options_ = options;
  Status s = p->Check();
  if (s.ok()) s = p->OpenCopy();
  if (s.ok()) s = p->SetUpCredentials();
  if (!s.ok()) return s;
  // Every process folds decide's state (the policy in force); the keeper
  // builds no stage, only that fold, for its tool directory.
  p->audit_reader_ = std::make_unique<LogAuditReader>(p->local_->log->store());
  StageEnv env;
  env.options = &p->options_.pipeline;
  env.topics = p->bus_.topics;
  env.local = p->local_.get();
  env.redactor = std::make_shared<RedactorInForce>();
  env.audit = p->audit_reader_.get();
  s = BuildStages(p->keeper() ? std::vector<std::string>{} : std::vector<std::string>{p->options_.stage}, env,
                  &p->built_);
  if (!s.ok()) return s;
  // The approvers' webhooks: an observer of this process's copy of the log
  // (give --webhook to one process: the keeper, or the approve stage).
  StartApprovalWebhooks(p->options_.pipeline.webhooks, p->local_->store_view.get(), *p->local_->sink,
                        &p->webhooks_);
  s = p->keeper() ? p->StartKeeper() : p->StartStage();
  if (!s.ok()) return s;
  *out = std::move(p);
  return Status::Ok();
}

// The options, the data dir and this process's instance id.
Status StageService::Check() {
  PipelineOptions& po = options_.pipeline;
  const std::string& stage = options_.stage;
  if (!keeper() && std::find(StageNames().begin(), StageNames().end(), stage) == StageNames().end()) {
    return Status::Error(errc::kInvalidRequest,
                         "no stage '" + stage + "' (ingest, decide, approve, execute, audit)");
  }
  if (po.brokers.empty()) return Status::Error(errc::kInvalidRequest, "a stage service needs --brokers");
  if (po.policy_path.empty()) po.policy_path = DefaultPolicyPath();
  std::filesystem::create_directories(po.data_dir);
  std::error_code mode_ec;  // tollgate's alone (docs/sandbox.md)
  std::filesystem::permissions(po.data_dir, std::filesystem::perms::owner_all, mode_ec);
  if (keeper()) std::filesystem::create_directories(po.data_dir + "/keys", mode_ec);
  std::error_code abs_ec;
  const std::string abs_data = std::filesystem::absolute(po.data_dir, abs_ec).lexically_normal().string();
  // Two replicas with the same data path on two hosts (containers) must not
  // share a transactional id: the host name is part of the default.
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  if (options_.instance.empty())
    options_.instance = Sha256Hex(std::string(host) + ":" + abs_data).substr(0, 12);
  bus_.brokers = po.brokers;
  bus_.topics.prefix = po.topic_prefix;
  bus_.partitions = po.partitions;
  bus_.topics.shared_results = po.shared_results_topic;
  return EnsureTopics(bus_, std::chrono::seconds(30));
}

// The local copy of the record (the keeper's is the audit log), restored:
// the copy on disk, then the topic's tail, before any listener exists (the
// stages fold the copy when they are restored).
Status StageService::OpenCopy() {
  const PipelineOptions& po = options_.pipeline;
  Status s = LocalLog::Open(po, &local_);
  if (!s.ok()) return s;
  // The deployment's key for the events topic: the keeper makes it on
  // first start; every other process must be given the same file.
  s = EventsKey::Load(
      options_.deployment_key.empty() ? po.data_dir + "/keys/events.key" : options_.deployment_key, keeper(),
      &key_);
  if (!s.ok()) return s;
  // Its Kafka ids carry a secret of the deployment key (deploy/identity.h).
  transactional_id_ = StageTransactionalId(*key_, options_.stage, options_.instance);
  // The gate's result key: every process given the deployment key has it.
  s = GateSigner(*key_, &gate_);
  if (!s.ok()) return s;
  FollowerOptions fo;
  fo.key = key_;
  fo.bus = bus_;
  fo.offset_path = po.data_dir + "/events.offset";
  fo.max_event_bytes = local_->options.max_event_bytes;
  s = EventFollower::Open(fo, local_->log->head_seq() == 0, *local_->sink, &follower_);
  if (!s.ok()) return s;
  return follower_->CatchUp();
}

Status StageService::SetUpCredentials() {
  const PipelineOptions& po = options_.pipeline;
  if (!keeper()) {
    Status s = FoldCredentials(local_->log->store(), local_->credentials.get());
    if (s.ok()) local_->FollowCredentials();
    return s;
  }
  // Credential changes (tokens file import, the service key, the HTTP
  // API's) go to the events topic, so every stage folds them.
  const LogStore& store = local_->log->store();
  Status s = TopicEventSink::Open(
      bus_, transactional_id_ + "-writer", *follower_,
      [&store](const std::string& id, uint64_t* seq) { return store.SeqOfEvent(id, seq); }, key_,
      &topic_sink_);
  if (!s.ok()) return s;
  local_->FollowCredentials();
  s = SetUpIdentity({po.data_dir, po.tokens_file}, local_->log->store(), *topic_sink_,
                    local_->credentials.get(), &service_signer_, &admin_token_created_);
  if (s.ok()) s = RegisterGateKey(*gate_, local_->credentials.get(), *topic_sink_);
  return s;
}

// A stage process: its one stage, restored and run by the host; its events
// go to the events topic in the runner's transaction.
Status StageService::StartStage() {
  const PipelineOptions& po = options_.pipeline;
  HostEnv he;
  he.history = local_->history.get();
  he.feed = local_->sink.get();
  he.sink = local_->sink.get();
  he.view = local_->view.get();
  he.runner_options = [this, &po](const Stage& stage) {
    RunnerOptions ro;
    ro.bus = bus_;
    ro.incarnation = "ext";
    ro.max_batch = po.max_batch;
    ro.clock = po.clock;
    ro.max_event_bytes = local_->options.max_event_bytes;
    ro.transactional_id = transactional_id_;
    ro.group = StageGroupId(*key_, stage.name());
    ro.workers = std::max<size_t>(1, options_.workers);
    ro.events_topic = bus_.topics.events();
    ro.events_key = key_;
    ro.results = std::make_shared<ResultPublisher>(bus_, gate_);
    ro.catch_up = [f = follower_.get()] { return f->CatchUp(); };
    return ro;
  };
  Status s = StageHost::Restore(std::move(built_.stages), std::move(he), &host_);
  if (s.ok()) s = host_->Run();
  if (s.ok()) s = ServeMetrics();
  return s;
}

Status StageService::ServeMetrics() {
  if (options_.metrics_listen.empty()) return Status::Ok();
  const PipelineOptions& po = options_.pipeline;
  const std::string& stage = options_.stage;
  auto render = [this] {
    MetricsText t;
    WriteRunnerMetrics(t, host_->runners());
    WriteLogMetrics(t, *local_->log);
    WriteBudgetMetrics(t, built_.decide);
    return t.text();
  };
  Status s = MetricsServer::Start(options_.metrics_listen, local_->credentials.get(), po.metrics_public,
                                  render, &metrics_);
  if (!s.ok()) return s;
  s = WriteEndpoints(po.data_dir, {{"metrics", metrics_->url()}, {"stage", stage}, {"pid", ::getpid()}});
  if (!s.ok()) return s;
  log::Info({stage}) << "metrics at " << metrics_->url() << "\n";
  return Status::Ok();
}

// The keeper: what the process that owns the log does (as `up` does),
// then the follow loop and the API.
Status StageService::StartKeeper() {
  const PipelineOptions& po = options_.pipeline;
  // The log's Merkle tree and signed checkpoints, as `up` keeps them, but
  // not logged: this copy is one of several folded from the topic.
  Status s = StartCheckpoints(*local_, *key_, KeeperCheckpointOptions(po.checkpoints), &checkpoints_,
                              topic_sink_.get());
  if (!s.ok()) return s;
  // Scheduled calls fire from the process that writes the log
  // (deploy/scheduler.h); it folds what the follower appends.
  s = Scheduler::Start(local_->log->store(), *local_->sink, {bus_, service_signer_}, &scheduler_);
  if (!s.ok()) return s;
  // So do Duragent's notify deliveries, and "allow always" written into a
  // Duragent workspace (deploy/notify_deliveries.h, duragent_local_rules.h):
  // registered before the follower thread starts, so no group is missed.
  if (options_.notify) {
    NotifyOptions no;
    no.data_dir = po.data_dir;
    no.policy = built_.policy;
    // A copy just read from the topic (no notify.state): other keepers, or
    // this one before its disk was lost, sent what it holds.
    no.catch_up_without_state = false;
    s = StartNotifyOnLog(std::move(no), *key_, *local_, &notify_);
    if (!s.ok()) return s;
  }
  local_->sink->AddListener(DuragentLocalRulesListener(po.policy_path, built_.policy));
  // The keeper folds every event of the deployment: its /metrics counts
  // them all (from this process's start), and it exports the spans.
  keeper_metrics_ = std::make_shared<Metrics>();
  keeper_metrics_->SetToolCatalog(DeploymentToolCatalog(built_.policy, po.policy_path, po.data_dir));
  local_->sink->AddListener([m = keeper_metrics_](const std::vector<Event>& events) { m->Observe(events); });
  if (NotifyDeliveries* n = notify_.get())
    keeper_metrics_->AddCollector([n](MetricsText& t) { WriteNotifyMetrics(t, *n); });
  s = StartOtlpExport(po.otlp_endpoint, *local_->sink, *keeper_metrics_, &otlp_);
  if (!s.ok()) return s;
  // The keeper follows continuously: the audit log is current without a
  // batch to trigger it.
  threads_.emplace_back([this] {
    while (!stop_.load()) {
      Status st = follower_->CatchUp();
      if (!st.ok()) {
        log::Warn({"keeper"}) << st.ToString() << "\n";
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
      std::this_thread::sleep_for(options_.follow_interval);
    }
  });
  return ServeKeeperApi();
}

Status StageService::ServeKeeperApi() {
  const PipelineOptions& po = options_.pipeline;
  ApiOptions ao;
  ao.credentials = local_->credentials.get();
  ao.sink = topic_sink_.get();
  ao.service_signer = service_signer_;
  ao.metrics = [m = keeper_metrics_] { return m->Render(); };
  ao.metrics_public = po.metrics_public;
  ao.log_refusal = [log = local_->log.get()] { return log->refusal(); };  // a full disk on /healthz
  ao.tree = checkpoints_.tree.get();
  ao.checkpointer = checkpoints_.checkpointer.get();
  auto tools = MakeToolDirectory(po.policy_path, po.data_dir, built_.policy);
  ao.list_tools = [tools](const std::string& org, const std::string& agent, Json* out) {
    return tools->List(org, agent, out);
  };
  Status s = ServeLog(po, bus_, std::move(ao), local_->log->store(),
                      {{"embedded_broker", false},
                       {"keeper", true},
                       {"gate_key", GateKeyJson(*gate_)},
                       {"checkpoint_key", CheckpointKeyJson(checkpoints_.checkpointer->signer())}},
                      &api_);
  if (!s.ok()) return s;
  if (api_ && notify_) notify_->SetConsoleBase(api_->url());
  return Status::Ok();
}

void StageService::Stop() {
  stop_.store(true);
  scheduler_.reset();
  if (host_) host_->Stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

StageService::~StageService() {
  api_.reset();  // it reads the log
  metrics_.reset();
  Stop();
  notify_.reset();  // reads the log; nothing appends once the follower stopped
  host_.reset();
  built_ = BuiltStages();
  otlp_.reset();
  webhooks_.reset();
  topic_sink_.reset();
  // Nothing appends now: the checkpointer stops, then the tree closes,
  // before the log they read.
  checkpoints_.checkpointer.reset();
  checkpoints_.tree.reset();
  follower_.reset();
  local_.reset();
}

}  // namespace tollgate
