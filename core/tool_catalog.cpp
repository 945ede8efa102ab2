// The built-in tools (core/tool_catalog.h; docs/tools.md describes each).
#include "core/tool_catalog.h"

namespace tollgate {
namespace {

using D = DangerLevel;
using R = Reads;

//  name               reads          file   inline danger      category      description
constexpr ToolFacts kTools[] = {
    {"echo",            R::kReadOnly, false, true,  D::kSafe,   "utility",    "Return the args unchanged."},
    {"current_time",    R::kReadOnly, false, true,  D::kSafe,   "utility",    "The current UTC time."},
    {"calculate",       R::kReadOnly, false, true,  D::kSafe,   "utility",    "Evaluate an arithmetic expression safely."},
    {"read_file",       R::kReadOnly, true,  false, D::kLow,    "filesystem", "Read a file in the agent's workspace."},
    {"write_file",      R::kMutates,  true,  false, D::kMedium, "filesystem",
     "Write or append to a file in the agent's workspace."},
    {"list_directory",  R::kReadOnly, true,  false, D::kLow,    "filesystem", "List a directory in the agent's workspace."},
    {"file_exists",     R::kReadOnly, true,  false, D::kSafe,   "filesystem",
     "Whether a path exists in the agent's workspace."},
    {"delete_file",     R::kMutates,  true,  false, D::kHigh,   "filesystem",
     "Delete a file or empty directory in the agent's workspace."},
    {"search_files",    R::kReadOnly, true,  false, D::kLow,    "filesystem",
     "Find files in the agent's workspace by glob pattern."},
    {"http_request",    R::kByMethod, false, false, D::kMedium, "network",
     "Make an HTTP(S) request under the agent's policy."},
    {"execute_command", R::kMutates,  false, false, D::kHigh,   "shell",
     "Run an allowlisted program with arguments (no shell) in the agent's workspace."},
    {"get_audit_log",   R::kReadOnly, false, false, D::kLow,    "audit",
     "Read this agent's own audit entries (session or agent)."},
    {"get_system_info", R::kReadOnly, false, false, D::kLow,    "system",
     "OS, CPU count, memory and uptime of the executor."},
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

bool IsReadOnlyMethod(std::string_view method) { return method == "GET" || method == "HEAD" || method == "OPTIONS"; }

}  // namespace tollgate
