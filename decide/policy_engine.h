// The policy engine: a pure function from (policy in force, budget ledger,
// request, received_at) to the decision.made data. No Kafka, no RocksDB, no
// wall clock: the same inputs always give the same decision, which is what
// lets replay re-decide a past session (docs/policy.md).
//
// Pieces, in the order a request meets them, each with its own header
// (this one includes them all, so callers include only this):
//   Policy        decide/policy_loader.h: one policy file, parsed,
//                 schema-checked and compiled; immutable.
//   PolicyInForce decide/policy_in_force.h: the file policy plus the
//                 agent-local tier ("allow always" approvals), versioned
//                 per org.
//   Glob, GlobSet decide/glob.h: the patterns deny/allow/notify lists use.
//   BudgetLedger  below: reservations and spend, a fold over the log keyed
//                 by (org_id, request_id) (idempotent).
//   DecideInto()  below: the order of checks of docs/policy.md; returns the
//                 decision.made data with the path through the checks.
// The tool catalog (core/tool_catalog.h) supplies the built-ins' defaults.
//
// Thread-safety: Policy is immutable after construction. PolicyInForce and
// BudgetLedger are value types with no internal locking; the decide stage
// guards them with its own mutex. Decide() only reads its arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/status.h"
#include "core/tool_catalog.h"
#include "decide/glob.h"
#include "decide/labels.h"
#include "decide/policy_in_force.h"
#include "decide/policy_loader.h"

namespace tollgate {

// ---------------------------------------------------------------------------
// Budgets. Amounts are integer micro-dollars internally (exact, no drift),
// USD at the edges.
struct BudgetEntry {
  std::string org_id, agent_id, session_id, tool;
  int64_t at_us = 0;  // the request's received_at
  int64_t reserved_micros = 0;
  int64_t actual_micros = 0;  // once settled
  enum class State : uint8_t { kReserved, kSettled, kReleased } state = State::kReserved;
  // What counts against budgets now: reserved amount, actual cost, or 0.
  int64_t micros() const;
  bool counts_as_call() const { return state != State::kReleased; }
};

struct Decision;

class BudgetLedger {
 public:
  BudgetLedger();
  ~BudgetLedger();
  BudgetLedger(const BudgetLedger&);
  BudgetLedger& operator=(const BudgetLedger&);

  // Folds one event (any type; irrelevant ones are ignored):
  //   decision.made with verdict allow|ask and a reservation -> reserve
  //   decision.made deny                                      -> release
  //   execution.completed (data.cost_usd)                     -> settle
  //   approval.denied / approval.expired                      -> release
  // Idempotent: keyed by (org_id, request_id) of the envelope (request ids
  // are scoped by org: two orgs' requests with the same id are two
  // entries); a settled or released entry stays so. applied_seq() becomes
  // the largest seq seen (a snapshot covers it when the fold ran in seq
  // order, as the rebuild at start does).
  // A decision.made at a seq the ledger has pruned up to (pruned_seq())
  // was folded before: it is skipped, so a pruned entry never returns.
  void Apply(const Event& e);
  // The decide stage's own decision, before it is appended (seq 0); the
  // entry is (request.org_id, request_id).
  void ApplyDecision(const std::string& request_id, const Json& request, const Json& decision,
                     uint64_t seq = 0);
  // The same for a decision held as a Decision, for the request of
  // (org, agent, session, tool): what ApplyDecision does with
  // decision.ToJson(), without building it (re-decision's fast path).
  void ApplyDecision(const std::string& request_id, const std::string& org_id, const std::string& agent_id,
                     const std::string& session_id, const std::string& tool, const Decision& decision,
                     uint64_t seq = 0);

  // Pruning (docs/policy.md, "Budgets"): drops the entries no budget can
  // still count on its own: settled or released by an event at seq <=
  // upto_seq, and received more than kPruneKeepUs before the newest entry
  // (the longest rolling window is a day). A session window counts a
  // session's whole history, so what they contributed is kept as one sum
  // per session (and per session and tool). Returns how many were dropped.
  // upto_seq must be a seq every event up to which has been applied (the
  // decide state passes its fold's seq minus the refold margin).
  static constexpr int64_t kPruneKeepUs = 2 * 86'400'000'000;
  size_t Prune(uint64_t upto_seq);
  uint64_t pruned_seq() const;

  // Sum over entries of org `org_id` matching the filter, with at_us in
  // (from_us, to_us] (from_us = INT64_MIN for no lower bound), excluding
  // the request (org_id, exclude_request_id).
  struct Usage {
    int64_t micros = 0;
    int64_t calls = 0;
  };
  enum class Scope : uint8_t { kOrg, kAgent, kSession };
  Usage Sum(Scope scope, const std::string& org_id, const std::string& agent_id,
            const std::string& session_id, const std::string& tool /* "" = all tools */, int64_t from_us,
            int64_t to_us, const std::string& exclude_request_id) const;

  // The entry of org `org_id`'s request `request_id`, or null.
  const BudgetEntry* Find(const std::string& org_id, const std::string& request_id) const;
  // Calls fn for every entry, in no order (metrics: who holds a budget).
  void ForEachEntry(const std::function<void(const BudgetEntry&)>& fn) const;
  size_t size() const;
  uint64_t applied_seq() const { return applied_seq_; }
  void set_applied_seq(uint64_t s) { applied_seq_ = s; }

