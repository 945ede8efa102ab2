// Compiling a policy document (decide/policy_compiler.h; docs/policy.md is
// the reference for every key read here).
#include "decide/policy_compiler.h"

#include <algorithm>
#include <set>

#include "core/http_alias.h"
#include "core/invocation.h"
#include "core/tool_catalog.h"
#include "core/url.h"
#include "decide/compiled_policy.h"

namespace tollgate {

std::string PointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out.push_back(c);
  }
  return out;
}

SourceMark MarkOf(const LineMap* lines, std::string ptr) {
  if (lines != nullptr) {
    while (true) {
      auto it = lines->find(ptr);
      if (it != lines->end()) return it->second;
      size_t slash = ptr.rfind('/');
      if (slash == std::string::npos) break;
      ptr.resize(slash);
    }
  }
  return {};
}

std::string Where(const LineMap* lines, std::string ptr) {
  const SourceMark m = MarkOf(lines, ptr);
  if (m.line > 0) return "line " + std::to_string(m.line) + ": ";
  return ptr.empty() ? "" : "at " + ptr + ": ";
}

namespace {

std::string Resolve(const Origins* origins, const std::string& ptr) {
  if (origins == nullptr || origins->empty()) return ptr;
  std::string p = ptr;
  while (!p.empty()) {
    auto it = origins->find(p);
    if (it != origins->end()) return it->second + ptr.substr(p.size());
    p.resize(p.rfind('/'));
  }
  return ptr;
}

struct Compiler {
  const LineMap* lines;
  Status error;
  const Origins* origins = nullptr;      // compiling an org's merged document
  std::string failed_at;                 // the first error's pointer in the file
  Policy::Compiled* compiled = nullptr;  // what Compile builds (history rules register patterns)
  const Json* doc = nullptr;             // ... from this document

  bool Fail(const std::string& ptr, const std::string& what) {
    if (error.ok()) {
      failed_at = Resolve(origins, ptr);
      error = Status::Error(errc::kPolicyInvalid, Where(lines, failed_at) + what);
    }
    return false;
  }

  // Kaizen's mcp__kaizen_builtin__X names the built-in X (core/tool_catalog.h):
  // accepted where a tool name goes, as a literal one of its twelve tools.
  // In deny, allow and notify (invocation globs: builtin:read_file,
  // http_request:DELETE *, bash:ls *) or as a glob it would match nothing,
  // silently: refused instead.
  bool KaizenName(const std::string& p, const std::string& ptr, bool invocation) {
    static const std::string kServer = "mcp__" + std::string(kKaizenBuiltinServer);
    if (p.rfind(kServer, 0) != 0 || (p.size() > kServer.size() && p.compare(kServer.size(), 2, "__") != 0)) {
      return true;
    }
    if (invocation) {
      return Fail(ptr, "'" + p +
                           "' is a tool name; deny, allow and notify match invocations (builtin:read_file, "
                           "http_request:DELETE https://..., bash:ls *)");
    }
    if (CanonicalToolName(p).size() == p.size()) {
      return Fail(ptr, "'" + p +
                           "': mcp__kaizen_builtin__ names one of Kaizen's twelve built-ins by name "
                           "(read_file, http_get, bash_command, ...), not a glob");
    }
    return true;
  }

  bool Globs(const Json& arr, const std::string& ptr, GlobSet* out, bool invocations = false) {
    if (!arr.is_array()) return true;
    for (size_t i = 0; i < arr.size(); ++i) {
      std::string err;
      const std::string at = ptr + "/" + std::to_string(i);
      if (!KaizenName(arr[i].get<std::string>(), at, invocations)) return false;
      if (!out->Add(McpToolPattern(arr[i].get<std::string>()), &err)) return Fail(at, err);
    }
    return true;
  }

  static std::vector<std::string> Strings(const Json& j, const char* key) {
    std::vector<std::string> out;
    if (j.contains(key)) {
      const Json& v = j[key];
      if (v.is_string())
        out.push_back(v.get<std::string>());
      else if (v.is_array())
        for (const auto& s : v) out.push_back(s.get<std::string>());
    }
    return out;
  }

