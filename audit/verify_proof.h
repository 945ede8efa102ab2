// `tollgate audit verify-proof`'s checks (audit/, so that bench/ and tests use them too), offline: no log, no
// network, only a pinned checkpoint key and the texts an auditor was given (docs/log_format.md, "Checkpoints
// and proofs"):
//
//   - each signed checkpoint (core/checkpoint.h) is signed by the key and
//     names its origin; with witness keys, enough of them cosigned it;
//   - two checkpoints of one size have one root (else two histories);
//   - each export record's hash is SHA-256(prev_hash || canonical body);
//   - each tlog-proof's own checkpoint verifies as above, and the record of
//     seq index+1 is the leaf at `index` under its root (RFC 9162 §2.1.3.2);
//     every record given must be proven so;
//   - each consistency proof joins two checkpoints given, of its sizes
//     (RFC 9162 §2.1.4.2);
//   - with `complete`, the records of each request and of each session they
//     hold form an unbroken chain of links (docs/log_format.md, "Links")
//     back to that request's or session's first event: a record left out of
//     the answer is named.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/sha256.h"
#include "core/status.h"

namespace tollgate {
namespace errc {
// A proof, record or checkpoint that does not check out (what the check
// says names which and why).
inline constexpr const char* kProofFailed = "E_PROOF_FAILED";
}  // namespace errc

// One input: a name for the report (its file) and its contents.
struct ProofInput {
  std::string name;
  std::string text;
};

struct ProofBundle {
  std::string key;                      // the log's verifier key, pinned
  std::vector<ProofInput> checkpoints;  // signed checkpoint notes
  std::vector<ProofInput> proofs;       // C2SP tlog-proofs
  // Export records, one JSON line each (export header and end lines are
  // skipped). A record carrying "proof" (GET /v1/audit?proofs=1) brings
  // that proof along; "proof"/"proof_pending" are not part of its body.
  std::vector<ProofInput> records;
  std::vector<ProofInput> consistency;  // tollgate.dev/tlog-consistency@v1
  std::vector<std::string> witnesses;   // witness verifier keys (type 0x04)
  size_t quorum = 0;                    // cosignatures needed; 0: every witness
  bool complete = false;                // check the records' request and session chains
};

struct ProofCheck {
  std::string what;    // e.g. "checkpoint cp.txt"
  Status status;       // ok, or why not
  std::string detail;  // when ok: what was established
};

struct ProofReport {
  std::vector<ProofCheck> checks;
  // Every check passed, and there was at least one.
  bool ok() const;
  // One line per check: "OK <what>: <detail>" or "FAIL <what>: <message>".
  std::string Text() const;
};

ProofReport VerifyProofBundle(const ProofBundle& bundle);

// An export record line's seq and hash, once its hash is recomputed:
// SHA-256(prev_hash || canonical JSON of the record without prev_hash and
// hash (and proof, proof_pending)) must equal its "hash". The hash is the
// record's Merkle leaf data. E_EXPORT_INVALID for a malformed record,
// E_CHAIN_BROKEN for a hash that does not match.
Status RecordHash(std::string_view line, uint64_t* seq, Digest* hash);

}  // namespace tollgate
