// The policy engine: loading, compiling and deciding (decide/policy_engine.h,
// docs/policy.md is the reference for every rule applied here).
#include "decide/policy_engine.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/invocation.h"
#include "core/messages.h"
#include "core/redact.h"
#include "core/schema.h"
#include "core/sha256.h"

namespace tollgate {

// ---------------------------------------------------------------------------
// Names.
namespace {
const char* const kDangerNames[] = {"SAFE", "LOW", "MEDIUM", "HIGH", "CRITICAL"};
const char* const kModeNames[] = {"bypass", "plan", "ask", "restrict", "dangerous"};
}  // namespace

const char* DangerName(DangerLevel d) { return kDangerNames[static_cast<int>(d)]; }
bool ParseDanger(std::string_view name, DangerLevel* out) {
  for (int i = 0; i < 5; ++i) {
    if (name == kDangerNames[i]) {
      *out = static_cast<DangerLevel>(i);
      return true;
    }
  }
  return false;
}
const char* ModeName(Mode m) { return kModeNames[static_cast<int>(m)]; }
bool ParseMode(std::string_view name, Mode* out) {
  for (int i = 0; i < 5; ++i) {
    if (name == kModeNames[i]) {
      *out = static_cast<Mode>(i);
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// Built-in tools (execute's registry) and their defaults.
namespace {
struct BuiltinSpec {
  const char* name;
  DangerLevel danger;
  bool read_only;
  const char* category;
};
constexpr BuiltinSpec kBuiltins[] = {
    {"echo", DangerLevel::kSafe, true, "utility"},
    {"current_time", DangerLevel::kSafe, true, "utility"},
    {"calculate", DangerLevel::kSafe, true, "utility"},
    {"read_file", DangerLevel::kLow, true, "filesystem"},
    {"write_file", DangerLevel::kMedium, false, "filesystem"},
    {"list_directory", DangerLevel::kLow, true, "filesystem"},
    {"file_exists", DangerLevel::kSafe, true, "filesystem"},
    {"delete_file", DangerLevel::kHigh, false, "filesystem"},
    {"search_files", DangerLevel::kLow, true, "filesystem"},
    {"http_request", DangerLevel::kMedium, false, "network"},
    {"execute_command", DangerLevel::kHigh, false, "shell"},
    {"get_audit_log", DangerLevel::kLow, true, "audit"},
    {"get_system_info", DangerLevel::kLow, true, "system"},
};
const BuiltinSpec* FindBuiltin(std::string_view tool) {
  for (const auto& b : kBuiltins) {
    if (tool == b.name) return &b;
  }
  return nullptr;
}
bool IsReadOnlyMethod(std::string_view m) { return m == "GET" || m == "HEAD" || m == "OPTIONS"; }
}  // namespace

bool IsBuiltinTool(std::string_view tool, bool* read_only) {
  const BuiltinSpec* b = FindBuiltin(tool);
  if (b == nullptr) return false;
  if (read_only != nullptr) *read_only = b->read_only;
  return true;
}

// ---------------------------------------------------------------------------
// The compiled policy.
namespace {
int64_t UsdToMicros(double usd) {
  if (!std::isfinite(usd) || usd < 0) return 0;
  return static_cast<int64_t>(std::llround(usd * 1e6));
}
std::string MicrosToUsd(int64_t m) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "$%.2f", static_cast<double>(m) / 1e6);
  if (m % 10000 != 0) std::snprintf(buf, sizeof buf, "$%.6g", static_cast<double>(m) / 1e6);
  return buf;
}
}  // namespace

struct ToolSpec {
  DangerLevel danger = DangerLevel::kHigh;
  bool read_only = false;
  std::string category;
  int64_t cost_micros = 0;
};

struct HttpConfig {
  bool has_base_url = false, has_methods = false, has_auto_approve = false, has_hosts = false;
  std::string base_url;
  std::vector<std::string> methods;
  bool auto_approve = false;
  GlobSet hosts;
  std::vector<std::string> host_patterns;
};

struct Condition {
  std::vector<std::string> methods;
  GlobSet hosts;
  bool has_hosts = false;
  std::vector<std::string> path_prefixes;
  std::vector<std::string> file_prefixes;
  std::vector<std::string> commands;
};

struct Rule {
  std::string name;
  GlobSet tools;  // empty: any tool
  Condition when;
  std::string verdict;  // allow | deny | ask
  std::string reason;
};

struct Tier {
  bool has_mode = false;
  Mode mode = Mode::kAsk;
  GlobSet deny, allow, notify;
  std::vector<Rule> rules;
  bool has_grants = false;
  GlobSet grants;  // tool names
  bool has_http = false;
  HttpConfig http;
};

struct Budget {
  std::string name;
  BudgetLedger::Scope scope = BudgetLedger::Scope::kAgent;
  std::string tool;            // "" = all tools
  std::string agent;           // "" = every agent
  bool session_window = false;  // over the session rather than a rolling window
  int64_t window_us = 0;        // rolling window length
  std::string window_name;
  int64_t max_micros = -1;
  int64_t max_calls = -1;
};

struct ApprovalSpec {
  int quorum = 0;  // 0 = not set here
  bool has_approvers = false;
  std::vector<std::string> approvers;
  int timeout_s = 0;  // 0 = not set here
};

struct Policy::Compiled {
  std::unordered_map<std::string, ToolSpec> tools;                  // exact names from the file
  std::vector<std::pair<Glob, ToolSpec>> tool_patterns;             // "cli:*"-style entries
  DangerLevel threshold = DangerLevel::kHigh;
  Tier org;
  std::unordered_map<std::string, Tier> agents;
  bool has_tool_allowlist = false;
  GlobSet tool_allowlist;
  std::vector<Budget> budgets;
  ApprovalSpec approval_default;
  std::unordered_map<std::string, ApprovalSpec> approval_by_danger, approval_by_tool, approval_by_org;
  std::unordered_map<std::string, std::vector<std::string>> groups;
};

Policy::Policy() = default;
Policy::~Policy() = default;

// ---------------------------------------------------------------------------
// YAML -> JSON, remembering the line of every JSON pointer.
namespace {
using LineMap = std::map<std::string, int>;

std::string PointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out.push_back(c);
  }
  return out;
}

Json YamlScalar(const YAML::Node& n) {
  const std::string& v = n.Scalar();
  if (n.Tag() == "!") return v;  // quoted: always a string
  if (v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL") return nullptr;
  if (v == "true" || v == "True" || v == "TRUE") return true;
  if (v == "false" || v == "False" || v == "FALSE") return false;
  int64_t i = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), i);
  if (ec == std::errc() && p == v.data() + v.size()) return i;
  double d = 0;
  auto [p2, ec2] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec2 == std::errc() && p2 == v.data() + v.size() && std::isfinite(d)) return d;
  return v;
}

