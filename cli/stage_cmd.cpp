// `tollgate stage NAME`: one stage as its own process, the distributed
// deployment (docs/deployments.md; deploy/stage_service.h).
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "cli/signals.h"
#include "core/log.h"
#include "deploy/stage_service.h"

namespace tollgate::cli {
namespace {

struct StageFlags {
  ServiceOptions service;
  std::string durability = "sync";
  std::string log_format = "json";
  bool check = false;
  bool no_notify = false;
};

int RunStage(StageFlags& f) {
  log::Format format;
  if (!log::ParseFormat(f.log_format, &format)) {
    std::cerr << "tollgate: --log-format must be json or text\n";
    return 2;
  }
  log::SetFormat(format);
  if (!ParseDurability(f.durability, &f.service.pipeline.durability)) {
    std::cerr << "tollgate: --durability must be sync or buffered\n";
    return 2;
  }
  if (f.service.stage != "audit") f.service.pipeline.http_listen.clear();
  f.service.notify = !f.no_notify;
  if (f.check) {
    // Validates the invocation without starting anything (compose test).
    const PipelineOptions& po = f.service.pipeline;
    std::cout << Json{{"stage", f.service.stage},
                      {"data", po.data_dir},
                      {"brokers", po.brokers},
                      {"topic_prefix", po.topic_prefix},
                      {"durability", f.durability},
                      {"http", po.http_listen},
                      {"deployment_key", f.service.deployment_key},
                      {"workers", f.service.workers},
                      {"policy", po.policy_path.empty() ? DefaultPolicyPath() : po.policy_path}}
                     .dump()
              << std::endl;
    return 0;
  }
  BlockStopSignals();
  std::unique_ptr<StageService> svc;
  Status s = StageService::Start(f.service, &svc);
  if (!s.ok()) {
    std::cerr << "tollgate: stage " << f.service.stage << " cannot start: " << s.ToString() << "\n";
    return 2;
  }
  const std::string& data = f.service.pipeline.data_dir;
  std::cout << "tollgate stage " << f.service.stage << " is up\n"
            << "  brokers    " << f.service.pipeline.brokers << "\n"
            << "  instance   " << svc->transactional_id() << "\n"
            << "  log        " << data << "/log  ("
            << (f.service.stage == "audit" ? "the audit log" : "this stage's copy") << " of "
            << f.service.pipeline.topic_prefix << "events; head seq " << svc->log().head_seq() << ")\n";
  if (svc->api()) {
    std::cout << "  HTTP API   " << svc->api()->url() << "  (docs/http_api.md)\n";
    if (svc->admin_token_created()) {
      std::cout << "  first start: an admin token is in " << data << "/admin.token (mode 0600)\n";
    }
  }
  std::cout << "Ctrl-C stops after the batch in flight." << std::endl;
  int sig = WaitForSignal();
  std::cout << "tollgate: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", draining…" << std::endl;
  // With the brokers gone, librdkafka calls can block past their timeouts
  // and a drain would never end. Leaving without it is safe: what was not
  // committed is read again after a restart, as after a kill -9.
  std::thread watchdog([] {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    std::cerr
        << "tollgate: the drain did not finish in 30 s (are the brokers reachable?); exiting without it\n";
    _exit(3);
  });
  watchdog.detach();
  svc->Stop();
  if (const RunnerStats* st = svc->runner_stats()) {
    std::cout << "  " << f.service.stage << ": " << st->messages << " messages in " << st->batches
              << " batches, " << st->events << " events, " << st->retries << " retries\n";
  }
  const FollowerStats& fs = svc->follower().stats();
  std::cout << "  followed " << fs.appended << " events (" << fs.duplicates << " already held, " << fs.foreign
            << " not events)\n";
  svc.reset();
  std::cout << "tollgate: stopped" << std::endl;
  return 0;
}

}  // namespace

void AddStageCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<StageFlags>();
  f->service.pipeline.data_dir = "";
  f->service.pipeline.http_listen = "127.0.0.1:0";
  auto* cmd = app.add_subcommand("stage", "run one stage as its own process (the distributed deployment)");
  cmd->add_option("name", f->service.stage, "ingest, decide, approve, execute, or audit (the log keeper)")
      ->required()
      ->check(CLI::IsMember({"ingest", "decide", "approve", "execute", "audit"}));
  cmd->add_option("--brokers", f->service.pipeline.brokers, "Kafka bootstrap servers")->required();
  cmd->add_option("--data", f->service.pipeline.data_dir,
                  "this process's data directory (its copy of the log; the keeper's is the audit log)")
      ->required();
  cmd->add_option("--instance", f->service.instance,
                  "this process's stable id (its transactional id); default: from the host name and --data");
  cmd->add_option(
      "--deployment-key", f->service.deployment_key,
      "the events topic's key (default DATA/keys/events.key; the keeper makes it, the stages need a "
      "copy)");
  cmd->add_option("--checkpoint-every-events", f->service.pipeline.checkpoints.every_events,
                  "audit only: sign a checkpoint of the log every N events (0: on demand only); every "
                  "keeper signs the same bytes at the same sizes")
      ->capture_default_str();
  cmd->add_option("--topic-prefix", f->service.pipeline.topic_prefix, "topic name prefix")
      ->capture_default_str();
  cmd->add_option("--partitions", f->service.pipeline.partitions, "partitions of the topics tollgate creates")
      ->capture_default_str();
  cmd->add_option("--durability", f->durability, "sync (fdatasync per batch) or buffered")
      ->capture_default_str();
  cmd->add_option("--log-format", f->log_format, "stderr lines: json (one object per line) or text")
      ->capture_default_str();
  cmd->add_option("--policy", f->service.pipeline.policy_path,
                  "policy file (decide watches it; execute reads its section)");
  cmd->add_option("--http", f->service.pipeline.http_listen,
                  "audit only: HTTP API address HOST:PORT (\"\": off)")
      ->capture_default_str();
  cmd->add_flag("--metrics-public", f->service.pipeline.metrics_public,
                "GET /metrics without a token (else an operator or admin token)");
  cmd->add_option("--metrics", f->service.metrics_listen,
                  "not audit: serve this process's GET /metrics on HOST:PORT (port 0: any; the URL goes to "
                  "DATA/endpoints.json)");
  cmd->add_flag(
      "--shared-results-topic", f->service.pipeline.shared_results_topic,
      "every org's results on one topic PREFIXresults (compatibility; give every process the same)");
  cmd->add_option("--tokens", f->service.pipeline.tokens_file,
                  "audit only: tokens file (default DATA/tokens.json)");
  cmd->add_option("--webhook", f->service.pipeline.webhooks,
                  "approve only: URL POSTed when an approval is requested");
  cmd->add_option(
      "--otlp-endpoint", f->service.pipeline.otlp_endpoint,
      "audit (the keeper) only: OTLP/HTTP collector, one span per tool call (docs/operations.md)");
  cmd->add_option("--tools-dir", f->service.pipeline.tools_dir,
                  "execute only: CLI tools (default DATA/tools)");
  cmd->add_option("--workspaces", f->service.pipeline.workspace_root, "execute only: workspaces root");
  cmd->add_option("--workers", f->service.workers, "execute only: tools run at once by this process")
      ->capture_default_str();
  cmd->add_option("--max-request-bytes", f->service.pipeline.max_request_bytes,
                  "ingest only: larger requests are rejected")
      ->capture_default_str();
  cmd->add_flag(
      "--no-notify", f->no_notify,
      "audit only: send no notify deliveries from this keeper (with several keepers, let one send them)");
  cmd->add_flag("--check", f->check, "validate the flags, print the configuration and exit");
  cmd->callback([f, exit_code] { *exit_code = RunStage(*f); });
}

}  // namespace tollgate::cli