  bool Http(const Json& j, const std::string& ptr, HttpConfig* h) {
    if (j.contains("base_url")) {
      h->has_base_url = true;
      h->base_url = j["base_url"].get<std::string>();
    }
    if (j.contains("default_method")) {
      h->has_default_method = true;
      h->default_method = j["default_method"].get<std::string>();
      std::transform(h->default_method.begin(), h->default_method.end(), h->default_method.begin(),
                     ::toupper);
    }
    if (j.contains("allowed_methods")) {
      h->has_methods = true;
      for (const auto& m : j["allowed_methods"]) {
        std::string s = m.get<std::string>();
        std::transform(s.begin(), s.end(), s.begin(), ::toupper);
        h->methods.push_back(s);
      }
    }
    if (j.contains("auto_approve")) {
      h->has_auto_approve = true;
      h->auto_approve = j["auto_approve"].get<bool>();
    }
    if (j.contains("hosts")) {
      h->has_hosts = true;
      for (size_t i = 0; i < j["hosts"].size(); ++i) {
        std::string host = j["hosts"][i].get<std::string>();
        std::transform(host.begin(), host.end(), host.begin(), ::tolower);
        std::string err;
        if (!h->hosts.Add(host, &err)) return Fail(ptr + "/hosts/" + std::to_string(i), err);
        h->host_patterns.push_back(host);
      }
    }
    if (j.contains("aliases")) {
      for (const auto& [name, spec] : j["aliases"].items()) {
        HttpAlias a;
        Status s = ParseHttpAlias(name, spec, &a);
        if (!s.ok()) return Fail(ptr + "/aliases/" + name, s.message());
        h->aliases.emplace(name, std::move(a));
      }
    }
    return true;
  }

  bool When(const Json& w, const std::string& ptr, Condition* when) {
    for (auto m : Strings(w, "method")) {
      std::transform(m.begin(), m.end(), m.begin(), ::toupper);
      when->methods.push_back(m);
    }
    for (auto h : Strings(w, "host")) {
      std::transform(h.begin(), h.end(), h.begin(), ::tolower);
      std::string err;
      if (!when->hosts.Add(h, &err)) return Fail(ptr + "/host", err);
      when->has_hosts = true;
    }
    when->path_prefixes = Strings(w, "path_prefix");
    for (const auto& f : Strings(w, "file_prefix")) when->file_prefixes.push_back(NormalizePath(f));
    when->commands = Strings(w, "command");
    return true;
  }

  // History (docs/policy.md, "History"). A tool name in a history rule is a
  // glob, or a tool that exists: a typo would make the rule match nothing.
  bool KnownTool(const std::string& t, const std::string& ptr) {
    if (t.find_first_of("*?[") != std::string::npos || FindBuiltinTool(t) != nullptr ||
        compiled->tools.count(t) != 0 || FindBuiltinHttpAlias(t) != nullptr || t.rfind("cli:", 0) == 0 ||
        t.rfind("mcp:", 0) == 0 || t.rfind("mcp__", 0) == 0) {
      return true;
    }
    const Json* h = doc->contains("http_request") ? &(*doc)["http_request"] : nullptr;
    if (h != nullptr && h->contains("aliases") && (*h)["aliases"].contains(t)) return true;
    return Fail(ptr,
                "unknown tool '" + t + "' (not a built-in, not in tools:, not cli:NAME or mcp:SERVER/TOOL)");
  }

  bool ToolGlobs(const Json& j, const std::string& ptr, GlobSet* out) {
    for (const auto& t : Strings(j, "tool")) {
      std::string err;
      if (!KaizenName(t, ptr + "/tool", false) || !KnownTool(t, ptr + "/tool")) return false;
      if (!out->Add(McpToolPattern(t), &err)) return Fail(ptr + "/tool", err);
    }
    return true;
  }

  bool InvocationGlobs(const Json& j, const std::string& ptr, GlobSet* out) {
    for (const auto& g : Strings(j, "invocation")) {
      std::string err;
      if (!out->Add(g, &err)) return Fail(ptr + "/invocation", err);
    }
    return true;
  }

  bool Labels(const Json& j, CompiledLabels* out) {
    if (j.contains("trusted_hosts")) {
      out->has_trusted_hosts = true;
      for (auto h : Strings(j, "trusted_hosts")) {
        std::transform(h.begin(), h.end(), h.begin(), ::tolower);
        std::string err;
        if (!out->trusted_hosts.Add(h, &err)) return Fail("/labels/trusted_hosts", err);
      }
    }
    for (const auto& s : Strings(j, "trusted_servers")) out->trusted_servers.insert(s);
    if (j.contains("untrusted") && !Globs(j["untrusted"], "/labels/untrusted", &out->untrusted, true))
      return false;
    if (j.contains("trusted") && !Globs(j["trusted"], "/labels/trusted", &out->trusted, true)) return false;
    for (int level = 1; level < 4; ++level) {
      const char* name = ConfidentialityName(static_cast<Confidentiality>(level));
      if (j.contains(name) && !Globs(j[name], std::string("/labels/") + name, &out->levels[level], true))
        return false;
    }
    if (j.contains("redacted") && !ParseConfidentiality(j["redacted"].get<std::string>(), &out->redacted))
      return Fail("/labels/redacted", "unknown confidentiality label");
    compiled->has_history = true;
    return true;
  }

