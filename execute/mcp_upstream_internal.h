// One upstream MCP server (internal to execute/mcp_upstream*.cpp): the
// JSON-RPC state both transports share, the protocol era rules both apply,
// and a factory per transport.
//
// Eras (docs/mcp.md, "Upstream MCP servers"). Every (re)connect first
// probes with server/discover carrying the 2026-07-28 envelope. A server
// that answers with a DiscoverResult listing 2026-07-28 (or -32022 whose
// data.supported lists it) is spoken to in that era: no initialize, no
// session, the envelope in every request's params._meta, and over HTTP the
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers. Any other answer
// means a legacy server: initialize, as before 2026-07-28. The probe is
// classified by McpProbeEra; what a transport does when no answer came
// (stdio: a timeout is legacy; HTTP: another 4xx is legacy, 401/403, 3xx,
// 5xx and no answer are down) is the transport's.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/canonical_json.h"
#include "core/status.h"
#include "execute/config.h"

namespace tollgate {

// The legacy revision tollgate asks for in initialize.
inline constexpr const char* kMcpClientVersion = "2025-06-18";
// The modern revision: probed for first, spoken when the server lists it.
inline constexpr const char* kMcpModernVersion = "2026-07-28";

class McpUpstream {
 public:
  virtual ~McpUpstream() = default;
  // One JSON-RPC request; *result is the response's `result`. Errors carry
  // E_UPSTREAM_UNAVAILABLE, E_UPSTREAM_TOOL_ERROR, E_UPSTREAM_PROTOCOL or
  // E_TIMEOUT.
  virtual Status Request(const std::string& method, const Json& params, int timeout_ms, Json* result) = 0;
  // Ends the supervisor (and the server); called once, before destruction.
  virtual void Stop() = 0;

  const McpServerSpec& spec() const { return spec_; }
  // {"transport", "state", "era"?, "error"?, "tools"} (McpUpstreams::Describe).
  Json StatusJson() const;
  bool Settled() const;
  // Waits up to `ms` while the server is starting; false (and *why) when
  // it is not ready then.
  bool WaitReady(int ms, std::string* why) const;

 protected:
  explicit McpUpstream(McpServerSpec spec) : spec_(std::move(spec)) {}
  enum class State { kStarting, kReady, kDown };
  void SetState(State s, const std::string& error = "");
  void SetTools(Json tools);
  // The era of this connection: kMcpModernVersion, the legacy revision the
  // server's initialize named, or "" while it is not known (a reconnect
  // clears it before probing).
  void SetEra(std::string era);
  bool Modern() const;
  // Sleeps the backoff unless stopped; doubles it. False when stopped.
  bool Backoff(std::chrono::steady_clock::time_point up_since);
  void StopSupervisor();

  const McpServerSpec spec_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  State state_ = State::kStarting;
  std::string error_;
  std::string era_;
  Json tools_ = Json::array();
  bool stop_ = false;
  std::chrono::milliseconds backoff_{100};
  std::thread supervisor_;
};

// A JSON-RPC response (or {"x-unavailable": why}, {"x-protocol": why}) to
// a Status with its result; both transports answer callers this way.
Status McpAnswer(const std::string& server, const std::string& method, const Json& msg, Json* result);

// Upstream bytes (a stdio line, an HTTP body, an SSE event's data) are
// untrusted input and parse as such (ParseJson, never nlohmann's own
// parse): at most kMaxUpstreamMessage bytes, nested at most
// kMaxUpstreamDepth, one level under the input limit because the agent's
// result carries the answer one level deeper ({result: {content}} becomes
// {result: {data: {content}}}) and results are read under the input
// limits. What it refuses never reaches our recursive walks (copies, dump,
// redaction, schema compilation).
inline constexpr size_t kMaxUpstreamMessage = 16 << 20;
inline constexpr int kMaxUpstreamDepth = kMaxInputJsonDepth - 1;
Status ParseUpstreamMessage(std::string_view bytes, Json* out);
// "upstream MCP server 'S' sent WHAT tollgate refuses (CODE: why)".
std::string McpRefusal(const std::string& server, const std::string& what, const Status& why);

// The `initialize` request's params.
Json McpInitializeParams();
// The revision a legacy server's initialize result names, when it is plain
// enough to go back in a header and into Describe(); else kMcpClientVersion.
std::string McpLegacyVersion(const Json& initialize_result);

// `params` with the 2026-07-28 envelope in its _meta (protocol revision,
// clientCapabilities {} -- tollgate serves nothing to upstream servers --
// and clientInfo). Keys the caller already put in _meta stay; params that
// are not an object become one.
Json McpWithEnvelope(const Json& params);
// The server/discover request's params: the envelope alone.
Json McpDiscoverParams();

enum class McpEra { kLegacy, kModern };
// What one JSON-RPC answer to server/discover says about the server (the
// official SDK client's rule in auto mode): kModern for a result whose
// supportedVersions lists 2026-07-28, or for the error -32022 whose
// data.supported lists it; anything else -- another error (-32601 from a
// v1 server, -32000 from a v1 HTTP server), a result of another shape, not
// a JSON-RPC message at all -- is a legacy server.
McpEra McpProbeEra(const Json& msg);

// A 2026-07-28 result, checked before it is used: `resultType` must be
// "complete". Anything else ("input_required" asks the client for input,
// "task" hands back a task) is E_UPSTREAM_PROTOCOL saying so: tollgate
// serves no requests from upstream servers and holds no tasks. A result
// without resultType is refused too (the revision requires it; the SDK
// client refuses it as well).
Status McpModernResult(const std::string& server, const std::string& method, const Json& result);

// A value for an MCP header (Mcp-Name): as it is when it is a plain field
// value (printable ASCII or tab, no leading or trailing whitespace, not
// itself of the encoded form), otherwise `=?base64?<base64 of its
// UTF-8>?=`, the Streamable HTTP encoding (which also keeps CR/LF out of a
// header).
std::string McpHeaderValue(std::string_view value);
// The headers of a 2026-07-28 request over HTTP: MCP-Protocol-Version,
// Mcp-Method, and Mcp-Name for the methods whose body it mirrors
// (tools/call and prompts/get: params.name; resources/read: params.uri).
std::vector<std::string> McpModernHeaders(const std::string& method, const Json& params);

std::shared_ptr<McpUpstream> StartStdioUpstream(McpServerSpec spec, const ExecutePolicy& policy);
std::shared_ptr<McpUpstream> StartHttpUpstream(McpServerSpec spec, const ExecutePolicy& policy);

}  // namespace tollgate
