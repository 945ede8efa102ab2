// `tollgate mcp`: the MCP gateway over stdio, for clients that spawn their
// servers (docs/mcp.md). One session per process: the agent is the one
// whose key signs (--key, else the data dir's), its calls go straight to
// Kafka as signed tool requests, and its tool list comes from the running
// deployment's API (GET /v1/tools) with the CLI's token.
#include <unistd.h>

#include <iostream>
#include <random>

#include "cli/admin_client.h"
#include "cli/commands.h"
#include "core/auth.h"
#include "core/event.h"
#include "core/withdraw.h"
#include "deploy/endpoints.h"
#include "deploy/mcp_gateway.h"
#include "mcp/stdio_server.h"

namespace tollgate::cli {
namespace {

struct McpFlags {
  std::string data = kDefaultDataDir, brokers, topic_prefix, token_file;
  std::string org = "default", agent, session, key, gate_key;
  int max_wait_s = 3600;
  int hold_s = 45;
  int watch_ms = 2000;
};

std::string RandomSession() {
  std::random_device rd;
  char buf[48];
  std::snprintf(buf, sizeof buf, "mcp-%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

// The events of a request, as the audit API returns them.
Status RequestEvents(const std::string& url, const std::string& token, const std::string& org,
                     const std::string& rid, std::vector<Event>* out) {
  out->clear();
  if (url.empty() || token.empty())
    return Status::Error("E_UNAVAILABLE", "no tollgate API to read the log from");
  int status = 0;
  Json reply;
  Status s = ApiCall(url, token, "GET",
                     "/v1/audit?org=" + EncodeQueryParam(org) + "&request=" + EncodeQueryParam(rid), "",
                     &status, &reply);
  if (!s.ok()) return s;
  for (const Json& j : reply.value("events", Json::array())) {
    Event e;
    if (!(s = EventFromJson(j, &e)).ok()) return s;
    out->push_back(std::move(e));
  }
  return Status::Ok();
}

// The pending approvals of an agent, as the approvals API returns them
// (what attaching a re-issued call needs: id, tool, args_hash).
Status AgentPending(const std::string& url, const std::string& token, const std::string& org,
                    const std::string& agent, std::vector<PendingApproval>* out) {
  out->clear();
  if (url.empty() || token.empty()) return Status::Error("E_UNAVAILABLE", "no tollgate API");
  int status = 0;
  Json reply;
  Status s = ApiCall(
      url, token, "GET",
      "/v1/approvals?org=" + EncodeQueryParam(org) + "&agent=" + EncodeQueryParam(agent) + "&limit=200", "",
      &status, &reply);
  if (!s.ok()) return s;
  for (const Json& j : reply.value("approvals", Json::array())) {
    PendingApproval p;
    p.request_id = j.value("request_id", "");
    p.agent_id = j.value("agent_id", "");
    p.tool = j.value("tool", "");
    p.args_hash = j.value("args_hash", "");
    out->push_back(std::move(p));
  }
  return Status::Ok();
}

int RunMcp(McpFlags& f) {
  BusConfig bus;
  if (Status s = ClientBus(f.data, f.brokers, f.topic_prefix, &bus); !s.ok()) {
    std::cerr << "tollgate mcp: " << s.ToString() << "\n";
    return 2;
  }
  auto signer = std::make_shared<JwtSigner>();
  if (Status s = AgentSignerFor(f.data, f.org, f.agent, f.key, signer.get()); !s.ok()) {
    std::cerr << "tollgate mcp: " << s.ToString() << "\n";
    return 2;
  }
  std::vector<Ed25519Verifier> gate;
  if (Status s = ClientGateKeys(f.data, f.gate_key, &gate); !s.ok()) {
    std::cerr << "tollgate mcp: " << s.ToString() << "\n";
    return 2;
  }
  std::unique_ptr<mcp::PipelineClient> pipeline;
  if (Status s = mcp::PipelineClient::Open(
          bus, [gate] { return gate; }, &pipeline);
      !s.ok()) {
    std::cerr << "tollgate mcp: cannot reach the bus: " << s.ToString() << "\n";
    return 2;
  }
  // `up` restarted (a new broker, maybe on new ports): reconnect where
  // endpoints.json says, so calls waiting still get their results.
  if (f.brokers.empty()) pipeline->Follow(EndpointsBusSource(f.data, f.topic_prefix));
  // The tool list (and progress details) come from the deployment's API.
  std::string token;
  const std::string url = LiveApiUrl(f.data);
  if (Status s = ResolveToken({f.data, f.token_file}, &token); !s.ok() || url.empty()) {
    std::cerr << "tollgate mcp: no tool list: "
              << (url.empty() ? "no running API in " + f.data : s.ToString())
              << " (tools/list will fail; calls still go through)\n";
  }
  mcp::Gateway gw;
  gw.pipeline = pipeline.get();
  gw.max_wait = std::chrono::seconds(f.max_wait_s);
  gw.hold = std::chrono::seconds(f.hold_s);
  gw.list_tools = [url, token](const std::string& org, const std::string& agent, Json* out) {
    if (url.empty() || token.empty())
      return Status::Error("E_UNAVAILABLE", "no tollgate API to list tools from");
    int status = 0;
    return ApiCall(url, token, "GET",
                   "/v1/tools?org=" + EncodeQueryParam(org) + "&agent=" + EncodeQueryParam(agent), "",
                   &status, out);
  };
  gw.sign_request = [signer](const std::string& org, const std::string& agent, const std::string& rid,
                             const std::string& value) {
    return SignRequest(*signer, org, agent, rid, value, NowMicros() / 1'000'000);
  };
  const Topics topics = bus.topics;
  gw.withdraw = [signer, topics](const std::string& org, const std::string& agent, const std::string& rid,
                                 Message* m) {
    *m = WithdrawMessage(topics, *signer, org, agent, rid, "cancelled by the MCP client",
                         NowMicros() / 1'000'000);
    return Status::Ok();
  };
  gw.events = [url, token](const std::string& org, const std::string& rid, std::vector<Event>* out) {
    return RequestEvents(url, token, org, rid, out);
  };
  gw.pending = [url, token](const std::string& org, const std::string& agent,
                            std::vector<PendingApproval>* out) {
    return AgentPending(url, token, org, agent, out);
  };
  const std::string mcp_session = RandomSession();
  mcp::Session session(gw, {f.org, f.agent, f.session.empty() ? mcp_session : f.session}, mcp_session);
  std::cerr << "tollgate mcp: serving agent '" << f.agent << "' of org '" << f.org << "' on stdio (session "
            << session.who().session << ")\n";
  return mcp::ServeStdio(session, STDIN_FILENO, STDOUT_FILENO, std::chrono::milliseconds(f.watch_ms));
}

}  // namespace

void AddMcpCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<McpFlags>();
  auto* cmd = app.add_subcommand(
      "mcp", "serve one agent as an MCP server over stdio (its calls go through the gate)");
  cmd->add_option("--data", f->data, "where `up` wrote endpoints.json")->capture_default_str();
  cmd->add_option("--brokers", f->brokers, "Kafka bootstrap servers (instead of endpoints.json)");
  cmd->add_option("--topic-prefix", f->topic_prefix, "topic name prefix");
  cmd->add_option("--org", f->org, "the agent's org")->capture_default_str();
  cmd->add_option("--agent", f->agent, "the agent (its key signs every call)")->required();
  cmd->add_option("--session", f->session,
                  "tollgate session id of every call (default: the MCP session's id)");
  cmd->add_option("--key", f->key,
                  "the agent's private key (default DATA/keys/ORG/AGENT.pem, registered if missing)");
  cmd->add_option("--token-file", f->token_file,
                  "API token for the tool list (default $TOLLGATE_TOKEN, DATA/admin.token)");
  cmd->add_option(
      "--gate-key", f->gate_key,
      "the gate's public key results are checked with (default: endpoints.json's; GET /v1/gate-key)");
  cmd->add_option("--max-wait", f->max_wait_s, "seconds a call waits for its result at most")
      ->capture_default_str();
  cmd->add_option("--hold", f->hold_s,
                  "seconds an asked call holds a client without tasks before answering E_PENDING_APPROVAL")
      ->capture_default_str();
  cmd->add_option("--watch-ms", f->watch_ms, "how often the tool list is checked for changes")
      ->capture_default_str();
  cmd->callback([f, exit_code] { *exit_code = RunMcp(*f); });
}

}  // namespace tollgate::cli
