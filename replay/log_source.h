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
#include <string_view>
#include <vector>

#include "audit/log_store.h"
#include "core/event.h"
#include "core/status.h"

namespace tollgate::replay {

// A request's key in replay's maps: org NUL request_id. Request ids are the
// agents' own and scoped by org (two orgs may use the same one); ids hold
// no control characters, so the NUL cannot be forged.
inline std::string OrgRequestKey(std::string_view org_id, std::string_view request_id) {
  std::string k;
  k.reserve(org_id.size() + 1 + request_id.size());
  k.append(org_id);
  k.push_back('\0');
  k.append(request_id);
  return k;
}

// Which requests a re-decision is about: those of `session_id`, or of
// `agent_id` received in [since, until), and of `org_id` alone when set
// (a tenant's view: session and agent ids are the clients' own strings, so
// two orgs may use the same one). Empty fields do not filter.
struct Target {
  std::string session_id;
  std::string agent_id;
  std::string org_id;
  std::optional<int64_t> since_us, until_us;
  bool Matches(const Event& e) const;
  static Target Session(std::string id) {
    Target t;
    t.session_id = std::move(id);
    return t;
  }
};

// Every event of `session_id`, in seq order (prev_hash and hash filled in).
// E_NOT_FOUND when the session has no event.
Status ReadSession(const LogStore& store, const std::string& session_id, std::vector<Event>* out);

// Every event of the target (its session, or its agent in the time range),
// of target.org_id alone when set, in seq order (prev_hash and hash filled
// in). E_NOT_FOUND when there is none, with the same message whether the
// id is unused or used by other orgs only: a tenant learns nothing of them.
Status ReadTargetEvents(const LogStore& store, const Target& target, std::vector<Event>* out);

// Every event of `agent_id` with since <= time < until, in seq order.
Status ReadAgent(const LogStore& store, const std::string& agent_id, std::optional<int64_t> since_us,
                 std::optional<int64_t> until_us, std::vector<Event>* out);

// Every event whose type is one of `types`, in seq order, up to seq
// `max_seq` inclusive (0 = no bound). For the state a decision depended on
// (policy.updated; the events the budget ledger folds).
Status ReadTypes(const LogStore& store, const std::vector<std::string>& types, uint64_t max_seq,
                 std::vector<Event>* out);

// What re-deciding the requests of `target` depends on
// (replay/redecide.h), in seq order, up to the target's last event: every
// policy.updated of the file tier and those of the target's orgs (their
// agent-local rules; another org's are not read), and from the target's
// orgs the budget ledger's events
// (decision.made, execution.completed, approval.denied, approval.expired)
// and the target's request.received. Only what the fold reads is decoded:
// records are filtered on their envelope (ScanEnvelope), approvals are
// read as envelopes, execution.completed as its envelope and
// data.cost_usd. E_NOT_FOUND when the target has no event.
Status ReadDecisionInputs(const LogStore& store, const Target& target, std::vector<Event>* out);

// One input of a re-decision as the fast path reads it: the event (its id,
// prev_hash and hash left empty: the fold reads none of them), and for a
// decision.made of the target whose data is canonical
// (replay/canonical_scan.h) the canonical bytes of its compared fields
// alone (kComparedFields: what CanonicalBytes gives for the data with every
// other field removed), with event.data left null: Redecide compares them
// with the re-made decision's bytes and parses them only on a difference.
// Otherwise compared_bytes is empty and event.data decoded.
struct DecisionInput {
  Event event;
  std::string compared_bytes;
};
// As above, the same events in the same order; decision data kept as
// compared bytes (the overload above parses all of it). Read as
// StreamDecisionInputs reads them.
Status ReadDecisionInputs(const LogStore& store, const Target& target, std::vector<DecisionInput>* out);

// The same inputs handed to `sink` in seq order, a chunk at a time, on the
// calling thread, while one other thread reads and decodes the chunks after
// it (a few chunks ahead at most), so that a fold in `sink` overlaps the
// read. The org's records are read with one iterator over the events, in
// seq order, stepping over records of other orgs (seeking past long runs of
// them). `sink` may move data out of the inputs; the chunk is reused. On an
// error no chunk after the first bad record is handed on: the error is the
// first in seq order, as in ReadDecisionInputs.
Status StreamDecisionInputs(const LogStore& store, const Target& target,
                            const std::function<void(std::vector<DecisionInput>& chunk)>& sink);

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