// More than any real policy has: YAML aliases can make a few hundred bytes
// expand to billions of values, or a few kilobytes to gigabytes (one long
// string aliased many times), and a policy also arrives from the HTTP API
// (a what-if's candidate). Both caps are checked before a value is copied,
// so a bomb is refused after at most this much work.
constexpr size_t kMaxPolicyValues = 200'000;
// Scalars, keys and JSON pointers (the line map's) as expanded, in bytes.
constexpr size_t kMaxPolicyExpandedBytes = 8 << 20;

struct YamlBudget {
  size_t values = 0;
  size_t bytes = 0;
};

Status YamlToJson(const YAML::Node& n, const std::string& ptr, Json* out, LineMap* lines, int depth,
                  YamlBudget* budget) {
  if (depth > 64) return Status::Error(errc::kPolicyInvalid, "line " + std::to_string(n.Mark().line + 1) + ": nested too deeply");
  if (++budget->values > kMaxPolicyValues) {
    return Status::Error(errc::kPolicyInvalid, "line " + std::to_string(n.Mark().line + 1) + ": more than " +
                                                   std::to_string(kMaxPolicyValues) +
                                                   " values (aliases expanding?)");
  }
  budget->bytes += ptr.size() + 16 + (n.IsScalar() ? n.Scalar().size() : 0);
  if (budget->bytes > kMaxPolicyExpandedBytes) {
    return Status::Error(errc::kPolicyInvalid, "line " + std::to_string(n.Mark().line + 1) +
                                                   ": the policy expands to more than " +
                                                   std::to_string(kMaxPolicyExpandedBytes) +
                                                   " bytes (aliases expanding?)");
  }
  (*lines)[ptr] = n.Mark().line + 1;
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      *out = nullptr;
      return Status::Ok();
    case YAML::NodeType::Scalar:
      *out = YamlScalar(n);
      return Status::Ok();
    case YAML::NodeType::Sequence: {
      *out = Json::array();
      size_t i = 0;
      for (const auto& item : n) {
        Json v;
        Status s = YamlToJson(item, ptr + "/" + std::to_string(i++), &v, lines, depth + 1, budget);
        if (!s.ok()) return s;
        out->push_back(std::move(v));
      }
      return Status::Ok();
    }
    case YAML::NodeType::Map: {
      *out = Json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) {
          return Status::Error(errc::kPolicyInvalid,
                               "line " + std::to_string(kv.first.Mark().line + 1) + ": keys must be plain strings");
        }
        const std::string key = kv.first.Scalar();
        if (out->contains(key)) {
          return Status::Error(errc::kPolicyInvalid, "line " + std::to_string(kv.first.Mark().line + 1) +
                                                         ": duplicate key '" + key + "'");
        }
        Json v;
        Status s = YamlToJson(kv.second, ptr + "/" + PointerToken(key), &v, lines, depth + 1, budget);
        if (!s.ok()) return s;
        (*out)[key] = std::move(v);
      }
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// "line N: " for the deepest known ancestor of `ptr`, or "at PTR: ".
std::string Where(const LineMap* lines, std::string ptr) {
  if (lines != nullptr) {
    while (true) {
      auto it = lines->find(ptr);
      if (it != lines->end()) return "line " + std::to_string(it->second) + ": ";
      size_t slash = ptr.rfind('/');
      if (slash == std::string::npos) break;
      ptr.resize(slash);
    }
  }
  return ptr.empty() ? "" : "at " + ptr + ": ";
}

// Schema messages look like "/agents/a1/mode: must be one of ...".
std::string LocateSchemaMessage(const LineMap* lines, const std::string& msg) {
  if (!msg.empty() && msg[0] == '/') {
    size_t colon = msg.find(": ");
    if (colon != std::string::npos) {
      std::string ptr = msg.substr(0, colon);
      return Where(lines, ptr) + msg;
    }
  }
  return msg;
}

