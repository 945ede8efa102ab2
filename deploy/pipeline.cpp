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
      McpGatewayOptions mcp;
      mcp.hold = std::chrono::seconds(options.mcp_hold_s);
      Status s =
          MakeMcpEndpoint(bus, api.service_signer, store, *api.credentials, api.list_tools, &api.mcp, mcp);
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
void Pipeline::AddPipelineCollectors() {
  metrics_->AddCollector([p = this](MetricsText& t) {
    WriteRunnerMetrics(t, p->host_->runners());
    WriteLogMetrics(t, *p->local_->log);
    WriteBudgetMetrics(t, p->decide_);
    if (p->approve_ != nullptr) {
      t.Family("tollgate_approvals_pending", "gauge", "Approvals waiting for an answer now.");
      t.Sample("tollgate_approvals_pending", {}, static_cast<double>(p->approve_->pending()));
    }
    if (p->webhooks_) WriteWebhookMetrics(t, p->webhooks_->poster());
  });
}

// Start, step by step: each step leaves what the next one needs, and on
// error the destructor stops what already runs.
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
  std::string incarnation;
  Status s = p->StartBroker(&incarnation);
  if (!s.ok()) return s;
  phase("broker");
  s = LocalLog::Open(p->options_, &p->local_);
  if (!s.ok()) return s;
  phase("log");
  s = p->OpenLogAndIdentity();
  if (s.ok()) s = p->StartObservers();
  if (s.ok()) s = Producer::Open(p->bus_, "", &p->reconcile_producer_);
  if (!s.ok()) return s;
  phase("identity");
  s = p->ReconcileNow();
  if (!s.ok()) return s;
  phase("reconcile");
  if (options.replay_from.empty()) {
    // Scheduled calls fire from the process that writes the log (deploy/scheduler.h).
    s = Scheduler::Start(p->local_->log->store(), *p->local_->sink, {p->bus_, p->service_signer_},
                         &p->scheduler_);
    if (!s.ok()) return s;
  }
  s = p->StartStages(incarnation);
  if (!s.ok()) return s;
  phase("runners");
  p->AddPipelineCollectors();
  s = p->ServeApi();
  if (!s.ok()) return s;
  phase("api");
  *out = std::move(p);
  return Status::Ok();
}

Status Pipeline::StartBroker(std::string* incarnation) {
  bus_.topics.prefix = options_.topic_prefix;
  bus_.partitions = options_.partitions;
  bus_.latency_first = options_.latency_first;
  bus_.topics.shared_results = options_.shared_results_topic;
  std::filesystem::create_directories(options_.data_dir);
  // The log, keys and workspaces are tollgate's alone (docs/sandbox.md).
  std::error_code mode_ec;
  std::filesystem::permissions(options_.data_dir, std::filesystem::perms::owner_all, mode_ec);
  if (!options_.brokers.empty()) {
    bus_.brokers = options_.brokers;
    *incarnation = "ext";
    return EnsureTopics(bus_, std::chrono::seconds(30));
  }
  Status s = EmbeddedBroker::Start(1, &broker_, options_.broker_port);
  if (!s.ok()) return s;
  for (const auto& t : bus_.topics.All()) {
    s = broker_->CreateTopic(t, PartitionsOf(bus_, t));
    if (!s.ok()) return s;
  }
  bus_.brokers = broker_->bootstrap();
  // The embedded broker starts empty each time: its offsets mean nothing
  // across restarts, so sources carry a fresh incarnation.
  std::random_device rd;
  char buf[24];
  std::snprintf(buf, sizeof buf, "emb-%08x%08x", rd(), rd());
  *incarnation = buf;
  return Status::Ok();
}

