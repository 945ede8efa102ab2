#include "core/tlog_proof.h"

#include <algorithm>

#include "core/checkpoint.h"
#include "core/signed_note.h"

namespace tollgate {
namespace {

Status Malformed(std::string_view what, const std::string& why) {
  return Status::Error(errc::kNoteMalformed, std::string(what) + " " + why);
}

// The lines of a text, one at a time.
class Lines {
 public:
  explicit Lines(std::string_view text) : rest_(text) {}
  // The next line without its "\n"; false when no complete line is left.
  bool Next(std::string_view* line) {
    size_t nl = rest_.find('\n');
    if (nl == rest_.npos) return false;
    *line = rest_.substr(0, nl);
    rest_.remove_prefix(nl + 1);
    return true;
  }
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
};

std::string HashLine(const Digest& d) {
  return Base64StdEncode(std::string_view(reinterpret_cast<const char*>(d.data()), d.size())) + "\n";
}

bool DecodeHash(std::string_view b64, Digest* out) {
  std::string bytes;
  if (b64.size() != 44 || !Base64StdDecode(b64, &bytes) || bytes.size() != out->size()) return false;
  std::copy(bytes.begin(), bytes.end(), out->begin());
  return true;
}

// "<key> <decimal>" as the proofs write numbers.
bool NumberLine(std::string_view line, std::string_view key, uint64_t* out) {
  return line.size() > key.size() + 1 && line.substr(0, key.size()) == key && line[key.size()] == ' ' &&
         ParseTlogDecimal(line.substr(key.size() + 1), out);
}

// The tlog-proof's inclusion path, up to the blank line before the checkpoint.
Status ParsePath(Lines* in, std::vector<Digest>* hashes) {
  std::string_view line;
  while (in->Next(&line)) {
    if (line.empty()) return Status::Ok();
    if (hashes->size() == kMaxProofHashes) {
      return Malformed("tlog-proof", "has over " + std::to_string(kMaxProofHashes) + " hashes");
    }
    Digest d;
    if (!DecodeHash(line, &d)) {
      return Malformed("tlog-proof", "hash line " + std::to_string(hashes->size() + 1) +
                                         " is not 32 bytes of padded standard base64");
    }
    hashes->push_back(d);
  }
  return Malformed("tlog-proof", "has no blank line before its checkpoint");
}

Status CheckCheckpointNote(std::string_view note) {
  SignedNote parsed;
  Status s = ParseNote(note, &parsed);
  if (!s.ok()) return Malformed("tlog-proof", "checkpoint: " + s.message());
  Checkpoint cp;
  s = ParseCheckpointText(parsed.text, &cp);
  if (!s.ok()) return Malformed("tlog-proof", "checkpoint: " + s.message());
  return Status::Ok();
}

}  // namespace

std::string FormatTlogProof(const TlogProof& proof) {
  std::string out = std::string(kTlogProofHeader) + "\n";
  if (proof.extra) out += "extra " + Base64StdEncode(*proof.extra) + "\n";
  out += "index " + std::to_string(proof.index) + "\n";
  for (const Digest& d : proof.hashes) out += HashLine(d);
  return out + "\n" + proof.checkpoint;
}

Status ParseTlogProof(std::string_view text, TlogProof* out) {
  constexpr std::string_view kWhat = "tlog-proof";
  if (text.size() > kMaxTlogProofBytes) {
    return Malformed(kWhat, "is over " + std::to_string(kMaxTlogProofBytes) + " bytes");
  }
  Lines in(text);
  std::string_view line;
  if (!in.Next(&line) || line != kTlogProofHeader) {
    return Malformed(kWhat, "does not start with the line " + std::string(kTlogProofHeader));
  }
  TlogProof proof;
  if (!in.Next(&line)) return Malformed(kWhat, "has no index line");
  if (line.substr(0, 6) == "extra ") {
    std::string extra;
    if (!Base64StdDecode(line.substr(6), &extra))
      return Malformed(kWhat, "extra is not padded standard base64");
    proof.extra = std::move(extra);
    if (!in.Next(&line)) return Malformed(kWhat, "has no index line");
  }
  if (!NumberLine(line, "index", &proof.index)) {
    return Malformed(kWhat, "index line is not \"index <decimal without leading zeros>\"");
  }
  Status s = ParsePath(&in, &proof.hashes);
  if (!s.ok()) return s;
  s = CheckCheckpointNote(in.rest());
  if (!s.ok()) return s;
  proof.checkpoint = std::string(in.rest());
  *out = std::move(proof);
  return Status::Ok();
}

std::string FormatConsistencyProof(const ConsistencyProof& proof) {
  std::string out = std::string(kConsistencyProofHeader) + "\n";
  out += "old " + std::to_string(proof.old_size) + "\n";
  out += "new " + std::to_string(proof.new_size) + "\n";
  for (const Digest& d : proof.hashes) out += HashLine(d);
  return out;
}

Status ParseConsistencyProof(std::string_view text, ConsistencyProof* out) {
  constexpr std::string_view kWhat = "consistency proof";
  if (text.size() > kMaxTlogProofBytes) {
    return Malformed(kWhat, "is over " + std::to_string(kMaxTlogProofBytes) + " bytes");
  }
  Lines in(text);
  std::string_view line;
  if (!in.Next(&line) || line != kConsistencyProofHeader) {
    return Malformed(kWhat, "does not start with the line " + std::string(kConsistencyProofHeader));
  }
  ConsistencyProof proof;
  if (!in.Next(&line) || !NumberLine(line, "old", &proof.old_size)) {
    return Malformed(kWhat, "second line is not \"old <decimal without leading zeros>\"");
  }
  if (!in.Next(&line) || !NumberLine(line, "new", &proof.new_size)) {
    return Malformed(kWhat, "third line is not \"new <decimal without leading zeros>\"");
  }
  if (proof.old_size > proof.new_size) return Malformed(kWhat, "old size is over the new size");
  while (in.Next(&line)) {
    if (proof.hashes.size() == kMaxProofHashes) {
      return Malformed(kWhat, "has over " + std::to_string(kMaxProofHashes) + " hashes");
    }
    Digest d;
    if (!DecodeHash(line, &d)) {
      return Malformed(kWhat, "hash line " + std::to_string(proof.hashes.size() + 1) +
                                  " is not 32 bytes of padded standard base64");
    }
    proof.hashes.push_back(d);
  }
  if (!in.rest().empty()) return Malformed(kWhat, "does not end in a newline");
  *out = std::move(proof);
  return Status::Ok();
}

}  // namespace tollgate
