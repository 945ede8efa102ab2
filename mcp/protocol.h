// The Model Context Protocol as tollgate's gateway speaks it (docs/mcp.md):
// JSON-RPC 2.0 shapes, version negotiation, and the mapping from a tollgate
// result (schemas/result.schema.json) to an MCP CallToolResult. Pure
// functions, no I/O: both transports (stdio, Streamable HTTP) use them.
#pragma once

#include <string>
#include <vector>

#include "core/canonical_json.h"

namespace tollgate::mcp {

// JSON-RPC 2.0 error codes (the spec's; MCP uses the same).
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

// The protocol revisions this server speaks, newest first.
const std::vector<std::string>& SupportedVersions();
// The client's version when supported, else our newest (the client then
// decides whether to go on, as the spec's lifecycle says).
std::string NegotiateVersion(const std::string& requested);

// Messages. `id` is the request's id (a string or an integer; null when it
// could not be read).
Json Result(const Json& id, Json result);
Json Error(const Json& id, int code, const std::string& message, Json data = nullptr);
Json Notification(const std::string& method, Json params);

// One parsed incoming message.
struct Incoming {
  enum class Kind { kRequest, kNotification, kResponse, kInvalid } kind = Kind::kInvalid;
  Json id;             // requests and responses
  std::string method;  // requests and notifications
  Json params = Json::object();
  // kInvalid: the error to answer (with id when one could be read).
  int error_code = 0;
  std::string error_message;
};
// Classifies `text` (one JSON-RPC message, untrusted: parsed under the input
// limits; batches are refused, as the 2025-06-18 revision removed them).
Incoming Parse(const std::string& text);

// The request_id a tools/call becomes: derived from the MCP session (the
// transport's own, random per connection) and the JSON-RPC id, keyed with
// a random secret of the process (nobody else can predict it), so a call
// resent within its session is the same request and is never run twice,
// while a new session's id 1 is a new request.
std::string RequestIdFor(const std::string& mcp_session, const Json& jsonrpc_id);

// A tollgate result message as an MCP CallToolResult:
//   completed  content: the tool's data as text (an upstream MCP tool's own
//              content as it gave it), structuredContent: the data
//   otherwise  isError: true, content: "CODE: message", structuredContent:
//              {status, error {code, message}, decision}
// _meta["io.tollgate/request_id"], ["io.tollgate/status"] link the call to
// the log.
Json CallToolResultOf(const Json& tollgate_result);

// A call that ended at the gateway without a tollgate result (no result
// within the wait, pipeline unreachable): isError with `code`.
Json GatewayErrorResult(const std::string& request_id, const std::string& code, const std::string& message);

// Where a request stands, for a progress message, from its events so far
// (objects with "type" and "data", in log order): "received", "decided",
// "awaiting approval: 0 of 1 approvals, expires at ...", "executing".
std::string DescribeProgress(const Json& events);

}  // namespace tollgate::mcp
