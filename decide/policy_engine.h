// The policy engine: a pure function from (policy in force, budget ledger,
// request, received_at) to the decision.made data. No Kafka, no RocksDB, no
// wall clock: the same inputs always give the same decision, which is what
// lets replay re-decide a past session (docs/policy.md).
//
// Pieces, in the order a request meets them:
//   Policy        one policy file, parsed (YAML or JSON), schema-checked and
//                 compiled (globs precompiled and indexed): the deployment
//                 defaults, plus one effective policy per org that has a
//                 section under `orgs:` (docs/policy.md, "Organisations").
//                 Immutable; share it through std::shared_ptr<const Policy>.
//   PolicyInForce the file policy plus the agent-local tier (rules folded
//                 from policy.updated events of tier "agent_local", i.e.
//                 "allow always" approvals). Its version(org) changes when
//                 that org's effective policy or that org's agent-local
//                 rules change, and only then.
//   BudgetLedger  reservations and spend, a fold over the log keyed by
//                 (org_id, request_id) (idempotent).
//   Decide()      the order of checks of docs/policy.md; returns the
//                 decision.made data with the path through the checks.
//
// Thread-safety: Policy is immutable after construction. PolicyInForce and
// BudgetLedger are value types with no internal locking; the decide stage
// guards them with its own mutex. Decide() only reads its arguments.
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/status.h"

namespace tollgate {

// Error codes of the decide stage (docs/errors.md).
namespace errc {
inline constexpr const char* kBudgetExceeded = "E_BUDGET_EXCEEDED";
inline constexpr const char* kPolicyInvalid = "E_POLICY_INVALID";
inline constexpr const char* kNoPolicy = "E_NO_POLICY";
}  // namespace errc

enum class DangerLevel : uint8_t { kSafe = 0, kLow, kMedium, kHigh, kCritical };
const char* DangerName(DangerLevel d);
bool ParseDanger(std::string_view name, DangerLevel* out);  // "SAFE".."CRITICAL"

enum class Mode : uint8_t { kBypass, kPlan, kAsk, kRestrict, kDangerous };
const char* ModeName(Mode m);
bool ParseMode(std::string_view name, Mode* out);

// ---------------------------------------------------------------------------
// Globs: "type:pattern" matched against the whole invocation string.
// `*` any run of characters (including '/' and ':'), `?` one character,
// `[abc]`, `[a-z]`, `[!x]` classes, `\x` the literal x. Matching is on bytes
// and case-sensitive.
class Glob {
 public:
  // False (and *error says why) on an unterminated class or trailing '\'.
  static bool Compile(std::string_view pattern, Glob* out, std::string* error);
  bool Match(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }
  // The literal bytes every match starts with (used to index glob sets).
  const std::string& literal_prefix() const { return prefix_; }

 private:
  struct Op {
    enum Kind : uint8_t { kLit, kAny, kOne, kClass } kind = kLit;
    char lit = 0;
    std::bitset<256> cls;  // kClass: the bytes it accepts
  };
  std::string pattern_;
  std::string prefix_;
  std::vector<Op> ops_;
  friend struct GlobOps;
};

// `pattern` with the glob metacharacters * ? [ ] \ escaped by a backslash,
// so that it matches exactly `literal` (the contract's "allow always" rule).
std::string EscapeGlob(std::string_view literal);

// A list of globs indexed by literal prefix (a trie): a lookup walks the
// text down the trie and tries only the globs whose literal prefix the text
// starts with, not a scan of the list. Reports the first glob (in list
// order) that matches.
class GlobSet {
 public:
  GlobSet();
  ~GlobSet();
  GlobSet(GlobSet&&) noexcept;
  GlobSet& operator=(GlobSet&&) noexcept;
  GlobSet(const GlobSet&);
  GlobSet& operator=(const GlobSet&);

  // Appends; false with *error on a bad pattern.
  bool Add(std::string_view pattern, std::string* error);
  // Index in list order of the first matching glob, or -1.
  int FirstMatch(std::string_view text) const;
  size_t size() const;
  const Glob& at(size_t i) const;

