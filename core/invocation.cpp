#include "core/invocation.h"

#include <algorithm>

#include "core/messages.h"
#include "core/tool_catalog.h"
#include "core/tool_kind.h"

namespace tollgate {
namespace {
std::string Str(const Json& args, const char* key) {
  if (!args.is_object()) return "";
  auto it = args.find(key);
  if (it == args.end() || !it->is_string()) return "";
  return it->get<std::string>();
}
}  // namespace

std::string HttpUrlArg(const Json& args) {
  const std::string url = Str(args, "url");
  return url.empty() ? Str(args, "path") : url;
}

std::string HttpMethod(const Json& args, const std::string& default_method) {
  std::string m = Str(args, "method");
  if (m.empty()) m = default_method.empty() ? "GET" : default_method;
  std::transform(m.begin(), m.end(), m.begin(), ::toupper);
  return m;
}

bool HttpUrl(const Json& args, const std::string& base_url, NormalUrl* url, std::string* out,
             std::string* why) {
  const std::string raw = HttpUrlArg(args);
  // base_url names a directory: "https://h/v1" resolves "items" to /v1/items.
  std::string base = base_url;
  if (!base.empty() && base.find_first_of("?#") == std::string::npos && base.back() != '/') base += '/';
  if (raw.empty() || !NormalizeUrl(raw, base, url, why)) {
    if (raw.empty()) *why = "url (or path) is required";
    *out = raw;
    return false;
  }
  *out = url->full;
  auto q = args.find("query");
  if (q != args.end() && q->is_object() && !q->empty()) {
    std::vector<std::pair<std::string, std::string>> kv;
    for (const auto& [k, v] : q->items()) kv.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
    *out = AppendQuery(*out, kv);
  }
  return true;
}

bool IsCommandTool(std::string_view tool) {
  return tool == "execute_command" || tool == "bash_command" || tool == "bash";
}

std::string ActionOf(const Json& request) {
  if (!request.is_object()) return "";
  if (auto a = request.find("args"); a != request.end()) {
    if (std::string act = Str(*a, "action"); !act.empty()) return act;
  }
  return Str(request, "action");
}

std::string CommandLine(const Json& args) {
  std::string cmd = Str(args, "command");
  if (args.is_object() && args.contains("args") && args["args"].is_array()) {
    for (const auto& a : args["args"]) {
      if (a.is_string()) {
        cmd += ' ';
        cmd += a.get<std::string>();
      }
    }
  }
  return cmd;
}

bool IsCommandArgv(const Json& args) {
  if (args.is_object() && args.contains("args")) return true;
  // The characters that make a word more than a program name to sh.
  return Str(args, "command").find_first_of(" \t\n\r;|&$<>`'\"\\*?(){}[]!~#=") == std::string::npos;
}

ShellLine CommandCallOf(const Json& args) {
  if (!IsCommandArgv(args)) return ParseShellLine(Str(args, "command"));
  ShellLine line;
  line.kind = ShellLine::Kind::kOk;
  SimpleCommand c;
  c.argv.push_back(Str(args, "command"));
  if (args.is_object() && args.contains("args") && args["args"].is_array()) {
    for (const auto& a : args["args"]) {
      if (a.is_string()) c.argv.push_back(a.get<std::string>());
    }
  }
  line.commands.push_back(std::move(c));
  return line;
}

std::string FilePathArg(const Json& args) {
  for (const char* k : {"path", "directory", "dir", "base"}) {  // base: search_directory
    std::string p = Str(args, k);
    if (!p.empty()) return p;
  }
  return "";
}

std::string BuildInvocation(const std::string& tool, const Json& args, const std::string& base_url,
                            const std::string& default_method, const std::string& action) {
  if (tool == "http_request") {
    NormalUrl u;
    std::string url, why;
    HttpUrl(args, base_url, &u, &url, &why);
    return "http_request:" + HttpMethod(args, default_method) + " " + url;
  }
  if (IsCommandTool(tool)) return "bash:" + CommandLine(args);
  if (IsCliTool(tool) || IsMcpTool(tool)) return tool;
  return "builtin:" + tool + (action.empty() ? "" : ":" + action);
}

std::string FileSubject(const std::string& tool, const Json& args, const std::string& action) {
  if (!action.empty() && tool != "http_request" && !IsCommandTool(tool) && !IsCliTool(tool) &&
      !IsMcpTool(tool)) {
    return "builtin:" + tool;
  }
  if (!IsFileTool(tool)) return "";
  const std::string p = FilePathArg(args);
  return p.empty() ? "" : tool + ":" + NormalizePath(p);
}

}  // namespace tollgate

namespace tollgate {

std::string McpToolPattern(const std::string& pattern) {
  if (IsMcpTool(pattern) && pattern.find('/') == std::string::npos) {
    // Duragent's spelling, mcp:SERVER:TOOL.
    if (const auto sep = pattern.find(':', 4); sep != std::string::npos && sep > 4) {
      return "mcp:" + pattern.substr(4, sep - 4) + "/" + pattern.substr(sep + 1);
    }
    return pattern;
  }
  if (pattern.rfind("mcp__", 0) != 0 || pattern.size() == 5) return pattern;
  // Kaizen's builtin server is tollgate's own built-ins, never an upstream.
  if (std::string_view b = CanonicalToolName(pattern); b.size() != pattern.size()) return std::string(b);
  const std::string rest = pattern.substr(5);
  const auto sep = rest.find("__");
  if (sep != std::string::npos && sep > 0) return "mcp:" + rest.substr(0, sep) + "/" + rest.substr(sep + 2);
  // "mcp__github": every tool of the server; "mcp__*": of every server.
  return rest.back() == '*' ? "mcp:" + rest : "mcp:" + rest + "/*";
}

}  // namespace tollgate
