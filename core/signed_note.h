// C2SP signed notes (https://c2sp.org/signed-note@v1.0.0): text signed by
// one or more keys, the envelope of our checkpoints (core/checkpoint.h).
//
// A note on the wire:
//
//   <text: one or more lines, each ending in "\n">
//   "\n"                                   (a blank line)
//   "— <key name> <base64(key ID || signature)>\n"   (one or more)
//
// "—" is U+2014 (bytes E2 80 94). base64 is RFC 4648 section 4, padded;
// we accept exactly one spelling of each byte string. The text may contain
// empty lines: it ends at the last blank line. A note is valid UTF-8 with no
// control character but "\n". A key name is non-empty, without Unicode
// spaces or '+'. The key ID is 4 bytes, big-endian:
//
//   key ID = SHA-256(name || 0x0A || type || public key)[:4]
//
// with type 0x01 for Ed25519 over the note text, 0x04 for tlog-cosignature
// v1 (Ed25519 over "cosignature/v1\ntime <t>\n" || text, the signature
// bytes being an 8-byte big-endian <t> then the 64-byte signature).
//
// Verifier keys ("vkeys") are "<name>+<8 lowercase hex key ID>+<base64(type
// || 32-byte public key)>", as golang.org/x/mod/sumdb/note prints them.
//
// Bounds: a note is at most kMaxNoteBytes and kMaxNoteSignatures signature
// lines (the spec asks verifiers to accept at least 16). Parsers never throw.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/jwt.h"
#include "core/status.h"

namespace tollgate {

namespace errc {
// A note, checkpoint or proof that is not in its format (the message says
// which rule it breaks).
inline constexpr const char* kNoteMalformed = "E_NOTE_MALFORMED";
// A note no known key signed, or with a known key's signature that fails.
inline constexpr const char* kNoteUnverified = "E_NOTE_UNVERIFIED";
}  // namespace errc

inline constexpr size_t kMaxNoteBytes = 1 << 20;
inline constexpr size_t kMaxNoteSignatures = 100;
// Signature types (signed-note, "Signature types").
inline constexpr uint8_t kNoteKeyEd25519 = 0x01;
inline constexpr uint8_t kNoteKeyCosignatureV1 = 0x04;

// RFC 4648 section 4 base64 with '=' padding.
std::string Base64StdEncode(std::string_view bytes);
// Strict inverse: false on the URL alphabet, whitespace, missing or extra
// padding, or non-zero unused bits. *out is untouched on failure.
bool Base64StdDecode(std::string_view text, std::string* out);

// One signature line. `sig` is the bytes after the key ID (for an Ed25519
// note signature the 64 signature bytes; for a cosignature the timestamp
// and signature).
struct NoteSignature {
  std::string name;
  uint32_t key_hash = 0;
  std::string sig;
};

struct SignedNote {
  std::string text;  // with its final "\n", without the blank line
  std::vector<NoteSignature> sigs;
};

// The note's bytes. Does not validate: ParseNote(FormatNote(n)) gives n back
// when n's text ends in "\n", its names are valid and each sig is non-empty.
std::string FormatNote(const SignedNote& note);
// E_NOTE_MALFORMED unless `note` is a signed note as above within the bounds.
// Checks the form only; VerifyNote checks signatures.
Status ParseNote(std::string_view note, SignedNote* out);
// E_NOTE_MALFORMED unless `text` can be a note's text: non-empty, ending in
// "\n", UTF-8 without control characters but "\n", within kMaxNoteBytes.
Status CheckNoteText(std::string_view text);

// True when `name` may name a key: non-empty UTF-8 without spaces or '+'.
bool IsValidKeyName(std::string_view name);
uint32_t NoteKeyHash(std::string_view name, uint8_t type, std::string_view public_key);
// Lowercase hex, 8 digits.
std::string KeyHashHex(uint32_t key_hash);

// The message a tlog-cosignature v1 signs: "cosignature/v1\ntime <t>\n"
// followed by the note text (core/checkpoint.h makes and reads them).
std::string CosignatureMessage(uint64_t timestamp, std::string_view text);

// A public key that verifies signature lines: Ed25519 (0x01) or Ed25519
// cosignature v1 (0x04). Immutable, cheap to copy, thread-safe.
class NoteVerifier {
 public:
  NoteVerifier() = default;  // empty: verifies nothing
  // E_INVALID_KEY unless `name` is valid, `type` is 0x01 or 0x04 and
  // `public_key` is 32 bytes and not a small-order point.
  static Status FromPublic(std::string name, uint8_t type, std::string_view public_key, NoteVerifier* out);

