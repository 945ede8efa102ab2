#include "audit/agent_rules.h"

#include <algorithm>

#include "audit/audit_query.h"
#include "core/sha256.h"

namespace tollgate {

Json AgentRule::ToJson() const {
  return {{"org_id", org_id},
          {"agent_id", agent_id},
          {"pattern", pattern},
          {"granted_by", granted_by},
          {"source", source},
          {"seq", seq},
          {"granted_at", FormatTime(time_us)}};
}

Status ListAgentRules(const LogStore& store, const std::string& org, const std::string& agent,
                      std::vector<AgentRule>* out) {
  out->clear();
  AuditQuery q;
  q.types = {ev::kPolicyUpdated};
  q.org_id = org;
  q.agent_id = agent;
  return ForEachEvent(store, q, [out](const Event& e) {
    const Json& d = e.data;
    if (d.value("tier", "") != "agent_local") return;
    const std::string o = d.value("org_id", e.org_id), a = d.value("agent_id", e.agent_id);
    auto held = [&](const std::string& pattern) {
      return [&, pattern](const AgentRule& r) {
        return r.org_id == o && r.agent_id == a && r.pattern == pattern;
      };
    };
    for (const Json& p : d.value("allow", Json::array())) {
      if (!p.is_string() || std::any_of(out->begin(), out->end(), held(p.get<std::string>()))) continue;
      out->push_back(
          {o, a, p.get<std::string>(), d.value("approver", ""), d.value("source", ""), e.seq, e.time_us});
    }
    for (const Json& p : d.value("revoke", Json::array())) {
      if (p.is_string())
        out->erase(std::remove_if(out->begin(), out->end(), held(p.get<std::string>())), out->end());
    }
  });
}

Event AgentRulesRevokedEvent(const std::string& org, const std::string& agent,
                             const std::vector<std::string>& patterns, const std::string& by,
                             const std::string& comment, int64_t time_us) {
  Json content{{"agent_id", agent}, {"org_id", org}, {"revoke", patterns}, {"time_us", time_us}};
  std::string bytes;
  if (!CanonicalBytes(content, &bytes).ok()) bytes = content.dump();
  const std::string hash = Sha256Hex(bytes);
  Event e;
  e.type = ev::kPolicyUpdated;
  e.id = MakeEventId(e.type, "", "revoke:" + hash);
  e.time_us = time_us;
  e.org_id = org;
  e.agent_id = agent;
  e.data = {{"policy_version", "agent-rule-revoked:" + hash.substr(0, 16)},
            {"content_hash", hash},
            {"source", "revoked by " + by},
            {"tier", "agent_local"},
            {"org_id", org},
            {"agent_id", agent},
            {"allow", Json::array()},
            {"revoke", patterns},
            {"revoked_by", by}};
  if (!comment.empty()) e.data["comment"] = comment;
  return e;
}

}  // namespace tollgate
