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
};

struct ToolFacts {
  std::string_view name;
  Reads reads;
  // Acts on one workspace path (args.path, args.directory or args.dir):
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

  // The answer when the call is not known: kByMethod counts as mutating.
  bool read_only() const { return reads == Reads::kReadOnly; }
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

// GET, HEAD and OPTIONS only read. `method` is upper case.
bool IsReadOnlyMethod(std::string_view method);

}  // namespace tollgate
