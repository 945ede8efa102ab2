#include "deploy/duragent_local_rules.h"

#include <filesystem>

#include "core/log.h"
#include "decide/duragent_policy.h"

namespace tollgate {

std::function<void(const std::vector<Event>&)> DuragentLocalRulesListener(
    std::string policy_path, std::function<PolicyInForce()> policy) {
  std::error_code ec;
  if (!std::filesystem::is_directory(policy_path, ec)) return [](const std::vector<Event>&) {};
  return [dir = std::move(policy_path), policy = std::move(policy)](const std::vector<Event>& events) {
    for (const Event& e : events) {
      if (e.type != ev::kPolicyUpdated || e.data.value("tier", "") != "agent_local") continue;
      const bool grant = e.data.value("source", "").rfind("approval:", 0) == 0;
      std::vector<std::string> add, remove;
      for (const Json& p : e.data.value(grant ? "allow" : "revoke", Json::array())) {
        if (p.is_string()) (grant ? add : remove).push_back(p.get<std::string>());
      }
      if (add.empty() && remove.empty()) continue;
      const std::string org = e.data.value("org_id", e.org_id), agent = e.data.value("agent_id", e.agent_id);
      std::string layout_org = kDuragentDefaultOrg;
      if (const PolicyInForce pif = policy(); pif.has_policy()) {
        const Json& doc = pif.file()->doc();
        if (auto l = doc.find("layout"); l != doc.end() && l->is_object())
          layout_org = l->value("org", layout_org);
      }
      const std::string path = DuragentLocalPolicyPath(dir, agent);
      std::error_code ec;
      if (org != layout_org || path.empty() || !std::filesystem::is_directory(dir + "/agents/" + agent, ec))
        continue;
      bool changed = false;
      Status s = UpdateDuragentLocalPolicy(path, add, remove, &changed);
      if (!s.ok()) {
        log::Error({"approve", e.request_id, e.session_id}) << "allow always: " << s.message() << "\n";
      } else if (changed) {
        log::Info({"approve", e.request_id, e.session_id})
            << "allow always: " << path << (grant ? " allows " : " no longer allows ")
            << Json(grant ? add : remove).dump() << "\n";
      }
    }
  };
}

}  // namespace tollgate