 private:
  struct Index;
  std::unique_ptr<Index> index_;
};

// ---------------------------------------------------------------------------
// Policy: one policy document. The YAML reference is docs/policy.md; the
// schema is schemas/policy.schema.json.
class Policy;
using PolicyPtr = std::shared_ptr<const Policy>;

// Parses YAML text, converts it to JSON, validates it against
// schemas/policy.schema.json and compiles it. Errors are E_POLICY_INVALID
// with "line N: ..." naming the offending place. `source` (a path) is kept
// for policy.updated.
Status LoadPolicyYaml(std::string_view text, const std::string& source, PolicyPtr* out);
// As above from a file (E_POLICY_INVALID also when it cannot be read).
Status LoadPolicyFile(const std::string& path, PolicyPtr* out);
// From the JSON document (the "policy" of a policy.updated event).
Status LoadPolicyJson(const Json& doc, const std::string& source, PolicyPtr* out);

class Policy {
 public:
  // The document as JSON (YAML converted), what policy.updated records.
  const Json& doc() const { return doc_; }
  const std::string& source() const { return source_; }
  // SHA-256 hex of the canonical JSON of doc() (the whole file, every org).
  const std::string& content_hash() const { return content_hash_; }
  // The deployment-wide version: "file:" + the first 16 hex digits of
  // content_hash(). Changes with any edit of the file, so it is for logs,
  // policy.updated and labels (a what-if's candidate), never for a
  // decision: decisions carry version(org_id).
  const std::string& version() const { return version_; }
  // The version of org `org_id`'s effective policy: "file:" + the first 16
  // hex digits of the SHA-256 of the canonical JSON of EffectiveDoc(org_id).
  // Another org's section (or its approvals.orgs entry) is not part of that
  // document, so editing it never changes this. For a file with neither
  // `orgs:` nor `approvals.orgs` it equals version().
  const std::string& version(const std::string& org_id) const;
  // Org `org_id`'s effective document: the file without `orgs`, its own
  // section merged over it (docs/policy.md, "Organisations"), and of
  // `approvals.orgs` its own entry alone. What version(org_id) hashes and
  // compiled(org_id) is compiled from.
  Json EffectiveDoc(const std::string& org_id) const;
  // The org ids with a section under `orgs:`, sorted.
  std::vector<std::string> OrgSections() const;

  struct Compiled;  // the precompiled form (policy_engine.cpp)
  // The deployment defaults: what an org without a section decides under.
  const Compiled& compiled() const { return *compiled_; }
  // What a request of org `org_id` is decided under (its own compiled
  // form when it has a section, else the defaults). One hash lookup, and
  // none when the file has no org sections.
  const Compiled& compiled(const std::string& org_id) const {
    if (orgs_.empty()) return *compiled_;
    auto it = orgs_.find(org_id);
    return it == orgs_.end() ? *compiled_ : *it->second.compiled;
  }

  Policy();
  ~Policy();

 private:
  friend struct PolicyLoader;
  friend class PolicyInForce;  // reads every org's version
  struct OrgForm {
    std::shared_ptr<const Compiled> compiled;
    std::string version;
  };
  Json doc_;
  std::string source_;
  std::string content_hash_;
  std::string version_;
  std::string default_version_;  // version(org) of an org with no section and no approvals.orgs entry
  std::shared_ptr<const Compiled> compiled_;
  // Orgs with a section or an approvals.orgs entry.
  std::unordered_map<std::string, OrgForm> orgs_;
};

// The agent-local tier plus the file policy: what decisions are made under.
class PolicyInForce {
 public:
  PolicyInForce();
  ~PolicyInForce();
  PolicyInForce(const PolicyInForce&);
  PolicyInForce& operator=(const PolicyInForce&);

  bool has_policy() const { return file_ != nullptr; }
  const PolicyPtr& file() const { return file_; }
  void SetFile(PolicyPtr p);

  // Folds one policy.updated event: tier "file" replaces the file policy
  // (from data.policy); tier "agent_local" adds allow rules for
  // (org_id, agent_id). Idempotent: the same rule (content_hash) twice
  // changes nothing. Other events are ignored. Errors leave *this as it was.
  Status Apply(const Event& e);
  // Adds agent-local allow patterns directly (tests, explain).
  Status AddAgentLocal(const std::string& org_id, const std::string& agent_id,
                       const std::vector<std::string>& allow, const std::string& content_hash);

  // What decision.policy_version of a request of org `org_id` is: the file
  // policy's version(org_id), plus "+local:<16 hex>" (SHA-256 of the sorted
  // content hashes of that org's agent-local rules, one per line) when the
  // org has agent-local rules. Changes when that org's effective policy or
  // its agent-local rules change, never with another org's.
  const std::string& version(const std::string& org_id) const {
    if (org_versions_.empty()) return default_version_;
    auto it = org_versions_.find(org_id);
    return it == org_versions_.end() ? default_version_ : it->second;
  }
  // The deployment-wide version, for logs and messages only (it changes
  // with every org's edits, so no decision carries it): the file's
  // version(), plus "+local:<16 hex>" over every org's agent-local content
  // hashes when there are any.
  const std::string& version() const { return version_; }
  // Agent-local allow globs of (org, agent), or null.
  const GlobSet* AgentLocal(const std::string& org_id, const std::string& agent_id) const;

