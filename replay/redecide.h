// Re-decision: the decisions of a session (or of an agent over a time
// range) made again by decide's pure engine (decide/policy_engine.h), from
// the log alone. Pure: a fold over events, no I/O.
//
// The state a decision depended on is folded from the events before it, in
// seq order, by decide's own fold (DecideState, decide/decide_state.h):
//   - the policy in force: policy.updated events (tier "file" carries the
//     whole policy; tier "agent_local" adds "allow always" rules of the
//     target's orgs: another org's are not read, and with target.org_id
//     set they are skipped uncounted; a decision's policy_version is its
//     org's, docs/policy.md "Versions");
//   - the budget ledger: decision.made, execution.completed,
//     approval.denied and approval.expired of the same org(s), keyed by
//     (org_id, request_id) as decide keys them.
// Each target decision.made is re-decided from its request.received
// (request and received_at) under the state just before it, then folded.
//
// Two modes:
//   verify  (no candidate): the policy and budgets the log had. A clean log
//           gives no change; a change means the decision was not made under
//           the policy the log says was in force (a policy loaded behind the
//           log's back, an edited decision), or the engine has changed.
//   what-if (candidate set): the candidate replaces the file tier (the
//           log's agent-local rules stay). The ledger is the
//           counterfactual one: each target request is folded with its
//           re-decided decision, so a call the candidate denies releases its
//           budget for the calls after it, and its recorded execution no
//           longer counts.
//
// Caveat: re-decision sees the request as logged, with secrets redacted;
// a policy that matched on a secret-bearing argument may decide otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "core/event.h"
#include "decide/decide_state.h"
#include "decide/policy_engine.h"
#include "replay/log_source.h"

namespace tollgate::replay {

struct RedecideOptions {
  PolicyPtr candidate;  // null: verify against the log's own policy
};

// The decision.made fields that are compared (decision.checks, the path
// through the checks, is explanation and is not).
extern const char* const kComparedFields[];

struct DecisionChange {
  uint64_t seq = 0;  // of the recorded decision.made
  std::string org_id, request_id, session_id, agent_id, tool;
  int64_t received_us = 0;
  Json recorded;                    // decision.made data without source and checks
  Json redecided;                   // the same fields from the engine; null when not re-decided
  std::vector<std::string> fields;  // the compared fields that differ
  bool executed = false;            // the log shows the call completed
  double cost_usd = 0;              // its recorded actual cost
  std::string note;                 // why it could not be re-decided ("" when it was)

  bool verdict_changed() const;
  std::string transition() const;  // "allow→deny"
};

struct RedecideReport {
  bool what_if = false;
  std::string candidate_version;
  uint64_t events = 0;     // events folded
  uint64_t decisions = 0;  // target decisions re-decided
  // Verify: every decision with a differing field. What-if: every decision
  // whose verdict changes (same_verdict_other_rule counts the rest).
  std::vector<DecisionChange> changes;
  std::vector<DecisionChange> not_redecided;  // no request.received, no policy in force
  uint64_t same_verdict_other_rule = 0;
  std::map<std::string, uint64_t> transitions;  // "allow→deny" -> n
  struct PerSession {
    uint64_t decisions = 0, changes = 0;
  };
  std::map<std::string, PerSession> sessions;  // re-decided target sessions
  // Budget effect (what-if; in verify these are the log's own figures).
  double spend_recorded_usd = 0;          // actual cost of the target calls that completed
  double spend_avoided_usd = 0;           // ... of those the candidate no longer allows
  double reserved_recorded_usd = 0;       // sum of the recorded reservations
  double reserved_redecided_usd = 0;      // sum of the re-decided reservations
  double newly_allowed_reserved_usd = 0;  // reservations of calls denied before, allowed (or asked) now
  uint64_t budget_denials_recorded = 0, budget_denials_redecided = 0;  // E_BUDGET_EXCEEDED

  bool clean() const { return changes.empty() && not_redecided.empty(); }
  Json ToJson() const;
};

// `events`: what the decisions depended on (see above), in any order
// (sorted by seq here), as ReadDecisionInputs returns them. Decisions are
// re-decided when `target` matches their request.
RedecideReport Redecide(std::vector<Event> events, const Target& target, const RedecideOptions& options);
// The same over inputs whose decisions may be kept as the canonical bytes of
// their compared fields (ReadDecisionInputs' fast overload): a decision
// whose bytes are identical to the re-made decision's is not parsed; any
// other is parsed and compared as above. The report is the same as for the
// decoded events (tests/replay_test.cpp pins the two paths together).
RedecideReport Redecide(std::vector<DecisionInput> inputs, const Target& target,
                        const RedecideOptions& options);

// The fold behind Redecide, one input at a time, for a reader that streams
// the log (StreamDecisionInputs): Redecide(inputs) is Fold over the inputs
// sorted by seq, then Finish.
class Redecider {
 public:
  Redecider(const Target& target, const RedecideOptions& options);
  ~Redecider();
  Redecider(const Redecider&) = delete;
  Redecider& operator=(const Redecider&) = delete;
  // The next input in seq order; its data may be moved out or swapped.
  void Fold(DecisionInput& input);
  // The report, once every input is folded. Call once.
  RedecideReport Finish();
  // The policy in force and ledger folded so far (in what-if mode the
  // ledger is the counterfactual one).
  const DecideState& state() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// A report for people: the changes, one line each, then the summary (per
// session too when there are several).
std::string FormatReport(const RedecideReport& r);

}  // namespace tollgate::replay
