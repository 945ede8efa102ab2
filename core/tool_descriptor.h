// What a client is told about one tool: its name, a one-paragraph
// description and the JSON Schema of its arguments. The same record backs
// MCP's tools/list, `tollgate tools list` and GET /v1/tools, whichever kind
// of tool it describes:
//   builtin  a row of the tool catalog (core/tool_catalog.h)
//   cli      <tools_dir>/<name>/run, with optional schema.json and README
//   mcp      a tool an upstream MCP server lists, named mcp:<server>/<tool>
//   http     an http_request alias of the agent's (core/http_alias.h)
// An upstream's description and schema are its own words: they are shown,
// never trusted for a decision (decide reads only the policy).
#pragma once

#include <string>

#include "core/canonical_json.h"

namespace tollgate {

struct ToolDescriptor {
  std::string name;  // "echo", "cli:report", "mcp:everything/echo"
  std::string description;
  Json input_schema = Json::object();  // a JSON Schema of type "object"
  std::string source;                  // builtin | cli | mcp | http
};

}  // namespace tollgate
