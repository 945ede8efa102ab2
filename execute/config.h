// ExecutePolicy: the parts of the policy file execute owns (docs/policy.md):
// the `execute:` section and, per agent, `orgs.<org>.agents.<agent_id>.http_request`.
// Absent file or section: the safe defaults below (docs/tools.md lists every
// key). Immutable once loaded; shared read-only between worker threads.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/canonical_json.h"
#include "core/status.h"
#include "execute/net_guard.h"

namespace tollgate {

struct SandboxLimits {
  int timeout_ms = 10000;              // wall clock; then the process group is killed
  int cpu_seconds = 10;                // RLIMIT_CPU
  size_t memory_mb = 512;              // RLIMIT_AS; 0 = none (MCP servers' default)
  size_t file_size_mb = 16;            // RLIMIT_FSIZE
  int open_files = 64;                 // RLIMIT_NOFILE
  int processes = 64;                  // RLIMIT_NPROC (per real uid: see run_as)
  size_t max_output_bytes = 64 << 10;  // per stream; the rest is dropped (truncated: true)
  bool operator==(const SandboxLimits&) const = default;
};

// One upstream MCP server (execute.mcp_servers.<name>, docs/mcp.md): its
// tools are the tools "mcp:<name>/<tool>". Either a program spoken to over
// stdio, run as CLI tools are (sandboxed, no shell, scrubbed env, rlimits),
// or a Streamable HTTP URL under http_request's SSRF rules.
struct McpServerSpec {
  std::string name;                                          // [a-z0-9_-]+
  std::vector<std::string> command;                          // stdio: argv; [0] looked up in kSafePath
  std::vector<std::pair<std::string, std::string>> env;      // values may hold ${env:NAME}
  std::vector<std::string> read_only;                        // host paths it may read (absolute)
  bool network = false;                                      // stdio: the host's network in its sandbox
  std::string url;                                           // http: the MCP endpoint
  std::vector<std::pair<std::string, std::string>> headers;  // values may hold ${env:NAME}
  int call_timeout_ms = 30000;                               // one tools/call
  SandboxLimits limits;                                      // stdio; timeout_ms unused (it keeps running)
  bool operator==(const McpServerSpec&) const = default;
};

struct ExecutePolicy {
  std::string workspace_root;  // each agent gets <root>/<org_id>/<agent_id>
  bool writes_enabled = true;  // write_file / delete_file
  size_t max_read_bytes = 1 << 20;
  size_t max_write_bytes = 1 << 20;
  size_t max_list_entries = 1000;
  size_t max_search_results = 200;
  int max_search_depth = 16;

  // execute_command: names (looked up in /usr/local/bin:/usr/bin:/bin) or
  // absolute paths. The blocklist wins over the allowlist.
  std::vector<std::string> command_allowlist;
  std::vector<std::string> interpreter_blocklist;
  // execute_command's role admin (docs/tools.md): never the agent's own
  // word. Only the agents listed here ("ORG/AGENT") may take it, and they
  // may then run admin_allowlist's programs besides the allowlist (the
  // blocklist still wins). commands.admin_agents / commands.admin_allow.
  std::vector<std::string> admin_agents;
  std::vector<std::string> admin_allowlist;
  SandboxLimits limits;
  // As root, children run under this user (RLIMIT_NPROC counts per real
  // uid, and root ignores it); "" keeps the current user.
  std::string run_as = "nobody";

  std::vector<Cidr> allow_cidrs;  // execute.network.allow_cidrs
  int max_redirects = 5;