  // when.session: the session's labels.
  bool SessionCond(const Json& s, const std::string& ptr, HistoryCond* h) {
    h->session = true;
    if (s.contains("integrity")) {
      Integrity i;
      if (!ParseIntegrity(s["integrity"].get<std::string>(), &i) || i != Integrity::kUntrusted)
        return Fail(ptr + "/integrity", "a session condition names integrity: untrusted");
      h->untrusted = true;
    }
    if (s.contains("confidentiality")) {
      h->has_confidentiality = true;
      if (!ParseConfidentiality(s["confidentiality"].get<std::string>(), &h->confidentiality))
        return Fail(ptr + "/confidentiality", "unknown confidentiality label");
    }
    if (!h->untrusted && !h->has_confidentiality)
      return Fail(ptr, "a session condition names integrity or confidentiality");
    return true;
  }

  // after: a call pattern, registered once by its text.
  bool After(const Json& a, const std::string& ptr, HistoryCond* h) {
    CallPattern p;
    Json keyed = a;
    keyed.erase("count");
    p.key = keyed.dump();
    p.key_hash = PatternKeyHash()(std::string_view(p.key));
    if (!ToolGlobs(a, ptr, &p.tools) || !InvocationGlobs(a, ptr, &p.invocations)) return false;
    if (a.contains("result")) {
      const Json& r = a["result"];
      if (r.contains("integrity")) {
        p.has_integrity = true;
        if (!ParseIntegrity(r["integrity"].get<std::string>(), &p.integrity))
          return Fail(ptr + "/result/integrity", "unknown integrity label");
      }
      if (r.contains("confidentiality")) {
        p.has_confidentiality = true;
        if (!ParseConfidentiality(r["confidentiality"].get<std::string>(), &p.confidentiality))
          return Fail(ptr + "/result/confidentiality", "unknown confidentiality label");
      }
    }
    h->count = a.value("count", 1);
    if (h->count < 1 || h->count > static_cast<int>(SessionFacts::kMaxMatches))
      return Fail(ptr + "/count", "count is 1 to " + std::to_string(SessionFacts::kMaxMatches));
    auto& pats = compiled->after_patterns;
    auto it = std::find_if(pats.begin(), pats.end(), [&](const CallPattern& q) { return q.key == p.key; });
    h->after = static_cast<size_t>(it - pats.begin());
    if (it == pats.end()) pats.push_back(std::move(p));
    return true;
  }

  // within: a bounded window, of calls or of minutes.
  bool Within(const Json& w, const std::string& ptr, HistoryCond* h) {
    const bool calls = w.contains("calls"), minutes = w.contains("minutes");
    if (calls == minutes)
      return Fail(
          ptr,
          "within: names one bounded window, {calls: N} (at most 10000) or {minutes: M} (at most 10080)");
    if (calls) {
      h->within_calls = w["calls"].get<int>();
      if (h->within_calls < 1 || h->within_calls > 10000) return Fail(ptr + "/calls", "calls is 1 to 10000");
    } else {
      const int m = w["minutes"].get<int>();
      if (m < 1 || m > 10080) return Fail(ptr + "/minutes", "minutes is 1 to 10080 (a week)");
      h->within_us = int64_t{m} * 60'000'000;
    }
    return true;
  }

