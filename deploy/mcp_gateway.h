// The MCP gateway of a deployment's HTTP API (/mcp, docs/mcp.md): what
// `up` and the keeper (`stage audit`) give mcp::HttpEndpoint. A call is
// published as a tool request signed by the service key on behalf of the
// agent its token names (docs/trust.md); its progress is read from the log.
#pragma once

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

// `store` (the log, for progress messages) and `credentials` (the gate
// keys results are checked with) must outlive the endpoint.
Status MakeMcpEndpoint(const BusConfig& bus, std::shared_ptr<const JwtSigner> signer, const LogStore& store,
                       const CredentialRegistry& credentials, ListToolsFn list_tools,
                       std::shared_ptr<mcp::HttpEndpoint>* out);

}  // namespace tollgate