 private:
  void Reversion();
  PolicyPtr file_;
  struct Local;
  std::map<std::string, std::shared_ptr<Local>> local_;  // key org \0 agent
  std::string version_;          // deployment-wide
  std::string default_version_;  // version(org) of an org with no section, no approvals.orgs entry, no local rules
  std::unordered_map<std::string, std::string> org_versions_;  // every other org's version(org)
};

// ---------------------------------------------------------------------------
// Budgets. Amounts are integer micro-dollars internally (exact, no drift),
// USD at the edges.
struct BudgetEntry {
  std::string org_id, agent_id, session_id, tool;
  int64_t at_us = 0;          // the request's received_at
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
  void Apply(const Event& e);
  // The decide stage's own decision, before it is appended; the entry is
  // (request.org_id, request_id).
  void ApplyDecision(const std::string& request_id, const Json& request, const Json& decision);
  // The same for a decision held as a Decision, for the request of
  // (org, agent, session, tool): what ApplyDecision does with
  // decision.ToJson(), without building it (re-decision's fast path).
  void ApplyDecision(const std::string& request_id, const std::string& org_id, const std::string& agent_id,
                     const std::string& session_id, const std::string& tool, const Decision& decision);

  // Sum over entries of org `org_id` matching the filter, with at_us in
  // (from_us, to_us] (from_us = INT64_MIN for no lower bound), excluding
  // the request (org_id, exclude_request_id).
  struct Usage {
    int64_t micros = 0;
    int64_t calls = 0;
  };
  enum class Scope : uint8_t { kOrg, kAgent, kSession };
  Usage Sum(Scope scope, const std::string& org_id, const std::string& agent_id, const std::string& session_id,
            const std::string& tool /* "" = all tools */, int64_t from_us, int64_t to_us,
            const std::string& exclude_request_id) const;

  // The entry of org `org_id`'s request `request_id`, or null.
  const BudgetEntry* Find(const std::string& org_id, const std::string& request_id) const;
  size_t size() const;
  uint64_t applied_seq() const { return applied_seq_; }
  void set_applied_seq(uint64_t s) { applied_seq_ = s; }

  // Snapshot: JSON with the entries and applied_seq, and a checksum so a
  // corrupt file is refused (then fold the whole log). Format
  // "decide-ledger.v2" (entries keyed by org and request); a v1 snapshot,
  // keyed by request_id alone, is refused.
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
struct DecideInput {
  // The normalised request: request_id, org_id, agent_id, session_id, tool,
  // args, optional action, estimated_cost_usd.
  const Json* request = nullptr;
  int64_t received_at_us = 0;
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
  std::string received_at;             // RFC 3339, in the reservation
  std::vector<std::string> budgets;    // names of the budgets that apply
  std::string invocation;
  // File tools: "TOOL:PATH" (the path normalised), the second string deny
  // and allow globs match; empty for other tools. What an "allow always"
  // approval pins, so that it allows that path and no other.
  std::string subject;
  bool read_only = false;
  std::vector<DecisionCheck> checks;
  // When verdict is ask.
  int quorum = 1;
  std::vector<std::string> approvers;
  int timeout_s = 900;
  std::vector<std::string> notify;  // notify globs that matched
  void Clear();
  Json ToJson() const;
};
void DecideInto(const PolicyInForce& policy, const BudgetLedger& ledger, const DecideInput& in, Decision* out);

// The decision.made data (without "source"):
//   verdict, reason, rule, danger_level, policy_version, [error_code],
//   reservation {usd, received_at, budgets:[names]} (allow/ask with cost or
//   budgets), invocation, read_only, checks [{check, result, detail}],
//   [approval {quorum, approvers, timeout_s}] when verdict is ask,
//   [notify: [patterns]] when a notify glob matched.
// Without a policy (has_policy() false) the verdict is deny with
// E_NO_POLICY; the stage never calls it so (it fails closed earlier).
Json Decide(const PolicyInForce& policy, const BudgetLedger& ledger, const DecideInput& in);

// The invocation string of a request (what deny/allow globs are matched
// against and decision.invocation records), e.g. "builtin:read_file",
// "bash:git status", "cli:deploy", "http_request:POST https://x/y".
// `policy` supplies the agent's http base_url; may be null.
std::string InvocationOf(const Policy* policy, const Json& request);

// The built-in tool names execute knows, and whether each is read-only.
bool IsBuiltinTool(std::string_view tool, bool* read_only);

}  // namespace tollgate
