// The kinds of tool name (docs/tools.md): a built-in ("echo",
// "http_request"; its invocation "builtin:TOOL[:ACTION]"), a CLI tool
// ("cli:NAME") and an upstream MCP server's tool ("mcp:SERVER/TOOL"). Code
// tells them apart and spells them through these, never a literal prefix.
#pragma once

#include <string>
#include <string_view>

namespace tollgate {

inline constexpr std::string_view kCliPrefix = "cli:";
inline constexpr std::string_view kMcpPrefix = "mcp:";
inline constexpr std::string_view kBuiltinPrefix = "builtin:";

enum class ToolKind { kBuiltin, kCli, kMcp };

inline bool IsCliTool(std::string_view tool) { return tool.substr(0, kCliPrefix.size()) == kCliPrefix; }
inline bool IsMcpTool(std::string_view tool) { return tool.substr(0, kMcpPrefix.size()) == kMcpPrefix; }
inline ToolKind KindOf(std::string_view tool) {
  return IsCliTool(tool) ? ToolKind::kCli : IsMcpTool(tool) ? ToolKind::kMcp : ToolKind::kBuiltin;
}
// "cli", "mcp" or "builtin" (metrics labels, logs).
inline const char* KindName(ToolKind k) {
  return k == ToolKind::kCli ? "cli" : k == ToolKind::kMcp ? "mcp" : "builtin";
}
// "cli:NAME".
inline std::string CliToolName(std::string_view name) { return std::string(kCliPrefix) + std::string(name); }
// "mcp:SERVER/TOOL".
inline std::string McpToolName(std::string_view server, std::string_view tool) {
  return std::string(kMcpPrefix) + std::string(server) + "/" + std::string(tool);
}

}  // namespace tollgate
