// The tools an agent may call, with what a client needs to call them: the
// one answer behind MCP's tools/list, GET /v1/tools and `tollgate tools
// list` (docs/mcp.md). Tools come from what execute can run (the built-ins,
// the CLI tools of its tools_dir, upstream MCP servers' tools) and the
// agent's http_request aliases in the policy in force, which also says
// which of them this agent may call (decide/tool_access.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tool_descriptor.h"
#include "decide/policy_in_force.h"
#include "execute/mcp_upstream.h"

namespace tollgate {

class ToolDirectory {
 public:
  using ToolsFn = std::function<std::vector<ToolDescriptor>()>;
  using PolicyFn = std::function<PolicyInForce()>;
  ToolDirectory(ToolsFn tools, PolicyFn policy) : tools_(std::move(tools)), policy_(std::move(policy)) {}

  // {"org_id", "agent_id", "policy_version", "tools": [{"name",
  // "description", "input_schema", "source", "category", "danger",
  // "read_only", "asks", "depends_on_arguments"}]}, sorted by name,
  // callable tools only (core/tool_discovery.h filters and formats them).
  Status List(const std::string& org, const std::string& agent, Json* out) const;

 private:
  ToolsFn tools_;
  PolicyFn policy_;
};

// The built-ins of the tool catalog, with their schemas.
std::vector<ToolDescriptor> BuiltinDescriptors();

// The directory of a deployment: the built-ins, the CLI tools of the
// execute policy's tools_dir (read from `policy_path`, looked at on every
// call so a tool dropped in is listed at once) and, when execute runs in
// this process (`upstreams` set), the tools its upstream MCP servers last
// listed, under `policy`.
std::shared_ptr<ToolDirectory> MakeToolDirectory(const std::string& policy_path, const std::string& data_dir,
                                                 ToolDirectory::PolicyFn policy,
                                                 std::shared_ptr<const McpUpstreams> upstreams = nullptr);
// The tools of upstream servers as McpUpstreams::Describe() gives them.
std::vector<ToolDescriptor> UpstreamDescriptors(const Json& described);

}  // namespace tollgate
