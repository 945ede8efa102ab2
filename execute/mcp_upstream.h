// McpUpstreams: the upstream MCP servers of execute.mcp_servers
// (docs/mcp.md, "Upstream MCP servers"), kept connected so that a call to
// the tool "mcp:<server>/<tool>" is one JSON-RPC tools/call away.
// - Each server has a supervisor thread of its own. A stdio server is
//   started in the sandbox CLI tools run in (execute/sandbox.h: no shell,
//   scrubbed environment, rlimits, no network unless `network: true`, dies
//   with tollgate), connected, and its tools listed; when it exits, every
//   call waiting on it fails with E_UPSTREAM_UNAVAILABLE and it is started
//   again after a backoff (0.1 s doubling to 10 s, reset once it stayed up
//   30 s). A Streamable HTTP server is reached under http_request's SSRF
//   rules (execute/net_pin.h: only global addresses or allow_cidrs, the
//   resolved address pinned, no redirects, no proxy).
// - Either protocol era: each (re)connect probes with server/discover. A
//   server listing 2026-07-28 is spoken to in that revision (the _meta
//   envelope on every request, no initialize, no session); any other
//   answer means a legacy server, initialized as before
//   (mcp_upstream_internal.h has the rule). A 2026-07-28 result whose
//   resultType is not "complete" (input_required, task) is refused:
//   tollgate serves no requests from upstream servers.
// - What a server sends is untrusted input: parsed under the input limits
//   (ParseJson: 63 levels, 16 MiB). A refused answer is
//   E_UPSTREAM_PROTOCOL for its call; a stdio server whose stream it
//   desynchronises is restarted; a refused tools/list leaves the server
//   down, saying why (docs/mcp.md, "Hostile answers").
// - Requests the server sends us (sampling, roots, elicitation) are refused
//   with JSON-RPC -32601: an upstream server never reaches the agent or a
//   model through tollgate. notifications/tools/list_changed re-lists.
// - Configure() reconciles with the policy in force: new servers start,
//   removed ones stop, changed ones restart. Thread-safe throughout.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/canonical_json.h"
#include "execute/config.h"

namespace tollgate {

class McpUpstream;  // one server (mcp_upstream_internal.h)

class McpUpstreams {
 public:
  McpUpstreams();
  ~McpUpstreams();  // stops every server (its sandbox killed)
  McpUpstreams(const McpUpstreams&) = delete;
  McpUpstreams& operator=(const McpUpstreams&) = delete;

  void Configure(const ExecutePolicy& policy);
  bool Has(const std::string& server) const;
  // tools/call `tool` of `server` with `args`: a ToolResult. Success: data
  // {content, structuredContent?} as the server answered. Errors:
  // E_UPSTREAM_UNAVAILABLE (down, starting past the wait, unreachable),
  // E_UPSTREAM_TOOL_ERROR (isError, or a JSON-RPC error),
  // E_UPSTREAM_PROTOCOL (an answer the parser refuses, not an MCP result,
  // or a 2026-07-28 result that is not "complete"), E_TIMEOUT.
  Json Call(const std::string& server, const std::string& tool, const Json& args) const;
  // {"<server>": {"transport", "state": "starting|ready|down", "era"?,
  //  "error"?, "tools": [the server's tools/list entries]}}. "era" is
  // "2026-07-28" or the legacy revision the server's initialize named, once
  // the connection's era is known.
  Json Describe() const;
  // Until every server is ready or down (start-up, tests); false on timeout.
  bool WaitSettled(std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<McpUpstream>> servers_;
};

}  // namespace tollgate
