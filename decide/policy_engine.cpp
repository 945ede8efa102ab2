// The decision itself: the order of checks of docs/policy.md, over a
// loaded policy (decide/policy_loader.h) and the facts of one request
// (decide/invocation_facts.h). decide/policy_engine.h is the contract.
#include "decide/policy_engine.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <set>

#include "core/invocation.h"
#include "core/messages.h"
#include "core/shell_line.h"
#include "decide/compiled_policy.h"
#include "decide/invocation_facts.h"

namespace tollgate {

void ExecutorTools::ApplyReload(const std::string& org, const std::string& agent, const Json& tools) {
  std::map<std::string, std::string>& mine = agent_written[org + "/" + agent];
  mine.clear();
  if (!tools.is_array()) return;
  for (const Json& t : tools) {
    if (!t.is_object() || t.value("source", "") != "agent_written") continue;
    const std::string name = t.value("name", ""), sha = t.value("sha256", "");
    if (name.rfind("cli:", 0) == 0 && name.size() > 4 && !sha.empty()) mine[name.substr(4)] = sha;
  }
}

bool IsBuiltinTool(std::string_view tool, bool* read_only) {
  const ToolFacts* b = FindBuiltinTool(tool);
  if (b == nullptr) return false;
  if (read_only != nullptr) *read_only = b->read_only();
  return true;
}

// ---------------------------------------------------------------------------
// Decide.
void Decision::Clear() {
  verdict.clear();
  reason.clear();
  rule.clear();
  danger = DangerLevel::kCritical;
  policy_version.clear();
  error_code.clear();
  has_reservation = false;
  reserve_micros = 0;
  received_at.clear();
  budgets.clear();
  invocation.clear();
  subject.clear();
  tool_sha256.clear();
  read_only = false;
  checks.clear();
  quorum = 1;
  approvers.clear();
  timeout_s = 900;
  notify.clear();
}

Json Decision::ToJson() const {
  Json j = {{"verdict", verdict},
            {"reason", reason},
            {"rule", rule},
            {"danger_level", DangerName(danger)},
            {"policy_version", policy_version},
            {"invocation", invocation},
            {"read_only", read_only}};
  if (!subject.empty()) j["subject"] = subject;
  if (!tool_sha256.empty()) j["tool_sha256"] = tool_sha256;
  if (!error_code.empty()) j["error_code"] = error_code;
  if (has_reservation) {
    j["reservation"] = {{"usd", static_cast<double>(reserve_micros) / 1e6},
                        {"received_at", received_at},
                        {"budgets", budgets}};
  }
  Json cj = Json::array();
  for (const auto& c : checks) cj.push_back({{"check", c.check}, {"result", c.result}, {"detail", c.detail}});
  j["checks"] = std::move(cj);
  if (verdict == "ask")
    j["approval"] = {{"quorum", quorum}, {"approvers", approvers}, {"timeout_s", timeout_s}};
  if (!notify.empty()) j["notify"] = notify;
  return j;
}

namespace {

std::string MicrosToUsd(int64_t m) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "$%.2f", static_cast<double>(m) / 1e6);
  if (m % 10000 != 0) std::snprintf(buf, sizeof buf, "$%.6g", static_cast<double>(m) / 1e6);
  return buf;
}

// First match of `set` against the invocation or the second subject.
int MatchSubjects(const GlobSet& set, const std::string& inv, const std::string& subject2) {
  if (set.size() == 0) return -1;
  int i = set.FirstMatch(inv);
  if (i < 0 && !subject2.empty()) i = set.FirstMatch(subject2);
  return i;
}

void Step(Decision* d, const char* check, const char* result, std::string detail = {}) {
  d->checks.push_back({check, result, std::move(detail)});
}

