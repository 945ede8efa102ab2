// How close each budget is to its limit, for /metrics
// (tollgate_budget_usage_ratio, docs/operations.md): per org and budget of
// that org's policy in force, the largest share of the limit that any one
// holder (the org, one agent or one session, by the budget's scope) has
// used in the budget's current window: its spent USD over max_usd or its
// calls over max_calls, whichever is higher. 1 means the next call is
// denied. Agents and sessions are folded into the maximum, never labels,
// so the label set is bounded by orgs and the policy's budget names. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "decide/policy_engine.h"

namespace tollgate {

struct BudgetShare {
  std::string org, budget;
  double share = 0;  // 0 when nobody has used any of it
};

// Sorted by (org, budget); at most `max_orgs` orgs (those with the highest
// share first), so a deployment with thousands of orgs keeps a bounded
// scrape.
std::vector<BudgetShare> BudgetShares(const PolicyInForce& policy, const BudgetLedger& ledger, int64_t now_us,
                                      size_t max_orgs = 100);

}  // namespace tollgate
