// Tool discovery (ADR-012's discover_tools, Kaizen's provider formats): the
// tool directory's list (deploy/tool_directory.h: name, description,
// input_schema, source, category, danger, read_only, asks, ...) filtered by
// category, safe_only and keyword, and shown in MCP, OpenAI function-calling
// or Anthropic tool-use form. One pure function behind GET /v1/tools,
// `tollgate tools list` and MCP's tools/list (docs/mcp.md, "Discovery").
#pragma once

#include <string>

#include "core/canonical_json.h"
#include "core/status.h"

namespace tollgate {

struct ToolQuery {
  std::string category;    // exact, e.g. "filesystem"; "" = any
  bool safe_only = false;  // danger SAFE only (Kaizen's is_tool_safe)
  std::string keyword;     // case-insensitive, in the name or description; "" = any
  std::string format;      // "" (tollgate's own rows) | mcp | openai | anthropic
};

// E_INVALID_QUERY naming the field when `format` is not one of the above or
// a field is over 256 bytes.
Status CheckToolQuery(const ToolQuery& q);

// The rows of `tools` (a JSON array of the directory's rows) that match `q`,
// in order, each in q.format: mcp {name, description, inputSchema},
// openai {type: function, function: {name, description, parameters}},
// anthropic {name, description, input_schema}. Names in the provider
// formats are ClientToolName's (models accept [A-Za-z0-9_.-] only).
Json DiscoverTools(const Json& tools, const ToolQuery& q);

// Tool names clients and models accept are [A-Za-z0-9_.-]; ours with ':'
// and '/' are offered as their aliases (cli:x -> cli__x, mcp:s/t ->
// mcp__s__t), and ToolFromClientName takes either form back.
std::string ClientToolName(const std::string& tool);
std::string ToolFromClientName(const std::string& name);

}  // namespace tollgate
