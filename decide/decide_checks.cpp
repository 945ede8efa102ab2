// The pieces of the decision (decide/decide_checks.h is the contract).
#include "decide/decide_checks.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <set>

#include "core/invocation.h"
#include "core/messages.h"
#include "core/shell_line.h"
#include "core/tool_kind.h"

namespace tollgate::decide_checks {

namespace {

std::string MicrosToUsd(int64_t m) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "$%.2f", static_cast<double>(m) / 1e6);
  if (m % 10000 != 0) std::snprintf(buf, sizeof buf, "$%.6g", static_cast<double>(m) / 1e6);
  return buf;
}

std::vector<std::string> Expand(const Policy::Compiled& c, const std::vector<std::string>& in) {
  std::set<std::string> out;
  for (const auto& a : in) {
    if (a.rfind("group:", 0) == 0) {
      auto it = c.groups.find(a.substr(6));
      if (it != c.groups.end()) out.insert(it->second.begin(), it->second.end());
    } else {
      out.insert(a);
    }
  }
  return {out.begin(), out.end()};
}

const char* WindowWord(const Budget& b) {
  return b.session_window            ? "this session"
         : b.window_name == "minute" ? "the last minute"
         : b.window_name == "hour"   ? "the last hour"
                                     : "the last day";
}

}  // namespace

// Most specific wins, field by field: tool > danger level > org > default.
void ResolveApproval(const Policy::Compiled& c, const InvocationFacts& f, DangerLevel danger, Decision* d) {
  const ApprovalSpec* specs[4] = {nullptr, nullptr, nullptr, &c.approval_default};
  if (auto it = c.approval_by_tool.find(*f.tool); it != c.approval_by_tool.end()) specs[0] = &it->second;
  if (auto it = c.approval_by_danger.find(DangerName(danger)); it != c.approval_by_danger.end())
    specs[1] = &it->second;
  if (auto it = c.approval_by_org.find(*f.org); it != c.approval_by_org.end()) specs[2] = &it->second;
  d->quorum = 1;
  d->timeout_s = 900;
  d->approvers.clear();
  for (const ApprovalSpec* s : specs) {
    if (s != nullptr && s->quorum > 0) {
      d->quorum = s->quorum;
      break;
    }
  }
  for (const ApprovalSpec* s : specs) {
    if (s != nullptr && s->timeout_s > 0) {
      d->timeout_s = s->timeout_s;
      break;
    }
  }
  for (const ApprovalSpec* s : specs) {
    if (s != nullptr && s->has_approvers) {
      d->approvers = Expand(c, s->approvers);
      break;
    }
  }
  Step(d, "approval", "ask",
       "quorum " + std::to_string(d->quorum) + ", " +
           (d->approvers.empty() ? std::string("any approver of the org")
                                 : std::to_string(d->approvers.size()) + " approvers") +
           ", timeout " + std::to_string(d->timeout_s) + "s");
}

