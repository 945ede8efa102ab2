// The Model Context Protocol as tollgate's gateway speaks it (docs/mcp.md):
// JSON-RPC 2.0 shapes, version negotiation, and the mapping from a tollgate
// result (schemas/result.schema.json) to an MCP CallToolResult. Pure
// functions, no I/O: both transports (stdio, Streamable HTTP) use them.
#pragma once

#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "core/request_state.h"

namespace tollgate::mcp {

// JSON-RPC 2.0 error codes (the spec's; MCP uses the same).
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
// The 2026-07-28 revision's own.
inline constexpr int kHeaderMismatch = -32020;
inline constexpr int kMissingCapability = -32021;
inline constexpr int kUnsupportedVersion = -32022;

// The 2026-07-28 revision ("modern"): no initialize, no session; every
// request names its version and the client's capabilities in params._meta.
inline constexpr const char* kModernVersion = "2026-07-28";
inline constexpr const char* kMetaVersion = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* kMetaCapabilities = "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* kMetaClientInfo = "io.modelcontextprotocol/clientInfo";
inline constexpr const char* kMetaServerInfo = "io.modelcontextprotocol/serverInfo";
inline constexpr const char* kTasksExtension = "io.modelcontextprotocol/tasks";
// The tollgate session a modern call belongs to, when the client names one.
inline constexpr const char* kMetaSession = "io.tollgate/session";

// The legacy revisions this server speaks (initialize), newest first.
const std::vector<std::string>& SupportedVersions();
// The modern revisions (server/discover's supportedVersions).
const std::vector<std::string>& ModernVersions();
bool IsModernVersion(const std::string& v);
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

// One request's era, read from its params._meta. A request is modern when
// it names a protocol version there (the spec's rule); its envelope must
// then name a modern version (else kUnsupportedVersion, data {supported,
// requested}) and carry clientCapabilities as an object (else
// kInvalidParams, data {envelope {key, problem}}).
struct Envelope {
  bool modern = false;
  std::string version;
  bool tasks = false;  // the client declared the Tasks extension
  std::string client_name;
  int error_code = 0;  // when refused: the error to answer
  std::string error_message;
  Json error_data;
};
Envelope ReadEnvelope(const Json& params);

// -32021 for a tasks/* request whose client did not declare the Tasks
// extension, naming it in data.requiredCapabilities.
Json MissingTasksError(const Json& id);

// A modern result: resultType "complete" and the server's info in _meta.
Json Complete(Json result);
// The answer to server/discover.
Json DiscoverResult(const std::string& instructions);
// A value of the Mcp-Name / Mcp-Method headers: as sent, or the
// "=?base64?...?=" form decoded; "" when that form is malformed.
std::string DecodeHeaderValue(const std::string& v);

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

// Where a request stands, for a progress message and a task's status,
// from its log (Summarize): "received", "decided", "awaiting approval: 0
// of 2 approvals, expires at ..." (distinct grants of approvers_needed),
// "executing"; "" without a request.received.
std::string DescribeProgress(const RequestState& state);

// A call still awaiting approval when its client's hold ended: isError with
// E_PENDING_APPROVAL, the request id, where it stands and when to ask again
// (the identical call then attaches to the same request).
Json PendingApprovalResult(const std::string& request_id, const std::string& where, int retry_after_s);

}  // namespace tollgate::mcp
