// The embedded deployment (docs/architecture.md): one process, every stage its
// own consumer on its own topic, the local RocksDB log as the event sink,
// and — without --brokers — librdkafka's mock cluster as the broker.
// Used by `tollgate up` and by the integration tests.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/http_api.h"
#include "api/metrics.h"
#include "approve/approve_stage.h"
#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "core/audit_reader.h"
#include "core/auth.h"
#include "core/credentials.h"
#include "decide/decide_stage.h"
#include "deploy/checkpoints.h"
#include "deploy/endpoints.h"  // WriteEndpoints, for its callers
#include "deploy/local_log.h"
#include "deploy/reconciler.h"
#include "deploy/scheduler.h"
#include "deploy/stages.h"
#include "observe/approval_webhooks.h"
#include "observe/otlp_export.h"
#include "runtime/event_follower.h"
#include "runtime/kafka_bus.h"
#include "runtime/result_publisher.h"
#include "runtime/stage_host.h"
#include "runtime/stage_runner.h"

namespace tollgate {

struct PipelineOptions {
  std::string data_dir = "tollgate-data";  // the log is data_dir/log
  std::string brokers;                     // empty: start the embedded broker
  int broker_port = -1;  // embedded: its bootstrap port (EmbeddedBroker::Start; 0 any, -1 none)
  std::string topic_prefix = "tollgate.";
  int partitions = 3;
  Durability durability = Durability::kSync;
  size_t max_request_bytes = 1 << 20;
  size_t max_batch = 500;
  // Signed checkpoints of the log's Merkle tree (audit/checkpointer.h).
  CheckpointOptions checkpoints;
  // The time the stages see (RunnerOptions::clock); null: the wall clock.
  std::function<int64_t()> clock;
  bool write_endpoints = true;  // data_dir/endpoints.json
  // Recorded-result replay (replay/replay_stage.h): when set, a replay
  // stage serving the results recorded in this data dir, log or export
  // takes execute's place; nothing is executed.
  std::string replay_from;
  std::string replay_session;  // match every session against this recorded one
  // The policy file (decide watches it; execute reads its own section).
  // Empty: config/default-policy.yaml of the source tree or next to the
  // binary (DefaultPolicyPath()).
  std::string policy_path;
  // Approvals (docs/approvals.md, docs/http_api.md).
  std::vector<std::string> webhooks;  // POSTed to when an approval is requested
  std::string http_listen;            // HTTP API "HOST:PORT" (port 0: any); empty = no API
  std::string tokens_file;            // tokens to import into the log; default data_dir/tokens.json
  // /mcp: how long an asked call holds a client without tasks before it
  // answers E_PENDING_APPROVAL (docs/mcp.md "Calls awaiting approval").
  int mcp_hold_s = 45;
  // OAuth access tokens for /mcp and /v1 (api/oauth.h, docs/oauth.md): the
  // config file of `up --oauth`; empty = static tokens only.
  std::string oauth_file;
  int64_t max_signature_skew_us = kDefaultMaxSkewUs;  // iat of a request's or response's signature
  // Execute: CLI tools dir and workspace root; empty = the policy's
  // execute.tools_dir / execute.workspace_root, else <data>/tools and
  // <data>/workspaces.
  std::string tools_dir;
  std::string workspace_root;
  // GET /metrics without a token (an operator or admin token otherwise).
  bool metrics_public = false;
  // An OTLP/HTTP collector to send one span per tool call to
  // (observe/otlp_export.h); empty = none.
  std::string otlp_endpoint;
  // BusConfig::latency_first for every client of the pipeline. Not the
  // default: it costs more than 10% throughput (docs/performance.md).
  bool latency_first = false;
  // Every org's results on the one topic <prefix>results instead of
  // <prefix>results.<org> (--shared-results-topic: for consumers written
  // before per-org topics; a Kafka ACL cannot keep orgs apart there).
  bool shared_results_topic = false;
};

// Where the shipped default policy is: $TOLLGATE_DEFAULT_POLICY, else
// config/default-policy.yaml next to the binary's tree, else of the source
// tree the binary was built from.
std::string DefaultPolicyPath();

// What a process that holds a log serves (`up`, the keeper): the HTTP API
// on options.http_listen (none when empty; `api` carries the credentials,
// sink and signer), then options.data_dir/endpoints.json (when
// options.write_endpoints) with the bus, the log, the pid, `extra` and the
// API's URL.
Status ServeLog(const PipelineOptions& options, const BusConfig& bus, ApiOptions api, const LogStore& store,
                Json extra, std::unique_ptr<ApiServer>* server);

class Pipeline {
 public:
  // Starts the broker (if embedded), the log, the reconciler, then the
  // stages. On error nothing keeps running.
  static Status Start(const PipelineOptions& options, std::unique_ptr<Pipeline>* out);
  // Stops every stage after its batch in flight, then closes the log.
  ~Pipeline();
  void Stop();

