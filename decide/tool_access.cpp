#include "decide/tool_access.h"

#include <map>

#include "core/invocation.h"
#include "decide/compiled_policy.h"
#include "decide/invocation_facts.h"

namespace tollgate {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Tools whose invocation string or file subject is built from arguments.
bool InvocationHasArgs(const std::string& tool) {
  return tool == "http_request" || IsCommandTool(tool) || IsFileTool(tool);
}

}  // namespace

ToolAccess AccessOf(const PolicyInForce& policy, const std::string& org, const std::string& agent,
                    const std::string& tool, int64_t now_us) {
  const Json probe{{"request_id", "tools-probe"}, {"org_id", org}, {"agent_id", agent},
                   {"session_id", "tools-probe"}, {"tool", tool},  {"args", Json::object()}};
  BudgetLedger empty;
  Decision d;
  DecideInto(policy, empty, DecideInput{&probe, now_us, nullptr, /*probe=*/true}, &d);
  ToolAccess a;
  a.danger = d.danger;
  a.read_only = d.read_only;
  a.rule = d.rule;
  a.reason = d.reason;
  a.policy_version = d.policy_version;
  a.asks = d.verdict == "ask";
  // An alias's invocation is built from its arguments too.
  const bool by_args =
      InvocationHasArgs(tool) || (tool != "http_request" && StartsWith(d.invocation, "http_request:"));
  const bool by_rule = StartsWith(d.rule, "org.rule:") || StartsWith(d.rule, "agent.rule:");
  a.depends_on_arguments = by_args || by_rule;
  if (d.verdict != "deny") {
    a.callable = true;
    return a;
  }
  const bool whole_tool = StartsWith(d.rule, "registry:") || d.rule == "org.tool_allowlist" ||
                          d.rule == "agent.tools" || StartsWith(d.rule, "mode:plan") ||
                          d.rule == "policy:none";
  const bool tool_level_glob =
      !by_args && (StartsWith(d.rule, "org.deny:") || StartsWith(d.rule, "agent.deny:") ||
                   StartsWith(d.rule, "mode:restrict"));
  a.callable = !(whole_tool || tool_level_glob);
  // Denied for this probe only (a rule, a budget, a missing URL): a call
  // with other arguments may pass.
  if (a.callable) a.depends_on_arguments = true;
  return a;
}

std::vector<ToolDescriptor> AliasDescriptors(const PolicyInForce& policy, const std::string& org,
                                             const std::string& agent) {
  std::vector<ToolDescriptor> out;
  if (!policy.has_policy()) return out;
  const Policy::Compiled& c = policy.file()->compiled(org);
  auto it = c.agents.find(agent);
  const EffectiveHttp http = HttpFor(c, it == c.agents.end() ? nullptr : &it->second);
  std::map<std::string, const HttpAlias*> named;
  for (const auto* m : http.aliases) {
    if (m == nullptr) continue;
    for (const auto& [name, a] : *m) named.emplace(name, &a);  // the agent's come first and stay
  }
  for (const auto& [name, a] : named) {
    ToolDescriptor d;
    d.name = name;
    d.description = a->description.empty() ? a->method + " " + a->url : a->description;
    d.input_schema = a->input_schema;
    d.source = "http";
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace tollgate