  // Snapshot: JSON with the entries, the pruned sums and applied_seq, and a
  // checksum so a corrupt file is refused (then fold the whole log). Format
  // "decide-ledger.v3" (v2 lacked what pruning needs; v1 keyed entries by
  // request_id alone): an older one is refused, and the log folded again.
  std::string Serialize() const;
  static Status Deserialize(std::string_view text, BudgetLedger* out);
  bool operator==(const BudgetLedger& other) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t applied_seq_ = 0;
};

// ---------------------------------------------------------------------------
// Decide.
// What the executors said they can run: the CLI tools of each one's tools
// directory (tools.available events, folded by DecideState). Until one
// has said anything, every cli:NAME counts as runnable.
struct ExecutorTools {
  std::map<std::string, std::set<std::string>> cli;  // executor -> tool names
  bool known() const { return !cli.empty(); }
  bool HasCli(const std::string& name) const {
    for (const auto& [executor, names] : cli) {
      if (names.count(name)) return true;
    }
    return false;
  }
  // The agent-written CLI tools each agent's last reload_tools found
  // (docs/tools.md, "Tool declarations"): "org/agent" -> name -> the
  // sha256 of its file, which a decision binds the call to.
  std::map<std::string, std::map<std::string, std::string>> agent_written;
  // Its sha256 when (org, agent)'s last reload found an agent-written
  // `name`, else null.
  const std::string* AgentWritten(const std::string& org, const std::string& agent,
                                  const std::string& name) const {
    auto a = agent_written.find(org + "/" + agent);
    if (a == agent_written.end()) return nullptr;
    auto n = a->second.find(name);
    return n == a->second.end() ? nullptr : &n->second;
  }
  // Folds the execution.completed of a successful reload_tools call.
  void ApplyReload(const std::string& org, const std::string& agent, const Json& tools);
};

class SessionFacts;

struct DecideInput {
  // The normalised request: request_id, org_id, agent_id, session_id, tool,
  // args, optional action, estimated_cost_usd.
  const Json* request = nullptr;
  int64_t received_at_us = 0;
  const ExecutorTools* executors = nullptr;  // null: not known
  // A probe with no arguments (decide/tool_access.h): an http_request
  // alias is decided on its configured URL instead of being denied for
  // arguments that do not fit it.
  bool probe = false;
  // The session facts history rules read (decide/session_facts.h); null:
  // no history (every history rule's condition is then false).
  const SessionFacts* facts = nullptr;
};

// decision.history (docs/policy.md, "History"): what the session's history
// was when the call was decided, and which of it a history rule used.
struct DecisionHistory {
  uint64_t upto = 0;   // the largest seq of the session's history folded
  uint64_t calls = 0;  // its completed calls
  Integrity integrity = Integrity::kTrusted;
  Confidentiality confidentiality = Confidentiality::kPublic;
  std::string rule;               // the history rule that decided, "" for none
  std::vector<uint64_t> matched;  // the seqs it matched, ascending
};

// One step of the path through the checks (decision.checks).
struct DecisionCheck {
  const char* check = "";   // "registry", "deny", "grants", ... (docs/policy.md)
  const char* result = "";  // "pass", "match", "deny", "allow", "ask", "skip"
  std::string detail;
};

// The decision as a value; ToJson() is the decision.made data. Reusing one
// Decision across calls (DecideInto) keeps the hot path free of allocation.
struct Decision {
  std::string verdict;  // allow | deny | ask
  std::string reason;
  std::string rule;
  DangerLevel danger = DangerLevel::kCritical;
  std::string policy_version;
  std::string error_code;  // "" when none
  bool has_reservation = false;
  int64_t reserve_micros = 0;
  std::string received_at;           // RFC 3339, in the reservation
  std::vector<std::string> budgets;  // names of the budgets that apply
  std::string invocation;
  // File tools: "TOOL:PATH" (the path normalised), the second string deny
  // and allow globs match; empty for other tools. What an "allow always"
  // approval pins, so that it allows that path and no other.
  std::string subject;
  // cli:NAME written by the agent itself: the sha256 of the file its last
  // reload_tools found; execute runs only those bytes.
  std::string tool_sha256;
  bool read_only = false;
  std::vector<DecisionCheck> checks;
  // When verdict is ask.
  int quorum = 1;
  std::vector<std::string> approvers;
  int timeout_s = 900;
  std::vector<std::string> notify;  // notify globs that matched
  // The policy has history (labels or history rules): every decision
  // records the session's history it saw.
  bool has_history = false;
  DecisionHistory history;
  void Clear();
  Json ToJson() const;
};
void DecideInto(const PolicyInForce& policy, const BudgetLedger& ledger, const DecideInput& in,
                Decision* out);

// The decision.made data (without "source"):
//   verdict, reason, rule, danger_level, policy_version, [error_code],
//   reservation {usd, received_at, budgets:[names]} (allow/ask with cost or
//   budgets), invocation, read_only, checks [{check, result, detail}],
//   [approval {quorum, approvers, timeout_s}] when verdict is ask,
//   [notify: [patterns]] when a notify glob matched,
//   [history {upto, calls, integrity, confidentiality, [rule, matched]}]
//   when the policy has labels or history rules.
// Without a policy (has_policy() false) the verdict is deny with
// E_NO_POLICY; the stage never calls it so (it fails closed earlier).
Json Decide(const PolicyInForce& policy, const BudgetLedger& ledger, const DecideInput& in);

// The invocation string of a request (what deny/allow globs are matched
// against and decision.invocation records), e.g. "builtin:read_file",
// "bash:git status", "cli:deploy", "http_request:POST https://x/y".
// `policy` supplies the agent's http base_url; may be null.
std::string InvocationOf(const Policy* policy, const Json& request);

// Whether `tool` is a built-in (core/tool_catalog.h), and its read-only
// default: false for http_request until its method is known.
bool IsBuiltinTool(std::string_view tool, bool* read_only);

}  // namespace tollgate