// ---- Compiling the JSON document.
// Where the values of an org's effective document came from: a pointer of
// the merged document -> the pointer in the file it was taken from (a
// subtree maps with it; a pointer with no mapped ancestor is the same
// place in the file). docs/policy.md, "Organisations".
using Origins = std::map<std::string, std::string>;

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
  const Origins* origins = nullptr;  // compiling an org's merged document

  bool Fail(const std::string& ptr, const std::string& what) {
    if (error.ok()) error = Status::Error(errc::kPolicyInvalid, Where(lines, Resolve(origins, ptr)) + what);
    return false;
  }

  bool Globs(const Json& arr, const std::string& ptr, GlobSet* out) {
    if (!arr.is_array()) return true;
    for (size_t i = 0; i < arr.size(); ++i) {
      std::string err;
      if (!out->Add(arr[i].get<std::string>(), &err)) return Fail(ptr + "/" + std::to_string(i), err);
    }
    return true;
  }

  static std::vector<std::string> Strings(const Json& j, const char* key) {
    std::vector<std::string> out;
    if (j.contains(key)) {
      const Json& v = j[key];
      if (v.is_string()) out.push_back(v.get<std::string>());
      else if (v.is_array())
        for (const auto& s : v) out.push_back(s.get<std::string>());
    }
    return out;
  }

  static std::string NormPath(std::string_view p);

  bool Http(const Json& j, const std::string& ptr, HttpConfig* h) {
    if (j.contains("base_url")) {
      h->has_base_url = true;
      h->base_url = j["base_url"].get<std::string>();
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
    return true;
  }

  bool Rules(const Json& arr, const std::string& ptr, std::vector<Rule>* out) {
    if (!arr.is_array()) return true;
    for (size_t i = 0; i < arr.size(); ++i) {
      const Json& r = arr[i];
      const std::string rp = ptr + "/" + std::to_string(i);
      Rule rule;
      rule.name = r.value("name", "rule-" + std::to_string(i));
      rule.verdict = r.value("verdict", "ask");
      rule.reason = r.value("reason", "");
      for (const auto& t : Strings(r, "tools")) {
        std::string err;
        if (!rule.tools.Add(t, &err)) return Fail(rp + "/tools", err);
      }
      for (const auto& t : Strings(r, "tool")) {
        std::string err;
        if (!rule.tools.Add(t, &err)) return Fail(rp + "/tool", err);
      }
      if (r.contains("when")) {
        const Json& w = r["when"];
        for (auto m : Strings(w, "method")) {
          std::transform(m.begin(), m.end(), m.begin(), ::toupper);
          rule.when.methods.push_back(m);
        }
        for (auto h : Strings(w, "host")) {
          std::transform(h.begin(), h.end(), h.begin(), ::tolower);
          std::string err;
          if (!rule.when.hosts.Add(h, &err)) return Fail(rp + "/when/host", err);
          rule.when.has_hosts = true;
        }
        rule.when.path_prefixes = Strings(w, "path_prefix");
        for (const auto& f : Strings(w, "file_prefix")) rule.when.file_prefixes.push_back(NormPath(f));
        rule.when.commands = Strings(w, "command");
      }
      out->push_back(std::move(rule));
    }
    return true;
  }

  bool TierFrom(const Json& j, const std::string& ptr, Tier* t) {
    if (j.contains("mode")) {
      t->has_mode = true;
      if (!ParseMode(j["mode"].get<std::string>(), &t->mode)) return Fail(ptr + "/mode", "unknown mode");
    }
    if (j.contains("deny") && !Globs(j["deny"], ptr + "/deny", &t->deny)) return false;
    if (j.contains("allow") && !Globs(j["allow"], ptr + "/allow", &t->allow)) return false;
    if (j.contains("notify") && !Globs(j["notify"], ptr + "/notify", &t->notify)) return false;
    if (j.contains("rules") && !Rules(j["rules"], ptr + "/rules", &t->rules)) return false;
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
      x.scope = scope == "org" ? BudgetLedger::Scope::kOrg
                : scope == "session" ? BudgetLedger::Scope::kSession
                                     : BudgetLedger::Scope::kAgent;
      x.tool = b.value("tool", "");
      x.agent = agent.empty() ? b.value("agent", "") : agent;
      x.window_name = b.value("window", "session");
      if (x.window_name == "session") x.session_window = true;
      else if (x.window_name == "minute") x.window_us = 60'000'000LL;
      else if (x.window_name == "hour") x.window_us = 3'600'000'000LL;
      else if (x.window_name == "day") x.window_us = 86'400'000'000LL;
      else return Fail(ptr + "/" + std::to_string(i) + "/window", "unknown window");
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

  bool Compile(const Json& doc, Policy::Compiled* c) {
    if (doc.contains("approval_threshold") &&
        !ParseDanger(doc["approval_threshold"].get<std::string>(), &c->threshold)) {
      return Fail("/approval_threshold", "unknown danger level");
    }
    if (doc.contains("tools")) {
      for (const auto& [name, spec] : doc["tools"].items()) {
        ToolSpec t;
        bool ro = false;
        if (const BuiltinSpec* b = FindBuiltin(name)) {
          t.danger = b->danger;
          t.read_only = b->read_only;
          t.category = b->category;
        } else if (IsBuiltinTool(name, &ro)) {
          t.read_only = ro;
        }
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
    }
    if (!TierFrom(doc, "", &c->org)) return false;
    if (doc.contains("tool_allowlist")) {
      c->has_tool_allowlist = true;
      if (!Globs(doc["tool_allowlist"], "/tool_allowlist", &c->tool_allowlist)) return false;
    }
    if (doc.contains("budgets") && !Budgets(doc["budgets"], "/budgets", "", &c->budgets)) return false;
    if (doc.contains("agents")) {
      for (const auto& [id, a] : doc["agents"].items()) {
        const std::string ptr = "/agents/" + PointerToken(id);
        Tier t;
        if (!TierFrom(a, ptr, &t)) return false;
        if (a.contains("budgets") && !Budgets(a["budgets"], ptr + "/budgets", id, &c->budgets)) return false;
        c->agents.emplace(id, std::move(t));
      }
    }
    if (doc.contains("approvals")) {
      const Json& ap = doc["approvals"];
      if (ap.contains("default")) c->approval_default = Approval(ap["default"]);
      if (ap.contains("danger"))
        for (const auto& [k, v] : ap["danger"].items()) c->approval_by_danger[k] = Approval(v);
      if (ap.contains("tools"))
        for (const auto& [k, v] : ap["tools"].items()) c->approval_by_tool[k] = Approval(v);
      if (ap.contains("orgs"))
        for (const auto& [k, v] : ap["orgs"].items()) c->approval_by_org[k] = Approval(v);
      if (ap.contains("groups"))
        for (const auto& [k, v] : ap["groups"].items()) c->groups[k] = v.get<std::vector<std::string>>();
      // A quorum its own approver list cannot reach would make every such
      // ask wait for its timeout: refuse the file instead.
      auto reachable = [&](const ApprovalSpec& a, const std::string& ptr) {
        if (!a.has_approvers || a.approvers.empty()) return true;
        std::set<std::string> who;
        for (const auto& x : a.approvers) {
          if (x.rfind("group:", 0) == 0) {
            auto it = c->groups.find(x.substr(6));
            if (it == c->groups.end()) return Fail(ptr + "/approvers", "unknown approver group '" + x.substr(6) + "'");
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
      };
      if (!reachable(c->approval_default, "/approvals/default")) return false;
      for (const char* section : {"danger", "tools", "orgs"}) {
        const auto& m = std::string(section) == "danger" ? c->approval_by_danger
                        : std::string(section) == "tools" ? c->approval_by_tool
                                                          : c->approval_by_org;
        for (const auto& [k, a] : m) {
          if (!reachable(a, std::string("/approvals/") + section + "/" + PointerToken(k))) return false;
        }
      }
    }
    return true;
  }
};

// Lexical normalisation, shared with execute (core/url.h).
std::string Compiler::NormPath(std::string_view p) { return NormalizePath(p); }

// ---- Org sections (docs/policy.md, "Organisations"): an org's effective
// document is the file without `orgs`, its section merged over it.
struct OrgMerge {
  Origins* origins;  // null: not recorded

  void Map(const std::string& merged, const std::string& from) {
    if (origins != nullptr) (*origins)[merged] = from;
  }
  static std::string Child(const std::string& ptr, const std::string& key) { return ptr + "/" + PointerToken(key); }
  static std::string Child(const std::string& ptr, size_t i) { return ptr + "/" + std::to_string(i); }

  // `out` (the deployment's values, at the same pointers in the file) keeps
  // the keys `over` lacks; the rest come from `over` (at `op` in the file).
  void KeepOthers(const Json& out, const std::string& mp, const Json& over) {
    for (auto it = out.begin(); it != out.end(); ++it) {
      if (!over.contains(it.key())) Map(Child(mp, it.key()), Child(mp, it.key()));
    }
  }

  // Maps merge key by key, recursively; any other value of `over` replaces.
  void Object(Json& out, const std::string& mp, const Json& over, const std::string& op) {
    Map(mp, op);
    KeepOthers(out, mp, over);
    for (const auto& [k, v] : over.items()) {
      auto cur = out.find(k);
      if (cur != out.end() && cur->is_object() && v.is_object()) {
        Object(*cur, Child(mp, k), v, Child(op, k));
      } else {
        out[k] = v;
        Map(Child(mp, k), Child(op, k));
      }
    }
  }

  // A tier: the top level (`top`) or one agent's entry. Over the
  // deployment's: `deny` is the union (the deployment's first), the
  // deployment's deny rules stay ahead of the org's `rules`, `budgets` merge
  // by name, `agents` entry by entry (each a tier), other maps key by key;
  // any other value (mode, allow, notify, tool grants, lists) replaces.
  void Tier(Json& out, const std::string& mp, const Json& over, const std::string& op, bool top) {
    if (!top) {
      Map(mp, op);
      KeepOthers(out, mp, over);
    }
    for (const auto& [k, v] : over.items()) {
      const std::string kp = Child(mp, k), ko = Child(op, k);
      auto cur = out.find(k);
      const bool has = cur != out.end();
      if (k == "deny" && has && cur->is_array() && v.is_array()) {
        Map(kp, kp);
        const size_t n = cur->size();
        for (size_t j = 0; j < v.size(); ++j) {
          if (std::find(cur->begin(), cur->begin() + static_cast<std::ptrdiff_t>(n), v[j]) !=
              cur->begin() + static_cast<std::ptrdiff_t>(n)) {
            continue;  // denied already
          }
          Map(Child(kp, cur->size()), Child(ko, j));
          cur->push_back(v[j]);
        }
      } else if (k == "rules" && has && cur->is_array() && v.is_array()) {
        Json merged = Json::array();
        for (size_t i = 0; i < cur->size(); ++i) {
          const Json& r = (*cur)[i];
          if (!r.is_object() || r.value("verdict", "") != "deny") continue;
          Json kept = r;
          if (!kept.contains("name")) kept["name"] = "rule-" + std::to_string(i);  // its name in the deployment
          Map(Child(kp, merged.size()), Child(kp, i));
          merged.push_back(std::move(kept));
        }
        for (size_t j = 0; j < v.size(); ++j) {
          Json r = v[j];
          if (r.is_object() && !r.contains("name")) r["name"] = "rule-" + std::to_string(j);  // its name in the section
          Map(Child(kp, merged.size()), Child(ko, j));
          merged.push_back(std::move(r));
        }
        Map(kp, ko);
        *cur = std::move(merged);
      } else if (k == "budgets" && has && cur->is_array() && v.is_array()) {
        Json merged = Json::array();
        std::vector<bool> used(v.size(), false);
        for (size_t i = 0; i < cur->size(); ++i) {
          const Json& b = (*cur)[i];
          const std::string name = b.is_object() ? b.value("name", "") : "";
          size_t j = 0;
          while (j < v.size() && (used[j] || !v[j].is_object() || v[j].value("name", "") != name)) ++j;
          if (j < v.size()) {
            used[j] = true;
            Map(Child(kp, merged.size()), Child(ko, j));
            merged.push_back(v[j]);
          } else {
            Map(Child(kp, merged.size()), Child(kp, i));
            merged.push_back(b);
          }
        }
        for (size_t j = 0; j < v.size(); ++j) {
          if (used[j]) continue;
          Map(Child(kp, merged.size()), Child(ko, j));
          merged.push_back(v[j]);
        }
        Map(kp, ko);
        *cur = std::move(merged);
      } else if (top && k == "agents" && has && cur->is_object() && v.is_object()) {
        for (const auto& [id, entry] : v.items()) {
          auto a = cur->find(id);
          if (a != cur->end() && a->is_object() && entry.is_object()) {
            Tier(*a, Child(kp, id), entry, Child(ko, id), false);
          } else {
            (*cur)[id] = entry;
            Map(Child(kp, id), Child(ko, id));
          }
        }
      } else if (has && cur->is_object() && v.is_object()) {
        Object(*cur, kp, v, ko);
      } else {
        out[k] = v;
        Map(kp, ko);
      }
    }
  }
};

// Of `approvals.orgs`, org `org_id`'s entry alone (an `approvals` left
// empty by that goes too): another org's approvers are not part of this
// org's policy, so editing them does not change its version.
void KeepOwnApprovals(Json* doc, const std::string& org_id) {
  auto ap = doc->find("approvals");
  if (ap == doc->end() || !ap->is_object()) return;
  auto orgs = ap->find("orgs");
  if (orgs == ap->end()) return;
  if (orgs->is_object() && orgs->contains(org_id)) {
    Json own = Json::object();
    own[org_id] = std::move((*orgs)[org_id]);
    *orgs = std::move(own);
    return;
  }
  ap->erase(orgs);
  if (ap->empty()) doc->erase(ap);
}

// Org `org_id`'s effective document (`section`: its section, or null).
Json EffectiveDocOf(const Json& doc, const std::string& org_id, const Json* section, Origins* origins) {
  Json out = doc;
  out.erase("orgs");
  if (section != nullptr && section->is_object()) {
    OrgMerge m{origins};
    m.Tier(out, "", *section, "/orgs/" + PointerToken(org_id), true);
  }
  KeepOwnApprovals(&out, org_id);
  return out;
}

std::string VersionOf(const Json& doc, Status* s) {
  std::string bytes;
  *s = CanonicalBytes(doc, &bytes);
  return "file:" + Sha256Hex(bytes).substr(0, 16);
}

// Path-component prefix: "/etc" covers "/etc" and "/etc/x", not "/etcetera".
bool UnderPrefix(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return false;
  if (prefix == "/") return !path.empty() && path[0] == '/';
  if (path.size() < prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

}  // namespace

struct PolicyLoader {
  static Status Load(const Json& doc, const std::string& source, const LineMap* lines, PolicyPtr* out) {
    if (!doc.is_object()) {
      return Status::Error(errc::kPolicyInvalid, Where(lines, "") + "a policy must be a mapping (an object)");
    }
    // Org ids first: the schema's message for a bad property name names
    // no place (schemas/policy.schema.json says the same).
    if (doc.contains("orgs") && doc["orgs"].is_object()) {
      for (auto it = doc["orgs"].begin(); it != doc["orgs"].end(); ++it) {
        const std::string& org = it.key();
        const bool control = std::any_of(org.begin(), org.end(), [](char ch) {
          const auto c = static_cast<unsigned char>(ch);
          return c < 0x20 || c == 0x7f;
        });
        if (org.empty() || control || org.size() > kMaxIdBytes) {
          return Status::Error(errc::kPolicyInvalid,
                               Where(lines, "/orgs/" + PointerToken(org)) +
                                   "/orgs: an org id must be 1 to 256 bytes without control characters");
        }
      }
    }
    Status s = SchemaRegistry::Builtin().Validate("policy", doc);
    if (!s.ok()) return Status::Error(errc::kPolicyInvalid, LocateSchemaMessage(lines, s.message()));
    {
      // redact.values must compile: the stages apply them to everything logged.
      std::shared_ptr<const Redactor> redactor;
      s = Redactor::FromPolicy(doc, &redactor);
      if (!s.ok()) return Status::Error(errc::kPolicyInvalid, Where(lines, "/redact") + s.message());
    }
    auto p = std::make_shared<Policy>();
    try {
      // The deployment defaults (`orgs` is not read by the compiler).
      auto defaults = std::make_shared<Policy::Compiled>();
      Compiler c{lines, Status::Ok()};
      if (!c.Compile(doc, defaults.get())) return c.error;
      p->compiled_ = defaults;
      // One compiled form per org with a section; an org named only in
      // approvals.orgs shares the defaults (its entry is looked up by org)
      // but has its own version.
      const Json* orgs = doc.contains("orgs") && doc["orgs"].is_object() ? &doc["orgs"] : nullptr;
      if (orgs != nullptr) {
        for (const auto& [org, section] : orgs->items()) {
          if (!(s = CheckSection(org, section, lines)).ok()) return s;
        }
      }
      std::set<std::string> named;
      if (orgs != nullptr) {
        for (auto it = orgs->begin(); it != orgs->end(); ++it) named.insert(it.key());
      }
      if (doc.contains("approvals") && doc["approvals"].is_object() && doc["approvals"].contains("orgs") &&
          doc["approvals"]["orgs"].is_object()) {
        const Json& ao = doc["approvals"]["orgs"];
        for (auto it = ao.begin(); it != ao.end(); ++it) named.insert(it.key());
      }
      for (const std::string& org : named) {
        const Json* section = orgs != nullptr && orgs->contains(org) ? &(*orgs)[org] : nullptr;
        Origins origins;
        Json eff = EffectiveDocOf(doc, org, section, &origins);
        Policy::OrgForm form;
        form.version = VersionOf(eff, &s);
        if (!s.ok()) return Status::Error(errc::kPolicyInvalid, s.message());
        if (section != nullptr) {
          auto compiled = std::make_shared<Policy::Compiled>();
          Compiler oc{lines, Status::Ok(), &origins};
          if (!oc.Compile(eff, compiled.get())) {
            return Status::Error(errc::kPolicyInvalid, oc.error.message() + " (in org '" + org + "')");
          }
          form.compiled = std::move(compiled);
        } else {
          form.compiled = defaults;
        }
        p->orgs_.emplace(org, std::move(form));
      }
      // Every other org: the file without `orgs` and without approvals.orgs.
      Json base = doc;
      base.erase("orgs");
      if (base.contains("approvals") && base["approvals"].is_object() && base["approvals"].contains("orgs")) {
        base["approvals"].erase("orgs");
        if (base["approvals"].empty()) base.erase("approvals");
      }
      p->default_version_ = VersionOf(base, &s);
      if (!s.ok()) return Status::Error(errc::kPolicyInvalid, s.message());
    } catch (const std::exception& e) {
      // The schema should make this unreachable; never let a bad file throw.
      return Status::Error(errc::kPolicyInvalid, std::string("policy does not compile: ") + e.what());
    }
    std::string bytes;
    if (!(s = CanonicalBytes(doc, &bytes)).ok()) return Status::Error(errc::kPolicyInvalid, s.message());
    p->doc_ = doc;
    p->source_ = source;
    p->content_hash_ = Sha256Hex(bytes);
    p->version_ = "file:" + p->content_hash_.substr(0, 16);
    *out = std::move(p);
    return Status::Ok();
  }

  // What the schema cannot say about an org's section: `mode: bypass`
  // skips the deny list, and an org cannot lift a deployment deny, so it
  // is refused in a section and in a section's agents.
  static Status CheckSection(const std::string& org, const Json& section, const LineMap* lines) {
    const std::string ptr = "/orgs/" + PointerToken(org);
    auto bypass = [&](const Json& tier, const std::string& at) {
      if (tier.is_object() && tier.contains("mode") && tier["mode"] == "bypass") {
        return Status::Error(errc::kPolicyInvalid,
                             Where(lines, at + "/mode") + at +
                                 "/mode: bypass is not allowed in an org section (it would skip the deployment's "
                                 "deny list, which an org cannot lift); use dangerous, which honours deny");
      }
      return Status::Ok();
    };
    Status s = bypass(section, ptr);
    if (s.ok() && section.is_object() && section.contains("agents") && section["agents"].is_object()) {
      for (const auto& [id, a] : section["agents"].items()) {
        if (!(s = bypass(a, ptr + "/agents/" + PointerToken(id))).ok()) break;
      }
    }
    return s;
  }
};

const std::string& Policy::version(const std::string& org_id) const {
  if (orgs_.empty()) return default_version_;
  auto it = orgs_.find(org_id);
  return it == orgs_.end() ? default_version_ : it->second.version;
}

Json Policy::EffectiveDoc(const std::string& org_id) const {
  const Json* section = nullptr;
  if (doc_.contains("orgs") && doc_["orgs"].is_object() && doc_["orgs"].contains(org_id)) {
    section = &doc_["orgs"][org_id];
  }
  return EffectiveDocOf(doc_, org_id, section, nullptr);
}

std::vector<std::string> Policy::OrgSections() const {
  std::vector<std::string> out;
  if (doc_.contains("orgs") && doc_["orgs"].is_object()) {
    for (auto it = doc_["orgs"].begin(); it != doc_["orgs"].end(); ++it) out.push_back(it.key());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status LoadPolicyJson(const Json& doc, const std::string& source, PolicyPtr* out) {
  return PolicyLoader::Load(doc, source, nullptr, out);
}

Status LoadPolicyYaml(std::string_view text, const std::string& source, PolicyPtr* out) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::Error(errc::kPolicyInvalid, "line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  Json doc;
  LineMap lines;
  YamlBudget budget;
  Status s = YamlToJson(root, "", &doc, &lines, 0, &budget);
  if (!s.ok()) return s;
  if (doc.is_null()) doc = Json::object();  // an empty file: every default
  return PolicyLoader::Load(doc, source, &lines, out);
}

Status LoadPolicyFile(const std::string& path, PolicyPtr* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::Error(errc::kPolicyInvalid, "cannot read policy file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  Status s = LoadPolicyYaml(ss.str(), path, out);
  if (!s.ok()) return Status::Error(s.code(), path + ": " + s.message());
  return s;
}

// ---------------------------------------------------------------------------
// PolicyInForce.
struct PolicyInForce::Local {
  GlobSet allow;
  std::set<std::string> hashes;  // content hashes folded in
};

PolicyInForce::PolicyInForce() = default;
PolicyInForce::~PolicyInForce() = default;
PolicyInForce::PolicyInForce(const PolicyInForce&) = default;
PolicyInForce& PolicyInForce::operator=(const PolicyInForce&) = default;

void PolicyInForce::SetFile(PolicyPtr p) {
  file_ = std::move(p);
  Reversion();
}

namespace {
// "+local:<16 hex>" over agent-local content hashes, "" for none.
std::string LocalSuffix(std::vector<std::string> hashes) {
  if (hashes.empty()) return "";
  std::sort(hashes.begin(), hashes.end());
  std::string joined;
  for (const auto& h : hashes) joined += h + "\n";
  return "+local:" + Sha256Hex(joined).substr(0, 16);
}
}  // namespace

void PolicyInForce::Reversion() {
  org_versions_.clear();
  if (file_ == nullptr) {
    version_.clear();
    default_version_.clear();
    return;
  }
  // Each org's version: its own effective policy and its own agent-local
  // rules, nothing of another org's.
  std::map<std::string, std::vector<std::string>> by_org;
  std::vector<std::string> all;
  for (const auto& [k, l] : local_) {
    std::vector<std::string>& mine = by_org[k.substr(0, k.find('\0'))];
    mine.insert(mine.end(), l->hashes.begin(), l->hashes.end());
    all.insert(all.end(), l->hashes.begin(), l->hashes.end());
  }
  version_ = file_->version() + LocalSuffix(std::move(all));
  default_version_ = file_->default_version_;
  for (const auto& [org, form] : file_->orgs_) org_versions_[org] = form.version;
  for (auto& [org, hashes] : by_org) org_versions_[org] = file_->version(org) + LocalSuffix(std::move(hashes));
}

Status PolicyInForce::AddAgentLocal(const std::string& org_id, const std::string& agent_id,
                                    const std::vector<std::string>& allow, const std::string& content_hash) {
  std::string key = org_id + '\0' + agent_id;
  auto it = local_.find(key);
  if (it != local_.end() && it->second->hashes.count(content_hash) != 0) return Status::Ok();  // idempotent
  auto l = it == local_.end() ? std::make_shared<Local>() : std::make_shared<Local>(*it->second);
  for (const auto& a : allow) {
    std::string err;
    if (!l->allow.Add(a, &err)) return Status::Error(errc::kPolicyInvalid, "agent-local rule: " + err);
  }
  l->hashes.insert(content_hash);
  local_[key] = std::move(l);
  Reversion();
  return Status::Ok();
}

Status PolicyInForce::Apply(const Event& e) {
  if (e.type != "policy.updated") return Status::Ok();
  const Json& d = e.data;
  std::string tier = d.value("tier", "file");
  if (tier == "agent_local") {
    std::vector<std::string> allow;
    if (d.contains("allow") && d["allow"].is_array()) {
      for (const auto& a : d["allow"])
        if (a.is_string()) allow.push_back(a.get<std::string>());
    }
    std::string org = d.value("org_id", e.org_id), agent = d.value("agent_id", e.agent_id);
    return AddAgentLocal(org, agent, allow, d.value("content_hash", ""));
  }
  if (!d.contains("policy")) return Status::Ok();  // a pre-policy-engine event: nothing to load
  if (file_ != nullptr && file_->content_hash() == d.value("content_hash", "")) return Status::Ok();
  PolicyPtr p;
  Status s = LoadPolicyJson(d["policy"], d.value("source", ""), &p);
  if (!s.ok()) return s;
  SetFile(std::move(p));
  return Status::Ok();
}

const GlobSet* PolicyInForce::AgentLocal(const std::string& org_id, const std::string& agent_id) const {
  if (local_.empty()) return nullptr;
  auto it = local_.find(org_id + '\0' + agent_id);
  return it == local_.end() ? nullptr : &it->second->allow;
}

// ---------------------------------------------------------------------------
// Invocation strings: built by core/invocation.h, shared with execute.
namespace {
using Url = NormalUrl;

// The agent's effective http config: agent base tier over the org tier.
struct EffectiveHttp {
  const std::string* base_url = nullptr;
  const std::vector<std::string>* methods = nullptr;  // null: GET, HEAD
  bool auto_approve = false;
  const HttpConfig* hosts_from = nullptr;             // null: any host
};
EffectiveHttp HttpFor(const Policy::Compiled& c, const Tier* agent) {
  EffectiveHttp e;
  for (const Tier* t : {&c.org, agent}) {
    if (t == nullptr || !t->has_http) continue;
    const HttpConfig& h = t->http;
    if (h.has_base_url) e.base_url = &h.base_url;
    if (h.has_methods) e.methods = &h.methods;
    if (h.has_auto_approve) e.auto_approve = h.auto_approve;
    if (h.has_hosts) e.hosts_from = &h;
  }
  return e;
}

std::string MethodOf(const Json& args) { return HttpMethod(args); }

std::string CommandName(const std::string& cmdline) {
  size_t b = cmdline.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = cmdline.find_first_of(" \t", b);
  std::string first = cmdline.substr(b, e == std::string::npos ? std::string::npos : e - b);
  size_t slash = first.rfind('/');
  return slash == std::string::npos ? first : first.substr(slash + 1);
}

const std::string& BaseUrlOf(const EffectiveHttp* http) {
  static const std::string kNone;
  return http != nullptr && http->base_url != nullptr ? *http->base_url : kNone;
}

void BuildInvocation(const std::string& tool, const Json& args, const EffectiveHttp* http, std::string* out) {
  *out = tollgate::BuildInvocation(tool, args, BaseUrlOf(http));
}
}  // namespace

std::string InvocationOf(const Policy* policy, const Json& request) {
  const std::string tool = request.value("tool", "");
  const Json& args = request.contains("args") ? request["args"] : Json::object();
  std::string out;
  if (policy != nullptr) {
    const auto& c = policy->compiled(request.value("org_id", ""));
    auto it = c.agents.find(request.value("agent_id", ""));
    EffectiveHttp h = HttpFor(c, it == c.agents.end() ? nullptr : &it->second);
    BuildInvocation(tool, args, &h, &out);
  } else {
    BuildInvocation(tool, args, nullptr, &out);
  }
  return out;
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
  if (!error_code.empty()) j["error_code"] = error_code;
  if (has_reservation) {
    j["reservation"] = {{"usd", static_cast<double>(reserve_micros) / 1e6},
                        {"received_at", received_at},
                        {"budgets", budgets}};
  }
  Json cj = Json::array();
  for (const auto& c : checks) cj.push_back({{"check", c.check}, {"result", c.result}, {"detail", c.detail}});
  j["checks"] = std::move(cj);
  if (verdict == "ask") j["approval"] = {{"quorum", quorum}, {"approvers", approvers}, {"timeout_s", timeout_s}};
  if (!notify.empty()) j["notify"] = notify;
  return j;
}

namespace {

struct Facts {
  const std::string* org;
  const std::string* agent;
  const std::string* session;
  const std::string* request_id;
  const std::string* tool;
  const Json* args;
  std::string method;      // http
  Url url;                 // http
  bool url_ok = false;
  std::string url_error;   // why not url_ok
  std::string file_path;   // file tools, normalised
  std::string command;     // execute_command: the command name
  // (The second subject of file tools, "<tool>:<path>", is Decision::subject.)
};

bool RuleMatches(const Rule& r, const Facts& f) {
  if (r.tools.size() != 0 && r.tools.FirstMatch(*f.tool) < 0) return false;
  const Condition& w = r.when;
  if (!w.methods.empty() &&
      (f.method.empty() || std::find(w.methods.begin(), w.methods.end(), f.method) == w.methods.end())) {
    return false;
  }
  if (w.has_hosts && (!f.url_ok || w.hosts.FirstMatch(f.url.host) < 0)) return false;
  if (!w.path_prefixes.empty()) {
    if (!f.url_ok) return false;
    bool any = false;
    for (const auto& p : w.path_prefixes) any = any || f.url.path.rfind(p, 0) == 0;
    if (!any) return false;
  }
  if (!w.file_prefixes.empty()) {
    if (f.file_path.empty()) return false;
    bool any = false;
    for (const auto& p : w.file_prefixes) any = any || UnderPrefix(f.file_path, p);
    if (!any) return false;
  }
  if (!w.commands.empty() &&
      (f.command.empty() || std::find(w.commands.begin(), w.commands.end(), f.command) == w.commands.end())) {
    return false;
  }
  return true;
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

void Finish(Decision* d, const char* verdict, std::string reason, std::string rule, const char* code = nullptr) {
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
void ResolveApproval(const Policy::Compiled& c, const Facts& f, DangerLevel danger, Decision* d) {
  const ApprovalSpec* specs[4] = {nullptr, nullptr, nullptr, &c.approval_default};
  if (auto it = c.approval_by_tool.find(*f.tool); it != c.approval_by_tool.end()) specs[0] = &it->second;
  if (auto it = c.approval_by_danger.find(DangerName(danger)); it != c.approval_by_danger.end()) specs[1] = &it->second;
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
           (d->approvers.empty() ? std::string("any approver of the org") : std::to_string(d->approvers.size()) + " approvers") +
           ", timeout " + std::to_string(d->timeout_s) + "s");
}

const char* WindowWord(const Budget& b) {
  return b.session_window ? "this session" : b.window_name == "minute" ? "the last minute"
                                         : b.window_name == "hour"     ? "the last hour"
                                                                       : "the last day";
}

// Budget check for an allow/ask verdict: true when every budget has room.
bool CheckBudgets(const Policy::Compiled& c, const BudgetLedger& ledger, const Facts& f, int64_t at_us,
                  int64_t cost, Decision* d) {
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
    BudgetLedger::Usage u = ledger.Sum(scope, *f.org, *f.agent, *f.session, b.tool, from, at_us, *f.request_id);
    const std::string who = b.scope == BudgetLedger::Scope::kOrg     ? "org " + *f.org
                            : b.scope == BudgetLedger::Scope::kAgent ? "agent " + *f.agent
                                                                     : "session " + *f.session;
    if (b.max_micros >= 0 && u.micros + cost > b.max_micros) {
      int64_t left = std::max<int64_t>(0, b.max_micros - u.micros);
      Step(d, "budget", "deny", b.name);
      Finish(d, "deny",
             "budget '" + b.name + "' (" + who + ", " + WindowWord(b) + (b.tool.empty() ? "" : ", tool " + b.tool) +
                 "): spent " + MicrosToUsd(u.micros) + " of " + MicrosToUsd(b.max_micros) + ", " + MicrosToUsd(left) +
                 " remains; this call is estimated at " + MicrosToUsd(cost),
             "budget:" + b.name, errc::kBudgetExceeded);
      return false;
    }
    if (b.max_calls >= 0 && u.calls + 1 > b.max_calls) {
      Step(d, "budget", "deny", b.name);
      Finish(d, "deny",
             "budget '" + b.name + "' (" + who + ", " + WindowWord(b) + (b.tool.empty() ? "" : ", tool " + b.tool) +
                 "): " + std::to_string(u.calls) + " of " + std::to_string(b.max_calls) + " calls used, " +
                 std::to_string(std::max<int64_t>(0, b.max_calls - u.calls)) + " remain",
             "budget:" + b.name, errc::kBudgetExceeded);
      return false;
    }
  }
  Step(d, "budget", "pass", any ? std::to_string(d->budgets.size()) + " budgets with room" : "no budgets apply");
  return true;
}

}  // namespace

void DecideInto(const PolicyInForce& pif, const BudgetLedger& ledger, const DecideInput& in, Decision* d) {
  d->Clear();
  static const std::string kEmpty;
  static const Json kEmptyArgs = Json::object();
  const Json& req = *in.request;
  auto str = [&](const char* k) -> const std::string& {
    auto it = req.find(k);
    return it != req.end() && it->is_string() ? it->get_ref<const std::string&>() : kEmpty;
  };
  Facts f;
  f.org = &str("org_id");
  f.agent = &str("agent_id");
  f.session = &str("session_id");
  f.request_id = &str("request_id");
  f.tool = &str("tool");
  auto ait = req.find("args");
  f.args = ait != req.end() ? &*ait : &kEmptyArgs;
  d->received_at = FormatTime(in.received_at_us);

  if (!pif.has_policy()) {
    BuildInvocation(*f.tool, *f.args, nullptr, &d->invocation);
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
  BuildInvocation(*f.tool, *f.args, &http, &d->invocation);
  const std::string& inv = d->invocation;

  // 1. registry
  ToolSpec spec;
  bool known = false;
  if (auto it = c.tools.find(*f.tool); it != c.tools.end()) {
    spec = it->second;
    known = true;
  } else {
    for (const auto& [g, s] : c.tool_patterns) {
      if (g.Match(*f.tool)) {
        spec = s;
        known = true;
        break;
      }
    }
    if (!known) {
      if (const BuiltinSpec* b = FindBuiltin(*f.tool)) {
        spec.danger = b->danger;
        spec.read_only = b->read_only;
        spec.category = b->category;
        known = true;
      } else if (f.tool->rfind("cli:", 0) == 0 && f.tool->size() > 4) {
        spec.danger = DangerLevel::kHigh;
        spec.read_only = false;
        spec.category = "cli";
        known = true;
      }
    }
  }
  if (*f.tool == "http_request") {
    f.method = MethodOf(*f.args);
    // The same normalised URL as the invocation (and what execute fetches).
    std::string ignored;
    f.url_ok = HttpUrl(*f.args, BaseUrlOf(&http), &f.url, &ignored, &f.url_error);
    spec.read_only = IsReadOnlyMethod(f.method);  // GET/HEAD/OPTIONS only read
  } else if (*f.tool == "execute_command") {
    f.command = CommandName(CommandLine(*f.args));
  } else if (IsFileTool(*f.tool)) {
    // Normalised, so "/etc//x" or "/srv/../etc/x" cannot dodge a deny glob.
    d->subject = FileSubject(*f.tool, *f.args);
    if (!d->subject.empty()) f.file_path = d->subject.substr(f.tool->size() + 1);
  }
  d->danger = spec.danger;
  d->read_only = spec.read_only;
  if (!known) {
    d->danger = DangerLevel::kCritical;  // nothing is known about it
    Step(d, "registry", "deny", "unknown tool");
    Finish(d, "deny", "unknown tool '" + *f.tool + "'", "registry:unknown-tool", errc::kUnknownTool);
    return;
  }
  Step(d, "registry", "pass",
       std::string(DangerName(spec.danger)) + (spec.read_only ? ", read-only" : ", mutating"));

  // Notify globs only annotate.
  for (const Tier* t : {&c.org, agent}) {
    if (t == nullptr) continue;
    int n = MatchSubjects(t->notify, inv, d->subject);
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

  // 2. bypass
  if (mode == Mode::kBypass) {
    Step(d, "mode", "allow", std::string("bypass (") + mode_from + ")");
    return finish_allow_or_ask("allow", "mode bypass allows every call", std::string("mode:bypass@") + mode_from);
  }

  // 3. deny lists: org ∪ agent. Nothing overrides a deny.
  for (const Tier* t : {&c.org, agent}) {
    if (t == nullptr) continue;
    int i = MatchSubjects(t->deny, inv, d->subject);
    if (i >= 0) {
      const std::string& pat = t->deny.at(i).pattern();
      Step(d, "deny", "deny", pat);
      const std::string& what = t->deny.at(i).Match(inv) ? inv : d->subject;
      Finish(d, "deny", "'" + what + "' matches deny pattern '" + pat + "'",
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

  // 5. dangerous: bypass that honoured deny.
  if (mode == Mode::kDangerous) {
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

  // 9. http: methods and hosts.
  if (*f.tool == "http_request") {
    static const std::vector<std::string> kDefaultMethods = {"GET", "HEAD"};
    const auto& methods = http.methods ? *http.methods : kDefaultMethods;
    if (std::find(methods.begin(), methods.end(), f.method) == methods.end()) {
      Step(d, "http", "deny", "method " + f.method);
      Finish(d, "deny", "method " + f.method + " is not in allowed_methods for agent '" + *f.agent + "'",
             "http.allowed_methods", errc::kPolicyDenied);
      return;
    }
    if (!f.url_ok) {
      Step(d, "http", "deny", "bad url");
      Finish(d, "deny", "url is not an absolute http(s) URL and no base_url resolves it: " + f.url_error, "http.url",
             errc::kPolicyDenied);
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

  // 10. argument-level ask, then allow rules (agent tier first).
  for (const char* want : {"ask", "allow"}) {
    for (const Tier* t : {agent, static_cast<const Tier*>(&c.org)}) {
      if (t == nullptr) continue;
      for (const Rule& r : t->rules) {
        if (r.verdict == want && RuleMatches(r, f)) {
          Step(d, "rules", want, r.name);
          return finish_allow_or_ask(want, r.reason.empty() ? std::string(want) + " by rule '" + r.name + "'" : r.reason,
                                     std::string(t == &c.org ? "org" : "agent") + ".rule:" + r.name);
        }
      }
    }
  }

  // 11. allow lists: agent local, agent base, org.
  {
    const GlobSet* sets[3] = {local, agent ? &agent->allow : nullptr, &c.org.allow};
    const char* names[3] = {"agent_local", "agent", "org"};
    for (int k = 0; k < 3; ++k) {
      if (sets[k] == nullptr) continue;
      int i = MatchSubjects(*sets[k], inv, d->subject);
      if (i >= 0) {
        const std::string& pat = sets[k]->at(i).pattern();
        Step(d, "allow", "allow", pat);
        return finish_allow_or_ask("allow", "matches allow pattern '" + pat + "'",
                                   std::string(names[k]) + ".allow:" + pat);
      }
    }
    Step(d, "allow", "pass", "no allow pattern matches");
  }

  // 12. restrict: only what is allowed runs.
  if (mode == Mode::kRestrict) {
    Step(d, "mode", "deny", std::string("restrict (") + mode_from + ")");
    Finish(d, "deny", "mode restrict: '" + inv + "' is not allowed", std::string("mode:restrict@") + mode_from,
           errc::kPolicyDenied);
    return;
  }

  // 13. mutating http: ask unless auto_approve.
  if (*f.tool == "http_request" && !IsReadOnlyMethod(f.method)) {
    if (http.auto_approve) {
      Step(d, "http", "allow", "auto_approve");
      return finish_allow_or_ask("allow", "mutating http_request auto-approved for agent '" + *f.agent + "'",
                                 "http.auto_approve");
    }
    Step(d, "http", "ask", "mutating method " + f.method);
    return finish_allow_or_ask("ask", "mutating http_request (" + f.method + ") needs approval", "http.mutating");
  }

  // 14. approval threshold.
  if (spec.danger >= c.threshold) {
    Step(d, "threshold", "ask", std::string(DangerName(spec.danger)) + " >= " + DangerName(c.threshold));
    return finish_allow_or_ask("ask",
                               "'" + *f.tool + "' is " + DangerName(spec.danger) + ", at or above the approval threshold " +
                                   DangerName(c.threshold),
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
