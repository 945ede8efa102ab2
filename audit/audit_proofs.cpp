#include "audit/audit_proofs.h"

#include "core/canonical_json.h"
#include "core/checkpoint.h"
#include "core/signed_note.h"
#include "core/tlog_proof.h"

namespace tollgate {
namespace {

// Adds "proof" (or "proof_pending") to one event's JSON record `line`,
// before its closing brace (the line stays as it was otherwise).
Status AddProof(const MerkleStore& tree, const ProofBasis& basis, std::string* line) {
  Json rec;
  Status s = ParseJson(*line, &rec);
  if (!s.ok()) return s;
  if (!rec.is_object() || !rec.contains("seq") || !rec["seq"].is_number_unsigned() || line->back() != '}') {
    return Status::Error(errc::kLogCorrupt, "an audit record without a seq");
  }
  Json fields;
  s = ProofFields(tree, basis, rec["seq"].get<uint64_t>(), &fields);
  if (!s.ok()) return s;
  line->pop_back();  // the record's closing brace; the fields go before it
  for (const auto& [k, v] : fields.items()) *line += "," + Json(k).dump() + ":" + v.dump();
  *line += '}';
  return Status::Ok();
}

}  // namespace

Status CheckpointNoteSize(std::string_view note, uint64_t* size) {
  SignedNote parsed;
  Checkpoint cp;
  Status s = ParseNote(note, &parsed);
  if (s.ok()) s = ParseCheckpointText(parsed.text, &cp);
  if (s.ok()) *size = cp.size;
  return s;
}

Status TlogProofText(const merkle::SubtreeSource& tree, const std::string& note, uint64_t size, uint64_t seq,
                     std::string* out) {
  TlogProof proof;
  proof.index = seq - 1;
  proof.checkpoint = note;
  Status s = merkle::InclusionProof(tree, proof.index, size, &proof.hashes);
  if (s.ok()) *out = FormatTlogProof(proof);
  return s;
}

Status LatestProofBasis(const MerkleStore& tree, ProofBasis* out) {
  *out = ProofBasis{};
  Status s = tree.LatestCheckpoint(&out->checkpoint);
  if (s.code() == errc::kNotFound) {  // no checkpoint yet: every event is pending
    out->checkpoint.clear();
    return Status::Ok();
  }
  return s.ok() ? CheckpointNoteSize(out->checkpoint, &out->size) : s;
}

Status ProofFields(const MerkleStore& tree, const ProofBasis& basis, uint64_t seq, Json* fields) {
  if (seq < 1 || seq > basis.size) {
    *fields = {{"proof_pending", true}};
    return Status::Ok();
  }
  std::string proof;
  Status s = TlogProofText(tree, basis.checkpoint, basis.size, seq, &proof);
  if (s.ok()) *fields = {{"proof", std::move(proof)}};
  return s;
}

Status ProveAuditRecords(const MerkleStore& tree, std::vector<std::string>* lines, std::string* checkpoint) {
  ProofBasis basis;
  Status s = LatestProofBasis(tree, &basis);
  for (size_t i = 0; s.ok() && i < lines->size(); ++i) s = AddProof(tree, basis, &(*lines)[i]);
  *checkpoint = basis.checkpoint;
  return s;
}

}  // namespace tollgate
