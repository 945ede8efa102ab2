// The distributed deployment (docs/deployments.md): `tollgate stage NAME`
// runs one stage as its own process, scaled by running more of them in the
// stage's consumer group.
//
// Every process keeps a local copy of the events topic (an EventFollower
// into DATA/log): the stages' state (policy in force, budget ledger, pending
// approvals, credentials) is folded from it exactly as in the embedded
// deployment, restored at start from the copy already on disk plus the
// topic's tail, and brought up to the topic's committed end before each
// batch. A stage's events go to the events topic in the same transaction as
// its outputs and input offsets.
//
// "audit" is the log keeper: the same copy, kept current continuously, is
// the audit log that verify, export, get_audit_log and replay read, and it
// serves the HTTP API. As the process that owns the log it also fires
// scheduled calls, sends notify deliveries and writes "allow always" into a
// Duragent workspace (--policy DIR), as `tollgate up` does. More than one
// keeper may run; each holds the same events under the same seqs and hashes,
// keeps the log's Merkle tree and signs the same checkpoints of it
// (deploy/checkpoints.h, KeeperCheckpointOptions).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/http_api.h"
#include "api/metrics_server.h"
#include "deploy/checkpoints.h"
#include "deploy/notify_deliveries.h"
#include "deploy/pipeline.h"
#include "deploy/stages.h"
#include "observe/otlp_export.h"
#include "runtime/event_follower.h"
#include "runtime/stage_host.h"
#include "runtime/stage_runner.h"

namespace tollgate {

struct ServiceOptions {
  std::string stage;         // ingest | decide | approve | execute | audit
  PipelineOptions pipeline;  // brokers (required), data_dir, policy, ...
  // Identifies this process across restarts (its transactional id): two
  // processes must not share one. Default: the stage and the data dir.
  std::string instance;
  // The deployment's events-topic key (runtime/event_follower.h EventsKey);
  // default DATA/keys/events.key. The keeper makes it when missing; every
  // other process needs a copy of the keeper's.
  std::string deployment_key;
  // Execute: threads that run tools at once in this process (the runner's
  // deferred-work pool).
  size_t workers = 8;
  std::chrono::milliseconds follow_interval{50};  // how often the keeper follows
  // A stage other than the keeper: serve GET /metrics on "HOST:PORT" (port
  // 0: any; the URL goes to DATA/endpoints.json as "metrics"). Empty: none.
  std::string metrics_listen;
  // The keeper: send the policy's notify deliveries (deploy/notify_deliveries.h).
  // Each keeper that does sends them: with more than one keeper, let one.
  bool notify = true;
};

class StageService {
 public:
  static Status Start(const ServiceOptions& options, std::unique_ptr<StageService>* out);
  ~StageService();
  void Stop();

  EventLog& log() { return *local_->log; }
  ApiServer* api() { return api_.get(); }
  const EventFollower& follower() const { return *follower_; }
  const RunnerStats* runner_stats() const {
    return host_ && !host_->runners().empty() ? &host_->runners()[0].second->stats() : nullptr;
  }
  bool admin_token_created() const { return admin_token_created_; }
  const std::string& transactional_id() const { return transactional_id_; }
  // The keeper's notify deliveries; null in a stage, or with notify off.
  NotifyDeliveries* notify() { return notify_.get(); }

 private:
  StageService() = default;
  // The steps of Start, in order (stage_service.cpp).
  Status Check();
  Status OpenCopy();
  Status SetUpCredentials();
  Status StartStage();
  Status ServeMetrics();
  Status StartKeeper();
  Status ServeKeeperApi();
  bool keeper() const { return options_.stage == "audit"; }

  ServiceOptions options_;
  std::string transactional_id_;
  BusConfig bus_;
  std::unique_ptr<LocalLog> local_;
  std::shared_ptr<const EventsKey> key_;
  std::shared_ptr<const JwtSigner> gate_;
  std::unique_ptr<EventFollower> follower_;
  std::unique_ptr<TopicEventSink> topic_sink_;  // the keeper's writers
  std::unique_ptr<Scheduler> scheduler_;        // the keeper fires scheduled calls
  std::unique_ptr<NotifyDeliveries> notify_;    // and sends notify deliveries
  std::shared_ptr<Metrics> keeper_metrics_;     // the keeper's /metrics
  Checkpoints checkpoints_;                     // the keeper's tree and checkpoints
  std::shared_ptr<const JwtSigner> service_signer_;
  bool admin_token_created_ = false;
  std::unique_ptr<AuditReader> audit_reader_;
  BuiltStages built_;
  std::shared_ptr<OtlpExporter> otlp_;          // the keeper, with --otlp-endpoint
  std::unique_ptr<ApprovalWebhooks> webhooks_;  // with --webhook
  std::unique_ptr<StageHost> host_;             // a stage's one stage (none in the keeper)
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<MetricsServer> metrics_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace tollgate
