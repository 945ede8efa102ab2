#include "deploy/mcp_gateway.h"

#include "audit/approvals.h"
#include "audit/log_sink.h"
#include "core/auth.h"
#include "core/event.h"
#include "core/withdraw.h"
#include "deploy/endpoints.h"
#include "deploy/gate_key.h"

namespace tollgate {

Status MakeMcpEndpoint(const BusConfig& bus, std::shared_ptr<const JwtSigner> signer, const LogStore& store,
                       const CredentialRegistry& credentials, ListToolsFn list_tools,
                       std::shared_ptr<mcp::HttpEndpoint>* out, const McpGatewayOptions& options) {
  if (!signer) return Status::Error("E_UNAVAILABLE", "no service key to sign the agents' calls with");
  std::shared_ptr<mcp::PipelineClient> pipeline;
  {
    std::unique_ptr<mcp::PipelineClient> p;
    Status s = mcp::PipelineClient::Open(
        bus, [&credentials] { return GateVerifiers(credentials); }, &p);
    if (!s.ok()) return s;
    pipeline = std::move(p);
  }
  mcp::Gateway gw;
  gw.pipeline = pipeline.get();
  auto view = std::make_shared<StoreLogView>(store);
  gw.keep_alive =
      std::make_shared<std::pair<std::shared_ptr<mcp::PipelineClient>, std::shared_ptr<StoreLogView>>>(
          pipeline, view);
  gw.list_tools = std::move(list_tools);
  // The token proved (org, agent); the service key vouches for it.
  gw.sign_request = [signer](const std::string& org, const std::string& agent, const std::string& rid,
                             const std::string& value) {
    return SignRequestOnBehalf(*signer, org, agent, rid, value, NowMicros() / 1'000'000);
  };
  const Topics topics = bus.topics;
  gw.withdraw = [signer, topics](const std::string& org, const std::string& agent, const std::string& rid,
                                 Message* m) {
    *m = WithdrawMessageOnBehalf(topics, *signer, org, agent, rid, "cancelled by the MCP client",
                                 NowMicros() / 1'000'000);
    return Status::Ok();
  };
  gw.events = [view](const std::string& org, const std::string& rid, std::vector<Event>* out) {
    return view->EventsOfRequest(org, rid, out);
  };
  gw.pending = [&store](const std::string& org, const std::string& agent, std::vector<PendingApproval>* out) {
    return ListPendingApprovals(store, {org, agent}, out);
  };
  gw.hold = options.hold;
  *out = std::make_shared<mcp::HttpEndpoint>(std::move(gw));
  return Status::Ok();
}

mcp::PipelineClient::BusSource EndpointsBusSource(std::string data_dir, std::string topic_prefix) {
  return [data_dir, topic_prefix](BusConfig* bus, std::string* incarnation) {
    Json before, after;
    Status s = ReadEndpoints(data_dir, &before);
    if (s.ok()) s = ClientBus(data_dir, "", topic_prefix, bus);
    if (s.ok()) s = ReadEndpoints(data_dir, &after);
    if (!s.ok()) return s;
    if (before != after) return Status::Error("E_UNAVAILABLE", "endpoints.json changed while read");
    *incarnation = after.value("pid", Json()).dump() + "@" + bus->brokers;
    return Status::Ok();
  };
}

}  // namespace tollgate
