// PolicyInForce: the file policy plus the agent-local tier (rules folded
// from policy.updated events of tier "agent_local", i.e. "allow always"
// approvals): what decisions are made under. Its version(org) changes when
// that org's effective policy or that org's agent-local rules change, and
// only then (docs/policy.md, "Versions").
//
// A value type with no internal locking: the decide stage guards it with
// its own mutex.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/event.h"
#include "core/status.h"
#include "decide/glob.h"
#include "decide/policy_loader.h"

namespace tollgate {

class PolicyInForce {
 public:
  PolicyInForce();
  ~PolicyInForce();
  PolicyInForce(const PolicyInForce&);
  PolicyInForce& operator=(const PolicyInForce&);

  bool has_policy() const { return file_ != nullptr; }
  const PolicyPtr& file() const { return file_; }
  void SetFile(PolicyPtr p);

  // Folds one policy.updated event: tier "file" replaces the file policy
  // (from data.policy); tier "agent_local" adds allow rules for
  // (org_id, agent_id). Idempotent: the same rule (content_hash) twice
  // changes nothing. Other events are ignored. Errors leave *this as it was.
  Status Apply(const Event& e);
  // Adds agent-local allow patterns directly (tests, explain), and drops
  // the `revoke` ones (`tollgate rules revoke`, docs/approvals.md).
  Status AddAgentLocal(const std::string& org_id, const std::string& agent_id,
                       const std::vector<std::string>& allow, const std::string& content_hash,
                       const std::vector<std::string>& revoke = {});
  // The agent-local allow patterns of (org, agent) in force.
  std::vector<std::string> AgentLocalPatterns(const std::string& org_id, const std::string& agent_id) const;

  // What decision.policy_version of a request of org `org_id` is: the file
  // policy's version(org_id), plus "+local:<16 hex>" (SHA-256 of the sorted
  // content hashes of that org's agent-local rules, one per line) when the
  // org has agent-local rules. Changes when that org's effective policy or
  // its agent-local rules change, never with another org's.
  const std::string& version(const std::string& org_id) const {
    if (org_versions_.empty()) return default_version_;
    auto it = org_versions_.find(org_id);
    return it == org_versions_.end() ? default_version_ : it->second;
  }
  // The deployment-wide version, for logs and messages only (it changes
  // with every org's edits, so no decision carries it): the file's
  // version(), plus "+local:<16 hex>" over every org's agent-local content
  // hashes when there are any.
  const std::string& version() const { return version_; }
  // Agent-local allow globs of (org, agent), or null.
  const GlobSet* AgentLocal(const std::string& org_id, const std::string& agent_id) const;

 private:
  void Reversion();
  PolicyPtr file_;
  struct Local;
  std::map<std::string, std::shared_ptr<Local>> local_;  // key org \0 agent
  std::string version_;                                  // deployment-wide
  std::string
      default_version_;  // version(org) of an org with no section, no approvals.orgs entry, no local rules
  std::unordered_map<std::string, std::string> org_versions_;  // every other org's version(org)
};

}  // namespace tollgate
