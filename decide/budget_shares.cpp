#include "decide/budget_shares.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "decide/compiled_policy.h"

namespace tollgate {

std::vector<BudgetShare> BudgetShares(const PolicyInForce& policy, const BudgetLedger& ledger, int64_t now_us,
                                      size_t max_orgs) {
  std::vector<BudgetShare> out;
  if (!policy.has_policy()) return out;
  // The holders with an entry: (org, agent, session).
  std::map<std::string, std::set<std::pair<std::string, std::string>>> holders;
  ledger.ForEachEntry([&](const BudgetEntry& e) { holders[e.org_id].emplace(e.agent_id, e.session_id); });
  std::map<std::string, double> org_max;
  for (const auto& [org, agents_sessions] : holders) {
    const Policy::Compiled& c = policy.file()->compiled(org);
    for (const Budget& b : c.budgets) {
      const BudgetLedger::Scope scope = b.session_window ? BudgetLedger::Scope::kSession : b.scope;
      const int64_t from = b.session_window ? INT64_MIN : now_us - b.window_us;
      std::set<std::pair<std::string, std::string>> seen;  // the holder keys summed already
      double best = 0;
      for (const auto& [agent, session] : agents_sessions) {
        if (!b.agent.empty() && b.agent != agent) continue;
        const std::pair<std::string, std::string> key{scope == BudgetLedger::Scope::kOrg ? "" : agent,
                                                      scope == BudgetLedger::Scope::kSession ? session : ""};
        if (!seen.insert(key).second) continue;
        const BudgetLedger::Usage u = ledger.Sum(scope, org, agent, session, b.tool, from, now_us, "");
        if (b.max_micros > 0)
          best = std::max(best, static_cast<double>(u.micros) / static_cast<double>(b.max_micros));
        if (b.max_calls > 0)
          best = std::max(best, static_cast<double>(u.calls) / static_cast<double>(b.max_calls));
        if ((b.max_micros == 0 && u.micros > 0) || (b.max_calls == 0 && u.calls > 0))
          best = std::max(best, 1.0);
      }
      out.push_back({org, b.name, best});
      org_max[org] = std::max(org_max[org], best);
    }
  }
  if (org_max.size() > max_orgs) {
    std::vector<std::pair<double, std::string>> ranked;
    for (const auto& [org, m] : org_max) ranked.emplace_back(-m, org);
    std::sort(ranked.begin(), ranked.end());
    std::set<std::string> keep;
    for (size_t i = 0; i < max_orgs; ++i) keep.insert(ranked[i].second);
    std::erase_if(out, [&](const BudgetShare& s) { return !keep.count(s.org); });
  }
  return out;
}

}  // namespace tollgate
