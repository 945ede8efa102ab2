// `tollgate submit`: publish one tool request, optionally wait for its
// result; or, with --chain, ADR-012's tool chain (RunChain).
// Exit code: 0 completed, 1 any other status (denied, failed, rejected,
// expired), 2 usage or connection error, 3 no final result within
// --timeout (still awaiting approval: the pending message is printed).
// --wait follows a restart of `up` (endpoints.json's instance changes): it
// reconnects and sends the request again under the same id, which runs
// once (docs/operations.md, "Restarts").
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "cli/admin_client.h"
#include "cli/commands.h"
#include "core/auth.h"
#include "core/messages.h"
#include "core/result_signature.h"
#include "core/trace.h"
#include "core/unproven.h"
#include "deploy/endpoints.h"

namespace tollgate::cli {
namespace {

struct SubmitFlags {
  std::string data = kDefaultDataDir, brokers, topic_prefix;
  std::string org = "default", agent, session, tool, args = "{}", action, request_id, key, traceparent,
              gate_key;
  double cost = -1;
  bool wait = false;
  int timeout_s = 30;
};

// "awaiting approval: 0 of 2 (alice, bob), deadline ..." from a pending message.
std::string PendingLine(const Json& pending) {
  const Json a = pending.value("approval", Json::object());
  std::string line = pending.value("request_id", "") + " awaits approval";
  if (a.contains("quorum"))
    line += ": " + std::to_string(a.value("approvals", 0)) + " of " + a["quorum"].dump();
  if (a.contains("approvers") && a["approvers"].is_array() && !a["approvers"].empty()) {
    line += " (approvers:";
    for (const Json& who : a["approvers"])
      line += " " + (who.is_string() ? who.get<std::string>() : who.dump());
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

// What one submit needs, opened once (a chain sends several requests); the
// bus part again after a restart of the gate.
struct Client {
  BusConfig bus;
  std::unique_ptr<Consumer> consumer;  // --wait only
  std::vector<Ed25519Verifier> gate;
  JwtSigner signer;
  std::unique_ptr<Producer> producer;
  // Who served the bus when it was opened (EndpointsServer), and whether
  // endpoints.json names the bus in use at all (with --brokers, only when
  // it serves that very address): else a restart is not watched for.
  std::string server;
  bool watch = false;
};

// The bus, its producer and, with --wait, the results consumer. Subscribes
// first, so the result cannot slip past between send and read; only a
// result the gate signed for this very request counts.
Status OpenBus(const SubmitFlags& f, Client* c) {
  BusConfig bus;
  Status s = ClientBus(f.data, f.brokers, f.topic_prefix, &bus);
  std::string at;
  const std::string server = EndpointsServer(f.data, &at);
  std::unique_ptr<Consumer> consumer;
  if (s.ok() && f.wait) {
    // Its org's topic, and where a refusal of a message nobody proved
    // (an unregistered key, say) is answered (docs/trust.md).
    std::vector<std::string> topics = {bus.topics.results_for(f.org)};
    if (bus.topics.results_for(kUnprovenOrg) != topics[0])
      topics.push_back(bus.topics.results_for(kUnprovenOrg));
    for (const std::string& t : topics) {
      if (s.ok()) s = EnsureTopic(bus, t, std::chrono::seconds(10));
    }
    // A restarted embedded broker starts its topics empty, behind the
    // offsets this reader holds: it then reads them from their start
    // instead of stopping on an offset loss (which would look for the
    // committed offsets a tail reader never has, up to 10 s).
    BusConfig tail = bus;
    tail.extra["auto.offset.reset"] = "earliest";
    if (s.ok()) s = Consumer::OpenTail(tail, topics, std::chrono::seconds(10), &consumer);
  }
  std::unique_ptr<Producer> producer;
  if (s.ok()) s = Producer::Open(bus, "", &producer);
  if (!s.ok()) return s;
  c->bus = std::move(bus);
  c->consumer = std::move(consumer);
  c->producer = std::move(producer);
  c->server = server;
  c->watch = !server.empty() && at == c->bus.brokers;
  return Status::Ok();
}

// 0, or the exit code after saying what failed.
int Open(const SubmitFlags& f, Client* c) {
  Status s = OpenBus(f, c);
  if (s.ok() && f.wait) s = ClientGateKeys(f.data, f.gate_key, &c->gate);
  // Signed as the agent (docs/trust.md).
  if (s.ok()) s = AgentSignerFor(f.data, f.org, f.agent, f.key, &c->signer);
  if (!s.ok()) {
    std::cerr << "tollgate: " << s.ToString() << "\n";
    return 2;
  }
  return 0;
}

// Signs and publishes the request (tool, args, f's other fields). Sent
// again after a restart, it is the same request (same id, same content):
// ingest runs it at most once and answers a finished one with its recorded
// result. Returns the id its refusal would carry were the signature not to
// hold (core/unproven.h).
Status Publish(const SubmitFlags& f, Client& c, const std::string& request_id, const std::string& tool,
               const Json& args, std::string* refusal_id) {
  Json req{{"request_id", request_id}, {"org_id", f.org}, {"agent_id", f.agent},
           {"session_id", f.session},  {"tool", tool},    {"args", args}};
  if (!f.action.empty()) req["action"] = f.action;
  if (f.cost >= 0) req["estimated_cost_usd"] = f.cost;
  Message m = MessageFor(c.bus.topics.requests(), req, req);
  m.headers[kHeaderAuth] =
      SignRequest(c.signer, f.org, f.agent, request_id, m.value, NowMicros() / 1'000'000);
  if (!f.traceparent.empty()) m.headers[kHeaderTraceparent] = f.traceparent;
  *refusal_id = UnprovenRequestId(m);
  Status s = c.producer->Send(m);
  if (s.ok()) s = c.producer->Flush(std::chrono::seconds(f.timeout_s));
  return s;
}

// Has the gate restarted (endpoints.json names another server for the bus
// in use)? Then the embedded broker restarted empty: reopens the bus and
// sends the request again (Publish). Checked about once a second. False
// when nothing changed or reopening failed (tried again at the next check).
bool FollowRestart(const SubmitFlags& f, Client& c, const std::string& request_id, const std::string& tool,
                   const Json& args, std::vector<std::string>* refusal_ids) {
  std::string at;
  const std::string now = EndpointsServer(f.data, &at);
  if (!c.watch || now.empty() || now == c.server || (!f.brokers.empty() && at != f.brokers)) return false;
  const std::string before = c.server;
  Status s = OpenBus(f, &c);
  std::string refusal_id;
  if (s.ok()) s = Publish(f, c, request_id, tool, args, &refusal_id);
  if (!s.ok()) {
    c.server = before;  // so the next check tries again
    std::cerr << "tollgate: the gate restarted; reconnecting failed (trying again): " << s.ToString() << "\n";
    return false;
  }
  refusal_ids->push_back(refusal_id);
  std::cerr << "tollgate: the gate restarted (" << f.data << "/endpoints.json): reconnected to "
            << c.bus.brokers << " and sent " << request_id << " again (the same request: it runs once)\n";
  return true;
}

// With --wait: reads the request's result into *out. The exit code as
// documented at the top.
int AwaitResult(const SubmitFlags& f, Client& c, const std::string& request_id, const std::string& tool,
                const Json& args, std::vector<std::string> refusal_ids, Json* out) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(f.timeout_s);
  auto next_check = start + std::chrono::seconds(1);
  std::vector<Message> batch;
  Json pending;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      FollowRestart(f, c, request_id, tool, args, &refusal_ids);
    }
    batch.clear();
    c.consumer->Poll(100, std::chrono::milliseconds(200), &batch);
    for (const auto& m : batch) {
      Json result;
      Status v = VerifyResult(m, c.gate, {f.org, f.agent, request_id}, &result);
      for (size_t i = 0; !v.ok() && i < refusal_ids.size(); ++i) {
        if (VerifyResult(m, c.gate, {kUnprovenOrg, "", refusal_ids[i]}, &result).ok()) {
          std::cerr << "tollgate: the request was refused as unproven (filed under org " << kUnprovenOrg
                    << " as " << refusal_ids[i] << ")\n";
          *out = std::move(result);
          return 1;
        }
      }
      if (!v.ok()) {
        // Someone else's result, or a forgery: say so only when it claims ours.
        auto it = m.headers.find(kHeaderRequestId);
        if (it != m.headers.end() && it->second == request_id) {
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
      const bool completed = result.value("status", "") == "completed";
      *out = std::move(result);
      return completed ? 0 : 1;
    }
  }
  if (!pending.is_null()) {
    *out = std::move(pending);
    std::cerr << "tollgate: " << request_id << " is still waiting for approval after " << f.timeout_s
              << " s\n";
    return 3;
  }
  std::cerr << "tollgate: no result for " << request_id << " within " << f.timeout_s << " s\n";
  return 3;
}

// Sends one request and, with --wait, reads its result into *out. The exit
// code as documented at the top.
int SubmitOne(const SubmitFlags& f, Client& c, const std::string& request_id, const std::string& tool,
              const Json& args, Json* out) {
  // Ingest drops a malformed traceparent (agents' headers are not
  // trusted); a person typing it is told.
  if (!f.traceparent.empty() && !IsValidTraceparent(f.traceparent)) {
    std::cerr << "tollgate: --traceparent is not a W3C version-00 traceparent; tollgate will start its own "
                 "trace\n";
  }
  std::string refusal_id;
  Status s = Publish(f, c, request_id, tool, args, &refusal_id);
  if (!s.ok()) {
    std::cerr << "tollgate: cannot publish: " << s.ToString() << "\n";
    return 2;
  }
  if (!f.wait) {
    *out = Json{{"request_id", request_id}, {"status", "submitted"}};
    return 0;
  }
  return AwaitResult(f, c, request_id, tool, args, {refusal_id}, out);
}

int RunSubmit(SubmitFlags& f) {
  Json args;
  if (!ParseJson(f.args, &args).ok() || !args.is_object()) {
    std::cerr << "tollgate: --args must be a JSON object\n";
    return 2;
  }
  if (f.request_id.empty()) f.request_id = RandomId();
  Client c;
  if (int rc = Open(f, &c); rc != 0) return rc;
  Json out;
  const int rc = SubmitOne(f, c, f.request_id, f.tool, args, &out);
  if (!out.is_null()) std::cout << (f.wait ? out.dump(2) : out.dump()) << std::endl;
  return rc;
}

// ADR-012's execute_tool_chain: the steps of FILE ([{tool_name, params}],
// or {executions: [...], stop_on_error}) one after another, each its own
// request (decided, approved, logged like any), each waited for; the
// results as one JSON array. With stop_on_error (the default) the chain
// ends at the first step that does not complete; the exit code is that of
// the last step sent.
int RunChain(SubmitFlags& f, const std::string& file, bool stop_on_error) {
  Json chain;
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (!in || !ParseJson(text, &chain).ok()) {
    std::cerr << "tollgate: --chain " << file << " is not a JSON file\n";
    return 2;
  }
  if (chain.is_object()) {
    stop_on_error = chain.value("stop_on_error", stop_on_error);
    chain = chain.value("executions", Json());
  }
  if (!chain.is_array() || chain.empty() || chain.size() > 100) {
    std::cerr << "tollgate: a chain is a list of 1 to 100 {tool_name, params}\n";
    return 2;
  }
  for (const Json& step : chain) {
    if (!step.is_object() || !step.contains("tool_name") || !step["tool_name"].is_string() ||
        !step.value("params", Json::object()).is_object()) {
      std::cerr << "tollgate: each step of a chain is {tool_name: string, params: object}\n";
      return 2;
    }
  }
  f.wait = true;
  Client c;
  if (int rc = Open(f, &c); rc != 0) return rc;
  const std::string base = f.request_id.empty() ? RandomId() : f.request_id;
  Json results = Json::array();
  int rc = 0;
  for (size_t i = 0; i < chain.size(); ++i) {
    Json out;
    rc = SubmitOne(f, c, base + "-" + std::to_string(i + 1), chain[i]["tool_name"],
                   chain[i].value("params", Json::object()), &out);
    results.push_back(out.is_null()
                          ? Json{{"request_id", base + "-" + std::to_string(i + 1)}, {"status", "unknown"}}
                          : out);
    if (rc != 0 && stop_on_error) break;
  }
  std::cout << results.dump(2) << std::endl;
  return rc;
}

}  // namespace

Status AgentSignerFor(const std::string& data, const std::string& org, const std::string& agent,
                      const std::string& key_flag, JwtSigner* out) {
  const std::string key = key_flag.empty() ? DefaultAgentKeyPath(data, org, agent) : key_flag;
  if (key_flag.empty() && !std::filesystem::exists(key)) {
    bool registered = false;
    Status s = EnsureAgentKey(data, org, agent, key, &registered);
    if (!s.ok()) {
      return Status::Error(s.code(), "no key for agent '" + agent + "' of org '" + org +
                                         "' and none could be registered: " + s.message());
    }
    if (registered) {
      std::cerr << "registered a key for agent '" << agent << "' of org '" << org << "' (" << key << ")\n";
    }
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
  auto* tool = cmd->add_option("--tool", f->tool, "tool, e.g. echo, http_request, cli:code-search");
  auto chain = std::make_shared<std::string>();
  auto keep_going = std::make_shared<bool>(false);
  auto* chain_opt = cmd->add_option(
      "--chain", *chain,
      "a tool chain (ADR-012): a JSON file of [{tool_name, params}] run in order, each waited for");
  chain_opt->excludes(tool);
  cmd->add_flag("--continue-on-error", *keep_going, "with --chain: run every step even after one fails");
  cmd->add_option("--args", f->args, "arguments as a JSON object")->capture_default_str();
  cmd->add_option("--action", f->action, "optional action");
  cmd->add_option("--cost", f->cost, "estimated cost in USD");
  cmd->add_option("--request-id", f->request_id, "idempotency key (default: a random id)");
  cmd->add_option(
      "--traceparent", f->traceparent,
      "W3C traceparent to continue (00-<trace-id>-<parent-id>-<flags>); default: tollgate starts one");
  cmd->add_option("--key", f->key,
                  "the agent's private key (default DATA/keys/ORG/AGENT.pem, registered if missing)");
  cmd->add_flag("--wait", f->wait, "wait for the result and print it (only one the gate signed counts)");
  cmd->add_option(
      "--gate-key", f->gate_key,
      "the gate's public key results are checked with (default: endpoints.json's; GET /v1/gate-key)");
  cmd->add_option("--timeout", f->timeout_s, "seconds to wait")->capture_default_str();
  cmd->callback([f, exit_code, chain, keep_going] {
    if (!chain->empty()) {
      *exit_code = RunChain(*f, *chain, !*keep_going);
    } else if (f->tool.empty()) {
      std::cerr << "tollgate: submit needs --tool (or --chain FILE)\n";
      *exit_code = 2;
    } else {
      *exit_code = RunSubmit(*f);
    }
  });
}

}  // namespace tollgate::cli
