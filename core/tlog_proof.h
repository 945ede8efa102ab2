// Offline-verifiable proofs as text.
//
// Inclusion: C2SP tlog-proof@v1 (https://c2sp.org/tlog-proof), one event's
// place in a signed checkpoint:
//
//   c2sp.org/tlog-proof@v1\n
//   [extra <base64 opaque bytes>\n]   optional, NOT authenticated
//   index <n>\n                       zero-based leaf index, no leading zeros
//   <base64 hash>\n ...               the RFC 6962 inclusion path, leaf's
//                                     sibling first, 0 to kMaxProofHashes
//   \n
//   <the checkpoint's signed note, verbatim (core/checkpoint.h)>
//
// Consistency: no C2SP format exists, so ours, in the same style, for
// GET /v1/audit/consistency (RFC 6962 section 2.1.2's proof that the tree of
// `old` leaves is a prefix of the tree of `new` leaves):
//
//   tollgate.dev/tlog-consistency@v1\n
//   old <size>\n
//   new <size>\n                      old <= new
//   <base64 hash>\n ...               the proof, 0 to kMaxProofHashes
//
// Hashes are 32 bytes in padded standard base64; numbers are decimal
// without leading zeros. Nothing else is accepted: no blank or trailing
// lines, no "\r". The two checkpoints a consistency proof joins travel
// separately (each a signed note). Parsers bound their input and never
// throw; they check the form only (audit/merkle.h checks the hashes,
// OpenCheckpoint the signatures).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sha256.h"
#include "core/status.h"

namespace tollgate {

inline constexpr std::string_view kTlogProofHeader = "c2sp.org/tlog-proof@v1";
inline constexpr std::string_view kConsistencyProofHeader = "tollgate.dev/tlog-consistency@v1";
// A path in a tree of up to 2^64 leaves has at most 64 hashes; a
// consistency proof at most twice that.
inline constexpr size_t kMaxProofHashes = 128;
inline constexpr size_t kMaxTlogProofBytes = 2 << 20;

struct TlogProof {
  std::optional<std::string> extra;  // the decoded bytes
  uint64_t index = 0;
  std::vector<Digest> hashes;
  std::string checkpoint;  // the signed note text, as is
};

std::string FormatTlogProof(const TlogProof& proof);
// E_NOTE_MALFORMED, naming the rule, unless `text` is a tlog-proof whose
// checkpoint is a signed note with a checkpoint text.
Status ParseTlogProof(std::string_view text, TlogProof* out);

struct ConsistencyProof {
  uint64_t old_size = 0;
  uint64_t new_size = 0;
  std::vector<Digest> hashes;
};

std::string FormatConsistencyProof(const ConsistencyProof& proof);
// E_NOTE_MALFORMED, naming the rule, unless `text` is a consistency proof.
Status ParseConsistencyProof(std::string_view text, ConsistencyProof* out);

}  // namespace tollgate
