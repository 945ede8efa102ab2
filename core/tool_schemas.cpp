// The JSON Schemas of the built-ins' arguments (core/tool_catalog.h,
// InputSchemaOf): what MCP's tools/list, `tollgate tools list` and
// GET /v1/tools show, and what the MCP gateway checks a call against
// before it submits it. Each says what the tool's file in execute/tools/
// reads; the tool still checks its arguments itself.
#include <map>

#include "core/tool_catalog.h"

namespace tollgate {
namespace {

const std::map<std::string_view, std::string_view>& Schemas() {
  static const std::map<std::string_view, std::string_view> kSchemas = {
      {"echo", R"S({"type":"object","properties":{"text":{"type":"string","description":"Text to return"}},"additionalProperties":true})S"},
      {"current_time", R"S({"type":"object","properties":{},"additionalProperties":false})S"},
      {"calculate", R"S({"type":"object","properties":{"expression":{"type":"string","description":"Numbers, + - * / % ^, parentheses, pi, e and sqrt abs sin cos tan asin acos atan log ln log2 exp floor ceil round min max pow, e.g. sqrt(2) * (3 + 4)^2"}},"required":["expression"],"additionalProperties":false})S"},
      {"read_file", R"S({"type":"object","properties":{"path":{"type":"string","description":"Path inside the agent's workspace"}},"required":["path"],"additionalProperties":false})S"},
      {"write_file", R"S({"type":"object","properties":{"path":{"type":"string","description":"Path inside the agent's workspace"},"content":{"type":"string","description":"What to write"},"append":{"type":"boolean","description":"Append instead of replacing (default false)"},"encoding":{"type":"string","enum":["utf-8","base64"],"description":"How content is encoded (default utf-8)"},"create_dirs":{"type":"boolean","description":"Create missing parent directories"}},"required":["path","content"],"additionalProperties":false})S"},
      {"list_directory", R"S({"type":"object","properties":{"path":{"type":"string","description":"Directory inside the agent's workspace (default: its root)"}},"additionalProperties":false})S"},
      {"file_exists", R"S({"type":"object","properties":{"path":{"type":"string","description":"Path inside the agent's workspace"}},"required":["path"],"additionalProperties":false})S"},
      {"delete_file", R"S({"type":"object","properties":{"path":{"type":"string","description":"File or empty directory inside the agent's workspace"}},"required":["path"],"additionalProperties":false})S"},
      {"search_files", R"S({"type":"object","properties":{"pattern":{"type":"string","description":"Glob matched against file names, e.g. *.md"},"path":{"type":"string","description":"Directory to search (default: the workspace root)"},"max_results":{"type":"integer","minimum":1,"description":"At most this many paths"}},"required":["pattern"],"additionalProperties":false})S"},
      {"http_request", R"S({"type":"object","properties":{"url":{"type":"string","description":"Absolute http(s) URL, or relative to the agent's base_url"},"method":{"type":"string","description":"GET (default), HEAD, POST, PUT, PATCH, DELETE, OPTIONS: the policy's allowed_methods decide"},"headers":{"type":"object","additionalProperties":{"type":"string"}},"query":{"type":"object","description":"Query parameters appended to the URL"},"body":{"type":"string","description":"Request body as text"},"json":{"description":"Request body as JSON (instead of body)"},"data":{"description":"The same as json (the AI Orchestrator's name for the JSON payload); not with json"},"timeout_ms":{"type":"integer","minimum":1},"response_format":{"type":"string","enum":["auto","json","text"]}},"required":["url"],"additionalProperties":false})S"},
      {"execute_command", R"S({"type":"object","properties":{"command":{"type":"string","description":"An allowlisted program (no shell: ; | $( ) are plain bytes)"},"args":{"type":"array","items":{"type":"string"},"description":"Its arguments"},"stdin":{"type":"string"},"timeout_ms":{"type":"integer","minimum":1}},"required":["command"],"additionalProperties":false})S"},
      {"get_audit_log", R"S({"type":"object","properties":{"scope":{"type":"string","enum":["session","agent"],"description":"This session's entries (default) or all of this agent's"},"session_id":{"type":"string"},"request_id":{"type":"string"},"tool":{"type":"string"},"types":{"type":"array","items":{"type":"string"}},"verdict":{"type":"string","enum":["allow","deny","ask"]},"since":{"type":"string","description":"RFC 3339"},"until":{"type":"string","description":"RFC 3339"},"limit":{"type":"integer","minimum":1},"last_n":{"type":"integer","minimum":1,"maximum":1000,"description":"The newest N entries, oldest first (not with limit, cursor or descending)"},"cursor":{"type":"string"},"descending":{"type":"boolean"}},"additionalProperties":false})S"},
      {"get_system_info", R"S({"type":"object","properties":{},"additionalProperties":false})S"},
  };
  return kSchemas;
}

}  // namespace

std::string_view InputSchemaOf(std::string_view name) {
  auto it = Schemas().find(name);
  return it == Schemas().end() ? std::string_view(R"S({"type":"object"})S") : it->second;
}

}  // namespace tollgate
