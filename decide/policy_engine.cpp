// The decision itself: the order of checks of docs/policy.md, over a
// loaded policy (decide/policy_loader.h) and the facts of one request
// (decide/invocation_facts.h). decide/policy_engine.h is the contract.
#include "decide/policy_engine.h"

#include <algorithm>

#include "core/invocation.h"
#include "core/messages.h"
#include "core/shell_line.h"
#include "core/tool_kind.h"
#include "decide/compiled_policy.h"
#include "decide/decide_checks.h"
#include "decide/invocation_facts.h"

namespace tollgate {

void ExecutorTools::ApplyReload(const std::string& org, const std::string& agent, const Json& tools) {
  std::map<std::string, std::string>& mine = agent_written[org + "/" + agent];
  mine.clear();
  if (!tools.is_array()) return;
  for (const Json& t : tools) {
    if (!t.is_object() || t.value("source", "") != "agent_written") continue;
    const std::string name = t.value("name", ""), sha = t.value("sha256", "");
    if (IsCliTool(name) && name.size() > 4 && !sha.empty()) mine[name.substr(4)] = sha;
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
  has_history = false;
  history.upto = history.calls = 0;
  history.integrity = Integrity::kTrusted;
  history.confidentiality = Confidentiality::kPublic;
  history.rule.clear();
  history.matched.clear();
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
  if (has_history) {
    Json h = {{"upto", history.upto},
              {"calls", history.calls},
              {"integrity", IntegrityName(history.integrity)},
              {"confidentiality", ConfidentialityName(history.confidentiality)}};
    if (!history.rule.empty()) {
      h["rule"] = history.rule;
      h["matched"] = history.matched;
    }
    j["history"] = std::move(h);
  }
  return j;
}

namespace {

using decide_checks::CheckBudgets;
using decide_checks::CommandsDetail;
using decide_checks::FindToolSpec;
using decide_checks::Finish;
using decide_checks::HasExecutor;
using decide_checks::MatchSubjects;
using decide_checks::ResolveApproval;
using decide_checks::Step;

// One call being decided: what the steps below share. Each step either
// decides (finishes `d` and returns true) or records its check and passes.
struct Call {
  const Policy::Compiled& c;  // the request's org's effective policy
  const BudgetLedger& ledger;
  const DecideInput& in;
  InvocationFacts& f;
  Decision* d;
  const Tier* agent = nullptr;     // the agent's entry, if any
  const GlobSet* local = nullptr;  // the agent's local allow list, if any
  EffectiveHttp http;
  bool is_http = false;                   // http_request or one of its aliases
  ToolSpec spec;                          // from the registry step
  bool is_line = false;                   // execute_command given a line
  bool unanalysable = false;              // ... that cannot be analysed statically
  std::vector<std::string> command_keys;  // "bash:" + each simple command's argv
  Mode mode = Mode::kAsk;
  const char* mode_from = "default";
  int64_t cost = 0;
  const SessionFacts::Session* session = nullptr;  // its history, when the policy has history rules

  const std::string& inv() const { return d->invocation; }
  const char* TierName(const Tier* t) const { return t == &c.org ? "org" : "agent"; }
};

// An allow or ask verdict: decided only if every budget has room; it then
// reserves the call's cost, and an ask gets its approval terms.
bool FinishAllowOrAsk(Call& k, const char* verdict, std::string reason, std::string rule) {
  Finish(k.d, verdict, std::move(reason), std::move(rule));
  if (!CheckBudgets(k.c, k.ledger, k.f, k.in.received_at_us, k.cost, k.d)) return true;
  k.d->has_reservation = true;
  k.d->reserve_micros = k.cost;
  if (k.d->verdict == "ask") ResolveApproval(k.c, k.f, k.spec.danger, k.d);
  return true;
}

// 0. the org: the request's org_id picks its effective policy (its
// section merged over the deployment's, compiled at load) and its
// version: one lookup each, none when the file has no org sections and
// no agent-local rules. Every check below reads that org's `c`.
void ReadOrg(const PolicyInForce& pif, Call& k) {
  InvocationFacts& f = k.f;
  k.d->policy_version = pif.version(*f.org);
  auto agent_it = k.c.agents.find(*f.agent);
  k.agent = agent_it == k.c.agents.end() ? nullptr : &agent_it->second;
  k.local = pif.AgentLocal(*f.org, *f.agent);
  k.http = HttpFor(k.c, k.agent);
  k.d->invocation = ResolveInvocation(k.http, &f);
  ParseArgs(k.http, &f, &k.d->subject);
  k.is_http = *f.tool == "http_request" || f.alias != nullptr;
  if (!k.c.has_history) return;
  // What the session's history was when this call was decided (replay
  // decides on exactly this much of it: decide/session_facts.h).
  Decision* d = k.d;
  d->has_history = true;
  k.session = k.in.facts == nullptr ? nullptr : k.in.facts->Find(*f.org, *f.session);
  if (k.session != nullptr) {
    d->history.upto = k.session->upto;
    d->history.calls = k.session->calls;
    d->history.integrity = k.session->integrity;
    d->history.confidentiality = k.session->confidentiality;
  }
}

// A history rule's condition over the session (docs/policy.md, "History"):
// on a match, the rule and the seqs it used go to decision.history, and
// *why says what they were.
bool HistoryHolds(Call& k, const Rule& r, std::string* why) {
  const SessionFacts::Session* s = k.session;
  const HistoryCond& h = r.history;
  if (s == nullptr) return false;
  if (h.session && ((h.untrusted && s->integrity != Integrity::kUntrusted) ||
                    (h.has_confidentiality && s->confidentiality < h.confidentiality))) {
    return false;
  }
  std::vector<uint64_t> seqs;  // the sequence's matches, newest first
  if (h.sequence) {
    const CallPattern& after = k.c.after_patterns[h.after];
    auto it = s->matches.find(PatternKey{after.key, after.key_hash});
    if (it == s->matches.end() || it->second.size() < static_cast<size_t>(h.count)) return false;
    const std::vector<SessionFacts::Match>& v = it->second;
    const int64_t since = k.in.received_at_us - h.within_us;
    for (auto m = v.rbegin(); m != v.rend() && static_cast<int>(seqs.size()) < h.count; ++m) {
      const bool in =
          h.within_calls > 0 ? s->calls - m->call < static_cast<uint64_t>(h.within_calls) : m->at_us >= since;
      if (in) seqs.push_back(m->seq);
      if (!in && (h.within_calls > 0 || m->max_at < since)) break;  // no older match is inside
    }
    if (static_cast<int>(seqs.size()) < h.count) return false;
  }
  // It holds: what it used, for decision.history and the reason.
  std::vector<uint64_t> used(seqs.rbegin(), seqs.rend());
  if (h.session && h.untrusted) {
    used.push_back(s->integrity_seq);
    *why = "seq " + std::to_string(s->integrity_seq) + " brought untrusted content into the session";
  }
  if (h.session && h.has_confidentiality) {
    used.push_back(s->confidentiality_seq);
    *why += std::string(why->empty() ? "" : "; ") + "seq " + std::to_string(s->confidentiality_seq) +
            " brought " + ConfidentialityName(s->confidentiality) + " data into the session";
  }
  if (h.sequence) {
    std::string list;
    for (auto q = seqs.rbegin(); q != seqs.rend(); ++q)
      list += (list.empty() ? "" : ", ") + std::to_string(*q);
    *why += std::string(why->empty() ? "" : "; ") + "seq " + list + " matched its after: within the last " +
            (h.within_calls > 0 ? std::to_string(h.within_calls) + " calls"
                                : std::to_string(h.within_us / 60'000'000) + " minutes");
  }
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  k.d->history.rule = r.name;
  k.d->history.matched = std::move(used);
  return true;
}

// Whether rule `r` holds for the call: its tools and `when:`, a sequence
// rule's then.invocation, and its history conditions. *why: what the
// history said, when a history rule holds.
bool RuleHolds(Call& k, const Rule& r, std::string* why) {
  if (!RuleMatches(r, k.f)) return false;
  if (r.invocations.size() != 0 && MatchSubjects(r.invocations, k.inv(), k.d->subject) < 0) return false;
  return !r.history.any() || HistoryHolds(k, r, why);
}

// A rule's reason, and what the history said when it is a history rule.
std::string RuleReason(const Rule& r, const char* verdict, const std::string& why) {
  std::string reason = !r.reason.empty() ? r.reason
                                         : std::string(verdict == std::string("deny") ? "denied" : "asked") +
                                               " by rule '" + r.name + "'";
  return why.empty() ? reason : reason + " (history: " + why + ")";
}

// A CLI tool no executor has (once they have said what they hold) could
// never run either. Also records the bytes an agent-written tool runs.
bool RegistryCliHeld(Call& k) {
  const InvocationFacts& f = k.f;
  const DecideInput& in = k.in;
  Decision* d = k.d;
  const std::string* written = in.executors == nullptr || !IsCliTool(*f.tool)
                                   ? nullptr
                                   : in.executors->AgentWritten(*f.org, *f.agent, f.tool->substr(4));
  if (written != nullptr) d->tool_sha256 = *written;  // an agent-written tool runs only these bytes
  if (in.executors != nullptr && in.executors->known() && IsCliTool(*f.tool) && written == nullptr &&
      !in.executors->HasCli(f.tool->substr(4))) {
    std::string held;
    for (const auto& [executor, names] : in.executors->cli) {
      for (const auto& n : names) held += (held.empty() ? "" : ", ") + n;
    }
    Step(d, "registry", "deny", "no executor has it");
    Finish(d, "deny",
           "no executor has the CLI tool '" + f.tool->substr(4) +
               "' in its tools directory (they hold: " + (held.empty() ? "none" : held) + ")",
           "registry:no-executor", errc::kUnknownTool);
    return true;
  }
  return false;
}

// 1. registry (an http_request alias is the file's `tools:` entry of its
// name, else http_request's)
bool Registry(Call& k) {
  const Policy::Compiled& c = k.c;
  const InvocationFacts& f = k.f;
  Decision* d = k.d;
  ToolSpec& spec = k.spec;
  const bool known = FindToolSpec(c, *f.tool, &spec) || (f.alias && FindToolSpec(c, "http_request", &spec));
  if (k.is_http) spec.read_only = IsReadOnlyMethod(f.method);
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
    return true;
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
    return true;
  }
  if (RegistryCliHeld(k)) return true;
  // A write while execute.writes_enabled is false could never run: denied
  // now rather than sent to approvers first.
  if (!c.writes_enabled && (*f.tool == "write_file" || *f.tool == "delete_file")) {
    Step(d, "registry", "deny", "writes are disabled");
    Finish(d, "deny", "'" + *f.tool + "' writes files and execute.writes_enabled is false",
           "registry:writes-disabled", errc::kWritesDisabled);
    return true;
  }
  // An alias call whose arguments do not fit it could never run.
  if (!f.alias_status.ok()) {
    Step(d, "registry", "deny", "arguments do not fit the alias");
    Finish(d, "deny", f.alias_status.message(), "alias:" + f.alias->name, f.alias_status.code().c_str());
    return true;
  }
  Step(d, "registry", "pass",
       std::string(DangerName(spec.danger)) + (spec.read_only ? ", read-only" : ", mutating") +
           (f.alias ? ", alias of http_request" : ""));
  return false;
}

// 1b. a command line (execute_command given a line, not an argv): the
// policy holds for each simple command in it (docs/policy.md, "Command
// lines"). A line no shell would run, or one redirecting to a file outside
// the workspace, could never run (execute refuses both): denied now. A
// line that cannot be analysed statically is never allowed (9b).
bool CommandLine(Call& k) {
  const InvocationFacts& f = k.f;
  Decision* d = k.d;
  k.is_line = f.command_line;
  k.unanalysable = k.is_line && f.line.kind == ShellLine::Kind::kUnanalysable;
  if (!k.is_line) return false;
  if (f.line.kind == ShellLine::Kind::kInvalid) {
    Step(d, "command", "deny", f.line.reason);
    Finish(d, "deny", "the command line is not valid: " + f.line.reason, "command:invalid",
           errc::kInvalidArgs);
    return true;
  }
  for (const auto& sc : f.line.commands) {
    k.command_keys.push_back("bash:" + JoinArgv(sc.argv));
    for (const auto& r : sc.redirections) {
      if (r.names_file() && !IsWorkspaceRedirectTarget(r.target)) {
        Step(d, "command", "deny", "redirection " + r.op + " " + r.target);
        Finish(d, "deny",
               "'" + JoinArgv(sc.argv) + "' redirects " + r.op + " '" + r.target +
                   "': a command line may redirect only to workspace-relative paths without '..' and "
                   "/dev/null",
               "command:redirect", errc::kPolicyDenied);
        return true;
      }
    }
  }
  Step(d, "command", k.unanalysable ? "unanalysable" : "pass",
       k.unanalysable ? f.line.reason + "; " + CommandsDetail(f.line) : CommandsDetail(f.line));
  return false;
}

// Notify globs only annotate.
void Notify(Call& k) {
  for (const Tier* t : {&k.c.org, k.agent}) {
    if (t == nullptr) continue;
    int n = MatchSubjects(t->notify, k.inv(), k.d->subject);
    for (size_t i = 0; n < 0 && i < k.command_keys.size(); ++i) n = t->notify.FirstMatch(k.command_keys[i]);
    if (n >= 0) k.d->notify.push_back(t->notify.at(n).pattern());
  }
}

// The mode (the agent's over the org's over ask) and the call's cost (the
// tool's, or the request's estimate when higher).
void ModeAndCost(Call& k) {
  if (k.c.org.has_mode) {
    k.mode = k.c.org.mode;
    k.mode_from = "org";
  }
  if (k.agent != nullptr && k.agent->has_mode) {
    k.mode = k.agent->mode;
    k.mode_from = "agent";
  }
  const Json& req = *k.in.request;
  k.cost = std::max<int64_t>(k.spec.cost_micros, [&] {
    auto it = req.find("estimated_cost_usd");
    return it != req.end() && it->is_number() ? UsdToMicros(it->get<double>()) : int64_t{0};
  }());
}

// 2. bypass (not for a line that cannot be analysed: 9b)
bool Bypass(Call& k) {
  if (k.mode == Mode::kBypass && k.unanalysable) {
    Step(k.d, "mode", "pass", "bypass allows no command line that cannot be analysed");
  } else if (k.mode == Mode::kBypass) {
    Step(k.d, "mode", "allow", std::string("bypass (") + k.mode_from + ")");
    return FinishAllowOrAsk(k, "allow", "mode bypass allows every call",
                            std::string("mode:bypass@") + k.mode_from);
  }
  return false;
}

// 3. deny lists: org ∪ agent, on the invocation and on each simple
// command of a line. Nothing overrides a deny.
bool DenyLists(Call& k) {
  Decision* d = k.d;
  const std::string& inv = k.inv();
  for (const Tier* t : {&k.c.org, k.agent}) {
    if (t == nullptr) continue;
    int i = MatchSubjects(t->deny, inv, d->subject);
    std::string what = i < 0 ? "" : "'" + (t->deny.at(i).Match(inv) ? inv : d->subject) + "'";
    for (size_t n = 0; i < 0 && n < k.command_keys.size(); ++n) {
      i = t->deny.FirstMatch(k.command_keys[n]);
      if (i >= 0)
        what = "simple command " + std::to_string(n + 1) + " of the line, '" + k.command_keys[n] + "',";
    }
    if (i >= 0) {
      const std::string& pat = t->deny.at(i).pattern();
      Step(d, "deny", "deny", pat);
      Finish(d, "deny", what + " matches deny pattern '" + pat + "'",
             std::string(k.TierName(t)) + ".deny:" + pat, errc::kPolicyDenied);
      return true;
    }
  }
  Step(d, "deny", "pass");
  return false;
}

// 4. argument-level deny rules (any tier).
bool DenyRules(Call& k) {
  for (const Tier* t : {&k.c.org, k.agent}) {
    if (t == nullptr) continue;
    for (const Rule& r : t->rules) {
      std::string why;
      if (r.verdict == "deny" && RuleHolds(k, r, &why)) {
        Step(k.d, "rules", "deny", why.empty() ? r.name : r.name + ": " + why);
        Finish(k.d, "deny", RuleReason(r, "deny", why), std::string(k.TierName(t)) + ".rule:" + r.name,
               errc::kPolicyDenied);
        return true;
      }
    }
  }
  return false;
}

// 5. dangerous: bypass that honoured deny (not for a line that cannot be analysed).
bool Dangerous(Call& k) {
  if (k.mode == Mode::kDangerous && k.unanalysable) {
    Step(k.d, "mode", "pass", "dangerous allows no command line that cannot be analysed");
  } else if (k.mode == Mode::kDangerous) {
    Step(k.d, "mode", "allow", std::string("dangerous (") + k.mode_from + ")");
    return FinishAllowOrAsk(k, "allow", "mode dangerous allows every call not denied",
                            std::string("mode:dangerous@") + k.mode_from);
  }
  return false;
}

// 6. org tool allowlist, 7. agent grants.
bool AllowlistAndGrants(Call& k) {
  const InvocationFacts& f = k.f;
  Decision* d = k.d;
  if (k.c.has_tool_allowlist) {
    if (k.c.tool_allowlist.FirstMatch(*f.tool) < 0) {
      Step(d, "tool_allowlist", "deny");
      Finish(d, "deny", "tool '" + *f.tool + "' is not in the org tool allowlist", "org.tool_allowlist",
             errc::kPolicyDenied);
      return true;
    }
    Step(d, "tool_allowlist", "pass");
  }
  if (k.agent != nullptr && k.agent->has_grants) {
    if (k.agent->grants.FirstMatch(*f.tool) < 0) {
      Step(d, "grants", "deny");
      Finish(d, "deny", "agent '" + *f.agent + "' is not granted tool '" + *f.tool + "'", "agent.tools",
             errc::kPolicyDenied);
      return true;
    }
    Step(d, "grants", "pass");
  }
  return false;
}

// 8. plan: read-only tools only.
bool Plan(Call& k) {
  if (k.mode != Mode::kPlan || k.spec.read_only) return false;
  Step(k.d, "plan", "deny", "mutating tool");
  Finish(k.d, "deny", "mode plan allows read-only tools only; '" + *k.f.tool + "' mutates",
         std::string("mode:plan@") + k.mode_from, errc::kPolicyDenied);
  return true;
}

// 9. http: methods (a configured alias's own method is the operator's
// grant; a built-in alias's is not) and hosts.
bool Http(Call& k) {
  if (!k.is_http) return false;
  const InvocationFacts& f = k.f;
  Decision* d = k.d;
  static const std::vector<std::string> kDefaultMethods = {"GET", "HEAD"};
  const auto& methods = k.http.methods ? *k.http.methods : kDefaultMethods;
  if ((f.alias == nullptr || f.alias->builtin) &&
      std::find(methods.begin(), methods.end(), f.method) == methods.end()) {
    Step(d, "http", "deny", "method " + f.method);
    Finish(d, "deny", "method " + f.method + " is not in allowed_methods for agent '" + *f.agent + "'",
           "http.allowed_methods", errc::kPolicyDenied);
    return true;
  }
  if (!f.url_ok) {
    Step(d, "http", "deny", "bad url");
    Finish(d, "deny", "url is not an absolute http(s) URL and no base_url resolves it: " + f.url_error,
           "http.url", errc::kPolicyDenied);
    return true;
  }
  if (k.http.hosts_from != nullptr && k.http.hosts_from->hosts.FirstMatch(f.url.host) < 0) {
    Step(d, "http", "deny", "host " + f.url.host);
    Finish(d, "deny", "host '" + f.url.host + "' is not in the http_request host allowlist", "http.hosts",
           errc::kPolicyDenied);
    return true;
  }
  Step(d, "http", "pass", f.method + " " + f.url.host);
  return false;
}

// 9b. a command line that cannot be analysed statically: never allowed.
// It asks (an approver reads the line), or is denied under restrict.
bool Unanalysable(Call& k) {
  if (!k.unanalysable) return false;
  const std::string& reason = k.f.line.reason;
  if (k.mode == Mode::kRestrict) {
    Step(k.d, "command", "deny", reason);
    Finish(k.d, "deny", "mode restrict: '" + k.inv() + "' cannot be analysed statically (" + reason + ")",
           std::string("mode:restrict@") + k.mode_from, errc::kPolicyDenied);
    return true;
  }
  Step(k.d, "command", "ask", reason);
  return FinishAllowOrAsk(k, "ask",
                          "'" + k.inv() + "' cannot be analysed statically (" + reason +
                              "): it is never allowed without an approver",
                          "command:unanalysable");
}

// 10. argument-level ask, then allow rules (agent tier first).
bool AskAllowRules(Call& k) {
  for (const char* want : {"ask", "allow"}) {
    for (const Tier* t : {k.agent, static_cast<const Tier*>(&k.c.org)}) {
      if (t == nullptr) continue;
      for (const Rule& r : t->rules) {
        std::string why;
        // A history ask rule only tightens an allow (HistoryAsk, below).
        if (r.verdict == want && !r.history.any() && RuleHolds(k, r, &why)) {
          Step(k.d, "rules", want, why.empty() ? r.name : r.name + ": " + why);
          return FinishAllowOrAsk(k, want,
                                  why.empty() && r.reason.empty()
                                      ? std::string(want) + " by rule '" + r.name + "'"
                                      : RuleReason(r, want, why),
                                  std::string(k.TierName(t)) + ".rule:" + r.name);
        }
      }
    }
  }
  return false;
}

// The allow lists of step 11, most specific first.
struct AllowSets {
  const GlobSet* sets[3];
  const char* names[3] = {"agent_local", "agent", "org"};
};

// 11, a line: a pattern naming exactly this line (an "allow always"
// approval), else every simple command matching some allow pattern.
bool AllowLine(Call& k, const AllowSets& a) {
  const std::string& inv = k.inv();
  for (int s = 0; s < 3; ++s) {
    if (a.sets[s] == nullptr) continue;
    for (size_t i = 0; i < a.sets[s]->size(); ++i) {
      const Glob& g = a.sets[s]->at(i);
      if (g.literal_prefix() == inv && g.Match(inv)) {
        Step(k.d, "allow", "allow", g.pattern());
        return FinishAllowOrAsk(k, "allow", "the line matches allow pattern '" + g.pattern() + "' exactly",
                                std::string(a.names[s]) + ".allow:" + g.pattern());
      }
    }
  }
  std::vector<std::string> rules;
  std::string unmatched;
  for (size_t ci = 0; ci < k.command_keys.size(); ++ci) {
    const std::string& key = k.command_keys[ci];
    // A pure filter of a pipe (`git status | head`) is covered by the
    // command whose output it reshapes (core/shell_line.h, IsPipeFilter).
    if (IsPipeFilter(k.f.line, ci)) continue;
    std::string rule;
    for (int s = 0; s < 3 && rule.empty(); ++s) {
      if (a.sets[s] == nullptr) continue;
      const int i = a.sets[s]->FirstMatch(key);
      if (i >= 0) rule = std::string(a.names[s]) + ".allow:" + a.sets[s]->at(i).pattern();
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
    Step(k.d, "allow", "allow", joined);
    return FinishAllowOrAsk(k, "allow",
                            "each of the line's " + std::to_string(k.command_keys.size()) +
                                " simple commands matches an allow pattern",
                            joined);
  }
  Step(k.d, "allow", "pass", "'" + unmatched + "' matches no allow pattern");
  return false;
}

// 11. allow lists: agent local, agent base, org.
bool AllowLists(Call& k) {
  const AllowSets a{{k.local, k.agent ? &k.agent->allow : nullptr, &k.c.org.allow}};
  if (k.is_line) return AllowLine(k, a);
  for (int s = 0; s < 3; ++s) {
    if (a.sets[s] == nullptr) continue;
    int i = MatchSubjects(*a.sets[s], k.inv(), k.d->subject);
    if (i >= 0) {
      const std::string& pat = a.sets[s]->at(i).pattern();
      Step(k.d, "allow", "allow", pat);
      return FinishAllowOrAsk(k, "allow", "matches allow pattern '" + pat + "'",
                              std::string(a.names[s]) + ".allow:" + pat);
    }
  }
  Step(k.d, "allow", "pass", "no allow pattern matches");
  return false;
}

// 12. restrict: only what is allowed runs.
bool Restrict(Call& k) {
  if (k.mode != Mode::kRestrict) return false;
  Step(k.d, "mode", "deny", std::string("restrict (") + k.mode_from + ")");
  Finish(k.d, "deny", "mode restrict: '" + k.inv() + "' is not allowed",
         std::string("mode:restrict@") + k.mode_from, errc::kPolicyDenied);
  return true;
}

// 13. mutating http: ask unless auto_approve.
bool MutatingHttp(Call& k) {
  const InvocationFacts& f = k.f;
  if (!k.is_http || IsReadOnlyMethod(f.method)) return false;
  if (k.http.auto_approve) {
    Step(k.d, "http", "allow", "auto_approve");
    return FinishAllowOrAsk(k, "allow", "mutating " + *f.tool + " auto-approved for agent '" + *f.agent + "'",
                            "http.auto_approve");
  }
  Step(k.d, "http", "ask", "mutating method " + f.method);
  return FinishAllowOrAsk(k, "ask", "mutating " + *f.tool + " (" + f.method + ") needs approval",
                          "http.mutating");
}

// 14. approval threshold.
bool Threshold(Call& k) {
  const DangerLevel danger = k.spec.danger, threshold = k.c.threshold;
  if (danger < threshold) return false;
  Step(k.d, "threshold", "ask", std::string(DangerName(danger)) + " >= " + DangerName(threshold));
  return FinishAllowOrAsk(k, "ask",
                          "'" + *k.f.tool + "' is " + DangerName(danger) +
                              ", at or above the approval threshold " + DangerName(threshold),
                          "approval_threshold");
}

// 15. mode default (ask, plan): read-only runs, mutating asks.
void ModeDefault(Call& k) {
  const std::string mode = ModeName(k.mode), rule = "mode:" + mode + "@" + k.mode_from;
  if (k.spec.read_only) {
    Step(k.d, "mode", "allow", mode + ": read-only");
    FinishAllowOrAsk(k, "allow", "'" + *k.f.tool + "' is read-only and below the approval threshold", rule);
    return;
  }
  Step(k.d, "mode", "ask", mode + ": mutating");
  FinishAllowOrAsk(k, "ask", "'" + *k.f.tool + "' mutates; mode " + mode + " asks", rule);
}

// 15b. history ask rules (agent tier first): an allowed call a history ask
// rule matches asks instead. After the other steps, so history can only
// tighten a decision: a deny or an ask stays (an ask rule at step 10
// would turn restrict's deny into an ask). Not under bypass. The
// reservation stays: the budgets had room for the allow.
void HistoryAsk(Call& k) {
  Decision* d = k.d;
  if (!k.c.has_history || d->verdict != "allow" || k.mode == Mode::kBypass) return;
  for (const Tier* t : {k.agent, static_cast<const Tier*>(&k.c.org)}) {
    if (t == nullptr) continue;
    for (size_t i : t->history_asks) {
      const Rule& r = t->rules[i];
      std::string why;
      if (RuleHolds(k, r, &why)) {
        Step(d, "history", "ask", r.name + ": " + why);
        Finish(d, "ask", RuleReason(r, "ask", why), std::string(k.TierName(t)) + ".rule:" + r.name);
        ResolveApproval(k.c, k.f, k.spec.danger, d);
        return;
      }
    }
  }
}

}  // namespace

// The numbered steps of docs/policy.md, in order; the first that decides
// ends the decision.
void DecideInto(const PolicyInForce& pif, const BudgetLedger& ledger, const DecideInput& in, Decision* d) {
  d->Clear();
  InvocationFacts f = ReadEnvelope(*in.request);
  f.probe = in.probe;
  d->received_at = FormatTime(in.received_at_us);

  if (!pif.has_policy()) {
    d->invocation = BuildInvocation(*f.tool, *f.args, BaseUrlOf(nullptr), "GET", f.action);
    Step(d, "policy", "deny", "no policy in force");
    Finish(d, "deny", "no policy is in force", "policy:none", errc::kNoPolicy);
    return;
  }
  Call k{pif.file()->compiled(*f.org), ledger, in, f, d};
  ReadOrg(pif, k);                            // 0.
  if (Registry(k) || CommandLine(k)) return;  // 1, 1b.
  Notify(k);
  ModeAndCost(k);
  if (Bypass(k) || DenyLists(k) || DenyRules(k) || Dangerous(k) || AllowlistAndGrants(k) || Plan(k) ||
      Http(k) || Unanalysable(k) || AskAllowRules(k) || AllowLists(k) || Restrict(k) || MutatingHttp(k) ||
      Threshold(k)) {
    HistoryAsk(k);  // 15b.
    return;         // 2 to 14.
  }
  ModeDefault(k);  // 15.
  HistoryAsk(k);   // 15b.
}

Json Decide(const PolicyInForce& policy, const BudgetLedger& ledger, const DecideInput& in) {
  Decision d;
  DecideInto(policy, ledger, in, &d);
  return d.ToJson();
}

}  // namespace tollgate