  std::string tools_dir;  // CLI tools: <tools_dir>/<name>/run (Duragent's workspace tools)
  // Duragent's layout (docs/tools.md, "Tool declarations"): each agent's
  // own tools at <agents_dir>/<agent_id>/tools/<name>/run, and the tools
  // its agent.yaml declares (agent -> tool name -> its command, an absolute
  // path, description and readme). Both win over tools_dir's.
  std::string agents_dir;
  struct DeclaredTool {
    std::string command, description, readme;
    bool operator==(const DeclaredTool&) const = default;
  };
  std::map<std::string, std::map<std::string, DeclaredTool>> declared_tools;
  // Where running children's process groups are recorded (see
  // KillLeftovers in execute/sandbox.h); "" = not recorded.
  std::string run_dir;
  SandboxLimits cli_limits;  // CLI tools' limits (timeout 30 s)
  // background_process (execute.background, docs/tools.md): live processes
  // per org and agent, each one's output ring, wall-clock lifetime (then
  // killed), RLIMIT_NPROC under the agent's uid, and RLIMIT_AS.
  struct BackgroundLimits {
    int max_per_agent = 4;
    size_t output_bytes = 1 << 20;
    int max_lifetime_s = 3600;
    int pids = 64;
    size_t memory_mb = 512;
    bool operator==(const BackgroundLimits&) const = default;
  };
  BackgroundLimits background;
  std::vector<McpServerSpec> mcp_servers;  // sorted by name
  std::string mcp_dir;                     // each stdio server's workspace: <mcp_dir>/<name>

  // The AI Orchestrator seed's tools (docs/tools.md, "The AI Orchestrator's tools").
  // list_llm_models: these names, and/or those an Ollama-compatible server
  // lists at GET <llm_models_url>/api/tags (under the SSRF guard: allow_cidrs).
  std::vector<std::string> llm_models;
  std::string llm_models_url;  // "" = none; an http(s) URL, checked at load
  int llm_models_timeout_ms = 5000;
  // search_directory: absolute host directories it may search besides the
  // agent's workspace (each lexically normal, no "..").
  std::vector<std::string> search_allowed_bases;
  // The QA tools (run_tests, run_lint, ...): no address-space limit by
  // default (node reserves more than any sane RLIMIT_AS), 2 minutes.
  SandboxLimits qa_limits{120000, 120, 0, 256, 1024, 256, 64 << 10};

  // Duragent's web, session and memory tools (docs/tools.md, "web",
  // "session", "memory"); keys execute.web, execute.session, execute.memory.
  // web search: a Brave Search API endpoint and its key. The key may hold
  // ${env:NAME}, expanded at each call; unset or empty = not configured.
  std::string web_search_url = "https://api.search.brave.com/res/v1/web/search";
  std::string web_api_key = "${env:BRAVE_API_KEY}";
  int web_timeout_ms = 30000;
  // session: whose sessions an agent may list and read: "agent" (its own)
  // or "org" (any agent's of its org); never another org's.
  std::string session_scope = "agent";
  // memory reflect: an OpenAI-compatible chat-completions URL (the full
  // .../chat/completions), "" = not configured; api_key may hold ${env:NAME}.
  std::string memory_llm_url, memory_llm_model, memory_llm_api_key;
  int memory_llm_timeout_ms = 30000;

  Json orgs = Json::object();           // the policy's `orgs` sections, for their agents' http_request
  Json http_defaults = Json::object();  // the policy's top-level `http_request` (every agent's defaults)
  // The top-level http_request overridden key by key by
  // orgs.<org_id>.agents.<agent_id>.http_request (as decide reads them;
  // `aliases` add up by name), or an empty object. An agent entry is its
  // org's alone (docs/policy.md, "Agents belong to an org"): another org's
  // agent of the same id never gets its base_url, headers or aliases.
  Json AgentHttp(const std::string& org_id, const std::string& agent_id) const;
};

// The defaults, with paths under `data_dir`.
ExecutePolicy DefaultExecutePolicy(const std::string& data_dir);
// Reads `path` (YAML; "" = defaults only). A malformed file or value is an
// error (fail closed), never silently ignored.
Status LoadExecutePolicy(const std::string& path, const std::string& data_dir, ExecutePolicy* out);
// The same from the policy already as JSON (tests).
Status ExecutePolicyFromJson(const Json& policy, const std::string& data_dir, ExecutePolicy* out);
// YAML text to JSON (scalars typed as YAML 1.2 core schema does).
Status YamlToJson(const std::string& yaml_text, Json* out);

}  // namespace tollgate
