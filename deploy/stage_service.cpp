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
  PipelineOptions& po = p->options_.pipeline;
  const std::string& stage = p->options_.stage;
  const bool keeper = stage == "audit";
  if (!keeper && std::find(StageNames().begin(), StageNames().end(), stage) == StageNames().end()) {
    return Status::Error(errc::kInvalidRequest,
                         "no stage '" + stage + "' (ingest, decide, approve, execute, audit)");
  }
  if (po.brokers.empty()) return Status::Error(errc::kInvalidRequest, "a stage service needs --brokers");
  if (po.policy_path.empty()) po.policy_path = DefaultPolicyPath();
  std::filesystem::create_directories(po.data_dir);
  std::error_code mode_ec;  // tollgate's alone (docs/sandbox.md)
  std::filesystem::permissions(po.data_dir, std::filesystem::perms::owner_all, mode_ec);
  if (keeper) std::filesystem::create_directories(po.data_dir + "/keys", mode_ec);
  std::error_code abs_ec;
  const std::string abs_data = std::filesystem::absolute(po.data_dir, abs_ec).lexically_normal().string();
  // Two replicas with the same data path on two hosts (containers) must not
  // share a transactional id: the host name is part of the default.
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  if (p->options_.instance.empty())
    p->options_.instance = Sha256Hex(std::string(host) + ":" + abs_data).substr(0, 12);

  p->bus_.brokers = po.brokers;
  p->bus_.topics.prefix = po.topic_prefix;
  p->bus_.partitions = po.partitions;
  p->bus_.topics.shared_results = po.shared_results_topic;
  Status s = EnsureTopics(p->bus_, std::chrono::seconds(30));
  if (!s.ok()) return s;

  // The local copy of the record (the keeper's is the audit log).
  LogOptions lo;
  lo.durability = po.durability;
  lo.max_event_bytes = std::max(kDefaultMaxEventBytes, 2 * po.max_request_bytes + (64 << 10));
  s = EventLog::Open(po.data_dir + "/log", lo, &p->log_);
  if (!s.ok()) return s;
  p->cache_ = std::make_unique<RequestCache>();
  p->sink_ = std::make_unique<LogSink>(*p->log_, p->cache_.get());
  p->store_view_ = std::make_unique<StoreLogView>(p->log_->store());
  p->view_ = std::make_unique<CachedLogView>(*p->cache_, *p->store_view_);

  // Restore: the copy on disk, then the topic's tail, before any listener
  // exists (the stages fold the copy when they are built).
  // The deployment's key for the events topic: the keeper makes it on
  // first start; every other process must be given the same file.
  std::shared_ptr<const EventsKey> key;
  s = EventsKey::Load(
      p->options_.deployment_key.empty() ? po.data_dir + "/keys/events.key" : p->options_.deployment_key,
      keeper, &key);
  if (!s.ok()) return s;
  // Its Kafka ids carry a secret of the deployment key (deploy/identity.h).
  p->transactional_id_ = StageTransactionalId(*key, stage, p->options_.instance);
  // The gate's result key: every process given the deployment key has it.
  std::shared_ptr<const JwtSigner> gate;
  s = GateSigner(*key, &gate);
  if (!s.ok()) return s;
  FollowerOptions fo;
  fo.key = key;
  fo.bus = p->bus_;
  fo.offset_path = po.data_dir + "/events.offset";
  fo.max_event_bytes = lo.max_event_bytes;
  s = EventFollower::Open(fo, p->log_->head_seq() == 0, *p->sink_, &p->follower_);
  if (!s.ok()) return s;
  s = p->follower_->CatchUp();
  if (!s.ok()) return s;

  p->credentials_ = std::make_unique<CredentialRegistry>();
  if (keeper) {
    // Credential changes (tokens file import, the service key, the HTTP
    // API's) go to the events topic, so every stage folds them.
    const LogStore& store = p->log_->store();
    s = TopicEventSink::Open(
        p->bus_, p->transactional_id_ + "-writer", *p->follower_,
        [&store](const std::string& id, uint64_t* seq) { return store.SeqOfEvent(id, seq); }, key,
        &p->topic_sink_);
    if (!s.ok()) return s;
    {
      CredentialRegistry* reg = p->credentials_.get();
      p->sink_->AddListener([reg](const std::vector<Event>& events) { reg->ApplyAll(events); });
    }
    s = SetUpIdentity({po.data_dir, po.tokens_file}, p->log_->store(), *p->topic_sink_, p->credentials_.get(),
                      &p->service_signer_, &p->admin_token_created_);
    if (s.ok()) s = RegisterGateKey(*gate, p->credentials_.get(), *p->topic_sink_);
    if (!s.ok()) return s;
  } else {
    s = FoldCredentials(p->log_->store(), p->credentials_.get());
    if (!s.ok()) return s;
    CredentialRegistry* reg = p->credentials_.get();
    p->sink_->AddListener([reg](const std::vector<Event>& events) { reg->ApplyAll(events); });
  }

  // Every process folds decide's state (the policy in force); the keeper
  // builds no stage, only that fold, for its tool directory.
  {
    p->audit_reader_ = std::make_unique<LogAuditReader>(p->log_->store());
    StageEnv env;
    env.options = &po;
    env.topics = p->bus_.topics;
    env.log = p->log_.get();
    env.sink = p->sink_.get();
    env.store_view = p->store_view_.get();
    env.credentials = p->credentials_.get();
    env.redactor = std::make_shared<RedactorInForce>();
    env.audit = p->audit_reader_.get();
    s = BuildStages(keeper ? std::vector<std::string>{} : std::vector<std::string>{stage}, env, &p->built_);
    if (!s.ok()) return s;
  }
  if (!keeper) {
    RunnerOptions ro;
    ro.bus = p->bus_;
    ro.incarnation = "ext";
    ro.max_batch = po.max_batch;
    ro.max_event_bytes = lo.max_event_bytes;
    ro.transactional_id = p->transactional_id_;
    ro.group = StageGroupId(*key, stage);
    ro.workers = std::max<size_t>(1, p->options_.workers);
    ro.events_topic = p->bus_.topics.events();
    ro.events_key = key;
    ro.results = std::make_shared<ResultPublisher>(p->bus_, gate);
    EventFollower* follower = p->follower_.get();
    ro.catch_up = [follower] { return follower->CatchUp(); };
    p->runner_ = std::make_unique<StageRunner>(*p->built_.stages[0], *p->sink_, *p->view_, ro);
    s = p->runner_->Start();
    if (!s.ok()) return s;
    p->threads_.emplace_back([r = p->runner_.get(), stage] {
      Status st = r->Run();
      if (!st.ok()) log::Error({stage}) << "stopped: " << st.ToString() << "\n";
    });
    if (!options.metrics_listen.empty()) {
      StageService* raw = p.get();
      auto render = [raw, stage] {
        MetricsText t;
        WriteRunnerMetrics(t, {{stage, raw->runner_.get()}});
        WriteLogMetrics(t, *raw->log_);
        WriteBudgetMetrics(t, raw->built_.decide);
        return t.text();
      };
      s = MetricsServer::Start(options.metrics_listen, p->credentials_.get(), po.metrics_public, render,
                               &p->metrics_);
      if (!s.ok()) return s;
      s = WriteEndpoints(po.data_dir,
                         {{"metrics", p->metrics_->url()}, {"stage", stage}, {"pid", ::getpid()}});
      if (!s.ok()) return s;
      log::Info({stage}) << "metrics at " << p->metrics_->url() << "\n";
    }
  } else {
    // Scheduled calls fire from the process that writes the log
    // (deploy/scheduler.h); it folds what the follower appends.
    s = Scheduler::Start(p->log_->store(), *p->sink_, {p->bus_, p->service_signer_}, &p->scheduler_);
    if (!s.ok()) return s;
    // So do Duragent's notify deliveries, and "allow always" written into a
    // Duragent workspace (deploy/notify_deliveries.h, duragent_local_rules.h):
    // registered before the follower thread starts, so no group is missed.
    if (p->options_.notify) {
      NotifyOptions no;
      no.data_dir = po.data_dir;
      no.policy = p->built_.policy;
      no.view = p->store_view_.get();
      // A copy just read from the topic (no notify.state): other keepers, or
      // this one before its disk was lost, sent what it holds.
      no.catch_up_without_state = false;
      const std::string derived = key->Derive("notify-webhook");
      s = NotifyDefaultSecret(po.data_dir,
                              ToHex(reinterpret_cast<const uint8_t*>(derived.data()), derived.size()),
                              &no.default_secret);
      if (s.ok())
        s = NotifyDeliveries::Start(std::move(no), p->log_->store(), p->log_->head_seq(), &p->notify_);
      if (!s.ok()) return s;
      NotifyDeliveries* n = p->notify_.get();
      p->sink_->AddListener([n](const std::vector<Event>& events) { n->OnAppended(events); });
    }
    p->sink_->AddListener(DuragentLocalRulesListener(po.policy_path, p->built_.policy));
    // The keeper follows continuously: the audit log is current without a
    // batch to trigger it.
    StageService* raw = p.get();
    p->threads_.emplace_back([raw] {
      while (!raw->stop_.load()) {
        Status st = raw->follower_->CatchUp();
        if (!st.ok()) {
          log::Warn({"keeper"}) << st.ToString() << "\n";
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        std::this_thread::sleep_for(raw->options_.follow_interval);
      }
    });
    ApiOptions ao;
    ao.credentials = p->credentials_.get();
    ao.sink = p->topic_sink_.get();
    ao.service_signer = p->service_signer_;
    // The keeper folds every event of the deployment: its /metrics counts
    // them all (from this process's start).
    {
      auto metrics = std::make_shared<Metrics>();
      metrics->SetToolCatalog(DeploymentToolCatalog(p->built_.policy, po.policy_path, po.data_dir));
      p->sink_->AddListener([metrics](const std::vector<Event>& events) { metrics->Observe(events); });
      if (NotifyDeliveries* n = p->notify_.get()) {
        metrics->AddCollector([n](MetricsText& t) { WriteNotifyMetrics(t, *n); });
      }
      ao.metrics = [metrics] { return metrics->Render(); };
      ao.metrics_public = po.metrics_public;
      // It sees every request's events: the spans are exported from here.
      s = StartOtlpExport(po.otlp_endpoint, *p->sink_, *metrics, &p->otlp_);
      if (!s.ok()) return s;
    }
    auto tools = MakeToolDirectory(po.policy_path, po.data_dir, p->built_.policy);
    ao.list_tools = [tools](const std::string& org, const std::string& agent, Json* out) {
      return tools->List(org, agent, out);
    };
    s = ServeLog(po, p->bus_, std::move(ao), p->log_->store(),
                 {{"embedded_broker", false}, {"keeper", true}, {"gate_key", GateKeyJson(*gate)}}, &p->api_);
    if (!s.ok()) return s;
    if (p->api_ && p->notify_) p->notify_->SetConsoleBase(p->api_->url());
  }
  *out = std::move(p);
  return Status::Ok();
}

void StageService::Stop() {
  stop_.store(true);
  scheduler_.reset();
  if (runner_) runner_->Stop();
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
  runner_.reset();
  built_.stages.clear();
  topic_sink_.reset();
  follower_.reset();
  log_.reset();
}

}  // namespace tollgate
