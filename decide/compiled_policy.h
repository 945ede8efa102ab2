// The compiled form of a policy (Policy::Compiled): what the compiler
// (decide/policy_compiler.h) builds from an org's effective document and
// what DecideInto reads. Internal to decide: nothing outside decide/
// includes this. Immutable once built.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/http_alias.h"
#include "decide/glob.h"
#include "decide/policy_engine.h"
#include "decide/session_facts.h"

namespace tollgate {

// USD to integer micro-dollars (exact, no drift); 0 for a negative or
// non-finite amount.
inline int64_t UsdToMicros(double usd) {
  if (!std::isfinite(usd) || usd < 0) return 0;
  return static_cast<int64_t>(std::llround(usd * 1e6));
}

// A tool's registry entry: the file's `tools:` over the catalog default.
struct ToolSpec {
  DangerLevel danger = DangerLevel::kHigh;
  bool read_only = false;
  std::string category;
  int64_t cost_micros = 0;
};
// A built-in's entry before the file says anything: the catalog's defaults
// (http_request counts as mutating until its method is known).
inline ToolSpec CatalogSpec(const ToolFacts& b) {
  return {b.danger, b.read_only(), std::string(b.category), 0};
}

// A tier's `http_request:` section; has_* says which keys it sets, so an
// agent's tier overrides the org's key by key.
struct HttpConfig {
  bool has_base_url = false, has_methods = false, has_auto_approve = false, has_hosts = false;
  bool has_default_method = false;
  std::string base_url;
  std::string default_method;  // upper-cased
  std::vector<std::string> methods;
  bool auto_approve = false;
  GlobSet hosts;
  std::vector<std::string> host_patterns;
  std::map<std::string, HttpAlias> aliases;  // by tool name (core/http_alias.h)
};

// A rule's `when:`; an empty field matches anything.
struct Condition {
  std::vector<std::string> methods;
  GlobSet hosts;
  bool has_hosts = false;
  std::vector<std::string> path_prefixes;
  std::vector<std::string> file_prefixes;
  std::vector<std::string> commands;
};

// `labels:` (docs/policy.md, "Labels"): how a completed call's result is
// labelled (decide/session_facts.h, ClassifyResult).
struct CompiledLabels {
  bool has_trusted_hosts = false;
  GlobSet trusted_hosts;                                // network results from other hosts are untrusted
  std::set<std::string> trusted_servers;                // mcp:SERVER/* results from others are untrusted
  GlobSet untrusted, trusted;                           // invocation/subject globs, over the defaults
  GlobSet levels[4];                                    // by Confidentiality (internal, confidential, secret)
  Confidentiality redacted = Confidentiality::kSecret;  // a result whose redaction fired
};

// A sequence rule's `after:`: what an earlier completed call must be.
struct CallPattern {
  std::string key;      // its canonical JSON: SessionFacts keeps matches by it
  size_t key_hash = 0;  // PatternKeyHash of key
  GlobSet tools, invocations;
  bool has_integrity = false;  // its result's labels
  Integrity integrity = Integrity::kTrusted;
  bool has_confidentiality = false;  // at least
  Confidentiality confidentiality = Confidentiality::kPublic;
};

// A rule's history conditions (docs/policy.md, "History").
struct HistoryCond {
  bool session = false;  // when.session: the session's labels
  bool untrusted = false;
  bool has_confidentiality = false;  // at least
  Confidentiality confidentiality = Confidentiality::kPublic;
  bool sequence = false;  // after/within
  size_t after = 0;       // Policy::Compiled::after_patterns index
  int count = 1;          // matches needed within the window
  int within_calls = 0;   // the last N completed calls of the session, or
  int64_t within_us = 0;  // completed within this long before received_at
  bool any() const { return session || sequence; }
};

struct Rule {
  std::string name;
  GlobSet tools;  // empty: any tool
  Condition when;
  GlobSet invocations;  // a sequence rule's then.invocation; empty: any
  HistoryCond history;
  std::string verdict;  // allow | deny | ask
  std::string reason;
  int priority = 0;  // higher matches first (the compiler sorts, stably)
};

// The org's top level or one agent's entry.
struct Tier {
  bool has_mode = false;
  Mode mode = Mode::kAsk;
  GlobSet deny, allow, notify;
  std::vector<Rule> rules;
  std::vector<size_t> history_asks;  // indexes of its history ask rules (step 15b), in order
  bool has_grants = false;
  GlobSet grants;  // tool names
  bool has_http = false;
  HttpConfig http;
};

// One budget; amounts in micro-dollars, -1 for no limit.
struct Budget {
  std::string name;
  BudgetLedger::Scope scope = BudgetLedger::Scope::kAgent;
  std::string tool;             // "" = all tools
  std::string agent;            // "" = every agent
  bool session_window = false;  // over the session rather than a rolling window
  int64_t window_us = 0;        // rolling window length
  std::string window_name;
  int64_t max_micros = -1;
  int64_t max_calls = -1;
};

// One `approvals:` entry (default, by danger, by tool or by org).
struct ApprovalSpec {
  int quorum = 0;  // 0 = not set here
  bool has_approvers = false;
  std::vector<std::string> approvers;
  int timeout_s = 0;  // 0 = not set here
};

struct Policy::Compiled {
  std::unordered_map<std::string, ToolSpec> tools;       // exact names from the file
  std::vector<std::pair<Glob, ToolSpec>> tool_patterns;  // "cli:*"-style entries
  DangerLevel threshold = DangerLevel::kHigh;
  Tier org;
  std::unordered_map<std::string, Tier> agents;
  bool has_tool_allowlist = false;
  GlobSet tool_allowlist;
  std::vector<Budget> budgets;
  ApprovalSpec approval_default;
  std::unordered_map<std::string, ApprovalSpec> approval_by_danger, approval_by_tool, approval_by_org;
  std::unordered_map<std::string, std::vector<std::string>> groups;
  std::set<std::string> mcp_servers;  // execute.mcp_servers' names
  bool writes_enabled = true;         // execute.writes_enabled
  CompiledLabels labels;
  std::vector<CallPattern> after_patterns;  // of every tier's sequence rules, once each
  bool has_history = false;                 // labels: or a history rule: decisions record `history`
};

}  // namespace tollgate
