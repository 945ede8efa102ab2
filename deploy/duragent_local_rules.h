// "Allow always" into a Duragent workspace (docs/policy.md, "Duragent
// policy files"): when the policy source is a workspace directory, every
// agent-local rule the approve stage appends (policy.updated, tier
// agent_local, source "approval:<request>": the quorum of an "allow
// always" approval completed) is also added to
// agents/<agent>/policy.local.yaml's allow list, and every revocation
// (`tollgate rules revoke`) removed from it, for an agent of the layout's
// org whose directory exists. The decide watch then reloads the workspace
// and logs the new version. The logged agent-local rule stays as it is.
// Only the process that owns the log registers it (`tollgate up`, or the
// distributed deployment's keeper, given decide's --policy DIR).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/event.h"
#include "decide/policy_in_force.h"

namespace tollgate {

// The LogSink listener; a no-op when `policy_path` is not a directory.
// `policy` gives the policy in force (its `layout.org` names the org).
std::function<void(const std::vector<Event>&)> DuragentLocalRulesListener(
    std::string policy_path, std::function<PolicyInForce()> policy);

}  // namespace tollgate