// Who may act, before anything is read from a topic; the gate's result key.
Status Pipeline::OpenLogAndIdentity() {
  Status s = SetUpIdentity({options_.data_dir, options_.tokens_file}, local_->log->store(), *local_->sink,
                           local_->credentials.get(), &service_signer_, &admin_token_created_);
  if (!s.ok()) return s;
  local_->FollowCredentials();
  // The gate's result key, from the deployment key (made on first start).
  s = EventsKey::Load(options_.data_dir + "/keys/events.key", true, &key_);
  if (s.ok()) s = GateSigner(*key_, &gate_);
  if (s.ok()) s = RegisterGateKey(*gate_, local_->credentials.get(), *local_->sink);
  if (!s.ok()) return s;
  results_ = std::make_shared<ResultPublisher>(bus_, gate_);
  return Status::Ok();
}

// Observers of the log: metrics, the approvers' webhooks, the checkpoints
// and the OTLP exporter.
Status Pipeline::StartObservers() {
  Metrics* m = metrics_.get();
  local_->sink->AddListener([m](const std::vector<Event>& events) { m->Observe(events); });
  StartApprovalWebhooks(options_.webhooks, local_->store_view.get(), *local_->sink, &webhooks_);
  Status s = StartCheckpoints(*local_, *key_, options_.checkpoints, &checkpoints_);
  if (!s.ok()) return s;
  return StartOtlpExport(options_.otlp_endpoint, *local_->sink, *metrics_, &otlp_);
}

// Builds every stage (deploy/stages.h: the same code builds `tollgate stage
// NAME`), restores and subscribes them (runtime/stage_host.h), then the
// observers that read the policy in force, then runs the stages.
Status Pipeline::StartStages(const std::string& incarnation) {
  // The redaction rules in force (the policy's redact section), for every
  // stage that logs (docs/redaction.md); decide's fold sets them.
  audit_reader_ = std::make_unique<LogAuditReader>(local_->log->store(), checkpoints_.tree.get());
  StageEnv env;
  env.options = &options_;
  env.topics = bus_.topics;
  env.local = local_.get();
  env.redactor = std::make_shared<RedactorInForce>();
  env.audit = audit_reader_.get();
  Status s = BuildStages(StageNames(), env, &built_);
  if (!s.ok()) return s;
  approve_ = built_.approve;
  decide_ = built_.decide;
  HostEnv he;
  he.history = local_->history.get();
  he.feed = local_->sink.get();
  he.sink = local_->sink.get();
  he.view = local_->view.get();
  he.runner_options = [this, incarnation](const Stage& stage) {
    RunnerOptions ro;
    ro.bus = bus_;
    // The stages' consumer groups and transactional ids carry a secret of
    // the data directory (deploy/identity.h): no other local process joins
    // them. Each stage is its group's only member here: another one is foreign.
    ro.group = StageGroupId(*key_, stage.name());
    ro.transactional_id = StageTransactionalId(*key_, stage.name());
    ro.sole_member = true;
    ro.incarnation = incarnation;
    ro.max_batch = options_.max_batch;
    ro.clock = options_.clock;
    ro.max_event_bytes = local_->options.max_event_bytes;
    ro.results = results_;
    ro.on_offset_lost = [this](const Status&) {
      Status r = ReconcileNow();
      if (!r.ok())
        log::Error({"reconciler"}) << "reconcile after offset loss failed: " << r.ToString() << "\n";
    };
    return ro;
  };
  s = StageHost::Restore(std::move(built_.stages), std::move(he), &host_);
  if (!s.ok()) return s;
  tools_ = MakeToolDirectory(options_.policy_path, options_.data_dir, built_.policy, built_.upstreams);
  metrics_->SetToolCatalog(
      DeploymentToolCatalog(built_.policy, options_.policy_path, options_.data_dir, built_.upstreams));
  s = StartNotify(built_.policy);
  if (s.ok()) s = host_->Run();
  if (!s.ok()) return s;
  WaitForPolicyInForce();
  return Status::Ok();
}

