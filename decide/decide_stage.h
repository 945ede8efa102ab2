// The decide stage: turns each received request into allow, deny or ask
// with the policy engine (decide/policy_engine.h) and records why
// (decision.made). A thin shell: the engine is pure; the state it decides
// under (policy in force, budget ledger) is one fold, DecideState
// (decide/decide_state.h), which replay's re-decision folds too.
//
// State and the log (docs/policy.md, "Versions" and "Budgets"):
//  - Restore() folds the existing log at start (decide/decide_snapshot.h:
//    from a snapshot when a valid one exists), before the runner starts.
//    With no policy in the log, the file must load then (the start fails
//    otherwise: better than holding every request); the redaction rules
//    in force are set from the policy in force.
//  - OnAppended() folds every group any stage appends
//    (decisions, completions, approvals, policy.updated) is folded in.
//  - Process() also folds its own decision.made at once, so later requests
//    of the same batch see the reservation.
//  - Tick() writes the snapshot when due and polls the policy file
//    (decide/policy_watch.h); when the file changed and is valid it emits
//    policy.updated, and the policy comes into force when that event is
//    appended (OnAppended). A bad file is reported (stderr, and once as
//    policy.refused) and the policy in force stays.
// Until a policy is in force Process() returns a non-ok error (E_NO_POLICY):
// the runner retries, nothing is denied by accident.
//
// Thread-safety: Process/Tick run on the runner thread, OnAppended on any
// appending thread; all state is guarded by one mutex.
#pragma once

#include <functional>
#include <mutex>

#include "core/flow_stage.h"
#include "core/redact.h"
#include "decide/budget_shares.h"
#include "decide/decide_snapshot.h"
#include "decide/decide_state.h"
#include "decide/policy_engine.h"
#include "decide/policy_watch.h"

namespace tollgate {

struct DecideConfig {
  Topics topics;
  // The policy file Tick() watches; "" watches nothing (the policy then
  // comes only from the log or UsePolicy()).
  std::string policy_path;
  // The redaction rules in force (docs/redaction.md) for decision.made and
  // denied results; null: the built-in rules.
  std::shared_ptr<RedactorInForce> redactor;
  // More checks a policy file must pass before Tick() logs it as in force
  // (the execute section, which execute enforces); null: none.
  std::function<Status(const Json& policy_doc)> validate;
  // Where Restore() reads and writes the ledger snapshot; "" = none (a
  // process that only folds the policy in force).
  std::string snapshot_path;
};

class DecideStage : public Stage {
 public:
  explicit DecideStage(DecideConfig config)
      : config_(std::move(config)), watch_(config_.policy_path, config_.validate) {}
  std::string name() const override { return "decide"; }
  std::vector<std::string> input_topics() const override { return {config_.topics.decide()}; }
  std::vector<std::string> output_topics() const override {
    return {config_.topics.approve(), config_.topics.execute(), config_.topics.results()};
  }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;
  StageResult Tick(const StageContext& ctx, const LogView& log) override;

  // Restore (core/stage.h) as the header says. Restoring again up to the
  // same head is a no-op: deploy/ restores decide's fold before building
  // the stages that read the policy in force, and the host calls it again.
  Status Restore(const LogHistory& history) override;
  using ReadEventFn = tollgate::ReadEventFn;
  // Folds events 1..head_seq (RebuildDecideState: from the snapshot at
  // `snapshot_path` when it is valid), then writes a new snapshot covering
  // head_seq ("" = no snapshot), which Tick() refreshes every few minutes
  // while the stage runs. *from_snapshot (optional) says whether the
  // snapshot was used.
  Status Rebuild(uint64_t head_seq, const ReadEventFn& read, const std::string& snapshot_path,
                 bool* from_snapshot = nullptr);
  void OnAppended(const std::vector<Event>& events) override;
  // Puts `policy` in force directly, with no event (tests, explain).
  void UsePolicy(PolicyPtr policy);

  // /healthz's "policy": the policy in force and the policy file's last
  // refused edit (PolicyFileWatch::Health).
  Json PolicyHealth() const;
  // Copies of the folded state (tests, explain).
  PolicyInForce policy() const;
  BudgetLedger ledger() const;
  // decide/budget_shares.h over the folded state, at `now_us` (/metrics;
  // holds the state's lock for one pass over the ledger).
  std::vector<BudgetShare> BudgetShares(int64_t now_us) const;

 private:
  void Fold(const Event& e);  // requires mu_

  DecideConfig config_;
  mutable std::mutex mu_;
  DecideState state_;
  DecideSnapshots snapshots_;   // from Rebuild
  bool restored_ = false;       // Restore ran
  uint64_t restored_head_ = 0;  // up to this seq
  PolicyFileWatch watch_;
};

// The policy.updated event for a file policy (tier "file").
Event PolicyUpdatedEvent(const Policy& policy, int64_t time_us);

}  // namespace tollgate
