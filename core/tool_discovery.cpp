#include "core/tool_discovery.h"

#include <algorithm>
#include <cctype>

#include "core/messages.h"
#include "core/tool_catalog.h"
#include "core/tool_kind.h"

namespace tollgate {
namespace {

bool SafeName(const std::string& s) {
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  }
  return !s.empty();
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool Matches(const Json& t, const ToolQuery& q) {
  if (!q.category.empty() && t.value("category", "") != q.category) return false;
  if (q.safe_only && t.value("danger", "") != "SAFE") return false;
  if (!q.keyword.empty()) {
    const std::string k = Lower(q.keyword);
    if (Lower(t.value("name", "")).find(k) == std::string::npos &&
        Lower(t.value("description", "")).find(k) == std::string::npos) {
      return false;
    }
  }
  return true;
}

Json Formatted(const Json& t, const std::string& format) {
  if (format.empty()) return t;
  const std::string name = ClientToolName(t.value("name", ""));
  const std::string description = t.value("description", "");
  Json schema = t.value("input_schema", Json::object());
  if (!schema.is_object() || schema.value("type", "") != "object") schema = {{"type", "object"}};
  if (format == "openai") {
    return {{"type", "function"},
            {"function", {{"name", name}, {"description", description}, {"parameters", std::move(schema)}}}};
  }
  if (format == "anthropic")
    return {{"name", name}, {"description", description}, {"input_schema", std::move(schema)}};
  return {{"name", name}, {"description", description}, {"inputSchema", std::move(schema)}};
}

}  // namespace

Status CheckToolQuery(const ToolQuery& q) {
  for (const auto& [field, v] :
       {std::pair{"category", &q.category}, {"keyword", &q.keyword}, {"format", &q.format}}) {
    if (v->size() > 256) return Status::Error("E_INVALID_QUERY", std::string(field) + " is over 256 bytes");
  }
  if (!q.format.empty() && q.format != "mcp" && q.format != "openai" && q.format != "anthropic") {
    return Status::Error("E_INVALID_QUERY", "format must be mcp, openai or anthropic");
  }
  return Status::Ok();
}

Json DiscoverTools(const Json& tools, const ToolQuery& q) {
  Json out = Json::array();
  if (!tools.is_array()) return out;
  for (const Json& t : tools) {
    if (t.is_object() && Matches(t, q)) out.push_back(Formatted(t, q.format));
  }
  return out;
}

std::string ClientToolName(const std::string& tool) {
  if (SafeName(tool)) return tool;
  if (IsCliTool(tool)) return "cli__" + tool.substr(4);
  if (IsMcpTool(tool)) {
    const std::string rest = tool.substr(4);
    const size_t slash = rest.find('/');
    if (slash != std::string::npos) return "mcp__" + rest.substr(0, slash) + "__" + rest.substr(slash + 1);
  }
  return tool;
}

std::string ToolFromClientName(const std::string& name) {
  // Kaizen's mcp__kaizen_builtin__read_file is the built-in read_file, not
  // an upstream server's tool (core/tool_catalog.h, CanonicalToolName).
  if (std::string_view b = CanonicalToolName(name); b.size() != name.size()) return std::string(b);
  if (name.rfind("cli__", 0) == 0) return "cli:" + name.substr(5);
  if (name.rfind("mcp__", 0) == 0) {
    const std::string rest = name.substr(5);
    const size_t sep = rest.find("__");
    if (sep != std::string::npos && sep > 0) return "mcp:" + rest.substr(0, sep) + "/" + rest.substr(sep + 2);
  }
  return name;
}

}  // namespace tollgate
