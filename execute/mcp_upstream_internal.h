// One upstream MCP server (internal to execute/mcp_upstream*.cpp): the
// JSON-RPC state both transports share, and a factory per transport.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "core/canonical_json.h"
#include "core/status.h"
#include "execute/config.h"

namespace tollgate {

inline constexpr const char* kMcpClientVersion = "2025-06-18";

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
  // Sleeps the backoff unless stopped; doubles it. False when stopped.
  bool Backoff(std::chrono::steady_clock::time_point up_since);
  void StopSupervisor();

  const McpServerSpec spec_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  State state_ = State::kStarting;
  std::string error_;
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

std::shared_ptr<McpUpstream> StartStdioUpstream(McpServerSpec spec, const ExecutePolicy& policy);
std::shared_ptr<McpUpstream> StartHttpUpstream(McpServerSpec spec, const ExecutePolicy& policy);

}  // namespace tollgate
