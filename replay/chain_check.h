// The hash chain over one session's events. A session's events are not
// contiguous in seq (other sessions interleave), so each is checked on its
// own and against its neighbours in the log:
//   - its hash is SHA-256(prev_hash || canonical body) (the body as
//     re-encoded from the event, which the log stores canonically);
//   - its prev_hash is the hash of the record at seq-1 (the genesis hash at
//     seq 1);
//   - the record at seq+1, when there is one, links back to its hash.
// So a session event altered in place, or with its hash recomputed, is
// found without walking the whole log. What this does not prove: that no
// event of the session was removed along with its index entries, or that
// the rest of the log is intact — `tollgate audit verify` checks the whole
// chain and every index.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/event.h"
#include "core/status.h"
#include "replay/log_source.h"

namespace tollgate::replay {

struct ChainProblem {
  uint64_t seq = 0;
  Status status;  // E_CHAIN_BROKEN, or the error reading a neighbour
};

// The record at a seq, or E_NOT_FOUND past the head.
using LinkLookup = std::function<Status(uint64_t seq, ChainLink* out)>;

// `events` must carry seq, prev_hash and hash (as read from the log).
std::vector<ChainProblem> CheckSessionChain(const std::vector<Event>& events, const LinkLookup& link_at);

}  // namespace tollgate::replay
