// mcp:<server>/<tool>: a tool of an upstream MCP server (execute.mcp_servers,
// execute/mcp_upstream.h). The call's args go to the server's tools/call as
// they are; its answer (content blocks and structuredContent) is the
// result's data, isError an E_UPSTREAM_TOOL_ERROR. The server's own
// readOnlyHint is not trusted: read-only only when decide's decision says
// so (the policy's `tools:` entry), otherwise mutating — fail closed.
#include "execute/tools/mcp_tool.h"

#include "core/tool_args.h"
#include "core/tool_kind.h"

namespace tollgate {
namespace {

class McpTool : public Tool {
 public:
  McpTool(std::shared_ptr<const McpUpstreams> upstreams, std::string server, std::string tool)
      : upstreams_(std::move(upstreams)), server_(std::move(server)), tool_(std::move(tool)) {}
  std::string name() const override { return "mcp:" + server_ + "/" + tool_; }
  std::string description() const override {
    return "tool " + tool_ + " of the upstream MCP server " + server_;
  }
  bool ReadOnly(const Json&, const Json& decision) const override {
    auto it = decision.find("read_only");
    return it != decision.end() && it->is_boolean() && it->get<bool>();
  }
  Json Run(const Json& args, const ToolContext&) const override {
    if (!args.is_object()) return ToolFail(errc::kInvalidArgs, "an MCP tool's arguments are an object");
    // The server's listed inputSchema, shape only (core/tool_args.h): on
    // every path, not just MCP's gateway, an argument the tool does not take
    // is refused here rather than left for the server to ignore.
    const Json described = upstreams_->Describe();
    if (described.contains(server_) && described[server_].contains("tools") &&
        described[server_]["tools"].is_array()) {
      for (const Json& t : described[server_]["tools"]) {
        if (!t.is_object() || t.value("name", "") != tool_) continue;
        const std::string why = CheckArgsShape(t.value("inputSchema", Json::object()), args);
        if (!why.empty()) return ToolFail(errc::kInvalidArgs, "invalid arguments for " + name() + ": " + why);
      }
    }
    return upstreams_->Call(server_, tool_, args);
  }

 private:
  const std::shared_ptr<const McpUpstreams> upstreams_;
  const std::string server_, tool_;
};

}  // namespace

bool SplitMcpToolName(const std::string& name, std::string* server, std::string* tool) {
  if (!IsMcpTool(name)) return false;
  const auto slash = name.find('/', 4);
  if (slash == std::string::npos || slash == 4 || slash + 1 == name.size()) return false;
  *server = name.substr(4, slash - 4);
  *tool = name.substr(slash + 1);
  return true;
}

std::unique_ptr<Tool> MakeMcpTool(std::shared_ptr<const McpUpstreams> upstreams, const std::string& name) {
  std::string server, tool;
  if (!upstreams || !SplitMcpToolName(name, &server, &tool) || !upstreams->Has(server)) return nullptr;
  return std::make_unique<McpTool>(std::move(upstreams), server, tool);
}

}  // namespace tollgate
