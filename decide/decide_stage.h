// The decide stage: turns each received request into allow, deny or ask
// with the policy engine (decide/policy_engine.h) and records why
// (decision.made). A thin shell: the engine is pure; this class holds the
// state folded from the log (the policy in force, the budget ledger) and
// watches the policy file.
//
// State and the log (docs/policy.md, "Versions" and "Budgets"):
//  - Rebuild() folds the existing log at start (from a snapshot when a valid
//    one exists), before the runner starts.
//  - OnAppended() is the LogSink listener: every group any stage appends
//    (decisions, completions, approvals, policy.updated) is folded in.
//  - Process() also applies its own decision to the ledger at once, so later
//    requests of the same batch see the reservation.
//  - Tick() checks the policy file (mtime/size, then content hash) and, when
//    it changed and is valid, emits policy.updated; the policy comes into
//    force when that event is appended (OnAppended). A bad file is reported
//    and the policy in force stays.
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
#include "decide/policy_engine.h"

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
};

class DecideStage : public Stage {
 public:
  explicit DecideStage(DecideConfig config) : config_(std::move(config)) {}
  std::string name() const override { return "decide"; }
  std::vector<std::string> input_topics() const override { return {config_.topics.decide()}; }
  std::vector<std::string> output_topics() const override {
    return {config_.topics.approve(), config_.topics.execute(), config_.topics.results()};
  }
  StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) override;
  StageResult Tick(const StageContext& ctx, const LogView& log) override;

  // Reads the event with sequence number `seq` (1..head).
  using ReadEventFn = std::function<Status(uint64_t seq, Event* out)>;
  // Folds events 1..head_seq into the policy in force and the ledger. When
  // `snapshot_path` holds a valid snapshot (checksum ok, covering seq S <=
  // head_seq whose event id still matches), starts from it and folds only
  // the events from a margin before S (a snapshot taken while listeners ran
  // may lack a group delivered out of order; the fold is idempotent); a
  // corrupt or stale snapshot falls back to the full fold. Then writes a new
  // snapshot covering head_seq ("" = no snapshot), and Tick() refreshes it
  // every few minutes while the stage runs. *from_snapshot (optional) says
  // whether the snapshot was used.
  Status Rebuild(uint64_t head_seq, const ReadEventFn& read, const std::string& snapshot_path,
                 bool* from_snapshot = nullptr);
  // The LogSink listener.
  void OnAppended(const std::vector<Event>& events);
  // Puts `policy` in force directly, with no event (tests, explain).
  void UsePolicy(PolicyPtr policy);

  // Copies of the folded state (tests, explain).
  PolicyInForce policy() const;
  BudgetLedger ledger() const;

 private:
  void Fold(const Event& e);  // requires mu_
  Status WriteSnapshotLocked(uint64_t seq, const std::string& event_id);  // requires mu_

  DecideConfig config_;
  mutable std::mutex mu_;
  PolicyInForce policy_;
  BudgetLedger ledger_;
  std::vector<Json> local_rules_;  // agent_local policy.updated data, for the snapshot
  std::string snapshot_path_;      // from Rebuild; "" = none
  uint64_t snapshot_seq_ = 0;      // what the last snapshot covers
  int64_t last_snapshot_us_ = 0;
  uint64_t max_seq_seen_ = 0;      // largest seq folded, and its event id
  std::string max_seq_id_;
  // The watched file as last seen.
  int64_t file_mtime_ns_ = -1;
  int64_t file_size_ = -1;
  std::string file_bytes_hash_;
  PolicyPtr file_policy_;      // the file's valid policy, when it is one
  std::string file_error_;     // why the file was refused, when it was
};

// The policy.updated event for a file policy (tier "file").
Event PolicyUpdatedEvent(const Policy& policy, int64_t time_us);

}  // namespace tollgate