  // A rule's history keys: when.session (a label rule), after/within/then
  // (a sequence rule). Such a rule denies or asks, never allows.
  bool RuleHistory(const Json& r, const std::string& rp, Rule* rule) {
    const bool session = r.contains("when") && r["when"].contains("session");
    const bool sequence = r.contains("after") || r.contains("within") || r.contains("then");
    if (!session && !sequence) return true;
    compiled->has_history = true;
    if (rule->verdict == "allow")
      return Fail(rp + "/verdict", "a history rule denies or asks: history can only restrict a call");
    if (session && !SessionCond(r["when"]["session"], rp + "/when/session", &rule->history)) return false;
    if (!sequence) return true;
    if (!r.contains("after") || !r.contains("within"))
      return Fail(rp, "a sequence rule needs after: and a bounded within: ({calls: N} or {minutes: M})");
    if (r.contains("tool") || r.contains("tools") || (r.contains("when") && !session))
      return Fail(rp, "a sequence rule names the later call in then: {tool, invocation, when}");
    rule->history.sequence = true;
    if (!After(r["after"], rp + "/after", &rule->history) ||
        !Within(r["within"], rp + "/within", &rule->history))
      return false;
    if (!r.contains("then")) return true;
    const Json& t = r["then"];
    if (!ToolGlobs(t, rp + "/then", &rule->tools) || !InvocationGlobs(t, rp + "/then", &rule->invocations))
      return false;
    return !t.contains("when") || When(t["when"], rp + "/then/when", &rule->when);
  }

  bool Rules(const Json& arr, const std::string& ptr, std::vector<Rule>* out) {
    if (!arr.is_array()) return true;
    for (size_t i = 0; i < arr.size(); ++i) {
      const Json& r = arr[i];
      const std::string rp = ptr + "/" + std::to_string(i);
      if (r.contains("priority") && !r["priority"].is_number_integer()) {
        return Fail(rp + "/priority", "priority must be an integer (higher matches first)");
      }
      Rule rule;
      rule.priority = r.value("priority", 0);
      rule.name = r.value("name", "rule-" + std::to_string(i));
      rule.verdict = r.value("verdict", "ask");
      rule.reason = r.value("reason", "");
      for (const auto& t : Strings(r, "tools")) {
        std::string err;
        if (!KaizenName(t, rp + "/tools", false)) return false;
        if (!rule.tools.Add(McpToolPattern(t), &err)) return Fail(rp + "/tools", err);
      }
      for (const auto& t : Strings(r, "tool")) {
        std::string err;
        if (!KaizenName(t, rp + "/tool", false)) return false;
        if (!rule.tools.Add(McpToolPattern(t), &err)) return Fail(rp + "/tool", err);
      }
      if (r.contains("when") && !When(r["when"], rp + "/when", &rule.when)) return false;
      if (!RuleHistory(r, rp, &rule)) return false;
      out->push_back(std::move(rule));
    }
    // Kaizen's PermissionRule priority: higher first; equal priorities (and
    // a file without any) keep list order.
    std::stable_sort(out->begin(), out->end(),
                     [](const Rule& a, const Rule& b) { return a.priority > b.priority; });
    return true;
  }

  // `notify`: a list of globs, or Duragent's object form (its patterns
  // when enabled; its deliveries are read by deploy/notify_deliveries.h).
  bool Notify(const Json& n, const std::string& ptr, GlobSet* out) {
    if (!n.is_object()) return Globs(n, ptr, out, true);
    if (n.contains("deliveries")) {
      for (size_t i = 0; i < n["deliveries"].size(); ++i) {
        const Json& d = n["deliveries"][i];
        if (d.value("type", "") == "webhook" && !d.contains("url")) {
          return Fail(ptr + "/deliveries/" + std::to_string(i), "a webhook delivery needs a url");
        }
      }
    }
    if (!n.value("enabled", true) || !n.contains("patterns")) return true;
    return Globs(n["patterns"], ptr + "/patterns", out, true);
  }

  bool TierFrom(const Json& j, const std::string& ptr, Tier* t) {
    if (j.contains("mode")) {
      t->has_mode = true;
      if (!ParseMode(j["mode"].get<std::string>(), &t->mode)) return Fail(ptr + "/mode", "unknown mode");
    }
    if (j.contains("deny") && !Globs(j["deny"], ptr + "/deny", &t->deny, true)) return false;
    if (j.contains("allow") && !Globs(j["allow"], ptr + "/allow", &t->allow, true)) return false;
    if (j.contains("notify") && !Notify(j["notify"], ptr + "/notify", &t->notify)) return false;
    if (j.contains("rules") && !Rules(j["rules"], ptr + "/rules", &t->rules)) return false;
    for (size_t i = 0; i < t->rules.size(); ++i) {
      if (t->rules[i].verdict == "ask" && t->rules[i].history.any()) t->history_asks.push_back(i);
    }
    if (j.contains("tools") && j["tools"].is_array()) {
      t->has_grants = true;
      if (!Globs(j["tools"], ptr + "/tools", &t->grants)) return false;
    }
    if (j.contains("http_request")) {
      t->has_http = true;
      if (!Http(j["http_request"], ptr + "/http_request", &t->http)) return false;
    }
    return true;
  }