// Duragent's notify deliveries, and "allow always" written into a Duragent
// workspace (deploy/notify_deliveries.h, duragent_local_rules.h).
Status Pipeline::StartNotify(const std::function<PolicyInForce()>& policy) {
  NotifyOptions no;
  no.data_dir = options_.data_dir;
  no.policy = policy;
  Status s = StartNotifyOnLog(std::move(no), *key_, *local_, &notify_);
  if (!s.ok()) return s;
  NotifyDeliveries* n = notify_.get();
  local_->sink->AddListener(DuragentLocalRulesListener(options_.policy_path, policy));
  metrics_->AddCollector([n](MetricsText& t) { WriteNotifyMetrics(t, *n); });
  return Status::Ok();
}

// endpoints.json (ServeApi) tells clients the pipeline is up: first let
// decide log the policy in force (its first tick), so a first tools/list
// or call does not meet E_NO_POLICY. Bounded: a policy file that does not
// load leaves requests denied with E_NO_POLICY, as before.
void Pipeline::WaitForPolicyInForce() const {
  if (!built_.policy) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!built_.policy().has_policy() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Status Pipeline::ServeApi() {
  ApiOptions ao;
  ao.credentials = local_->credentials.get();
  ao.sink = local_->sink.get();
  ao.service_signer = service_signer_;
  ao.metrics = [m = metrics_] { return m->Render(); };
  ao.metrics_public = options_.metrics_public;
  ao.degraded = [this] {
    std::vector<std::string> why;
    for (const auto& [name, runner] : host_->runners()) {
      if (runner->stats().foreign_members.load() != 0)
        why.push_back(name + ": its consumer group has a member that is not this process");
    }
    return why;
  };
  ao.list_tools = [tools = tools_](const std::string& org, const std::string& agent, Json* out) {
    return tools->List(org, agent, out);
  };
  if (decide_ != nullptr) ao.policy_health = [d = decide_] { return d->PolicyHealth(); };
  ao.log_refusal = [log = local_->log.get()] { return log->refusal(); };  // a full disk on /healthz
  ao.tree = checkpoints_.tree.get();
  ao.checkpointer = checkpoints_.checkpointer.get();
  if (!options_.oauth_file.empty()) {
    OAuthConfig oauth;
    if (Status c = OAuthConfig::Load(options_.oauth_file, &oauth); !c.ok()) return c;
    ao.oauth = std::make_shared<OAuthResourceServer>(std::move(oauth));
  }
  Status s = ServeLog(options_, bus_, std::move(ao), local_->log->store(),
                      {{"embedded_broker", options_.brokers.empty()},
                       {"gate_key", GateKeyJson(*gate_)},
                       {"checkpoint_key", CheckpointKeyJson(checkpoints_.checkpointer->signer())}},
                      &api_);
  if (!s.ok()) return s;
  if (api_) notify_->SetConsoleBase(api_->url());
  return Status::Ok();
}

Status Pipeline::AppendCredentialEvent(const Event& e) { return AppendOne(*local_->sink, e); }

Status Pipeline::ReconcileNow() {
  std::lock_guard<std::mutex> lock(reconcile_mu_);
  return Reconcile(local_->log->store(), *local_->sink, *reconcile_producer_, bus_.topics, results_.get(),
                   &reconciled_);
}

uint64_t Pipeline::retries() const { return host_ ? host_->retries() : 0; }

Json Pipeline::stats() const { return host_ ? host_->stats() : Json::object(); }

void Pipeline::Stop() {
  if (host_) host_->Stop();
}

Pipeline::~Pipeline() {
  api_.reset();  // it reads the log
  scheduler_.reset();
  Stop();
  notify_.reset();  // reads the log; nothing appends once the runners stopped
  host_.reset();
  built_ = BuiltStages();
  reconcile_producer_.reset();
  otlp_.reset();
  webhooks_.reset();
  checkpoints_.checkpointer.reset();  // then the tree, before the log it reads
  checkpoints_.tree.reset();
  local_.reset();
  broker_.reset();
}

}  // namespace tollgate
