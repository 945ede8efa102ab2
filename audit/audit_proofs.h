// Proofs on audit answers (docs/log_format.md, "Checkpoints and proofs"):
// each record of an answer carries the C2SP tlog-proof of its inclusion in
// the latest signed checkpoint, or says it is not covered yet. One
// implementation for every answer that carries them: GET /v1/audit?proofs=1
// (api/http_routes_proofs.cpp), the get_audit_log tool
// (audit/log_audit_reader.h) and `tollgate audit export --proofs`
// (audit/export.h). Thread-safe, as MerkleStore is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "audit/merkle.h"
#include "audit/merkle_store.h"
#include "core/canonical_json.h"
#include "core/status.h"

namespace tollgate {

// The tree size a signed checkpoint note names (its text parsed; the
// signature is not checked: the note is one this log stored).
Status CheckpointNoteSize(std::string_view note, uint64_t* size);

// The tlog-proof (core/tlog_proof.h) of the event at `seq` (leaf seq-1)
// against the checkpoint `note` of a tree of `size` leaves;
// 1 <= seq <= size.
Status TlogProofText(const merkle::SubtreeSource& tree, const std::string& note, uint64_t size, uint64_t seq,
                     std::string* out);

// What an answer is proven against: the latest signed checkpoint's note and
// the tree size it covers ("" and 0 before the first).
struct ProofBasis {
  std::string checkpoint;
  uint64_t size = 0;
};
Status LatestProofBasis(const MerkleStore& tree, ProofBasis* out);

// The proof fields of the record at `seq`: {"proof": <tlog-proof>} when
// the basis covers it, else {"proof_pending": true}.
Status ProofFields(const MerkleStore& tree, const ProofBasis& basis, uint64_t seq, Json* fields);

// Adds to each record of `lines` (the log's JSON records, as GetAuditLog
// returns them with json_lines) "proof": its tlog-proof against the latest
// signed checkpoint, or "proof_pending": true for an event that checkpoint
// does not cover yet. *checkpoint gets that checkpoint's note, "" when none
// was signed yet (every record is then pending). Which records the caller
// may see is the query's business: this proves what it is given.
// E_LOG_CORRUPT for a record without a seq; the tree's errors as they come.
Status ProveAuditRecords(const MerkleStore& tree, std::vector<std::string>* lines, std::string* checkpoint);

}  // namespace tollgate
