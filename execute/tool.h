// A tool: one small unit the execute stage can run (Envoy-filter style: each
// tool is its own file with its own config and tests, and registry.cpp
// registers them all in one place).
//
// Contract of Run(): never throws; always returns a ToolResult
// (core/messages.h: {success, data, error{code,message,recoverable}, meta})
// with one of the stable codes below (docs/errors.md); meta.duration_ms is
// filled in by the stage. Run() may be called concurrently from several
// worker threads, so a Tool must be thread-safe (the built-ins are stateless
// apart from their immutable config).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/audit_reader.h"
#include "core/http_alias.h"
#include "core/messages.h"
#include "core/tool_catalog.h"
#include "execute/config.h"

namespace tollgate {

class ToolRegistry;

// Stable tool error codes (docs/errors.md). The pipeline's own codes
// (E_TOOL_EXEC, E_OUTCOME_UNKNOWN) are in core/messages.h.
namespace errc {
inline constexpr const char* kFileNotFound = "E_FILE_NOT_FOUND";
inline constexpr const char* kPathForbidden = "E_PATH_FORBIDDEN";
inline constexpr const char* kTooLarge = "E_TOO_LARGE";
inline constexpr const char* kUrlForbidden = "E_URL_FORBIDDEN";
// A redirect to another origin that would re-send the method and body (http_request).
inline constexpr const char* kCrossOriginRedirect = "E_CROSS_ORIGIN_REDIRECT";
// The seed's names; the old E_METHOD_NOT_ALLOWED and E_HTTP are their
// error.alias (core/messages.h ErrorAlias).
inline constexpr const char* kMethodNotAllowed = "E_HTTP_METHOD";
inline constexpr const char* kHttpTimeout = "E_HTTP_TIMEOUT";
inline constexpr const char* kHttpStatus = "E_HTTP_STATUS";
inline constexpr const char* kHttp = "E_HTTP_ERROR";
inline constexpr const char* kCmdNotAllowed = "E_CMD_NOT_ALLOWED";
inline constexpr const char* kTimeout = "E_TIMEOUT";
inline constexpr const char* kSandbox = "E_SANDBOX_UNAVAILABLE";
inline constexpr const char* kUpstreamUnavailable = "E_UPSTREAM_UNAVAILABLE";
inline constexpr const char* kUpstreamToolError = "E_UPSTREAM_TOOL_ERROR";
// An upstream MCP server sent what the bounded parser refuses (too deep,
// too large, malformed) or no JSON-RPC answer: docs/mcp.md.
inline constexpr const char* kUpstreamProtocol = "E_UPSTREAM_PROTOCOL";
}  // namespace errc

// What a tool may know about the call. Scope (org, agent, session) comes
// from the request envelope, never from args.
struct ToolContext {
  std::string org_id;
  std::string agent_id;
  std::string session_id;
  std::string request_id;
  int64_t now_us = 0;
  const ExecutePolicy* policy = nullptr;  // never null in Run()
  Json decision;                          // the decision.made data
  AuditReader* audit = nullptr;           // null: get_audit_log unavailable
  // http_request run for an alias (core/http_alias.h): its method is
  // allowed and its headers are added; null otherwise.
  const HttpAlias* alias = nullptr;
  // The executor's registry (reload_tools reads the agent's tool set); null
  // outside the execute stage.
  const ToolRegistry* registry = nullptr;
};

class Tool {
 public:
  virtual ~Tool() = default;
  // e.g. "read_file", "cli:code-search".
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  // Whether running this call again has no side effect. Decides how a call
  // ends after a crash between execution.started and execution.completed
  // (never run again): read-only E_EXECUTION_INTERRUPTED, mutating
  // E_OUTCOME_UNKNOWN.
  virtual bool ReadOnly(const Json& args, const Json& decision) const = 0;
  virtual Json Run(const Json& args, const ToolContext& ctx) const = 0;
};

// A built-in tool: its name, description and read-only answer are its row
// in the tool catalog (core/tool_catalog.h), which decide reads too. A tool
// whose answer depends on the call (Reads::kByMethod) overrides ReadOnly.
class BuiltinTool : public Tool {
 public:
  // Aborts when `name` has no row: a programming error, caught by the first
  // test that registers the tool.
  explicit BuiltinTool(std::string_view name);
  std::string name() const override { return std::string(facts_.name); }
  std::string description() const override { return std::string(facts_.description); }
  // kByAction tools: decide's answer for this call (decision.read_only).
  bool ReadOnly(const Json& args, const Json& decision) const override;

 private:
  const ToolFacts& facts_;
};

// Shorthands for tool code.
inline Json ToolFail(const std::string& code, const std::string& message, bool recoverable = false) {
  return ToolResultError(code, message, recoverable);
}
inline Json ToolOk(Json data) { return ToolResultOk(std::move(data), 0); }

// args[key] as a string, or "" with *ok = false when present but not a string.
bool StringArg(const Json& args, const std::string& key, std::string* out, bool required = true);

}  // namespace tollgate
