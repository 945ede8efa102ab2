#include "deploy/pipeline.h"

#include <filesystem>
#include <iostream>
#include <random>

#include "audit/log_audit_reader.h"
#include "core/log.h"
#include "deploy/duragent_local_rules.h"
#include "deploy/gate_key.h"
#include "deploy/identity.h"
#include "deploy/mcp_gateway.h"
#include "deploy/notify_deliveries.h"
#include "deploy/observability.h"
#include "deploy/stages.h"
#include "deploy/tool_directory.h"

namespace tollgate {

std::string DefaultPolicyPath() {
  if (const char* env = std::getenv("TOLLGATE_DEFAULT_POLICY"); env != nullptr && *env) return env;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  for (auto dir = self.parent_path(); !ec && !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    if (std::filesystem::exists(dir / "config/default-policy.yaml"))
      return (dir / "config/default-policy.yaml").string();
  }
  return TOLLGATE_SOURCE_DIR "/config/default-policy.yaml";
}

Status ServeLog(const PipelineOptions& options, const BusConfig& bus, ApiOptions api, const LogStore& store,
                Json extra, std::unique_ptr<ApiServer>* server) {
  if (!options.http_listen.empty()) {
    if (!ParseListen(options.http_listen, &api.host, &api.port)) {
      return Status::Error(errc::kInvalidQuery,
                           "--http must be HOST:PORT, not '" + options.http_listen + "'");
    }
    api.bus = bus;
    // The MCP gateway (/mcp) on the same server, signing with the same key.
    if (!api.mcp && api.service_signer && api.credentials != nullptr) {
      Status s = MakeMcpEndpoint(bus, api.service_signer, store, *api.credentials, api.list_tools, &api.mcp);
      if (!s.ok()) return s;
    }
    Status s = ApiServer::Start(std::move(api), store, server);
    if (!s.ok()) return s;
  }
  if (!options.write_endpoints) return Status::Ok();
  Json ep = BusEndpoints(bus);
  ep["log"] = options.data_dir + "/log";
  for (auto& [k, v] : extra.items()) ep[k] = v;
  if (*server) ep["http"] = (*server)->url();
  return WriteEndpoints(options.data_dir, ep);
}

// The gauges and runner counters /metrics reads at each scrape.
void Pipeline::AddPipelineCollectors(Pipeline* p) {
  p->metrics_->AddCollector([p](MetricsText& t) {
    std::vector<std::pair<std::string, const StageRunner*>> runners;
    for (size_t i = 0; i < p->runners_.size(); ++i)
      runners.emplace_back(p->stages_[i]->name(), p->runners_[i].get());
    WriteRunnerMetrics(t, runners);
    WriteLogMetrics(t, *p->log_);
    WriteBudgetMetrics(t, p->decide_);
    if (p->approve_ != nullptr) {
      t.Family("tollgate_approvals_pending", "gauge", "Approvals waiting for an answer now.");
      t.Sample("tollgate_approvals_pending", {}, static_cast<double>(p->approve_->pending()));
      if (const WebhookNotifier* w = p->approve_->notifier()) {
        t.Family("tollgate_webhook_attempts_total", "counter", "Webhook POSTs tried (retries included).");
        t.Sample("tollgate_webhook_attempts_total", {}, static_cast<double>(w->attempts.load()));
        t.Family("tollgate_webhook_deliveries_total", "counter", "Webhook deliveries by outcome.");
        t.Sample("tollgate_webhook_deliveries_total", {{"outcome", "delivered"}},
                 static_cast<double>(w->delivered.load()));
        t.Sample("tollgate_webhook_deliveries_total", {{"outcome", "failed"}},
                 static_cast<double>(w->failed.load()));
        t.Sample("tollgate_webhook_deliveries_total", {{"outcome", "dropped"}},
                 static_cast<double>(w->dropped.load()));
      }
    }
  });
}

Status Pipeline::Start(const PipelineOptions& options, std::unique_ptr<Pipeline>* out) {
  std::unique_ptr<Pipeline> p(new Pipeline());
  p->options_ = options;
  // Where start-up time goes (startup_phases(), the bench's breakdown).
  auto last = std::chrono::steady_clock::now();
  auto phase = [&p, &last](const char* name) {
    const auto now = std::chrono::steady_clock::now();
    p->startup_phases_[name] = std::chrono::duration<double>(now - last).count();
    last = now;
  };
  if (p->options_.policy_path.empty()) p->options_.policy_path = DefaultPolicyPath();
  p->bus_.topics.prefix = options.topic_prefix;
  p->bus_.partitions = options.partitions;
  p->bus_.latency_first = options.latency_first;
  p->bus_.topics.shared_results = options.shared_results_topic;
  std::filesystem::create_directories(options.data_dir);
  // The log, keys and workspaces are tollgate's alone (docs/sandbox.md).
  std::error_code mode_ec;
  std::filesystem::permissions(options.data_dir, std::filesystem::perms::owner_all, mode_ec);

  std::string incarnation;
  Status s;
  if (options.brokers.empty()) {
    s = EmbeddedBroker::Start(1, &p->broker_);
    if (!s.ok()) return s;
    for (const auto& t : p->bus_.topics.All()) {
      s = p->broker_->CreateTopic(t, PartitionsOf(p->bus_, t));
      if (!s.ok()) return s;
    }
    p->bus_.brokers = p->broker_->bootstrap();
    // The embedded broker starts empty each time: its offsets mean nothing
    // across restarts, so sources carry a fresh incarnation.
    std::random_device rd;
    char buf[24];
    std::snprintf(buf, sizeof buf, "emb-%08x%08x", rd(), rd());
    incarnation = buf;
  } else {
    p->bus_.brokers = options.brokers;
    s = EnsureTopics(p->bus_, std::chrono::seconds(30));
    if (!s.ok()) return s;
    incarnation = "ext";
  }

  LogOptions lo;
  lo.durability = options.durability;
  // request.received carries the whole request: leave it room.
  lo.max_event_bytes = std::max(kDefaultMaxEventBytes, 2 * options.max_request_bytes + (64 << 10));
  phase("broker");
  s = EventLog::Open(options.data_dir + "/log", lo, &p->log_);
  if (!s.ok()) return s;
  phase("log");
  // Stages read request histories from memory when the request began in
  // this process (audit/request_cache.h), else from the log.
  p->cache_ = std::make_unique<RequestCache>();
  p->sink_ = std::make_unique<LogSink>(*p->log_, p->cache_.get());
  p->store_view_ = std::make_unique<StoreLogView>(p->log_->store());
  p->view_ = std::make_unique<CachedLogView>(*p->cache_, *p->store_view_);

  // Who may act, before anything is read from a topic.
  p->credentials_ = std::make_unique<CredentialRegistry>();
  s = SetUpIdentity({options.data_dir, options.tokens_file}, p->log_->store(), *p->sink_,
                    p->credentials_.get(), &p->service_signer_, &p->admin_token_created_);
  if (!s.ok()) return s;
  {
    CredentialRegistry* reg = p->credentials_.get();
    p->sink_->AddListener([reg](const std::vector<Event>& events) { reg->ApplyAll(events); });
  }
  {
    // The gate's result key, from the deployment key (made on first start).
    std::shared_ptr<const EventsKey> key;
    s = EventsKey::Load(options.data_dir + "/keys/events.key", true, &key);
    if (s.ok()) s = GateSigner(*key, &p->gate_);
    if (s.ok()) s = RegisterGateKey(*p->gate_, p->credentials_.get(), *p->sink_);
    if (!s.ok()) return s;
    p->results_ = std::make_shared<ResultPublisher>(p->bus_, p->gate_);
  }
  {
    Metrics* m = p->metrics_.get();
    p->sink_->AddListener([m](const std::vector<Event>& events) { m->Observe(events); });
  }
  s = StartOtlpExport(options.otlp_endpoint, *p->sink_, *p->metrics_, &p->otlp_);
  if (!s.ok()) return s;

  s = Producer::Open(p->bus_, "", &p->reconcile_producer_);
  if (!s.ok()) return s;
  phase("identity");
  s = p->ReconcileNow();
  if (!s.ok()) return s;
  phase("reconcile");
  if (options.replay_from.empty()) {
    // Scheduled calls fire from the process that writes the log (deploy/scheduler.h).
    s = Scheduler::Start(p->log_->store(), *p->sink_, {p->bus_, p->service_signer_}, &p->scheduler_);
    if (!s.ok()) return s;
  }

  const Topics& topics = p->bus_.topics;
  // The redaction rules in force (the policy's redact section), for every
  // stage that logs (docs/redaction.md); BuildStages sets them from the
  // policy in force and keeps them current.
  auto redactor = std::make_shared<RedactorInForce>();
  // Every stage, its state folded from the log and its listener registered
  // (deploy/stages.h: the same code builds `tollgate stage NAME`).
  p->audit_reader_ = std::make_unique<LogAuditReader>(p->log_->store());
  StageEnv env;
  env.options = &p->options_;
  env.topics = topics;
  env.log = p->log_.get();
  env.sink = p->sink_.get();
  env.store_view = p->store_view_.get();
  env.credentials = p->credentials_.get();
  env.redactor = redactor;
  env.audit = p->audit_reader_.get();
  BuiltStages built;
  s = BuildStages(StageNames(), env, &built);
  if (!s.ok()) return s;
  phase("stages");
  p->tools_ = MakeToolDirectory(p->options_.policy_path, options.data_dir, built.policy, built.upstreams);
  p->metrics_->SetToolCatalog(
      DeploymentToolCatalog(built.policy, p->options_.policy_path, options.data_dir, built.upstreams));
  const std::function<PolicyInForce()> policy_in_force = built.policy;
  // Duragent's notify deliveries, and "allow always" written into a
  // Duragent workspace (deploy/notify_deliveries.h, duragent_local_rules.h).
  {
    std::shared_ptr<const EventsKey> key;
    s = EventsKey::Load(options.data_dir + "/keys/events.key", true, &key);
    NotifyOptions no;
    no.data_dir = options.data_dir;
    no.policy = built.policy;
    no.view = p->store_view_.get();
    const std::string derived = s.ok() ? key->Derive("notify-webhook") : "";
    if (s.ok()) {
      s = NotifyDefaultSecret(options.data_dir,
                              ToHex(reinterpret_cast<const uint8_t*>(derived.data()), derived.size()),
                              &no.default_secret);
    }
    if (s.ok())
      s = NotifyDeliveries::Start(std::move(no), p->log_->store(), p->log_->head_seq(), &p->notify_);
    if (!s.ok()) return s;
    NotifyDeliveries* n = p->notify_.get();
    p->sink_->AddListener([n](const std::vector<Event>& events) { n->OnAppended(events); });
    p->sink_->AddListener(DuragentLocalRulesListener(p->options_.policy_path, built.policy));
    p->metrics_->AddCollector([n](MetricsText& t) { WriteNotifyMetrics(t, *n); });
  }
  p->stages_ = std::move(built.stages);
  p->approve_ = built.approve;
  p->decide_ = built.decide;
  Pipeline* raw = p.get();
  // The stages' consumer groups and transactional ids carry a secret of the
  // data directory (deploy/identity.h): no other local process joins them.
  std::shared_ptr<const EventsKey> ids_key;
  s = EventsKey::Load(options.data_dir + "/keys/events.key", true, &ids_key);
  if (!s.ok()) return s;
  for (auto& stage : p->stages_) {
    RunnerOptions ro;
    ro.bus = p->bus_;
    ro.group = StageGroupId(*ids_key, stage->name());
    ro.transactional_id = StageTransactionalId(*ids_key, stage->name());
    // Each stage is its group's only member here: another one is foreign.
    ro.sole_member = true;
    ro.incarnation = incarnation;
    ro.max_batch = options.max_batch;
    ro.max_event_bytes = lo.max_event_bytes;
    ro.results = p->results_;
    ro.on_offset_lost = [raw](const Status&) {
      Status r = raw->ReconcileNow();
      if (!r.ok())
        log::Error({"reconciler"}) << "reconcile after offset loss failed: " << r.ToString() << "\n";
    };
    auto runner = std::make_unique<StageRunner>(*stage, *p->sink_, *p->view_, ro);
    s = runner->Start();
    if (!s.ok()) return s;
    p->runners_.push_back(std::move(runner));
  }
  for (auto& runner : p->runners_) {
    p->threads_.emplace_back([r = runner.get()] {
      Status st = r->Run();
      if (!st.ok()) log::Error({"pipeline"}) << "stage stopped: " << st.ToString() << "\n";
    });
  }
  // endpoints.json (below) tells clients the pipeline is up: first let
  // decide log the policy in force (its first tick), so a first tools/list
  // or call does not meet E_NO_POLICY. Bounded: a policy file that does not
  // load leaves requests denied with E_NO_POLICY, as before.
  if (policy_in_force) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!policy_in_force().has_policy() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  phase("runners");
  AddPipelineCollectors(raw);
  ApiOptions ao;
  ao.credentials = p->credentials_.get();
  ao.sink = p->sink_.get();
  ao.service_signer = p->service_signer_;
  ao.metrics = [m = p->metrics_] { return m->Render(); };
  ao.metrics_public = options.metrics_public;
  ao.degraded = [raw] {
    std::vector<std::string> why;
    for (size_t i = 0; i < raw->runners_.size(); ++i) {
      if (raw->runners_[i]->stats().foreign_members.load() != 0) {
        why.push_back(raw->stages_[i]->name() + ": its consumer group has a member that is not this process");
      }
    }
    return why;
  };
  ao.list_tools = [tools = p->tools_](const std::string& org, const std::string& agent, Json* out) {
    return tools->List(org, agent, out);
  };
  s = ServeLog(options, p->bus_, std::move(ao), p->log_->store(),
               {{"embedded_broker", options.brokers.empty()}, {"gate_key", GateKeyJson(*p->gate_)}},
               &p->api_);
  if (!s.ok()) return s;
  if (p->api_) p->notify_->SetConsoleBase(p->api_->url());
  phase("api");
  *out = std::move(p);
  return Status::Ok();
}

Status Pipeline::AppendCredentialEvent(const Event& e) { return AppendOne(*sink_, e); }

Status Pipeline::ReconcileNow() {
  std::lock_guard<std::mutex> lock(reconcile_mu_);
  return Reconcile(log_->store(), *sink_, *reconcile_producer_, bus_.topics, results_.get(), &reconciled_);
}

uint64_t Pipeline::retries() const {
  uint64_t n = 0;
  for (const auto& r : runners_) n += r->stats().retries.load();
  return n;
}

Json Pipeline::stats() const {
  Json out = Json::object();
  for (size_t i = 0; i < runners_.size(); ++i) {
    const RunnerStats& st = runners_[i]->stats();
    out[stages_[i]->name()] = {{"messages", st.messages.load()},
                               {"batches", st.batches.load()},
                               {"events", st.events.load()},
                               {"outputs", st.outputs.load()},
                               {"retries", st.retries.load()},
                               {"process_us", st.process_us.load()},
                               {"append_us", st.append_us.load()},
                               {"publish_us", st.publish_us.load()},
                               {"publish_wait_us", st.publish_wait_us.load()},
                               {"pipelined", st.pipelined.load()},
                               {"deferred", st.deferred.load()},
                               {"already_committed", st.already_committed.load()}};
  }
  return out;
}

void Pipeline::Stop() {
  for (auto& r : runners_) r->Stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

Pipeline::~Pipeline() {
  api_.reset();  // it reads the log
  scheduler_.reset();
  Stop();
  notify_.reset();  // reads the log; nothing appends once the runners stopped
  runners_.clear();
  reconcile_producer_.reset();
  log_.reset();
  broker_.reset();
}

}  // namespace tollgate
