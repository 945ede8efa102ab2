// DecideState: what decisions depend on besides the request, folded from
// the log: the policy in force (decide/policy_in_force.h) and the budget
// ledger (BudgetLedger, decide/policy_engine.h) and the session facts
// history rules read (decide/session_facts.h). One fold, used by
//  - the decide stage, for its own decision (at once, so later requests of
//    the same batch see the reservation) and for every appended group (its
//    LogSink listener);
//  - the rebuild at start (decide/decide_snapshot.h);
//  - replay's re-decision (replay/redecide.h),
// so decide and replay cannot fold the log differently (docs/policy.md,
// "Versions" and "Budgets").
//
// Apply is idempotent: policy.updated by content_hash, the ledger by
// (org_id, request_id); a settled or released entry stays so. Events may
// arrive slightly out of seq order (listeners of different stages); seq
// only records how far the fold has come.
//
// A value type with no internal locking: the decide stage guards it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/event.h"
#include "core/status.h"
#include "decide/policy_engine.h"
#include "decide/session_facts.h"

namespace tollgate {

// Events folded again before a snapshot's seq at start, because listeners
// of different stages can deliver groups slightly out of seq order
// (decide/decide_snapshot.h); pruning never reaches into them.
inline constexpr uint64_t kRefoldMargin = 4096;

class DecideState {
 public:
  // Folds one event: policy.updated into the policy in force (tier "file"
  // replaces the file policy, "agent_local" adds allow rules),
  // tools.available into executors(), every other event into the ledger
  // (irrelevant types are ignored). A policy.updated
  // that does not load leaves the state as it was and returns why.
  Status Apply(const Event& e);
  // What Apply does with a decision.made of `envelope` (its ids and seq)
  // whose data is d.ToJson(), without building the JSON (re-decision's
  // fast path).
  void ApplyDecisionMade(const Event& envelope, const Decision& d);
  // The ledger entry of (request.org_id, request_id) as if `decision` had
  // been made, whatever the log says (re-decision under a candidate policy:
  // a counterfactual ledger).
  void ApplyDecision(const std::string& request_id, const Json& request, const Json& decision);

  // Puts `policy` in force as the file policy, with no event (tests,
  // explain, the snapshot).
  void SetFilePolicy(PolicyPtr policy);
  // Adds an agent-local rule as policy.updated data (org_id, agent_id,
  // allow, content_hash), with no event (the snapshot).
  Status AddLocalRule(const Json& rule);
  // Prunes the ledger (BudgetLedger::Prune) up to the fold's seq minus
  // kRefoldMargin, once enough was folded since the last time that the cost
  // stays O(1) per event. Prune() does it now.
  void MaybePrune();
  size_t Prune();

  // The fold covers the log up to `head_seq`, whose event id is `head_id`
  // (after the rebuild read it all).
  void CoverTo(uint64_t head_seq, const std::string& head_id);

  // The session facts (decide/session_facts.h), classified under the
  // policy in force, or under `labels_from` when set (a what-if's
  // candidate: it outlives the state).
  const SessionFacts& facts() const { return facts_; }
  SessionFacts& mutable_facts() { return facts_; }  // the snapshot restores it; replay defers it
  void set_labels_from(const PolicyInForce* p) { labels_from_ = p; }

  const PolicyInForce& policy() const { return policy_; }
  const BudgetLedger& ledger() const { return ledger_; }
  BudgetLedger& mutable_ledger() { return ledger_; }  // the snapshot restores it
  // The agent-local policy.updated data folded, once each (with org_id and
  // agent_id): what the snapshot keeps to rebuild that tier.
  const std::vector<Json>& local_rules() const { return local_rules_; }
  // What the executors said they can run (tools.available, the latest of
  // each executor).
  const ExecutorTools& executors() const { return executors_; }
  ExecutorTools& mutable_executors() { return executors_; }  // the snapshot restores it
  // The largest seq folded and its event id (what a snapshot covers).
  uint64_t max_seq() const { return max_seq_; }
  const std::string& max_seq_id() const { return max_seq_id_; }

 private:
  void Saw(const Event& e);

  PolicyInForce policy_;
  BudgetLedger ledger_;
  SessionFacts facts_;
  const PolicyInForce* labels_from_ = nullptr;
  std::vector<Json> local_rules_;
  ExecutorTools executors_;
  uint64_t max_seq_ = 0;
  std::string max_seq_id_;
  uint64_t pruned_at_seq_ = 0;  // max_seq_ when Prune last ran
};

}  // namespace tollgate
