// The MCP gateway of a deployment's HTTP API (/mcp, docs/mcp.md): what
// `up` and the keeper (`stage audit`) give mcp::HttpEndpoint. A call is
// published as a tool request signed by the service key on behalf of the
// agent its token names (docs/trust.md); its progress is read from the log.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "audit/log_store.h"
#include "core/credentials.h"
#include "core/jwt.h"
#include "mcp/http_endpoint.h"
#include "runtime/kafka_bus.h"

namespace tollgate {

using ListToolsFn = std::function<Status(const std::string& org, const std::string& agent, Json* out)>;

// How long an asked call holds a client without tasks (mcp::Gateway::hold).
struct McpGatewayOptions {
  std::chrono::seconds hold{45};
};

// `store` (the log: progress messages, tasks, pending approvals to attach
// to) and `credentials` (the gate keys results are checked with) must
// outlive the endpoint.
Status MakeMcpEndpoint(const BusConfig& bus, std::shared_ptr<const JwtSigner> signer, const LogStore& store,
                       const CredentialRegistry& credentials, ListToolsFn list_tools,
                       std::shared_ptr<mcp::HttpEndpoint>* out, const McpGatewayOptions& options = {});

// For the stdio gateway (`tollgate mcp`), a separate process that outlives
// restarts of `up`: where DATA/endpoints.json says the bus is now
// (ClientBus, with `topic_prefix` when given) and which incarnation wrote
// it (its pid and bootstrap), for mcp::PipelineClient::Follow. An error
// while there is no file, or it changed between two reads.
mcp::PipelineClient::BusSource EndpointsBusSource(std::string data_dir, std::string topic_prefix);

}  // namespace tollgate
