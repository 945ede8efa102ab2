// Whether an agent may call a tool at all under the policy in force, and
// whether a call would ask a human: what tools/list, GET /v1/tools and
// `tollgate tools list` show (docs/mcp.md). Answered by DecideInto itself
// on a probe call with no arguments, so it can never disagree with decide's
// order of checks (docs/policy.md); only the reading of the probe's answer
// is here. An http_request alias's probe is decided on the URL the
// operator configured (DecideInput::probe), so "asks" is what decide does
// with any call that fits the alias. Pure.
#pragma once

#include <string>
#include <vector>

#include "core/tool_descriptor.h"
#include "decide/policy_engine.h"

namespace tollgate {

struct ToolAccess {
  // False when the probe is denied by something no argument can change:
  // an unknown tool, the org's allowlist, the agent's grants, plan mode for
  // a mutating tool, or a deny glob / restrict mode on an invocation that
  // does not depend on arguments (builtin:TOOL, cli:NAME, mcp:S/T).
  bool callable = false;
  bool asks = false;                  // the probe's verdict is ask
  bool depends_on_arguments = false;  // a call's verdict may differ from the probe's
  DangerLevel danger = DangerLevel::kCritical;
  bool read_only = false;
  std::string rule, reason, policy_version;
};

ToolAccess AccessOf(const PolicyInForce& policy, const std::string& org, const std::string& agent,
                    const std::string& tool, int64_t now_us);

// The http_request aliases (core/http_alias.h) the policy in force gives
// `agent` of `org`, described for tools/list (source "http"); the agent's
// own over the top level's of the same name. Whether each is callable is
// AccessOf's answer, as for any tool.
std::vector<ToolDescriptor> AliasDescriptors(const PolicyInForce& policy, const std::string& org,
                                             const std::string& agent);

}  // namespace tollgate