void Finish(Decision* d, const char* verdict, std::string reason, std::string rule,
            const char* code = nullptr) {
  d->verdict = verdict;
  d->reason = std::move(reason);
  d->rule = std::move(rule);
  if (code != nullptr) d->error_code = code;
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

const char* WindowWord(const Budget& b) {
  return b.session_window            ? "this session"
         : b.window_name == "minute" ? "the last minute"
         : b.window_name == "hour"   ? "the last hour"
                                     : "the last day";
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
  if (tool.rfind("cli:", 0) == 0 && tool.size() > 4) {
    spec->danger = DangerLevel::kHigh;
    spec->read_only = false;
    spec->category = "cli";
    return true;
  }
  // An upstream MCP server's tool: known when the server is declared. Its
  // own annotations (readOnlyHint) are the server's word, not ours.
  if (const auto slash = tool.find('/'); tool.rfind("mcp:", 0) == 0 && slash != std::string::npos &&
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
  if (tool.rfind("cli:", 0) == 0) return tool.size() > 4;
  const auto slash = tool.find('/');
  return tool.rfind("mcp:", 0) == 0 && slash != std::string::npos && slash + 1 < tool.size() &&
         c.mcp_servers.count(tool.substr(4, slash - 4)) > 0;
}

}  // namespace

void DecideInto(const PolicyInForce& pif, const BudgetLedger& ledger, const DecideInput& in, Decision* d) {
  d->Clear();
  const Json& req = *in.request;
  InvocationFacts f = ReadEnvelope(req);
  d->received_at = FormatTime(in.received_at_us);

  if (!pif.has_policy()) {
    d->invocation = BuildInvocation(*f.tool, *f.args, BaseUrlOf(nullptr), "GET", f.action);
    Step(d, "policy", "deny", "no policy in force");
    Finish(d, "deny", "no policy is in force", "policy:none", errc::kNoPolicy);
    return;
  }
  // 0. the org: the request's org_id picks its effective policy (its
  // section merged over the deployment's, compiled at load) and its
  // version: one lookup each, none when the file has no org sections and
  // no agent-local rules. Every check below reads that org's `c`.
  const Policy::Compiled& c = pif.file()->compiled(*f.org);
  d->policy_version = pif.version(*f.org);
  auto agent_it = c.agents.find(*f.agent);
  const Tier* agent = agent_it == c.agents.end() ? nullptr : &agent_it->second;
  const GlobSet* local = pif.AgentLocal(*f.org, *f.agent);
  EffectiveHttp http = HttpFor(c, agent);
  d->invocation = ResolveInvocation(http, &f);
  const std::string& inv = d->invocation;
  ParseArgs(http, &f, &d->subject);
  const bool is_http = *f.tool == "http_request" || f.alias != nullptr;

  // 1. registry (an http_request alias is the file's `tools:` entry of its
  // name, else http_request's)
  ToolSpec spec;
  const bool known = FindToolSpec(c, *f.tool, &spec) || (f.alias && FindToolSpec(c, "http_request", &spec));
  if (is_http) spec.read_only = IsReadOnlyMethod(f.method);
  if (const ToolFacts* b = FindBuiltinTool(*f.tool);
      b != nullptr && b->reads == Reads::kByAction && c.tools.find(*f.tool) == c.tools.end()) {
    spec.read_only = b->read_only(f.action);  // Duragent's: schedule list reads, create does not
  }
  d->danger = spec.danger;
  d->read_only = spec.read_only;
  if (!known) {
    d->danger = DangerLevel::kCritical;  // nothing is known about it
    Step(d, "registry", "deny", "unknown tool");
    Finish(d, "deny", "unknown tool '" + *f.tool + "'", "registry:unknown-tool", errc::kUnknownTool);
    return;
  }
  // Known to the policy but to no executor: it could never run, so it is
  // denied now rather than sent to approvers first.
  if (!HasExecutor(c, *f.tool) && f.alias == nullptr) {
    Step(d, "registry", "deny", "no executor");
    Finish(d, "deny",
           "'" + *f.tool +
               "' is in the policy's tools: but no executor runs it (built-in tools, cli:NAME, "
               "mcp:SERVER/TOOL of a declared server)",
           "registry:no-executor", errc::kUnknownTool);
    return;
  }
  // A CLI tool no executor has (once they have said what they hold) could
  // never run either.
  const std::string* written = in.executors == nullptr || f.tool->rfind("cli:", 0) != 0
                                   ? nullptr
                                   : in.executors->AgentWritten(*f.org, *f.agent, f.tool->substr(4));
  if (written != nullptr) d->tool_sha256 = *written;  // an agent-written tool runs only these bytes
  if (in.executors != nullptr && in.executors->known() && f.tool->rfind("cli:", 0) == 0 &&
      written == nullptr && !in.executors->HasCli(f.tool->substr(4))) {
    std::string held;
    for (const auto& [executor, names] : in.executors->cli) {
      for (const auto& n : names) held += (held.empty() ? "" : ", ") + n;
    }
    Step(d, "registry", "deny", "no executor has it");
    Finish(d, "deny",
           "no executor has the CLI tool '" + f.tool->substr(4) +
               "' in its tools directory (they hold: " + (held.empty() ? "none" : held) + ")",
           "registry:no-executor", errc::kUnknownTool);
    return;
  }
  // A write while execute.writes_enabled is false could never run: denied
  // now rather than sent to approvers first.
  if (!c.writes_enabled && (*f.tool == "write_file" || *f.tool == "delete_file")) {
    Step(d, "registry", "deny", "writes are disabled");
    Finish(d, "deny", "'" + *f.tool + "' writes files and execute.writes_enabled is false",
           "registry:writes-disabled", errc::kWritesDisabled);
    return;
  }
  // An alias call whose arguments do not fit it could never run.
  if (!f.alias_status.ok()) {
    Step(d, "registry", "deny", "arguments do not fit the alias");
    Finish(d, "deny", f.alias_status.message(), "alias:" + f.alias->name, f.alias_status.code().c_str());
    return;
  }
  Step(d, "registry", "pass",
       std::string(DangerName(spec.danger)) + (spec.read_only ? ", read-only" : ", mutating") +
           (f.alias ? ", alias of http_request" : ""));

  // 1b. a command line (execute_command given a line, not an argv): the
  // policy holds for each simple command in it (docs/policy.md, "Command
  // lines"). A line no shell would run, or one redirecting to a file outside
  // the workspace, could never run (execute refuses both): denied now. A
  // line that cannot be analysed statically is never allowed (9b).
  const bool is_line = f.command_line;
  const bool unanalysable = is_line && f.line.kind == ShellLine::Kind::kUnanalysable;
  std::vector<std::string> command_keys;  // "bash:" + each simple command's argv
  if (is_line) {
    if (f.line.kind == ShellLine::Kind::kInvalid) {
      Step(d, "command", "deny", f.line.reason);
      Finish(d, "deny", "the command line is not valid: " + f.line.reason, "command:invalid",
             errc::kInvalidArgs);
      return;
    }
    for (const auto& sc : f.line.commands) {
      command_keys.push_back("bash:" + JoinArgv(sc.argv));
      for (const auto& r : sc.redirections) {
        if (r.names_file() && !IsWorkspaceRedirectTarget(r.target)) {
          Step(d, "command", "deny", "redirection " + r.op + " " + r.target);
          Finish(d, "deny",
                 "'" + JoinArgv(sc.argv) + "' redirects " + r.op + " '" + r.target +
                     "': a command line may redirect only to workspace-relative paths without '..' and "
                     "/dev/null",
                 "command:redirect", errc::kPolicyDenied);
          return;
        }
      }
    }
    Step(d, "command", unanalysable ? "unanalysable" : "pass",
         unanalysable ? f.line.reason + "; " + CommandsDetail(f.line) : CommandsDetail(f.line));
  }

  // Notify globs only annotate.
  for (const Tier* t : {&c.org, agent}) {
    if (t == nullptr) continue;
    int n = MatchSubjects(t->notify, inv, d->subject);
    for (size_t k = 0; n < 0 && k < command_keys.size(); ++k) n = t->notify.FirstMatch(command_keys[k]);
    if (n >= 0) d->notify.push_back(t->notify.at(n).pattern());
  }

  Mode mode = Mode::kAsk;
  const char* mode_from = "default";
  if (c.org.has_mode) {
    mode = c.org.mode;
    mode_from = "org";
  }
  if (agent != nullptr && agent->has_mode) {
    mode = agent->mode;
    mode_from = "agent";
  }
  const int64_t cost = std::max<int64_t>(spec.cost_micros, [&] {
    auto it = req.find("estimated_cost_usd");
    return it != req.end() && it->is_number() ? UsdToMicros(it->get<double>()) : int64_t{0};
  }());

  auto finish_allow_or_ask = [&](const char* verdict, std::string reason, std::string rule) {
    Finish(d, verdict, std::move(reason), std::move(rule));
    if (!CheckBudgets(c, ledger, f, in.received_at_us, cost, d)) return;
    d->has_reservation = true;
    d->reserve_micros = cost;
    if (d->verdict == "ask") ResolveApproval(c, f, spec.danger, d);
  };

  // 2. bypass (not for a line that cannot be analysed: 9b)
  if (mode == Mode::kBypass && unanalysable) {
    Step(d, "mode", "pass", "bypass allows no command line that cannot be analysed");
  } else if (mode == Mode::kBypass) {
    Step(d, "mode", "allow", std::string("bypass (") + mode_from + ")");
    return finish_allow_or_ask("allow", "mode bypass allows every call",
                               std::string("mode:bypass@") + mode_from);
  }

  // 3. deny lists: org ∪ agent, on the invocation and on each simple
  // command of a line. Nothing overrides a deny.
  for (const Tier* t : {&c.org, agent}) {
    if (t == nullptr) continue;
    int i = MatchSubjects(t->deny, inv, d->subject);
    std::string what = i < 0 ? "" : "'" + (t->deny.at(i).Match(inv) ? inv : d->subject) + "'";
    for (size_t k = 0; i < 0 && k < command_keys.size(); ++k) {
      i = t->deny.FirstMatch(command_keys[k]);
      if (i >= 0)
        what = "simple command " + std::to_string(k + 1) + " of the line, '" + command_keys[k] + "',";
    }
    if (i >= 0) {
      const std::string& pat = t->deny.at(i).pattern();
      Step(d, "deny", "deny", pat);
      Finish(d, "deny", what + " matches deny pattern '" + pat + "'",
             std::string(t == &c.org ? "org" : "agent") + ".deny:" + pat, errc::kPolicyDenied);
      return;
    }
  }
  Step(d, "deny", "pass");

  // 4. argument-level deny rules (any tier).
  for (const Tier* t : {&c.org, agent}) {
    if (t == nullptr) continue;
    for (const Rule& r : t->rules) {
      if (r.verdict == "deny" && RuleMatches(r, f)) {
        Step(d, "rules", "deny", r.name);
        Finish(d, "deny", r.reason.empty() ? "denied by rule '" + r.name + "'" : r.reason,
               std::string(t == &c.org ? "org" : "agent") + ".rule:" + r.name, errc::kPolicyDenied);
        return;
      }
    }
  }

  // 5. dangerous: bypass that honoured deny (not for a line that cannot be analysed).
  if (mode == Mode::kDangerous && unanalysable) {
    Step(d, "mode", "pass", "dangerous allows no command line that cannot be analysed");
  } else if (mode == Mode::kDangerous) {
    Step(d, "mode", "allow", std::string("dangerous (") + mode_from + ")");
    return finish_allow_or_ask("allow", "mode dangerous allows every call not denied",
                               std::string("mode:dangerous@") + mode_from);
  }

  // 6. org tool allowlist, 7. agent grants.
  if (c.has_tool_allowlist) {
    if (c.tool_allowlist.FirstMatch(*f.tool) < 0) {
      Step(d, "tool_allowlist", "deny");
      Finish(d, "deny", "tool '" + *f.tool + "' is not in the org tool allowlist", "org.tool_allowlist",
             errc::kPolicyDenied);
      return;
    }
    Step(d, "tool_allowlist", "pass");
  }
  if (agent != nullptr && agent->has_grants) {
    if (agent->grants.FirstMatch(*f.tool) < 0) {
      Step(d, "grants", "deny");
      Finish(d, "deny", "agent '" + *f.agent + "' is not granted tool '" + *f.tool + "'", "agent.tools",
             errc::kPolicyDenied);
      return;
    }
    Step(d, "grants", "pass");
  }

  // 8. plan: read-only tools only.
  if (mode == Mode::kPlan && !spec.read_only) {
    Step(d, "plan", "deny", "mutating tool");
    Finish(d, "deny", "mode plan allows read-only tools only; '" + *f.tool + "' mutates",
           std::string("mode:plan@") + mode_from, errc::kPolicyDenied);
    return;
  }

  // 9. http: methods (a configured alias's own method is the operator's
  // grant; a built-in alias's is not) and hosts.
  if (is_http) {
    static const std::vector<std::string> kDefaultMethods = {"GET", "HEAD"};
    const auto& methods = http.methods ? *http.methods : kDefaultMethods;
    if ((f.alias == nullptr || f.alias->builtin) &&
        std::find(methods.begin(), methods.end(), f.method) == methods.end()) {
      Step(d, "http", "deny", "method " + f.method);
      Finish(d, "deny", "method " + f.method + " is not in allowed_methods for agent '" + *f.agent + "'",
             "http.allowed_methods", errc::kPolicyDenied);
      return;
    }
    if (!f.url_ok) {
      Step(d, "http", "deny", "bad url");
      Finish(d, "deny", "url is not an absolute http(s) URL and no base_url resolves it: " + f.url_error,
             "http.url", errc::kPolicyDenied);
      return;
    }
    if (http.hosts_from != nullptr && http.hosts_from->hosts.FirstMatch(f.url.host) < 0) {
      Step(d, "http", "deny", "host " + f.url.host);
      Finish(d, "deny", "host '" + f.url.host + "' is not in the http_request host allowlist", "http.hosts",
             errc::kPolicyDenied);
      return;
    }
    Step(d, "http", "pass", f.method + " " + f.url.host);
  }

  // 9b. a command line that cannot be analysed statically: never allowed.
  // It asks (an approver reads the line), or is denied under restrict.
  if (unanalysable) {
    if (mode == Mode::kRestrict) {
      Step(d, "command", "deny", f.line.reason);
      Finish(d, "deny", "mode restrict: '" + inv + "' cannot be analysed statically (" + f.line.reason + ")",
             std::string("mode:restrict@") + mode_from, errc::kPolicyDenied);
      return;
    }
    Step(d, "command", "ask", f.line.reason);
    return finish_allow_or_ask("ask",
                               "'" + inv + "' cannot be analysed statically (" + f.line.reason +
                                   "): it is never allowed without an approver",
                               "command:unanalysable");
  }

  // 10. argument-level ask, then allow rules (agent tier first).
  for (const char* want : {"ask", "allow"}) {
    for (const Tier* t : {agent, static_cast<const Tier*>(&c.org)}) {
      if (t == nullptr) continue;
      for (const Rule& r : t->rules) {
        if (r.verdict == want && RuleMatches(r, f)) {
          Step(d, "rules", want, r.name);
          return finish_allow_or_ask(
              want, r.reason.empty() ? std::string(want) + " by rule '" + r.name + "'" : r.reason,
              std::string(t == &c.org ? "org" : "agent") + ".rule:" + r.name);
        }
      }
    }
  }

  // 11. allow lists: agent local, agent base, org.
  {
    const GlobSet* sets[3] = {local, agent ? &agent->allow : nullptr, &c.org.allow};
    const char* names[3] = {"agent_local", "agent", "org"};
    for (int k = 0; k < 3 && !is_line; ++k) {
      if (sets[k] == nullptr) continue;
      int i = MatchSubjects(*sets[k], inv, d->subject);
      if (i >= 0) {
        const std::string& pat = sets[k]->at(i).pattern();
        Step(d, "allow", "allow", pat);
        return finish_allow_or_ask("allow", "matches allow pattern '" + pat + "'",
                                   std::string(names[k]) + ".allow:" + pat);
      }
    }
    // A line: a pattern naming exactly this line (an "allow always"
    // approval), else every simple command matching some allow pattern.
    for (int k = 0; k < 3 && is_line; ++k) {
      if (sets[k] == nullptr) continue;
      for (size_t i = 0; i < sets[k]->size(); ++i) {
        const Glob& g = sets[k]->at(i);
        if (g.literal_prefix() == inv && g.Match(inv)) {
          Step(d, "allow", "allow", g.pattern());
          return finish_allow_or_ask("allow", "the line matches allow pattern '" + g.pattern() + "' exactly",
                                     std::string(names[k]) + ".allow:" + g.pattern());
        }
      }
    }
    if (is_line) {
      std::vector<std::string> rules;
      std::string unmatched;
      for (size_t ci = 0; ci < command_keys.size(); ++ci) {
        const std::string& key = command_keys[ci];
        // A pure filter of a pipe (`git status | head`) is covered by the
        // command whose output it reshapes (core/shell_line.h, IsPipeFilter).
        if (IsPipeFilter(f.line, ci)) continue;
        std::string rule;
        for (int k = 0; k < 3 && rule.empty(); ++k) {
          if (sets[k] == nullptr) continue;
          const int i = sets[k]->FirstMatch(key);
          if (i >= 0) rule = std::string(names[k]) + ".allow:" + sets[k]->at(i).pattern();
        }
        if (rule.empty()) {
          unmatched = key;
          break;
        }
        if (std::find(rules.begin(), rules.end(), rule) == rules.end()) rules.push_back(rule);
      }
      if (unmatched.empty()) {
        std::string joined;
        for (const auto& r : rules) joined += (joined.empty() ? "" : " + ") + r;
        Step(d, "allow", "allow", joined);
        return finish_allow_or_ask("allow",
                                   "each of the line's " + std::to_string(command_keys.size()) +
                                       " simple commands matches an allow pattern",
                                   joined);
      }
      Step(d, "allow", "pass", "'" + unmatched + "' matches no allow pattern");
    } else {
      Step(d, "allow", "pass", "no allow pattern matches");
    }
  }

  // 12. restrict: only what is allowed runs.
  if (mode == Mode::kRestrict) {
    Step(d, "mode", "deny", std::string("restrict (") + mode_from + ")");
    Finish(d, "deny", "mode restrict: '" + inv + "' is not allowed",
           std::string("mode:restrict@") + mode_from, errc::kPolicyDenied);
    return;
  }

  // 13. mutating http: ask unless auto_approve.
  if (is_http && !IsReadOnlyMethod(f.method)) {
    if (http.auto_approve) {
      Step(d, "http", "allow", "auto_approve");
      return finish_allow_or_ask("allow",
                                 "mutating " + *f.tool + " auto-approved for agent '" + *f.agent + "'",
                                 "http.auto_approve");
    }
    Step(d, "http", "ask", "mutating method " + f.method);
    return finish_allow_or_ask("ask", "mutating " + *f.tool + " (" + f.method + ") needs approval",
                               "http.mutating");
  }

  // 14. approval threshold.
  if (spec.danger >= c.threshold) {
    Step(d, "threshold", "ask", std::string(DangerName(spec.danger)) + " >= " + DangerName(c.threshold));
    return finish_allow_or_ask("ask",
                               "'" + *f.tool + "' is " + DangerName(spec.danger) +
                                   ", at or above the approval threshold " + DangerName(c.threshold),
                               "approval_threshold");
  }

  // 15. mode default (ask, plan): read-only runs, mutating asks.
  if (spec.read_only) {
    Step(d, "mode", "allow", std::string(ModeName(mode)) + ": read-only");
    return finish_allow_or_ask("allow", "'" + *f.tool + "' is read-only and below the approval threshold",
                               std::string("mode:") + ModeName(mode) + "@" + mode_from);
  }
  Step(d, "mode", "ask", std::string(ModeName(mode)) + ": mutating");
  return finish_allow_or_ask("ask", "'" + *f.tool + "' mutates; mode " + ModeName(mode) + " asks",
                             std::string("mode:") + ModeName(mode) + "@" + mode_from);
}

Json Decide(const PolicyInForce& policy, const BudgetLedger& ledger, const DecideInput& in) {
  Decision d;
  DecideInto(policy, ledger, in, &d);
  return d.ToJson();
}

}  // namespace tollgate