// Budget check for an allow/ask verdict: true when every budget has room.
bool CheckBudgets(const Policy::Compiled& c, const BudgetLedger& ledger, const InvocationFacts& f,
                  int64_t at_us, int64_t cost, Decision* d) {
  bool any = false;
  for (const Budget& b : c.budgets) {
    if (!b.agent.empty() && b.agent != *f.agent) continue;
    if (!b.tool.empty() && b.tool != *f.tool) continue;
    any = true;
    d->budgets.push_back(b.name);
    BudgetLedger::Scope scope = b.scope;
    int64_t from = INT64_MIN;
    if (b.session_window) {
      scope = BudgetLedger::Scope::kSession;
    } else {
      from = at_us - b.window_us;
    }
    // A session window narrows any scope to this session; org/agent scopes
    // with a rolling window sum over the whole org/agent.
    BudgetLedger::Usage u =
        ledger.Sum(scope, *f.org, *f.agent, *f.session, b.tool, from, at_us, *f.request_id);
    const std::string who = b.scope == BudgetLedger::Scope::kOrg     ? "org " + *f.org
                            : b.scope == BudgetLedger::Scope::kAgent ? "agent " + *f.agent
                                                                     : "session " + *f.session;
    if (b.max_micros >= 0 && u.micros + cost > b.max_micros) {
      int64_t left = std::max<int64_t>(0, b.max_micros - u.micros);
      Step(d, "budget", "deny", b.name);
      Finish(d, "deny",
             "budget '" + b.name + "' (" + who + ", " + WindowWord(b) +
                 (b.tool.empty() ? "" : ", tool " + b.tool) + "): spent " + MicrosToUsd(u.micros) + " of " +
                 MicrosToUsd(b.max_micros) + ", " + MicrosToUsd(left) +
                 " remains; this call is estimated at " + MicrosToUsd(cost),
             "budget:" + b.name, errc::kBudgetExceeded);
      return false;
    }
    if (b.max_calls >= 0 && u.calls + 1 > b.max_calls) {
      Step(d, "budget", "deny", b.name);
      Finish(d, "deny",
             "budget '" + b.name + "' (" + who + ", " + WindowWord(b) +
                 (b.tool.empty() ? "" : ", tool " + b.tool) + "): " + std::to_string(u.calls) + " of " +
                 std::to_string(b.max_calls) + " calls used, " +
                 std::to_string(std::max<int64_t>(0, b.max_calls - u.calls)) + " remain",
             "budget:" + b.name, errc::kBudgetExceeded);
      return false;
    }
  }
  Step(d, "budget", "pass",
       any ? std::to_string(d->budgets.size()) + " budgets with room" : "no budgets apply");
  return true;
}

// The registry step: the file's exact entry, then its first matching
// pattern, then the catalog's built-in, then any "cli:NAME" or
// "mcp:SERVER/TOOL" of a declared server (HIGH, mutating). False for a
// tool none of them knows.
bool FindToolSpec(const Policy::Compiled& c, const std::string& tool, ToolSpec* spec) {
  if (auto it = c.tools.find(tool); it != c.tools.end()) {
    *spec = it->second;
    return true;
  }
  for (const auto& [g, s] : c.tool_patterns) {
    if (g.Match(tool)) {
      *spec = s;
      return true;
    }
  }
  if (const ToolFacts* b = FindBuiltinTool(tool)) {
    *spec = CatalogSpec(*b);
    return true;
  }
  if (IsCliTool(tool) && tool.size() > 4) {
    spec->danger = DangerLevel::kHigh;
    spec->read_only = false;
    spec->category = "cli";
    return true;
  }
  // An upstream MCP server's tool: known when the server is declared. Its
  // own annotations (readOnlyHint) are the server's word, not ours.
  if (const auto slash = tool.find('/'); IsMcpTool(tool) && slash != std::string::npos &&
                                         slash + 1 < tool.size() &&
                                         c.mcp_servers.count(tool.substr(4, slash - 4))) {
    spec->danger = DangerLevel::kHigh;
    spec->read_only = false;
    spec->category = "mcp";
    return true;
  }
  return false;
}

// "N simple commands: [git status] [git diff]" for decision.checks, each
// command and the whole cut short so a long line stays a readable detail.
std::string CommandsDetail(const ShellLine& line) {
  std::string out = std::to_string(line.commands.size()) +
                    (line.commands.size() == 1 ? " simple command" : " simple commands");
  if (!line.ok()) out += " before the construct";
  out += ":";
  for (const auto& c : line.commands) {
    std::string one = JoinArgv(c.argv);
    if (one.size() > 120) one = one.substr(0, 117) + "...";
    if (out.size() + one.size() > 1000) {
      out += " ...";
      break;
    }
    out += " [" + one + "]";
  }
  return out;
}

// Whether an executor can run `tool`: a built-in, a CLI tool, or a tool of
// a declared upstream MCP server. A policy's tools: entry (or pattern) that
// names anything else makes it known, but nothing could run it.
bool HasExecutor(const Policy::Compiled& c, const std::string& tool) {
  if (FindBuiltinTool(tool) != nullptr) return true;
  if (IsCliTool(tool)) return tool.size() > 4;
  const auto slash = tool.find('/');
  return IsMcpTool(tool) && slash != std::string::npos && slash + 1 < tool.size() &&
         c.mcp_servers.count(tool.substr(4, slash - 4)) > 0;
}

}  // namespace tollgate::decide_checks
