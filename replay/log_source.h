// Reading what replay needs out of a log: a session's events, an agent's
// events in a time range, every event of some types, and the records a
// session's events link to in the hash chain. The only part of replay/ that
// touches RocksDB; everything else is pure over the vectors these return.
// Works on a LogStore in any mode (the CLI opens a secondary, like `audit`).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "audit/log_store.h"
#include "core/event.h"
#include "core/status.h"

namespace tollgate::replay {

// Every event of `session_id`, in seq order (prev_hash and hash filled in).
// E_NOT_FOUND when the session has no event.
Status ReadSession(const LogStore& store, const std::string& session_id, std::vector<Event>* out);

// Every event of `agent_id` with since <= time < until, in seq order.
Status ReadAgent(const LogStore& store, const std::string& agent_id, std::optional<int64_t> since_us,
                 std::optional<int64_t> until_us, std::vector<Event>* out);

// Every event whose type is one of `types`, in seq order, up to seq
// `max_seq` inclusive (0 = no bound). For the state a decision depended on
// (policy.updated; the events the budget ledger folds).
Status ReadTypes(const LogStore& store, const std::vector<std::string>& types, uint64_t max_seq,
                 std::vector<Event>* out);

// Each call visits one event (decoded, seq set) in seq order; return false
// to stop. Reads the whole log; for the benchmark's baseline and tools.
Status ScanAll(const LogStore& store, const std::function<bool(const Event&)>& visit);

// The chain fields of the record at `seq`: its prev_hash and hash (hex).
// E_NOT_FOUND past the head.
struct ChainLink {
  std::string prev_hash, hash;
};
Status ReadLink(const LogStore& store, uint64_t seq, ChainLink* out);

}  // namespace tollgate::replay
