// The built-in tools (core/tool_catalog.h; docs/tools.md describes each).
#include "core/tool_catalog.h"

namespace tollgate {
namespace {

using D = DangerLevel;
using R = Reads;

//  name               reads          file   inline danger      category      description
constexpr ToolFacts kTools[] = {
    {"echo", R::kReadOnly, false, true, D::kSafe, "utility", "Return the args unchanged."},
    {"current_time", R::kReadOnly, false, true, D::kSafe, "utility", "The current UTC time."},
    {"calculate", R::kReadOnly, false, true, D::kSafe, "utility",
     "Evaluate an arithmetic expression safely."},
    {"read_file", R::kReadOnly, true, false, D::kSafe, "filesystem", "Read a file in the agent's workspace."},
    {"write_file", R::kMutates, true, false, D::kMedium, "filesystem",
     "Write or append to a file in the agent's workspace."},
    {"list_directory", R::kReadOnly, true, false, D::kSafe, "filesystem",
     "List a directory in the agent's workspace."},
    {"file_exists", R::kReadOnly, true, false, D::kSafe, "filesystem",
     "Whether a path exists in the agent's workspace."},
    {"delete_file", R::kMutates, true, false, D::kHigh, "filesystem",
     "Delete a file or empty directory in the agent's workspace."},
    {"search_files", R::kReadOnly, true, false, D::kLow, "filesystem",
     "Find files in the agent's workspace by glob pattern."},
    {"http_request", R::kByMethod, false, false, D::kMedium, "network",
     "Make an HTTP(S) request under the agent's policy."},
    {"execute_command", R::kMutates, false, false, D::kHigh, "shell",
     "Run an allowlisted program with arguments (no shell) in the agent's workspace."},
    {"get_audit_log", R::kReadOnly, false, false, D::kLow, "audit",
     "Read this agent's own audit entries (session or agent)."},
    {"get_system_info", R::kReadOnly, false, false, D::kLow, "system",
     "OS, CPU count, memory and uptime of the executor."},
    // The AI Orchestrator seed's (docs/tools.md, "The AI Orchestrator's tools").
    {"get_datetime", R::kReadOnly, false, true, D::kSafe, "utility",
     "The current date and time (UTC) as ISO 8601, date, time and Unix timestamp."},
    {"list_llm_models", R::kReadOnly, false, false, D::kLow, "system",
     "The configured LLM models, grouped as general, code, vision, embedding and cloud."},
    {"search_directory", R::kReadOnly, true, false, D::kLow, "filesystem",
     "Find directories by name (exact or partial) in the agent's workspace, 3 levels deep, 5 at most."},
    {"git_status", R::kReadOnly, false, false, D::kLow, "qa",
     "git status of the agent's workspace, in the sandbox."},
    {"git_diff", R::kReadOnly, false, false, D::kLow, "qa",
     "git diff (or git diff --staged) of the agent's workspace, in the sandbox."},
    {"run_tests", R::kMutates, false, false, D::kHigh, "qa",
     "Run the workspace's tests (pytest for backend, npm test for frontend) in the sandbox."},
    {"run_lint", R::kMutates, false, false, D::kHigh, "qa",
     "Lint the workspace (ruff for backend, npm run lint for frontend) in the sandbox."},
    {"run_format", R::kMutates, false, false, D::kHigh, "qa",
     "Check (or apply) formatting: black for backend, npm run format or prettier for frontend."},
    {"run_build", R::kMutates, false, false, D::kHigh, "qa",
     "Build the workspace (Python byte-compile for backend, npm run build for frontend) in the sandbox."},
    {"run_typecheck", R::kMutates, false, false, D::kHigh, "qa",
     "Type-check the workspace (mypy for backend, the project's tsc for frontend) in the sandbox."},
    // Kaizen's (docs/tools.md, "Kaizen's tools"): http_request with a fixed
    // method (core/http_alias.h, FindBuiltinHttpAlias), and execute_command's
    // line mode. Danger as the seed's TOOL_DANGER_LEVELS.
    {"http_get", R::kReadOnly, false, false, D::kSafe, "network",
     "HTTP GET request (http_request with method GET)."},
    {"http_post", R::kMutates, false, false, D::kMedium, "network",
     "HTTP POST request; data (a dict or a string) is the body."},
    {"http_put", R::kMutates, false, false, D::kMedium, "network",
     "HTTP PUT request; data (a dict or a string) is the body."},
    {"http_delete", R::kMutates, false, false, D::kHigh, "network", "HTTP DELETE request."},
    {"fetch_url", R::kReadOnly, false, false, D::kSafe, "web", "Fetch a URL's content (GET)."},
    {"extract_links", R::kReadOnly, false, false, D::kSafe, "web",
     "The absolute URLs of the <a href> links of an HTML page (GET)."},
    {"bash_command", R::kMutates, false, false, D::kHigh, "shell",
     "Run a command line, checked command by command, in the sandbox (execute_command's line mode)."},
    // Duragent's (docs/tools.md, "Duragent's tools"). A call's action is
    // part of its invocation: builtin:TOOL:ACTION (core/invocation.h).
    {"bash", R::kMutates, false, false, D::kHigh, "shell",
     "Execute a shell command line in the sandbox, checked command by command."},
    {"reload_tools", R::kReadOnly, false, false, D::kLow, "tools",
     "Re-scan the tool directories and register newly discovered tools."},
    {"web", R::kReadOnly, false, false, D::kLow, "web",
     "Web search (search: a configured search API) and URL fetching as Markdown (fetch)."},
    {"schedule", R::kByAction, false, false, D::kMedium, "schedule",
     "Create, list and cancel scheduled tool calls of this agent and session.", "list"},
    {"background_process", R::kByAction, false, false, D::kHigh, "process",
     "Spawn and manage long-running processes in the agent's sandbox.", "list,status,log,capture"},
    {"session", R::kReadOnly, false, false, D::kLow, "session",
     "List and read this agent's other sessions, from the log."},
    {"memory", R::kByAction, false, false, D::kLow, "memory",
     "The agent's memory: recall, remember, reflect and update_world, folded from the log.", "recall"},
};

// The tools Kaizen's builtin MCP server offers, as mcp__kaizen_builtin__<name>.
constexpr std::string_view kKaizenBuiltins[] = {
    "read_file", "write_file", "delete_file", "list_directory", "file_exists",   "http_get",
    "http_post", "http_put",   "http_delete", "fetch_url",      "extract_links", "bash_command",
};

}  // namespace

std::span<const ToolFacts> BuiltinTools() { return kTools; }

const ToolFacts* FindBuiltinTool(std::string_view name) {
  for (const ToolFacts& t : kTools) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool IsFileTool(std::string_view tool) {
  const ToolFacts* t = FindBuiltinTool(tool);
  return t != nullptr && t->file_tool;
}

bool RunsInline(std::string_view tool) {
  const ToolFacts* t = FindBuiltinTool(tool);
  return t != nullptr && t->runs_inline;
}

std::string_view CanonicalToolName(std::string_view name) {
  constexpr std::string_view kPrefix = "mcp__kaizen_builtin__";
  if (name.substr(0, kPrefix.size()) != kPrefix) return name;
  const std::string_view rest = name.substr(kPrefix.size());
  for (std::string_view k : kKaizenBuiltins) {
    if (k == rest) return rest;
  }
  return name;
}

bool ToolFacts::read_only(std::string_view action) const {
  if (reads != Reads::kByAction) return read_only();
  if (action.empty()) return false;
  std::string_view rest = read_actions;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == action) return true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return false;
}

bool IsReadOnlyMethod(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS";
}

}  // namespace tollgate
