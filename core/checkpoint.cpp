#include "core/checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace tollgate {
namespace {

Status Malformed(const std::string& why) { return Status::Error(errc::kNoteMalformed, "checkpoint " + why); }

}  // namespace

bool ParseTlogDecimal(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

std::string CheckpointText(const Checkpoint& cp) {
  std::string out =
      cp.origin + "\n" + std::to_string(cp.size) + "\n" +
      Base64StdEncode(std::string_view(reinterpret_cast<const char*>(cp.root.data()), cp.root.size())) + "\n";
  for (const std::string& ext : cp.extensions) out += ext + "\n";
  return out;
}

Status ParseCheckpointText(std::string_view text, Checkpoint* out) {
  Status s = CheckNoteText(text);
  if (!s.ok()) return Status::Error(s.code(), "checkpoint " + s.message());
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == at) return Malformed("has an empty line");
    lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  if (lines.size() < 3) return Malformed("has fewer than 3 lines (origin, size, root hash)");
  Checkpoint cp;
  cp.origin = std::string(lines[0]);
  if (!ParseTlogDecimal(lines[1], &cp.size)) {
    return Malformed("size is not a decimal without leading zeros within 64 bits");
  }
  std::string root;
  if (!Base64StdDecode(lines[2], &root) || root.size() != cp.root.size()) {
    return Malformed("root hash is not 32 bytes of padded standard base64");
  }
  std::copy(root.begin(), root.end(), cp.root.begin());
  for (size_t i = 3; i < lines.size(); ++i) cp.extensions.emplace_back(lines[i]);
  *out = std::move(cp);
  return Status::Ok();
}

std::string SignCheckpoint(const Checkpoint& cp, const NoteSigner& log) {
  SignedNote note;
  note.text = CheckpointText(cp);
  note.sigs.push_back(log.Sign(note.text));
  return FormatNote(note);
}

Status OpenCheckpoint(std::string_view note, const NoteVerifier& log_key, Checkpoint* cp,
                      SignedNote* parsed) {
  SignedNote n;
  Status s = ParseNote(note, &n);
  if (!s.ok()) return s;
  s = VerifyNote(n, {log_key});
  if (!s.ok()) return s;
  Checkpoint c;
  s = ParseCheckpointText(n.text, &c);
  if (!s.ok()) return s;
  if (c.origin != log_key.name()) {
    return Status::Error(errc::kNoteUnverified,
                         "checkpoint origin is not the log key's name " + log_key.name());
  }
  *cp = std::move(c);
  if (parsed) *parsed = std::move(n);
  return Status::Ok();
}

NoteSignature Cosign(const NoteSigner& witness, std::string_view checkpoint_text, uint64_t timestamp) {
  if (witness.type() != kNoteKeyCosignatureV1)
    throw std::logic_error("Cosign needs a cosignature (0x04) key");
  if (timestamp > uint64_t{INT64_MAX}) throw std::logic_error("a cosignature time is at most 2^63 - 1");
  std::string bytes(8, '\0');
  for (size_t k = 0; k < 8; ++k) bytes[k] = static_cast<char>((timestamp >> (56 - 8 * k)) & 0xFF);
  bytes += witness.SignBytes(CosignatureMessage(timestamp, checkpoint_text));
  return NoteSignature{witness.name(), witness.KeyHash(), std::move(bytes)};
}

bool CosignatureTime(const NoteSignature& sig, uint64_t* timestamp) {
  if (sig.sig.size() != 72) return false;
  uint64_t t = 0;
  for (size_t k = 0; k < 8; ++k) t = (t << 8) | static_cast<uint8_t>(sig.sig[k]);
  *timestamp = t;
  return true;
}

Status VerifyCosignatures(const SignedNote& note, const std::vector<NoteVerifier>& witnesses, size_t quorum,
                          std::vector<std::string>* names) {
  std::vector<NoteVerifier> cosigners;
  for (const NoteVerifier& w : witnesses) {
    if (w.type() == kNoteKeyCosignatureV1) cosigners.push_back(w);
  }
  std::vector<std::string> signed_by;
  Status s = VerifyKnownSignatures(note, cosigners, &signed_by);
  if (!s.ok()) return s;
  if (signed_by.size() < quorum) {
    return Status::Error(errc::kNoteUnverified, "checkpoint has " + std::to_string(signed_by.size()) +
                                                    " witness cosignatures, the policy needs " +
                                                    std::to_string(quorum));
  }
  if (names) *names = std::move(signed_by);
  return Status::Ok();
}

}  // namespace tollgate