  bool Budgets(const Json& arr, const std::string& ptr, const std::string& agent, std::vector<Budget>* out) {
    if (!arr.is_array()) return true;
    for (size_t i = 0; i < arr.size(); ++i) {
      const Json& b = arr[i];
      Budget x;
      x.name = b.value("name", (agent.empty() ? "budget-" : agent + "-budget-") + std::to_string(i));
      std::string scope = b.value("scope", agent.empty() ? "org" : "agent");
      x.scope = scope == "org"       ? BudgetLedger::Scope::kOrg
                : scope == "session" ? BudgetLedger::Scope::kSession
                                     : BudgetLedger::Scope::kAgent;
      x.tool = b.value("tool", "");
      x.agent = agent.empty() ? b.value("agent", "") : agent;
      x.window_name = b.value("window", "session");
      if (x.window_name == "session")
        x.session_window = true;
      else if (x.window_name == "minute")
        x.window_us = 60'000'000LL;
      else if (x.window_name == "hour")
        x.window_us = 3'600'000'000LL;
      else if (x.window_name == "day")
        x.window_us = 86'400'000'000LL;
      else
        return Fail(ptr + "/" + std::to_string(i) + "/window", "unknown window");
      if (b.contains("max_usd")) x.max_micros = UsdToMicros(b["max_usd"].get<double>());
      if (b.contains("max_calls")) x.max_calls = b["max_calls"].get<int64_t>();
      out->push_back(std::move(x));
    }
    return true;
  }

  static ApprovalSpec Approval(const Json& j) {
    ApprovalSpec a;
    a.quorum = j.value("quorum", 0);
    a.timeout_s = j.value("timeout_s", 0);
    if (j.contains("approvers")) {
      a.has_approvers = true;
      for (const auto& s : j["approvers"]) a.approvers.push_back(s.get<std::string>());
    }
    return a;
  }

  // The file-wide settings: Duragent's defaults, the approval threshold,
  // and what execute can run (writes, upstream MCP servers).
  bool Settings(const Json& doc, Policy::Compiled* c) {
    // Duragent's file (docs/policy.md, "Duragent policy files"): with no
    // mode, dangerous (its default); its ask asks for any call not allowed,
    // whatever the danger, so the threshold is SAFE unless the file says.
    if (doc.value("apiVersion", "").rfind("duragent/", 0) == 0) {
      c->threshold = DangerLevel::kSafe;
      c->org.has_mode = true;
      c->org.mode = Mode::kDangerous;
    }
    if (doc.contains("approval_threshold") &&
        !ParseDanger(doc["approval_threshold"].get<std::string>(), &c->threshold)) {
      return Fail("/approval_threshold", "unknown danger level");
    }
    // What execute could not run whatever an approver said is denied here.
    if (doc.contains("execute") && doc["execute"].is_object() && doc["execute"].contains("writes_enabled") &&
        doc["execute"]["writes_enabled"].is_boolean()) {
      c->writes_enabled = doc["execute"]["writes_enabled"].get<bool>();
    }
    // Upstream MCP servers (execute.mcp_servers): their tools are known.
    if (doc.contains("execute") && doc["execute"].is_object() && doc["execute"].contains("mcp_servers") &&
        doc["execute"]["mcp_servers"].is_object()) {
      for (const auto& [server, spec] : doc["execute"]["mcp_servers"].items()) c->mcp_servers.insert(server);
    }
    return true;
  }

  // The `tools:` registry: exact names, then patterns.
  bool Tools(const Json& tools, Policy::Compiled* c) {
    for (const auto& [raw_name, spec] : tools.items()) {
      if (!KaizenName(raw_name, "/tools/" + PointerToken(raw_name), false)) return false;
      const std::string name = McpToolPattern(raw_name);
      ToolSpec t;
      if (const ToolFacts* b = FindBuiltinTool(name)) t = CatalogSpec(*b);
      if (spec.contains("danger") && !ParseDanger(spec["danger"].get<std::string>(), &t.danger)) {
        return Fail("/tools/" + PointerToken(name) + "/danger", "unknown danger level");
      }
      t.read_only = spec.value("read_only", t.read_only);
      t.category = spec.value("category", t.category);
      if (spec.contains("cost_usd")) t.cost_micros = UsdToMicros(spec["cost_usd"].get<double>());
      if (name.find_first_of("*?[\\") != std::string::npos) {
        Glob g;
        std::string err;
        if (!Glob::Compile(name, &g, &err)) return Fail("/tools/" + PointerToken(name), err);
        c->tool_patterns.emplace_back(std::move(g), std::move(t));
      } else {
        c->tools.emplace(name, std::move(t));
      }
    }
    return true;
  }

