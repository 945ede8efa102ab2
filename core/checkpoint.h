// C2SP transparency-log checkpoints (https://c2sp.org/tlog-checkpoint) and
// their witness cosignatures (https://c2sp.org/tlog-cosignature, the Ed25519
// "cosignature/v1" type): the signed heads of the audit log's Merkle tree
// (audit/merkle.h).
//
// A checkpoint's text, the body of a signed note (core/signed_note.h):
//
//   <origin>\n          non-empty; our log's key name is its origin
//   <size>\n            decimal leaf count, no leading zero ("0" when empty)
//   <root>\n            padded standard base64 of the 32-byte RFC 6962 root
//   [<extension>\n]...  optional, each non-empty, opaque
//
// A cosignature is a signature line by a witness key of type 0x04 whose
// bytes after the key ID are an 8-byte big-endian POSIX time t (at most
// 2^63 - 1) and an Ed25519 signature over
//
//   "cosignature/v1\ntime <t>\n" || checkpoint text
//
// stating that, at t, this was the largest consistent tree the witness saw.
// Parsers never throw and bound their input (kMaxNoteBytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/sha256.h"
#include "core/signed_note.h"
#include "core/status.h"

namespace tollgate {

struct Checkpoint {
  std::string origin;
  uint64_t size = 0;
  Digest root{};
  std::vector<std::string> extensions;  // without their "\n"
};

// The note text. Does not validate (an origin or extension with "\n" makes
// a text ParseCheckpointText refuses).
std::string CheckpointText(const Checkpoint& cp);
// E_NOTE_MALFORMED, naming the rule, unless `text` is a checkpoint text.
Status ParseCheckpointText(std::string_view text, Checkpoint* out);

// ASCII decimal without leading zeros (unless the value is 0) within 64
// bits, as the tlog formats write numbers. False otherwise.
bool ParseTlogDecimal(std::string_view s, uint64_t* out);

// A note whose text is `cp` signed by `log` (type 0x01).
std::string SignCheckpoint(const Checkpoint& cp, const NoteSigner& log);

// Parses a signed checkpoint `note`, checks that `log_key` signed it (other
// lines are kept, unverified, in *parsed) and that its origin is
// log_key.name(). E_NOTE_MALFORMED or E_NOTE_UNVERIFIED.
Status OpenCheckpoint(std::string_view note, const NoteVerifier& log_key, Checkpoint* cp,
                      SignedNote* parsed = nullptr);

// A witness's cosignature line for `checkpoint_text` at POSIX time
// `timestamp`. Throws std::logic_error unless `witness` is of type 0x04 and
// timestamp <= 2^63 - 1.
NoteSignature Cosign(const NoteSigner& witness, std::string_view checkpoint_text, uint64_t timestamp);
// The time in a cosignature line's bytes; false when it is not 72 bytes.
// (The time is only trustworthy once the line is verified.)
bool CosignatureTime(const NoteSignature& sig, uint64_t* timestamp);

// The N-of-M witness policy: Ok, *names the witnesses (type 0x04 keys in
// `witnesses`) whose cosignatures verify, when at least `quorum` did.
// E_NOTE_UNVERIFIED when a known witness's line fails or fewer signed.
Status VerifyCosignatures(const SignedNote& note, const std::vector<NoteVerifier>& witnesses, size_t quorum,
                          std::vector<std::string>* names = nullptr);

}  // namespace tollgate
