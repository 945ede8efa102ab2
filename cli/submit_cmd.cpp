// `tollgate submit`: publish one tool request, optionally wait for its result.
// Exit code: 0 completed, 1 any other status (denied, failed, rejected,
// expired), 2 usage or connection error, 3 no final result within
// --timeout (still awaiting approval: the pending message is printed).
#include <filesystem>
#include <iostream>
#include <random>

#include "cli/admin_client.h"
#include "cli/commands.h"
#include "core/auth.h"
#include "deploy/endpoints.h"
#include "core/messages.h"
#include "core/result_signature.h"
#include "core/unproven.h"
#include "core/trace.h"

namespace tollgate::cli {
namespace {

struct SubmitFlags {
  std::string data = kDefaultDataDir, brokers, topic_prefix;
  std::string org = "default", agent, session, tool, args = "{}", action, request_id, key, traceparent, gate_key;
  double cost = -1;
  bool wait = false;
  int timeout_s = 30;
};

// "awaiting approval: 0 of 2 (alice, bob), deadline ..." from a pending message.
std::string PendingLine(const Json& pending) {
  const Json a = pending.value("approval", Json::object());
  std::string line = pending.value("request_id", "") + " awaits approval";
  if (a.contains("quorum")) line += ": " + std::to_string(a.value("approvals", 0)) + " of " + a["quorum"].dump();
  if (a.contains("approvers") && a["approvers"].is_array() && !a["approvers"].empty()) {
    line += " (approvers:";
    for (const Json& who : a["approvers"]) line += " " + (who.is_string() ? who.get<std::string>() : who.dump());
    line += ")";
  }
  if (a.contains("deadline")) line += ", deadline " + a.value("deadline", "");
  return line;
}

std::string RandomId() {
  std::random_device rd;
  char buf[40];
  std::snprintf(buf, sizeof buf, "req-%08x%08x%08x", rd(), rd(), rd());
  return buf;
}

int RunSubmit(SubmitFlags& f) {
  BusConfig bus;
  if (Status s = ClientBus(f.data, f.brokers, f.topic_prefix, &bus); !s.ok()) {
    std::cerr << "tollgate: " << s.ToString() << "\n";
    return 2;
  }
  Json args;
  if (!ParseJson(f.args, &args).ok() || !args.is_object()) {
    std::cerr << "tollgate: --args must be a JSON object\n";
    return 2;
  }
  if (f.request_id.empty()) f.request_id = RandomId();
  Json req{{"request_id", f.request_id}, {"org_id", f.org}, {"agent_id", f.agent},
           {"session_id", f.session},    {"tool", f.tool},  {"args", args}};
  if (!f.action.empty()) req["action"] = f.action;
  if (f.cost >= 0) req["estimated_cost_usd"] = f.cost;

  // Subscribe first, so the result cannot slip past between send and read;
  // only a result the gate signed for this very request counts.
  std::unique_ptr<Consumer> consumer;
  std::vector<Ed25519Verifier> gate;
  if (f.wait) {
    // Its org's topic, and where a refusal of a message nobody proved
    // (an unregistered key, say) is answered (docs/trust.md).
    std::vector<std::string> topics = {bus.topics.results_for(f.org)};
    if (bus.topics.results_for(kUnprovenOrg) != topics[0]) topics.push_back(bus.topics.results_for(kUnprovenOrg));
    Status s = ClientGateKeys(f.data, f.gate_key, &gate);
    for (const std::string& t : topics) {
      if (s.ok()) s = EnsureTopic(bus, t, std::chrono::seconds(10));
    }
    if (s.ok()) s = Consumer::OpenTail(bus, topics, std::chrono::seconds(10), &consumer);
    if (!s.ok()) {
      std::cerr << "tollgate: " << s.ToString() << "\n";
      return 2;
    }
  }
  // Signed as the agent (docs/trust.md).
  JwtSigner signer;
  Status s = AgentSignerFor(f.data, f.org, f.agent, f.key, &signer);
  if (!s.ok()) {
    std::cerr << "tollgate: " << s.ToString() << "\n";
    return 2;
  }
  Message m = MessageFor(bus.topics.requests(), req, req);
  m.headers[kHeaderAuth] = SignRequest(signer, f.org, f.agent, f.request_id, m.value, NowMicros() / 1'000'000);
  if (!f.traceparent.empty()) {
    // Ingest drops a malformed one (agents' headers are not trusted); a
    // person typing it is told.
    if (!IsValidTraceparent(f.traceparent)) {
      std::cerr << "tollgate: --traceparent is not a W3C version-00 traceparent; tollgate will start its own trace\n";
    }
    m.headers[kHeaderTraceparent] = f.traceparent;
  }
  std::unique_ptr<Producer> producer;
  s = Producer::Open(bus, "", &producer);
  if (s.ok()) s = producer->Send(m);
  if (s.ok()) s = producer->Flush(std::chrono::seconds(f.timeout_s));
  if (!s.ok()) {
    std::cerr << "tollgate: cannot publish: " << s.ToString() << "\n";
    return 2;
  }
  if (!f.wait) {
    std::cout << Json{{"request_id", f.request_id}, {"status", "submitted"}}.dump() << std::endl;
    return 0;
  }
  // The id its refusal would carry were the signature not to hold.
  const std::string refusal_id = UnprovenRequestId(m);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(f.timeout_s);
  std::vector<Message> batch;
  Json pending;
  while (std::chrono::steady_clock::now() < deadline) {
    batch.clear();
    consumer->Poll(100, std::chrono::milliseconds(200), &batch);
    for (const auto& m : batch) {
      Json result;
      Status v = VerifyResult(m, gate, {f.org, f.agent, f.request_id}, &result);
      if (!v.ok() && VerifyResult(m, gate, {kUnprovenOrg, "", refusal_id}, &result).ok()) {
        std::cerr << "tollgate: the request was refused as unproven (filed under org " << kUnprovenOrg << " as "
                  << refusal_id << ")\n";
        std::cout << result.dump(2) << std::endl;
        return 1;
      }
      if (!v.ok()) {
        // Someone else's result, or a forgery: say so only when it claims ours.
        auto it = m.headers.find(kHeaderRequestId);
        if (it != m.headers.end() && it->second == f.request_id) {
          std::cerr << "tollgate: ignored a message claiming to be this result: " << v.message() << "\n";
        }
        continue;
      }
      if (!IsFinalStatus(result.value("status", ""))) {
        // Waiting for approvers: say so once, and keep waiting.
        if (pending.is_null()) std::cerr << "tollgate: " << PendingLine(result) << "\n";
        pending = std::move(result);
        continue;
      }
      std::cout << result.dump(2) << std::endl;
      return result.value("status", "") == "completed" ? 0 : 1;
    }
  }
  if (!pending.is_null()) {
    std::cout << pending.dump(2) << std::endl;
    std::cerr << "tollgate: " << f.request_id << " is still waiting for approval after " << f.timeout_s << " s\n";
    return 3;
  }
  std::cerr << "tollgate: no result for " << f.request_id << " within " << f.timeout_s << " s\n";
  return 3;
}

}  // namespace

Status AgentSignerFor(const std::string& data, const std::string& org, const std::string& agent,
                      const std::string& key_flag, JwtSigner* out) {
  const std::string key = key_flag.empty() ? DefaultAgentKeyPath(data, org, agent) : key_flag;
  if (key_flag.empty() && !std::filesystem::exists(key)) {
    Json reply;
    Status s = RegisterAgentKey({data, ""}, org, agent, key, &reply);
    if (!s.ok()) {
      return Status::Error(s.code(), "no key for agent '" + agent + "' of org '" + org +
                                         "' and none could be registered: " + s.message());
    }
    std::cerr << "registered a key for agent '" << agent << "' of org '" << org << "' (" << key << ")\n";
  }
  return LoadAgentSigner(key, out);
}

void AddSubmitCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SubmitFlags>();
  auto* cmd = app.add_subcommand("submit", "publish a tool request; --wait prints its result");
  cmd->add_option("--data", f->data, "where `up` wrote endpoints.json")->capture_default_str();
  cmd->add_option("--brokers", f->brokers, "Kafka bootstrap servers (instead of endpoints.json)");
  cmd->add_option("--topic-prefix", f->topic_prefix, "topic name prefix");
  cmd->add_option("--org", f->org, "org id")->capture_default_str();
  cmd->add_option("--agent", f->agent, "agent id")->required();
  cmd->add_option("--session", f->session, "session id")->required();
  cmd->add_option("--tool", f->tool, "tool, e.g. echo, http_request, cli:code-search")->required();
  cmd->add_option("--args", f->args, "arguments as a JSON object")->capture_default_str();
  cmd->add_option("--action", f->action, "optional action");
  cmd->add_option("--cost", f->cost, "estimated cost in USD");
  cmd->add_option("--request-id", f->request_id, "idempotency key (default: a random id)");
  cmd->add_option("--traceparent", f->traceparent,
                  "W3C traceparent to continue (00-<trace-id>-<parent-id>-<flags>); default: tollgate starts one");
  cmd->add_option("--key", f->key, "the agent's private key (default DATA/keys/ORG/AGENT.pem, registered if missing)");
  cmd->add_flag("--wait", f->wait, "wait for the result and print it (only one the gate signed counts)");
  cmd->add_option("--gate-key", f->gate_key,
                  "the gate's public key results are checked with (default: endpoints.json's; GET /v1/gate-key)");
  cmd->add_option("--timeout", f->timeout_s, "seconds to wait")->capture_default_str();
  cmd->callback([f, exit_code] { *exit_code = RunSubmit(*f); });
}

}  // namespace tollgate::cli
