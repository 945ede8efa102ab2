// The pieces the decision's steps (decide/policy_engine.cpp) are built
// of: recording a check and a verdict, the registry's lookups, the budget
// check and the approval an ask gets. Internal to decide/.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "decide/compiled_policy.h"
#include "decide/invocation_facts.h"
#include "decide/policy_engine.h"

namespace tollgate {

namespace decide_checks {

// First match of `set` against the invocation or the second subject.
inline int MatchSubjects(const GlobSet& set, const std::string& inv, const std::string& subject2) {
  if (set.size() == 0) return -1;
  int i = set.FirstMatch(inv);
  if (i < 0 && !subject2.empty()) i = set.FirstMatch(subject2);
  return i;
}

// One line of decision.checks.
inline void Step(Decision* d, const char* check, const char* result, std::string detail = {}) {
  d->checks.push_back({check, result, std::move(detail)});
}

// The verdict, its reason and rule, and (a refusal) its error code.
inline void Finish(Decision* d, const char* verdict, std::string reason, std::string rule,
                   const char* code = nullptr) {
  d->verdict = verdict;
  d->reason = std::move(reason);
  d->rule = std::move(rule);
  if (code != nullptr) d->error_code = code;
}

// Most specific wins, field by field: tool > danger level > org > default.
void ResolveApproval(const Policy::Compiled& c, const InvocationFacts& f, DangerLevel danger, Decision* d);

// Budget check for an allow/ask verdict: true when every budget has room;
// false with `d` finished as a deny (E_BUDGET_EXCEEDED).
bool CheckBudgets(const Policy::Compiled& c, const BudgetLedger& ledger, const InvocationFacts& f,
                  int64_t at_us, int64_t cost, Decision* d);

// The registry step: the file's exact entry, then its first matching
// pattern, then the catalog's built-in, then any "cli:NAME" or
// "mcp:SERVER/TOOL" of a declared server (HIGH, mutating). False for a
// tool none of them knows.
bool FindToolSpec(const Policy::Compiled& c, const std::string& tool, ToolSpec* spec);

// "N simple commands: [git status] [git diff]" for decision.checks, each
// command and the whole cut short so a long line stays a readable detail.
std::string CommandsDetail(const ShellLine& line);

// Whether an executor can run `tool`: a built-in, a CLI tool, or a tool of
// a declared upstream MCP server. A policy's tools: entry (or pattern) that
// names anything else makes it known, but nothing could run it.
bool HasExecutor(const Policy::Compiled& c, const std::string& tool);

}  // namespace decide_checks
}  // namespace tollgate
