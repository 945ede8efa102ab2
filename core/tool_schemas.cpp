// The JSON Schemas of the built-ins' arguments (core/tool_catalog.h,
// InputSchemaOf): what MCP's tools/list, `tollgate tools list` and
// GET /v1/tools show, and what the MCP gateway checks a call against
// before it submits it. Each says what the tool's file in execute/tools/
// reads; the tool still checks its arguments itself.
#include <map>

#include "core/tool_catalog.h"

namespace tollgate {
namespace {

// Out of the table below, whose layout clang-format keeps only while its
// lines stay short enough in total.
constexpr std::string_view kGetAuditLogSchema =
    R"S({"type":"object","properties":{"scope":{"type":"string","enum":["session","agent"],"description":"This session's entries (default) or all of this agent's"},"session_id":{"type":"string"},"request_id":{"type":"string"},"tool":{"type":"string"},"types":{"type":"array","items":{"type":"string"}},"verdict":{"type":"string","enum":["allow","deny","ask"]},"since":{"type":"string","description":"RFC 3339"},"until":{"type":"string","description":"RFC 3339"},"limit":{"type":"integer","minimum":1},"last_n":{"type":"integer","minimum":1,"maximum":1000,"description":"The newest N entries, oldest first (not with limit, cursor or descending)"},"cursor":{"type":"string"},"descending":{"type":"boolean"},"proofs":{"type":"boolean","description":"Also each entry's inclusion proof (a C2SP tlog-proof) and the signed checkpoint it is proven against"}},"additionalProperties":false})S";

const std::map<std::string_view, std::string_view>& Schemas() {
  static const std::map<std::string_view, std::string_view> kSchemas =
      {
          {"echo",
           R"S({"type":"object","properties":{"text":{"type":"string","description":"Text to return"}},"additionalProperties":true})S"},
          {"current_time", R"S({"type":"object","properties":{},"additionalProperties":false})S"},
          {"calculate",
           R"S({"type":"object","properties":{"expression":{"type":"string","description":"Numbers, + - * / // % ^ ** (Python's // and %: floor), unary minus, parentheses, pi, e and sqrt abs sin cos tan asin acos atan log ln log2 exp floor ceil round min max pow, e.g. sqrt(2) * (3 + 4)^2"}},"required":["expression"],"additionalProperties":false})S"},
          {"read_file",
           R"S({"type":"object","properties":{"path":{"type":"string","description":"Path inside the agent's workspace"}},"required":["path"],"additionalProperties":false})S"},
          {"write_file",
           R"S({"type":"object","properties":{"path":{"type":"string","description":"Path inside the agent's workspace"},"content":{"type":"string","description":"What to write"},"append":{"type":"boolean","description":"Append instead of replacing (default false)"},"encoding":{"type":"string","enum":["utf-8","base64"],"description":"How content is encoded (default utf-8)"},"create_dirs":{"type":"boolean","description":"Create missing parent directories"}},"required":["path","content"],"additionalProperties":false})S"},
          {"list_directory",
           R"S({"type":"object","properties":{"path":{"type":"string","description":"Directory inside the agent's workspace (default: its root)"}},"additionalProperties":false})S"},
          {"file_exists",
           R"S({"type":"object","properties":{"path":{"type":"string","description":"Path inside the agent's workspace"}},"required":["path"],"additionalProperties":false})S"},
          {"delete_file",
           R"S({"type":"object","properties":{"path":{"type":"string","description":"File or empty directory inside the agent's workspace"}},"required":["path"],"additionalProperties":false})S"},
          {"search_files",
           R"S({"type":"object","properties":{"pattern":{"type":"string","description":"Glob matched against file names, e.g. *.md"},"path":{"type":"string","description":"Directory to search (default: the workspace root)"},"max_results":{"type":"integer","minimum":1,"description":"At most this many paths"}},"required":["pattern"],"additionalProperties":false})S"},
          {"http_request",
           R"S({"type":"object","properties":{"url":{"type":"string","description":"Absolute http(s) URL, or relative to the agent's base_url"},"path":{"type":"string","description":"The same as url (the MVP seed's name): relative to base_url, or absolute; not with url"},"method":{"type":"string","description":"GET (default), HEAD, POST, PUT, PATCH, DELETE, OPTIONS: the policy's allowed_methods decide"},"headers":{"type":"object","additionalProperties":{"type":"string"}},"query":{"type":"object","description":"Query parameters appended to the URL"},"body":{"type":"string","description":"Request body as text"},"json":{"description":"Request body as JSON (instead of body)"},"data":{"description":"The same as json (the AI Orchestrator's name for the JSON payload); not with json"},"timeout_ms":{"type":"integer","minimum":1},"response_format":{"type":"string","enum":["auto","json","text"]}},"anyOf":[{"required":["url"]},{"required":["path"]}],"additionalProperties":false})S"},
          {"execute_command",
           R"S({"type":"object","properties":{"command":{"type":"string","description":"A command line (\"pytest tests/ -v\", \"git log | head -5\": pipes, && || ; and workspace redirections; no $, backticks, eval or subshells), or with args an allowlisted program"},"args":{"type":"array","items":{"type":"string"},"description":"The program's arguments: given, command is one program and no shell reads anything"},"stdin":{"type":"string"},"timeout":{"type":"integer","minimum":1,"description":"Seconds (default 30, capped by the policy)"},"timeout_ms":{"type":"integer","minimum":1},"role":{"type":"string","enum":["viewer","operator","admin"],"description":"viewer: read-only commands; operator (default): the allowlist; admin: only if the policy grants it"}},"required":["command"],"additionalProperties":false})S"},
          {"get_audit_log", kGetAuditLogSchema},
          {"get_system_info", R"S({"type":"object","properties":{},"additionalProperties":false})S"},
          {"get_datetime", R"S({"type":"object","properties":{},"additionalProperties":false})S"},
          {"list_llm_models", R"S({"type":"object","properties":{},"additionalProperties":false})S"},
          {"search_directory",
           R"S({"type":"object","properties":{"name":{"type":"string","minLength":1,"description":"Directory name to find (exact or partial, case-insensitive)"},"base":{"type":"string","description":"Where to search (default: the agent's workspace; else inside it or an allowed base)"},"max_depth":{"type":"integer","minimum":1,"default":3,"description":"Levels below base (default 3, at most 3)"}},"required":["name"],"additionalProperties":false})S"},
          {"git_status", R"S({"type":"object","properties":{},"additionalProperties":false})S"},
          {"git_diff",
           R"S({"type":"object","properties":{"staged":{"type":"boolean","default":false,"description":"Staged changes only (default false: unstaged)"}},"additionalProperties":false})S"},
          {"run_tests",
           R"S({"type":"object","properties":{"target":{"type":"string","enum":["backend","frontend","all"],"description":"backend (Python: pytest, ruff, black...), frontend (Node: npm), or all"}},"required":["target"],"additionalProperties":false})S"},
          {"run_lint",
           R"S({"type":"object","properties":{"target":{"type":"string","enum":["backend","frontend","all"],"description":"backend (Python: pytest, ruff, black...), frontend (Node: npm), or all"}},"required":["target"],"additionalProperties":false})S"},
          {"run_format",
           R"S({"type":"object","properties":{"target":{"type":"string","enum":["backend","frontend","all"],"description":"backend (Python: pytest, ruff, black...), frontend (Node: npm), or all"},"check_only":{"type":"boolean","default":true,"description":"Only check (default true); false applies the formatting"}},"required":["target"],"additionalProperties":false})S"},
          {"run_build",
           R"S({"type":"object","properties":{"target":{"type":"string","enum":["backend","frontend","all"],"description":"backend (Python: pytest, ruff, black...), frontend (Node: npm), or all"}},"required":["target"],"additionalProperties":false})S"},
          {"run_typecheck",
           R"S({"type":"object","properties":{"target":{"type":"string","enum":["backend","frontend"],"description":"backend (mypy) or frontend (the project's tsc)"}},"required":["target"],"additionalProperties":false})S"},
          // Kaizen's (docs/tools.md, "Kaizen's tools").
          {"http_get",
           R"S({"type":"object","properties":{"url":{"type":"string","description":"URL to fetch (absolute, or relative to the agent's base_url)"},"headers":{"type":"object","additionalProperties":{"type":"string"},"description":"Optional headers"}},"required":["url"],"additionalProperties":false})S"},
          {"http_post",
           R"S({"type":"object","properties":{"url":{"type":"string","description":"URL to post to"},"data":{"type":["object","string"],"description":"Request body: a dict (sent as JSON) or a string (sent as is)"},"headers":{"type":"object","additionalProperties":{"type":"string"},"description":"Optional headers"}},"required":["url"],"additionalProperties":false})S"},
          {"http_put",
           R"S({"type":"object","properties":{"url":{"type":"string","description":"URL to put to"},"data":{"type":["object","string"],"description":"Request body: a dict (sent as JSON) or a string (sent as is)"},"headers":{"type":"object","additionalProperties":{"type":"string"},"description":"Optional headers"}},"required":["url"],"additionalProperties":false})S"},
          {"http_delete",
           R"S({"type":"object","properties":{"url":{"type":"string","description":"URL to delete"},"headers":{"type":"object","additionalProperties":{"type":"string"},"description":"Optional headers"}},"required":["url"],"additionalProperties":false})S"},
          {"fetch_url",
           R"S({"type":"object","properties":{"url":{"type":"string","description":"URL to fetch"}},"required":["url"],"additionalProperties":false})S"},
          {"extract_links",
           R"S({"type":"object","properties":{"url":{"type":"string","description":"URL of the HTML page whose links to extract"}},"required":["url"],"additionalProperties":false})S"},
          {"bash_command",
           R"S({"type":"object","properties":{"command":{"type":"string","minLength":1,"description":"A command line (pipes, && || ; and workspace redirections; no $, backticks, eval or subshells), checked command by command"}},"required":["command"],"additionalProperties":false})S"},
          // Duragent's (docs/tools.md, "Duragent's tools"). `action` may also be the request's own top-level
          // field.
          {"bash",
           R"S({"type":"object","properties":{"command":{"type":"string","minLength":1,"description":"The shell command line (pipes, && || ; and workspace redirections; no $, backticks, eval or subshells); the policy holds for every simple command"},"timeout":{"type":"integer","minimum":1,"description":"Seconds (default 30, capped by the policy)"}},"required":["command"],"additionalProperties":false})S"},
          {"reload_tools", R"S({"type":"object","properties":{},"additionalProperties":false})S"},
          {"web",
           R"S({"type":"object","properties":{"action":{"type":"string","enum":["search","fetch"]},"query":{"type":"string","minLength":1,"description":"search: what to search for"},"count":{"type":"integer","minimum":1,"maximum":20,"default":5,"description":"search: how many results (1-20, default 5)"},"url":{"type":"string","minLength":1,"description":"fetch: an http or https URL"}},"required":["action"],"allOf":[{"if":{"properties":{"action":{"const":"search"}}},"then":{"required":["query"]}},{"if":{"properties":{"action":{"const":"fetch"}}},"then":{"required":["url"]}}],"additionalProperties":false})S"},
          {"schedule",
           R"S({"type":"object","properties":{"action":{"type":"string","enum":["create","list","cancel"]},"tool":{"type":"string","minLength":1,"description":"create: the tool to call when the time comes"},"args":{"type":"object","description":"create: its arguments"},"tool_action":{"type":"string","description":"create: the called tool's action, when it has one"},"at":{"type":"string","description":"create: when, RFC 3339"},"delay_seconds":{"type":"integer","minimum":1,"maximum":2592000,"description":"create: in this many seconds (instead of at)"},"description":{"type":"string","maxLength":1000},"schedule_id":{"type":"string","minLength":1,"description":"cancel: the schedule to cancel"},"include_done":{"type":"boolean","description":"list: also fired and cancelled schedules"}},"required":["action"],"allOf":[{"if":{"properties":{"action":{"const":"create"}}},"then":{"required":["tool"],"anyOf":[{"required":["at"]},{"required":["delay_seconds"]}]}},{"if":{"properties":{"action":{"const":"cancel"}}},"then":{"required":["schedule_id"]}}],"additionalProperties":false})S"},
          {"background_process",
           R"S({"type":"object","properties":{"action":{"type":"string","enum":["spawn","list","status","log","capture","send_keys","write","kill","watch","unwatch"]},"command":{"type":"string","minLength":1,"description":"spawn: the command line, checked as bash's"},"process_id":{"type":"string","minLength":1,"description":"every action but spawn and list"},"keys":{"type":["string","array"],"items":{"type":"string"},"description":"send_keys: key names (Enter, C-c, Up, Tab...) or literal text"},"input":{"type":"string","description":"write: bytes written to the process's terminal as given"},"lines":{"type":"integer","minimum":1,"maximum":10000,"description":"log, capture: the last N lines"},"offset":{"type":"integer","minimum":0,"description":"log: from this byte of the output"},"pattern":{"type":"string","minLength":1,"description":"watch: a regular expression matched against new output"},"signal":{"type":"string","enum":["TERM","KILL","INT","HUP"],"description":"kill: default TERM, then KILL after 5 s"}},"required":["action"],"allOf":[{"if":{"properties":{"action":{"const":"spawn"}}},"then":{"required":["command"]}},{"if":{"properties":{"action":{"enum":["status","log","capture","send_keys","write","kill","watch","unwatch"]}}},"then":{"required":["process_id"]}},{"if":{"properties":{"action":{"const":"send_keys"}}},"then":{"required":["keys"]}},{"if":{"properties":{"action":{"const":"write"}}},"then":{"required":["input"]}}],"additionalProperties":false})S"},
          {"session",
           R"S({"type":"object","properties":{"action":{"type":"string","enum":["list","read"]},"session_id":{"type":"string","minLength":1,"description":"read: the session to read"},"limit":{"type":"integer","minimum":1,"maximum":1000,"description":"list: at most this many sessions; read: the last N entries"}},"required":["action"],"allOf":[{"if":{"properties":{"action":{"const":"read"}}},"then":{"required":["session_id"]}}],"additionalProperties":false})S"},
          {"memory",
           R"S({"type":"object","properties":{"action":{"type":"string","enum":["recall","remember","reflect","update_world"]},"content":{"type":"string","minLength":1,"maxLength":16384,"description":"remember: what to remember; update_world: the new world model"},"query":{"type":"string","description":"recall: words to look for (empty: the newest)"},"tags":{"type":"array","items":{"type":"string"},"maxItems":16},"limit":{"type":"integer","minimum":1,"maximum":100,"description":"recall: at most this many memories (default 10)"}},"required":["action"],"allOf":[{"if":{"properties":{"action":{"enum":["remember","update_world"]}}},"then":{"required":["content"]}}],"additionalProperties":false})S"},
      };
  return kSchemas;
}

}  // namespace

std::string_view InputSchemaOf(std::string_view name) {
  auto it = Schemas().find(name);
  return it == Schemas().end() ? std::string_view(R"S({"type":"object"})S") : it->second;
}

}  // namespace tollgate