  const std::string& bootstrap() const { return bus_.brokers; }
  const Topics& topics() const { return bus_.topics; }
  EmbeddedBroker* broker() { return broker_.get(); }  // null with --brokers
  EventLog& log() { return *local_->log; }
  const ReconcileStats& reconciled() const { return reconciled_; }
  // Seconds each part of Start took: broker, log, identity, reconcile,
  // stages (state restored), runners (started, and the policy in force),
  // api.
  const Json& startup_phases() const { return startup_phases_; }
  // Sum of every runner's retries (failed batches).
  uint64_t retries() const;
  // Each stage's runner counters, by stage name.
  Json stats() const;
  // Re-drives unfinished requests now (also run at start).
  Status ReconcileNow();
  ApproveStage& approve() { return *approve_; }
  // The approvers' webhooks (observe/approval_webhooks.h); null without --webhook.
  const ApprovalWebhooks* webhooks() const { return webhooks_.get(); }
  Checkpointer& checkpointer() { return *checkpoints_.checkpointer; }
  const MerkleStore& tree() const { return *checkpoints_.tree; }
  ApiServer* api() { return api_.get(); }              // null without http_listen
  Scheduler* scheduler() { return scheduler_.get(); }  // null when replaying
  // What GET /metrics serves (api/metrics.h).
  Metrics& metrics() { return *metrics_; }
  // This start created data_dir/admin.token (first start with the API).
  bool admin_token_created() const { return admin_token_created_; }
  // Who may act: the log's credentials (docs/trust.md), current as events
  // are appended.
  const CredentialRegistry& credentials() const { return *local_->credentials; }
  // Appends a credential change (credential.added / .revoked) through the
  // pipeline's sink, so the registry applies it before this returns.
  Status AppendCredentialEvent(const Event& e);
  // Where the stages append: every listener (the approve stage, metrics,
  // credentials) sees what goes through it. For tests that stand in for a
  // stage.
  EventSink& sink() { return *local_->sink; }
  // The gate's result key (deploy/gate_key.h): waiters check results with
  // its public half.
  const JwtSigner& gate() const { return *gate_; }

 private:
  Pipeline() = default;
  // The steps of Start, in order (pipeline.cpp).
  Status StartBroker(std::string* incarnation);
  Status OpenLogAndIdentity();
  Status StartObservers();
  Status StartStages(const std::string& incarnation);
  Status StartNotify(const std::function<PolicyInForce()>& policy);
  Status ServeApi();
  void AddPipelineCollectors();
  void WaitForPolicyInForce() const;

  PipelineOptions options_;
  BusConfig bus_;
  std::shared_ptr<class ToolDirectory> tools_;  // GET /v1/tools and /mcp's tools/list
  std::unique_ptr<EmbeddedBroker> broker_;
  std::unique_ptr<LocalLog> local_;
  std::shared_ptr<const EventsKey> key_;  // the deployment key (keys/events.key)
  std::unique_ptr<Producer> reconcile_producer_;
  std::unique_ptr<Scheduler> scheduler_;            // fires scheduled calls (none when replaying)
  std::unique_ptr<class NotifyDeliveries> notify_;  // deploy/notify_deliveries.h
  std::shared_ptr<const JwtSigner> gate_;
  std::shared_ptr<ResultPublisher> results_;   // every runner's and the reconciler's
  std::unique_ptr<AuditReader> audit_reader_;  // get_audit_log, over the log
  std::mutex reconcile_mu_;
  ReconcileStats reconciled_;
  Json startup_phases_ = Json::object();
  BuiltStages built_;                // the policy in force, upstreams (stages moved to host_)
  std::unique_ptr<StageHost> host_;  // the stages, restored and run
  ApproveStage* approve_ = nullptr;  // owned by host_
  DecideStage* decide_ = nullptr;    // owned by host_
  std::unique_ptr<ApiServer> api_;
  bool admin_token_created_ = false;
  std::shared_ptr<const JwtSigner> service_signer_;
  std::shared_ptr<Metrics> metrics_ = std::make_shared<Metrics>();
  std::shared_ptr<OtlpExporter> otlp_;          // with --otlp-endpoint
  std::unique_ptr<ApprovalWebhooks> webhooks_;  // with --webhook
  Checkpoints checkpoints_;                     // the Merkle tree and its signed checkpoints
};

}  // namespace tollgate
