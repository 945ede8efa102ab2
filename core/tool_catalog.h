// The tool catalog: the one table of the built-in tools and what decide and
// execute both need to know about each, so the two cannot disagree about a
// tool. A new built-in is a row here plus its file in execute/tools/.
//
// CLI tools ("cli:NAME", discovered by execute from a directory) are not
// built-ins and not in the catalog: decide treats them as HIGH and mutating
// unless the policy says otherwise, and execute takes their read-only answer
// from the decision.
//
// The table is constant and lookups are pure, so thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tollgate {

// How dangerous a call is (docs/policy.md, "Tools"): a call at or above the
// policy's approval_threshold asks.
enum class DangerLevel : uint8_t { kSafe = 0, kLow, kMedium, kHigh, kCritical };

// Whether running a call has a side effect: decide's plan mode runs only
// read-only calls, and a call that a crash left between execution.started
// and execution.completed ends E_EXECUTION_INTERRUPTED when read-only,
// E_OUTCOME_UNKNOWN when mutating (execute/execute_stage.h).
enum class Reads : uint8_t {
  kMutates,   // every call may change something
  kReadOnly,  // no call changes anything
  kByMethod,  // http_request: read-only when its method IsReadOnlyMethod
  kByAction,  // Duragent's built-ins: read-only when args.action is in read_actions
};

struct ToolFacts {
  std::string_view name;
  Reads reads;
  // Acts on one workspace path (args.path, args.directory, args.dir or args.base):
  // decide also matches its deny and allow globs against "TOOL:PATH", and an
  // "allow always" for it pins that path (core/invocation.h, FileSubject).
  bool file_tool;
  // Pure and fast: execute runs it inside Process, with no deferred work.
  bool runs_inline;
  // Decide's default when the policy file does not set one.
  DangerLevel danger;
  std::string_view category;
  // One line, what `tollgate tools` and the registry's List() show.
  std::string_view description;
  // kByAction: the read-only actions, comma-separated ("list,status").
  std::string_view read_actions = {};

  // The answer when the call is not known: kByMethod and kByAction count
  // as mutating.
  bool read_only() const { return reads == Reads::kReadOnly; }
  // The answer for a call with this action (core/invocation.h, ActionOf).
  bool read_only(std::string_view action) const;
};

// Every built-in, in the order execute registers them.
std::span<const ToolFacts> BuiltinTools();
// The built-in named `name`, or null (CLI tools and unknown names).
const ToolFacts* FindBuiltinTool(std::string_view name);

// Shorthands for one field of FindBuiltinTool(tool); false when not a built-in.
bool IsFileTool(std::string_view tool);
bool RunsInline(std::string_view tool);

// The JSON Schema of a built-in's arguments, as JSON text
// (core/tool_schemas.cpp); {"type":"object"} for any other name.
std::string_view InputSchemaOf(std::string_view name);

// Kaizen's MCP naming (docs/tools.md, "Kaizen's tools"): the built-in X for
// "mcp__kaizen_builtin__X" when X is one of the twelve tools of Kaizen's
// builtin server (read_file, write_file, delete_file, list_directory,
// file_exists, http_get, http_post, http_put, http_delete, fetch_url,
// extract_links, bash_command); any other name unchanged. Ingest and the
// MCP gateway apply it where a request enters, so decide, execute, the log
// and replay only ever see the built-in's own name. "kaizen_builtin" is
// therefore never an upstream MCP server's name.
inline constexpr std::string_view kKaizenBuiltinServer = "kaizen_builtin";
std::string_view CanonicalToolName(std::string_view name);

// GET, HEAD and OPTIONS only read. `method` is upper case.
bool IsReadOnlyMethod(std::string_view method);

}  // namespace tollgate
