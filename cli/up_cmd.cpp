// `tollgate up`: the whole pipeline on one machine (embedded deployment);
// `tollgate broker`: the embedded broker alone, for multi-process setups.
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <vector>

#include "cli/commands.h"
#include "cli/signals.h"
#include "core/log.h"
#include "deploy/pipeline.h"
#include "runtime/tcp_forward.h"  // CanListen

namespace tollgate::cli {
namespace {

struct UpFlags {
  PipelineOptions pipeline;
  std::string durability = "sync";
  std::string log_format = "json";
  bool check = false;
  int broker_port = -1;                // --broker-port; -1: not given
  bool http_given = false;             // --http was on the command line
  double checkpoint_seconds = 10;      // --checkpoint-every-seconds
  std::vector<std::string> witnesses;  // --witness URL=VERIFIER_KEY
  size_t witness_quorum = 0;           // --witness-quorum; 0: all of them
};

constexpr const char* kDefaultHttp = "127.0.0.1:0";

// The ports `up` listens on (issue 31): the flags', else the last run's
// (DATA/endpoints.json) when they are free, so whoever knows them (a
// waiting `submit --wait`, a console tab, an MCP client) finds the
// restarted `up` where it was; else any free port. The embedded broker
// always gets a bootstrap forward (runtime/tcp_forward.h): its own port
// cannot be chosen. Returns a line for each last port that was taken.
std::vector<std::string> ChoosePorts(UpFlags& f) {
  std::vector<std::string> taken;
  const LastPorts last = ReadLastPorts(f.pipeline.data_dir);
  if (f.pipeline.brokers.empty()) {
    f.pipeline.broker_port = f.broker_port >= 0 ? f.broker_port : 0;
    if (f.broker_port < 0 && last.broker > 0) {
      if (CanListen("127.0.0.1", last.broker)) {
        f.pipeline.broker_port = last.broker;
      } else {
        taken.push_back("the last run's broker port " + std::to_string(last.broker) +
                        " is taken: listening on another (pin one with --broker-port)");
      }
    }
  }
  if (!f.http_given && f.pipeline.http_listen == kDefaultHttp && last.http > 0) {
    // The port only: the host stays the default loopback whatever the last
    // run was told.
    if (CanListen("127.0.0.1", last.http)) {
      f.pipeline.http_listen = "127.0.0.1:" + std::to_string(last.http);
    } else {
      taken.push_back("the last run's HTTP port " + std::to_string(last.http) +
                      " is taken: listening on another (pin one with --http HOST:PORT)");
    }
  }
  return taken;
}

// --witness/--witness-quorum into the checkpoint options; false (said on
// stderr) for a malformed one.
bool ApplyWitnessFlags(UpFlags& f) {
  WitnessOptions& w = f.pipeline.checkpoints.witnesses;
  for (const std::string& flag : f.witnesses) {
    WitnessEndpoint e;
    Status s = ParseWitnessFlag(flag, &e);
    if (!s.ok()) {
      std::cerr << "tollgate: --witness: " << s.ToString() << "\n";
      return false;
    }
    w.witnesses.push_back(std::move(e));
  }
  if (f.witness_quorum > f.witnesses.size()) {
    std::cerr << "tollgate: --witness-quorum " << f.witness_quorum << " needs that many --witness\n";
    return false;
  }
  w.quorum = f.witness_quorum;
  return true;
}

// 1. The flags: the log format and durability are applied, the rest
// checked. False (after saying why on stderr) when one is wrong.
bool ApplyUpFlags(UpFlags& f) {
  log::Format format;
  if (!log::ParseFormat(f.log_format, &format)) {
    std::cerr << "tollgate: --log-format must be json or text\n";
    return false;
  }
  log::SetFormat(format);
  if (!ParseDurability(f.durability, &f.pipeline.durability)) {
    std::cerr << "tollgate: --durability must be sync or buffered\n";
    return false;
  }
  if (f.pipeline.partitions < 1 || f.pipeline.max_request_bytes < 1024) {
    std::cerr << "tollgate: --partitions must be >= 1 and --max-request-bytes >= 1024\n";
    return false;
  }
  if (f.broker_port >= 0 && !f.pipeline.brokers.empty()) {
    std::cerr << "tollgate: --broker-port is the embedded broker's; with --brokers there is none\n";
    return false;
  }
  if (!(f.checkpoint_seconds >= 0 && f.checkpoint_seconds <= 86400)) {
    std::cerr << "tollgate: --checkpoint-every-seconds must be between 0 and 86400\n";
    return false;
  }
  f.pipeline.checkpoints.every = std::chrono::milliseconds(static_cast<int64_t>(f.checkpoint_seconds * 1000));
  if (!f.pipeline.oauth_file.empty()) {  // refused before anything starts
    OAuthConfig oauth;
    if (Status s = OAuthConfig::Load(f.pipeline.oauth_file, &oauth); !s.ok()) {
      std::cerr << "tollgate: " << s.ToString() << "\n";
      return false;
    }
    if (f.pipeline.http_listen.empty()) {
      std::cerr << "tollgate: --oauth needs the HTTP API (--http)\n";
      return false;
    }
  }
  return ApplyWitnessFlags(f);
}

// Signed checkpoints of the log (docs/log_format.md, "Checkpoints and proofs").
void AddCheckpointFlags(CLI::App* up, UpFlags* f) {
  up->add_option("--checkpoint-every-events", f->pipeline.checkpoints.every_events,
                 "sign a checkpoint of the log's Merkle tree every N events (0: off)")
      ->capture_default_str();
  up->add_option("--checkpoint-every-seconds", f->checkpoint_seconds,
                 "and after this long when the log grew (0: off)")
      ->capture_default_str();
  up->add_option("--witness", f->witnesses,
                 "a C2SP tlog-witness to cosign each checkpoint, URL=VERIFIER_KEY (its submission prefix "
                 "and cosignature/v1 key; repeatable; docs/log_format.md, \"Witnesses\")");
  up->add_option("--witness-quorum", f->witness_quorum,
                 "a checkpoint is served cosigned once this many witnesses signed it (default: all)");
}

// --check: validates the invocation without starting anything (compose test).
void PrintCheck(const UpFlags& f) {
  std::cout << Json{{"data", f.pipeline.data_dir},
                    {"brokers", f.pipeline.brokers},
                    {"topic_prefix", f.pipeline.topic_prefix},
                    {"partitions", f.pipeline.partitions},
                    {"durability", f.durability},
                    {"policy", f.pipeline.policy_path.empty() ? DefaultPolicyPath() : f.pipeline.policy_path}}
                   .dump()
            << std::endl;
}

// 2. What is up, where, and commands to paste (they name this very binary).
void PrintBanner(Pipeline& p, const UpFlags& f, const std::vector<std::string>& taken) {
  const auto& rec = p.reconciled();
  const std::string data = f.pipeline.data_dir;
  // The commands below name this very binary, so they paste as they are.
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec || self.empty()) self = "tollgate";
  std::cout << "tollgate is up\n"
            << "  broker     " << p.bootstrap()
            << (p.broker() ? "  (embedded; in memory — the log is the record)" : "") << "\n";
  for (const std::string& line : taken) std::cout << "  ports      " << line << "\n";
  std::cout << "  topics     " << p.topics().requests() << " → … → " << p.topics().results() << "\n"
            << "  log        " << data << "/log  (durability " << f.durability << ", head seq "
            << p.log().head_seq() << ")\n"
            << "  endpoints  " << data << "/endpoints.json\n"
            << (f.pipeline.replay_from.empty() ? ""
                                               : "  replay     serving the results recorded in " +
                                                     f.pipeline.replay_from + " (nothing is executed)\n")
            << "  policy     "
            << (f.pipeline.policy_path.empty() ? DefaultPolicyPath() : f.pipeline.policy_path)
            << "  (edit it to reload; `tollgate policy check FILE` first)\n"
            << "  reconciled " << rec.requests_seen << " unfinished requests in the log, re-drove "
            << rec.redriven << ", ended " << rec.failed_closed << " that could not be re-driven\n\n"
            << "Submit a call (signed with the agent's key; one is registered on first use):\n"
            << "  " << self << " submit --data " << data
            << " --agent my-agent --session s1 --tool echo --args '{\"text\":\"hi\"}' --wait\n"
            << "or publish signed JSON to " << p.topics().requests()
            << " with any Kafka client (docs/trust.md), e.g.\n"
            << "  echo "
               "'{\"org_id\":\"default\",\"agent_id\":\"my-agent\",\"session_id\":\"s\",\"tool\":\"echo\","
               "\"args\":{}}' > m.json\n"
            << "  kcat -P -b " << p.bootstrap() << " -t " << p.topics().requests()
            << " -k my-agent -H \"tollgate-auth=$(" << self << " agents sign --data " << data
            << " < m.json)\" m.json\n"
            << "Agents: " << self << " agents add|list|revoke --data " << data << " --org ORG --agent A\n"
            << "Audit: " << self << " audit query --data " << data << " --session s1\n"
            << "Ctrl-C stops after the batches in flight.\n";
  if (p.api()) {
    std::cout << "HTTP API: " << p.api()->url() << "  (docs/http_api.md)\n"
              << "Web console: " << p.api()->url() << "/  (log in with a token; docs/console.md)\n";
    if (p.admin_token_created()) {
      std::cout << "  first start: an admin token is in " << data << "/admin.token (mode 0600); e.g.\n"
                << "  curl -H \"Authorization: Bearer $(cat " << data << "/admin.token)\" " << p.api()->url()
                << "/v1/approvals\n"
                << "  add approvers: " << self << " tokens add --data " << data
                << " --identity alice --org ORG --role approver\n";
    }
  }
  std::cout << "Approvals: " << self << " approvals list --data " << data << "\n" << std::flush;
}

// 3. What each stage did, and where its time went: the first thing an
// on-call engineer asks after a slow or stuck run.
void PrintStageStats(const Json& stats) {
  for (const auto& [stage, st] : stats.items()) {
    std::cout << "  " << stage << ": " << st["messages"] << " messages in " << st["batches"] << " batches, "
              << st["events"] << " events, " << st["retries"] << " retries; ms in process "
              << st["process_us"].get<uint64_t>() / 1000 << ", append "
              << st["append_us"].get<uint64_t>() / 1000 << ", publish "
              << st["publish_us"].get<uint64_t>() / 1000;
    if (st["already_committed"].get<uint64_t>() > 0) {
      std::cout << "; " << st["already_committed"]
                << " outputs of messages read again were already committed";
    }
    std::cout << "\n";
  }
}

int RunUp(UpFlags& f) {
  if (!ApplyUpFlags(f)) return 2;
  if (f.check) {
    PrintCheck(f);
    return 0;
  }
  BlockStopSignals();
  const std::vector<std::string> taken = ChoosePorts(f);
  std::unique_ptr<Pipeline> p;
  Status s = Pipeline::Start(f.pipeline, &p);
  if (!s.ok()) {
    std::cerr << "tollgate: cannot start: " << s.ToString() << "\n";
    return 2;
  }
  PrintBanner(*p, f, taken);
  int sig = WaitForSignal();
  std::cout << "tollgate: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", draining…" << std::endl;
  p->Stop();
  PrintStageStats(p->stats());
  p.reset();
  std::cout << "tollgate: stopped" << std::endl;
  return 0;
}

}  // namespace

void AddUpCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<UpFlags>();
  f->pipeline.data_dir = kDefaultDataDir;
  auto* up =
      app.add_subcommand("up", "run the whole pipeline on this machine (embedded broker unless --brokers)");
  up->add_option("--data", f->pipeline.data_dir, "data directory: the log, endpoints.json")
      ->capture_default_str();
  up->add_option("--brokers", f->pipeline.brokers,
                 "Kafka bootstrap servers (default: start the embedded broker)");
  up->add_option("--topic-prefix", f->pipeline.topic_prefix, "topic name prefix")->capture_default_str();
  up->add_option("--partitions", f->pipeline.partitions, "partitions of the topics tollgate creates")
      ->capture_default_str();
  up->add_option("--durability", f->durability, "sync (fdatasync per batch) or buffered")
      ->capture_default_str();
  up->add_option("--log-format", f->log_format, "stderr lines: json (one object per line) or text")
      ->capture_default_str();
  up->add_option("--max-request-bytes", f->pipeline.max_request_bytes, "larger requests are rejected")
      ->capture_default_str();
  up->add_option("--replay-from", f->pipeline.replay_from,
                 "serve the tool results recorded in this data dir, log or export instead of executing");
  up->add_option("--replay-session", f->pipeline.replay_session,
                 "with --replay-from: match every session against this recorded session");
  up->add_option(
      "--policy", f->pipeline.policy_path,
      "policy file (YAML; default: the shipped config/default-policy.yaml); edits are reloaded live");
  up->add_option("--broker-port", f->broker_port,
                 "the embedded broker's bootstrap port on 127.0.0.1 (0: any free port; default: the last "
                 "run's when free)")
      ->check(CLI::Range(0, 65535));
  f->pipeline.http_listen = kDefaultHttp;
  auto* http = up->add_option("--http", f->pipeline.http_listen,
                              "HTTP API address HOST:PORT (port 0: any free port; \"\": off; default: "
                              "127.0.0.1 and the last run's port when free)")
                   ->capture_default_str();
  up->add_flag("--metrics-public", f->pipeline.metrics_public,
               "serve GET /metrics (Prometheus) without a token; otherwise an operator or admin token");
  up->add_flag("--latency-first", f->pipeline.latency_first,
               "shorter broker fetch waits and no producer linger: lower latency for more idle CPU "
               "(docs/operations.md)");
  up->add_flag("--shared-results-topic", f->pipeline.shared_results_topic,
               "every org's results on one topic PREFIXresults, not PREFIXresults.ORG (compatibility: no "
               "Kafka ACL can keep orgs apart there; docs/trust.md)");
  up->add_option("--mcp-hold", f->pipeline.mcp_hold_s,
                 "seconds /mcp holds an asked call of a client without tasks before answering "
                 "E_PENDING_APPROVAL (docs/mcp.md)")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  up->add_option("--tokens", f->pipeline.tokens_file,
                 "the HTTP API's tokens file (default DATA/tokens.json)");
  up->add_option("--oauth", f->pipeline.oauth_file,
                 "accept OAuth 2.1 access tokens (JWTs) on /mcp and /v1, as this JSON file configures "
                 "(issuers, claims, tool scopes; docs/oauth.md)");
  up->add_option("--webhook", f->pipeline.webhooks,
                 "URL POSTed (JSON) when an approval is requested (repeatable)");
  up->add_option("--otlp-endpoint", f->pipeline.otlp_endpoint,
                 "OTLP/HTTP collector (e.g. http://127.0.0.1:4318): one span per tool call, as JSON "
                 "(docs/operations.md)");
  up->add_option("--tools-dir", f->pipeline.tools_dir, "CLI tools: DIR/<name>/run (default DATA/tools)");
  up->add_option("--workspaces", f->pipeline.workspace_root,
                 "agents' workspaces root (default DATA/workspaces)");
  AddCheckpointFlags(up, f.get());
  up->add_flag("--check", f->check, "validate the flags, print the configuration and exit");
  up->callback([f, exit_code, http] {
    f->http_given = http->count() > 0;
    *exit_code = RunUp(*f);
  });

  auto bf = std::make_shared<UpFlags>();
  bf->pipeline.data_dir = "";
  auto* broker = app.add_subcommand("broker", "run the embedded Kafka-protocol broker alone (in memory)");
  broker->add_option("--topic-prefix", bf->pipeline.topic_prefix, "topic name prefix")->capture_default_str();
  broker->add_option("--partitions", bf->pipeline.partitions, "partitions per topic")->capture_default_str();
  broker->add_option("--data", bf->pipeline.data_dir, "write DATA/endpoints.json with the bootstrap address");
  auto port = std::make_shared<int>(-1);
  broker->add_option("--port", *port,
                     "also accept bootstrap connections on 127.0.0.1:PORT (a fixed address)");
  broker->callback([bf, exit_code, port] {
    BlockStopSignals();
    // --port: a fixed bootstrap address in front of the mock's own port.
    std::unique_ptr<EmbeddedBroker> b;
    Status s = EmbeddedBroker::Start(1, &b, *port);
    BusConfig bus;
    bus.topics.prefix = bf->pipeline.topic_prefix;
    bus.partitions = bf->pipeline.partitions;
    const Topics& topics = bus.topics;
    for (size_t i = 0; s.ok() && i < topics.All().size(); ++i) {
      s = b->CreateTopic(topics.All()[i], PartitionsOf(bus, topics.All()[i]));
    }
    const std::string bootstrap = s.ok() ? b->bootstrap() : "";
    if (s.ok() && !bf->pipeline.data_dir.empty()) {
      std::filesystem::create_directories(bf->pipeline.data_dir);
      std::error_code mode_ec;  // tollgate's alone (docs/sandbox.md)
      std::filesystem::permissions(bf->pipeline.data_dir, std::filesystem::perms::owner_all, mode_ec);
      bus.brokers = bootstrap;
      Json ep = BusEndpoints(bus);
      ep["embedded_broker"] = true;
      s = WriteEndpoints(bf->pipeline.data_dir, ep);
    }
    if (!s.ok()) {
      std::cerr << "tollgate: " << s.ToString() << "\n";
      *exit_code = 2;
      return;
    }
    std::cout << bootstrap << std::endl;
    WaitForSignal();
    *exit_code = 0;
  });
}

}  // namespace tollgate::cli