  const std::string& name() const { return name_; }
  uint32_t KeyHash() const { return key_hash_; }
  uint8_t type() const { return type_; }
  const std::string& public_key() const { return public_key_; }  // 32 raw bytes
  // True when `sig` (a NoteSignature's sig) signs `text` under this key.
  bool Verify(std::string_view text, std::string_view sig) const;

 private:
  std::string name_;
  uint32_t key_hash_ = 0;
  uint8_t type_ = 0;
  std::string public_key_;
  Ed25519Verifier ed25519_;
};

// "<name>+<hex key ID>+<base64(type || key)>". E_INVALID_KEY when the parts
// are missing or malformed, the type is unsupported, or the key ID is not
// the one the name and key give.
Status ParseVerifierKey(std::string_view vkey, NoteVerifier* out);
std::string FormatVerifierKey(const NoteVerifier& key);

// An Ed25519 private key with its key name and type: Sign for type 0x01,
// Cosign (core/checkpoint.h) for 0x04. Immutable, cheap to copy,
// thread-safe; the secret is wiped when the last copy goes.
class NoteSigner {
 public:
  NoteSigner() = default;  // empty, until FromSeed/FromPem assigns to it
  // E_INVALID_KEY unless `seed` is 32 bytes (RFC 8032's private key), `name`
  // is a valid key name and `type` is 0x01 or 0x04.
  static Status FromSeed(std::string name, std::string_view seed, NoteSigner* out,
                         uint8_t type = kNoteKeyEd25519);
  // The same from an unencrypted PKCS#8 PEM Ed25519 key (core/jwt.h's
  // key files).
  static Status FromPem(std::string name, const std::string& private_pem, NoteSigner* out,
                        uint8_t type = kNoteKeyEd25519);

  const std::string& name() const { return name_; }
  uint32_t KeyHash() const { return key_hash_; }
  uint8_t type() const { return type_; }
  const std::string& public_key() const { return public_key_; }
  NoteVerifier Verifier() const;  // the matching public key
  std::string VerifierKey() const { return FormatVerifierKey(Verifier()); }

  // The signature line for `text` (a note text ending in "\n"). Throws
  // std::logic_error on an empty signer or one of type 0x04.
  NoteSignature Sign(std::string_view text) const;
  // Raw Ed25519 over `message` (64 bytes). Throws std::logic_error on an
  // empty signer.
  std::string SignBytes(std::string_view message) const;

 private:
  std::string name_;
  uint32_t key_hash_ = 0;
  uint8_t type_ = 0;
  std::string public_key_;
  std::shared_ptr<const std::string> secret_;  // libsodium's 64-byte secret key
};

// Checks `note`'s signatures against `known`. A line whose name and key ID
// match a known key (the first such in `known`) must verify, and appear
// once; other lines are ignored. Ok, *verified_names (when given) the names
// of the keys that signed, in line order, when at least one known key
// signed; else E_NOTE_UNVERIFIED saying why.
Status VerifyNote(const SignedNote& note, const std::vector<NoteVerifier>& known,
                  std::vector<std::string>* verified_names = nullptr);
// The same without the "at least one" rule: for witness cosignatures,
// where a policy counts them (core/checkpoint.h).
Status VerifyKnownSignatures(const SignedNote& note, const std::vector<NoteVerifier>& known,
                             std::vector<std::string>* verified_names);

}  // namespace tollgate
