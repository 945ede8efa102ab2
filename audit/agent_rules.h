// The agent-local "allow always" rules (docs/approvals.md, "Allow always"),
// as the log records them: policy.updated events of tier agent_local, each
// granting patterns (an approver's "always") or revoking them (`tollgate
// rules revoke`, POST /v1/rules/revoke). Listed from the log alone, so the
// CLI, the HTTP API and decide's fold (decide/policy_in_force.h) agree.
// Thread-safe like get_audit_log.
#pragma once

#include <string>
#include <vector>

#include "audit/log_store.h"
#include "core/event.h"

namespace tollgate {

struct AgentRule {
  std::string org_id, agent_id, pattern;
  std::string granted_by;  // the approver of the "always"
  std::string source;      // "approval:<request_id>"
  uint64_t seq = 0;        // the policy.updated that granted it
  int64_t time_us = 0;
  Json ToJson() const;
};

// The rules in force for `org` (empty: every org) and `agent` (empty:
// every agent), oldest grant first.
Status ListAgentRules(const LogStore& store, const std::string& org, const std::string& agent,
                      std::vector<AgentRule>* out);

// The policy.updated that revokes `patterns` of (org, agent): allow empty,
// revoke the patterns, revoked_by `by`. Its content hash covers the time, so
// a pattern granted again can be revoked again.
Event AgentRulesRevokedEvent(const std::string& org, const std::string& agent,
                             const std::vector<std::string>& patterns, const std::string& by,
                             const std::string& comment, int64_t time_us);

}  // namespace tollgate