  // Each agent's tier, its budgets among the file's.
  bool Agents(const Json& agents, Policy::Compiled* c) {
    for (const auto& [id, a] : agents.items()) {
      const std::string ptr = "/agents/" + PointerToken(id);
      Tier t;
      if (!TierFrom(a, ptr, &t)) return false;
      if (a.contains("budgets") && !Budgets(a["budgets"], ptr + "/budgets", id, &c->budgets)) return false;
      c->agents.emplace(id, std::move(t));
    }
    return true;
  }

  // A quorum its own approver list cannot reach would make every such ask
  // wait for its timeout: the file is refused instead.
  bool Reachable(const Policy::Compiled& c, const ApprovalSpec& a, const std::string& ptr) {
    if (!a.has_approvers || a.approvers.empty()) return true;
    std::set<std::string> who;
    for (const auto& x : a.approvers) {
      if (x.rfind("group:", 0) == 0) {
        auto it = c.groups.find(x.substr(6));
        if (it == c.groups.end())
          return Fail(ptr + "/approvers", "unknown approver group '" + x.substr(6) + "'");
        who.insert(it->second.begin(), it->second.end());
      } else {
        who.insert(x);
      }
    }
    if (a.quorum > 0 && static_cast<size_t>(a.quorum) > who.size()) {
      return Fail(ptr, "quorum " + std::to_string(a.quorum) + " needs at least that many approvers; " +
                           std::to_string(who.size()) + " listed");
    }
    return true;
  }

  // `approvals:`: default, by danger, tool and org, and approver groups.
  bool Approvals(const Json& ap, Policy::Compiled* c) {
    if (ap.contains("default")) c->approval_default = Approval(ap["default"]);
    if (ap.contains("danger"))
      for (const auto& [k, v] : ap["danger"].items()) c->approval_by_danger[k] = Approval(v);
    if (ap.contains("tools"))
      for (const auto& [k, v] : ap["tools"].items()) c->approval_by_tool[k] = Approval(v);
    if (ap.contains("orgs"))
      for (const auto& [k, v] : ap["orgs"].items()) c->approval_by_org[k] = Approval(v);
    if (ap.contains("groups"))
      for (const auto& [k, v] : ap["groups"].items()) c->groups[k] = v.get<std::vector<std::string>>();
    if (!Reachable(*c, c->approval_default, "/approvals/default")) return false;
    for (const char* section : {"danger", "tools", "orgs"}) {
      const auto& m = std::string(section) == "danger"  ? c->approval_by_danger
                      : std::string(section) == "tools" ? c->approval_by_tool
                                                        : c->approval_by_org;
      for (const auto& [k, a] : m) {
        if (!Reachable(*c, a, std::string("/approvals/") + section + "/" + PointerToken(k))) return false;
      }
    }
    return true;
  }

  bool Compile(const Json& doc, Policy::Compiled* c) {
    compiled = c;
    this->doc = &doc;
    if (!Settings(doc, c)) return false;
    if (doc.contains("labels") && !Labels(doc["labels"], &c->labels)) return false;
    if (doc.contains("tools") && !Tools(doc["tools"], c)) return false;
    if (!TierFrom(doc, "", &c->org)) return false;
    if (doc.contains("tool_allowlist")) {
      c->has_tool_allowlist = true;
      if (!Globs(doc["tool_allowlist"], "/tool_allowlist", &c->tool_allowlist)) return false;
    }
    if (doc.contains("budgets") && !Budgets(doc["budgets"], "/budgets", "", &c->budgets)) return false;
    if (doc.contains("agents") && !Agents(doc["agents"], c)) return false;
    return !doc.contains("approvals") || Approvals(doc["approvals"], c);
  }
};

// Lexical normalisation, shared with execute (core/url.h).

}  // namespace

Status CompilePolicy(const Json& doc, const LineMap* lines, const Origins* origins, Policy::Compiled* out,
                     std::string* failed_at) {
  Compiler c{lines, Status::Ok(), origins};
  c.Compile(doc, out);
  if (failed_at != nullptr) *failed_at = c.failed_at;
  return c.error;
}

}  // namespace tollgate
