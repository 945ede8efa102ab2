#include "deploy/tool_directory.h"

#include <algorithm>

#include "core/event.h"
#include "core/tool_catalog.h"
#include "decide/policy_engine.h"
#include "decide/tool_access.h"
#include "deploy/policy_source.h"
#include "execute/config.h"
#include "execute/tools/cli_tool.h"

namespace tollgate {

std::vector<ToolDescriptor> BuiltinDescriptors() {
  std::vector<ToolDescriptor> out;
  for (const ToolFacts& t : BuiltinTools()) {
    ToolDescriptor d;
    d.name = std::string(t.name);
    d.description = std::string(t.description);
    d.input_schema = Json::parse(InputSchemaOf(t.name));
    d.source = "builtin";
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<ToolDescriptor> UpstreamDescriptors(const Json& described) {
  std::vector<ToolDescriptor> out;
  if (!described.is_object()) return out;
  for (const auto& [server, s] : described.items()) {
    if (!s.contains("tools") || !s["tools"].is_array()) continue;
    for (const auto& t : s["tools"]) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
      ToolDescriptor d;
      d.name = "mcp:" + server + "/" + t["name"].get<std::string>();
      d.description = t.contains("description") && t["description"].is_string()
                          ? t["description"].get<std::string>()
                          : "";
      d.input_schema = t.contains("inputSchema") && t["inputSchema"].is_object() ? t["inputSchema"]
                                                                                 : Json{{"type", "object"}};
      d.source = "mcp";
      out.push_back(std::move(d));
    }
  }
  return out;
}

std::shared_ptr<ToolDirectory> MakeToolDirectory(const std::string& policy_path, const std::string& data_dir,
                                                 ToolDirectory::PolicyFn policy,
                                                 std::shared_ptr<const McpUpstreams> upstreams) {
  ExecutePolicy ep;
  if (!LoadDeploymentExecutePolicy(policy_path, data_dir, &ep).ok()) ep = DefaultExecutePolicy(data_dir);
  const std::string dir = ep.tools_dir;
  return std::make_shared<ToolDirectory>(
      [dir, upstreams] {
        std::vector<ToolDescriptor> tools = BuiltinDescriptors();
        for (ToolDescriptor& d : CliToolDescriptors(dir)) tools.push_back(std::move(d));
        if (upstreams) {
          for (ToolDescriptor& d : UpstreamDescriptors(upstreams->Describe())) tools.push_back(std::move(d));
        }
        return tools;
      },
      std::move(policy));
}

namespace {
// A built-in's catalog category (filesystem, network, ...); another tool's
// is its kind: cli, mcp, or network for an http_request alias.
std::string CategoryOf(const ToolDescriptor& t) {
  if (const ToolFacts* f = FindBuiltinTool(t.name); f != nullptr && t.source == "builtin")
    return std::string(f->category);
  return t.source == "http" ? "network" : t.source;
}
}  // namespace

Status ToolDirectory::List(const std::string& org, const std::string& agent, Json* out) const {
  const PolicyInForce policy = policy_();
  if (!policy.has_policy()) return Status::Error("E_NO_POLICY", "no policy is in force");
  std::vector<ToolDescriptor> tools = tools_();
  for (ToolDescriptor& d : AliasDescriptors(policy, org, agent)) tools.push_back(std::move(d));
  std::sort(tools.begin(), tools.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  const int64_t now = NowMicros();
  Json list = Json::array();
  std::string version;
  for (const ToolDescriptor& t : tools) {
    ToolAccess a = AccessOf(policy, org, agent, t.name, now);
    version = a.policy_version;
    if (!a.callable) continue;
    list.push_back({{"name", t.name},
                    {"description", t.description},
                    {"input_schema", t.input_schema},
                    {"source", t.source},
                    {"category", CategoryOf(t)},
                    {"danger", DangerName(a.danger)},
                    {"read_only", a.read_only},
                    {"asks", a.asks},
                    {"depends_on_arguments", a.depends_on_arguments}});
  }
  *out = {{"org_id", org}, {"agent_id", agent}, {"policy_version", version}, {"tools", std::move(list)}};
  return Status::Ok();
}

}  // namespace tollgate
