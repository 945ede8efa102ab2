// The tools of upstream MCP servers, "mcp:<server>/<tool>" (mcp_tool.cpp).
#pragma once

#include <memory>
#include <string>

#include "execute/mcp_upstream.h"
#include "execute/tool.h"

namespace tollgate {

// "mcp:<server>/<tool>" split at the first '/' (server names hold none);
// false for any other name.
bool SplitMcpToolName(const std::string& name, std::string* server, std::string* tool);
// The tool, or null when the name is not an mcp: name or its server is not
// configured.
std::unique_ptr<Tool> MakeMcpTool(std::shared_ptr<const McpUpstreams> upstreams, const std::string& name);

}  // namespace tollgate
