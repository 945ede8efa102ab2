// Decide's state at start, and its snapshot file (docs/policy.md,
// "Budgets"): <data>/decide-ledger.snapshot holds the ledger, the policy in
// force, the agent-local rules, the seq it covers and that event's id,
// under a SHA-256 checksum:
//   {"body": {"format": "decide-snapshot.v3", "seq", "event_id", "ledger",
//             "policy": {"doc", "source"}, "local": [rule data]},
//    "sha256": hex of the body's canonical bytes}
// Kept out of the stage: the stage folds, this file does the I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "decide/decide_state.h"

namespace tollgate {

// Reads the event with sequence number `seq` (1..head).
using ReadEventFn = std::function<Status(uint64_t seq, Event* out)>;

// Folds events 1..head_seq into a fresh *state. When `snapshot_path` holds a
// valid snapshot (checksum and format ok, covering seq S <= head_seq whose
// event id still matches), starts from it and folds only the events from a
// margin before S (a snapshot taken while listeners ran may lack a group
// delivered out of order; the fold is idempotent); a missing, corrupt or
// stale snapshot falls back to the full fold (said on stderr).
// *from_snapshot (optional) says whether the snapshot was used. Writes no
// snapshot (DecideSnapshots does).
Status RebuildDecideState(uint64_t head_seq, const ReadEventFn& read, const std::string& snapshot_path,
                          DecideState* state, bool* from_snapshot = nullptr);

// Writes `state` as covering `seq` (event `event_id`) to `path`, atomically
// (a temporary file renamed over it).
Status WriteDecideSnapshot(const std::string& path, const DecideState& state, uint64_t seq,
                           const std::string& event_id);

// When to write the snapshot while the stage runs: after the rebuild, then
// at most every 5 minutes and only once 1,000 more events are folded, so a
// restart folds little even after a long run. Path "" = never.
class DecideSnapshots {
 public:
  DecideSnapshots() = default;
  explicit DecideSnapshots(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  // Writes a snapshot covering what `state` has folded.
  Status Write(const DecideState& state);
  // Writes one when it is due at `now_us`; a failure is said on stderr
  // (the next one retries).
  void MaybeWrite(const DecideState& state, int64_t now_us);

 private:
  std::string path_;
  uint64_t covered_seq_ = 0;  // what the last snapshot covers
  int64_t last_us_ = 0;
};

}  // namespace tollgate
