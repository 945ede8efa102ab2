// Duragent's workspace layout as one tollgate policy document
// (docs/policy.md, "Duragent policy files"). `up --policy DIR`, DIR holding
//   .duragent/policy.yaml                     the workspace tier
//   agents/<name>/policy.yaml                 the agent base tier
//   agents/<name>/policy.local.yaml           the agent local tier ("allow always")
//   agents/<name>/agent.yaml                  spec.tools: the agent's grants
// is translated into: the workspace tier at the top level, each agent under
// orgs.<org>.agents.<name> (<org>: the workspace file's `org:`, default
// "default") with its two tiers merged as Duragent merges them (mode: the
// most specific tier that sets one; deny, allow, notify: unions), the
// execute section's tools_dir / agents_dir / declared_tools, and `layout`
// (the root, the org and the SHA-256 of every file read). Every error names
// the file and its line. Pure apart from reading DIR; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "core/status.h"
#include "decide/policy_loader.h"

namespace tollgate {

inline constexpr const char* kDuragentDefaultOrg = "default";
inline constexpr size_t kDuragentMaxAgents = 1024;
inline constexpr size_t kDuragentMaxFileBytes = 1 << 20;

// The translated document (not yet validated as a whole).
Status TranslateDuragentLayout(const std::string& dir, Json* doc);
// Translates and loads it (source = DIR). E_POLICY_INVALID with
// "FILE: line N: ..." when a file is refused.
Status LoadDuragentLayout(const std::string& dir, PolicyPtr* out);

// Every file the layout would read, present or not, in a fixed order (the
// policy watch stats these; a new agent directory adds three).
std::vector<std::string> DuragentLayoutFiles(const std::string& dir);

// agents/<agent>/policy.local.yaml under `dir`; "" when `agent` is not a
// plain directory name (empty, ".", "..", a '/', a control character).
std::string DuragentLocalPolicyPath(const std::string& dir, const std::string& agent);

// Adds `add` to and removes `remove` from the allow list of the policy
// file at `path` (an agent's policy.local.yaml: "allow always" approvals
// and their revocations), creating it with apiVersion duragent/v1alpha1
// and kind Policy when absent. Idempotent; written atomically (a temporary
// file renamed over it); other keys kept (comments are not). *changed says
// whether the file was written.
Status UpdateDuragentLocalPolicy(const std::string& path, const std::vector<std::string>& add,
                                 const std::vector<std::string>& remove, bool* changed);

}  // namespace tollgate
