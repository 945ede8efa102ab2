#include "audit/verify_proof.h"

#include <map>
#include <set>
#include <sstream>

#include "audit/log_format.h"
#include "audit/merkle.h"
#include "core/canonical_json.h"
#include "core/checkpoint.h"
#include "core/signed_note.h"
#include "core/tlog_proof.h"

namespace tollgate {
namespace {

std::string S(uint64_t n) { return std::to_string(n); }

Status Failed(const std::string& why) { return Status::Error(errc::kProofFailed, why); }

// A record's seq and recomputed hash (RecordHash on a parsed line).
// `rec` is consumed: the hashed body is what is left of it.
Status RecordHashOf(Json rec, uint64_t* seq, Digest* hash) {
  Digest prev{}, claimed{};
  auto hex = [&rec](const char* k, Digest* d) {
    return rec.contains(k) && rec[k].is_string() && DigestFromHex(rec[k].get<std::string>(), d);
  };
  if (!rec.is_object() || !hex("prev_hash", &prev) || !hex("hash", &claimed)) {
    return Status::Error(errc::kExportInvalid, "not a record: it needs hex prev_hash and hash");
  }
  if (!rec.contains("seq") || !rec["seq"].is_number_unsigned() || rec["seq"].get<uint64_t>() == 0) {
    return Status::Error(errc::kExportInvalid, "not a record: it needs a seq of 1 or more");
  }
  const uint64_t at = rec["seq"].get<uint64_t>();
  for (const char* k : {"prev_hash", "hash", "proof", "proof_pending"}) rec.erase(k);
  std::string canon;
  Status s = CanonicalBytes(rec, &canon);
  if (!s.ok()) return s;
  const std::string_view prev_bytes(reinterpret_cast<const char*>(prev.data()), prev.size());
  if (Sha256(prev_bytes, canon) != claimed) {
    return Status::Error(errc::kChainBroken, "its hash is not SHA-256(prev_hash || canonical body)");
  }
  *seq = at;
  *hash = claimed;
  return Status::Ok();
}

// One run over a bundle: what verified so far, and the report.
class Run {
 public:
  explicit Run(const ProofBundle& b) : b_(b) {}
  ProofReport Go();

 private:
  void Add(std::string what, Status s, std::string detail = {}) {
    report_.checks.push_back({std::move(what), std::move(s), std::move(detail)});
  }
  bool Keys();
  bool Open(const std::string& what, std::string_view note, Checkpoint* cp);
  void Records(const ProofInput& in);
  void Proof(const ProofInput& in);
  void Consistency(const ProofInput& in);
  void Complete();
  void Chain(const std::string& what, const std::vector<uint64_t>& seqs, bool request);

  const ProofBundle& b_;
  ProofReport report_;
  NoteVerifier log_key_;
  std::vector<NoteVerifier> witnesses_;
  size_t quorum_ = 0;
  std::map<std::string, Checkpoint, std::less<>> opened_;  // notes that verified, by text
  std::map<uint64_t, Digest> roots_;                       // by tree size, of every checkpoint that verified
  std::map<uint64_t, Digest> leaves_;  // record hashes by seq, of the records that verified
  std::vector<ProofInput> carried_;    // proofs the records carried
  std::set<uint64_t> proven_;          // seqs whose inclusion verified
  std::map<uint64_t, Event> events_;   // the records that verified, decoded (for `complete`)
};

ProofReport Run::Go() {
  if (!Keys()) return std::move(report_);
  Checkpoint cp;
  for (const ProofInput& in : b_.checkpoints) Open("checkpoint " + in.name, in.text, &cp);
  for (const ProofInput& in : b_.records) Records(in);
  for (const ProofInput& in : b_.proofs) Proof(in);
  for (const ProofInput& in : carried_) Proof(in);
  for (const ProofInput& in : b_.consistency) Consistency(in);
  if (b_.complete) Complete();
  for (const auto& [seq, hash] : leaves_) {
    if (!proven_.count(seq)) Add("record seq " + S(seq), Failed("no proof of its inclusion was given"));
  }
  if (report_.checks.empty()) Add("input", Failed("nothing to check: give checkpoints, proofs or records"));
  return std::move(report_);
}

// The pinned log key and the witness keys; false (reported) when unusable.
bool Run::Keys() {
  Status s = ParseVerifierKey(b_.key, &log_key_);
  if (s.ok() && log_key_.type() != kNoteKeyEd25519) s = Failed("the log key must be an Ed25519 (type 1) key");
  if (!s.ok()) {
    Add("key", s);
    return false;
  }
  for (const std::string& w : b_.witnesses) {
    NoteVerifier v;
    if (s = ParseVerifierKey(w, &v); !s.ok()) {
      Add("witness key " + w, s);
      return false;
    }
    witnesses_.push_back(v);
  }
  quorum_ = b_.quorum ? b_.quorum : witnesses_.size();
  if (quorum_ > witnesses_.size()) {
    Add("quorum", Failed("a quorum of " + S(quorum_) + " needs that many --witness keys"));
    return false;
  }
  return true;
}

// Opens one signed checkpoint: the log key's signature, the witness policy,
// and one root per size. True when all hold (each reported).
bool Run::Open(const std::string& what, std::string_view note, Checkpoint* cp) {
  if (const auto known = opened_.find(note); known != opened_.end()) {
    *cp = known->second;  // checked already (proofs of one answer share theirs)
    return true;
  }
  SignedNote parsed;
  Status s = OpenCheckpoint(note, log_key_, cp, &parsed);
  if (!s.ok()) {
    Add(what, s);
    return false;
  }
  auto [at, fresh] = roots_.emplace(cp->size, cp->root);
  if (!fresh && at->second != cp->root) {
    Add(what, Failed("another checkpoint of size " + S(cp->size) + " has another root: two histories"));
    return false;
  }
  Add(what, s, "signed by " + cp->origin + ", size " + S(cp->size));
  if (!witnesses_.empty()) {
    std::vector<std::string> names;
    s = VerifyCosignatures(parsed, witnesses_, quorum_, &names);
    std::string who;
    for (const std::string& n : names) who += (who.empty() ? "" : ", ") + n;
    Add("witnesses of " + what, s, S(names.size()) + " of " + S(witnesses_.size()) + " cosigned: " + who);
    if (!s.ok()) return false;
  }
  opened_.emplace(std::string(note), *cp);
  return true;
}

// The records of one file: each hash recomputed; header and end lines of
// an export skipped.
void Run::Records(const ProofInput& in) {
  std::istringstream lines(in.text);
  std::string line;
  for (size_t n = 1; std::getline(lines, line); ++n) {
    if (line.empty()) continue;
    const std::string where = in.name + ":" + S(n);
    Json rec;
    Status s = ParseJson(line, &rec);
    if (s.ok() && rec.is_object() &&
        (rec.contains("tollgate_export") || rec.contains("tollgate_export_end"))) {
      continue;
    }
    // The proof it carries rides outside its hashed body.
    std::string proof;
    if (s.ok() && rec.is_object()) {
      if (auto p = rec.find("proof"); p != rec.end() && p->is_string()) proof = p->get<std::string>();
      rec.erase("proof");
      rec.erase("proof_pending");
    }
    Event e;
    const bool decoded = b_.complete && s.ok() && EventFromJson(rec, &e).ok();
    uint64_t seq = 0;
    Digest hash{};
    if (s.ok()) s = RecordHashOf(std::move(rec), &seq, &hash);
    if (!s.ok()) {
      Add("record " + where, s);
      continue;
    }
    leaves_[seq] = hash;
    Add("record " + where, s, "seq " + S(seq) + ", hash " + ToHex(hash));
    if (decoded) events_[seq] = std::move(e);
    if (!proof.empty()) carried_.push_back({"carried by " + where, std::move(proof)});
  }
}

// A tlog-proof: its checkpoint, then the record of seq index+1 under it.
void Run::Proof(const ProofInput& in) {
  const std::string what = "proof " + in.name;
  TlogProof p;
  Status s = ParseTlogProof(in.text, &p);
  if (!s.ok()) return Add(what, s);
  Checkpoint cp;
  if (!Open("checkpoint in " + what, p.checkpoint, &cp))
    return Add(what, Failed("its checkpoint does not verify"));
  const uint64_t seq = p.index + 1;
  const auto leaf = leaves_.find(seq);
  if (leaf == leaves_.end()) {
    return Add(what, Failed("no verified --record of seq " + S(seq) + " (index " + S(p.index) +
                            "): its leaf is unknown"));
  }
  if (!merkle::VerifyInclusion(p.index, cp.size, merkle::LeafHash(leaf->second), p.hashes, cp.root)) {
    return Add(what, Failed("seq " + S(seq) + " is not in the checkpoint of size " + S(cp.size) +
                            " under its root"));
  }
  proven_.insert(seq);
  Add(what, Status::Ok(), "seq " + S(seq) + " is in the checkpoint of size " + S(cp.size));
}

// A consistency proof between two checkpoints that verified.
void Run::Consistency(const ProofInput& in) {
  const std::string what = "consistency " + in.name;
  ConsistencyProof p;
  Status s = ParseConsistencyProof(in.text, &p);
  if (!s.ok()) return Add(what, s);
  const auto old_root = roots_.find(p.old_size), new_root = roots_.find(p.new_size);
  if (old_root == roots_.end() || new_root == roots_.end()) {
    const uint64_t missing = old_root == roots_.end() ? p.old_size : p.new_size;
    return Add(what, Failed("no verified checkpoint of size " + S(missing) + " was given"));
  }
  if (!merkle::VerifyConsistency(p.old_size, p.new_size, old_root->second, new_root->second, p.hashes)) {
    return Add(what,
               Failed("the checkpoint of size " + S(p.old_size) + " is not a prefix of the one of size " +
                      S(p.new_size) + ": the log was rewritten or forked"));
  }
  Add(what, s,
      "the checkpoint of size " + S(p.old_size) + " is a prefix of the one of size " + S(p.new_size));
}

// The records' chains: each request's and each session's records, by seq.
void Run::Complete() {
  std::map<std::pair<std::string, std::string>, std::vector<uint64_t>> requests, sessions;
  for (const auto& [seq, e] : events_) {
    if (!e.request_id.empty()) requests[{e.org_id, e.request_id}].push_back(seq);
    if (!e.session_id.empty()) sessions[{e.org_id, e.session_id}].push_back(seq);
  }
  for (const auto& [key, seqs] : requests) Chain("request " + key.first + "/" + key.second, seqs, true);
  for (const auto& [key, seqs] : sessions) Chain("session " + key.first + "/" + key.second, seqs, false);
  if (events_.empty()) Add("completeness", Failed("no record to check"));
}

// One chain: the first record links to none (0), each later one to the
// record before it. A request whose last record ends it is complete; any
// other chain is complete up to its last record.
void Run::Chain(const std::string& what, const std::vector<uint64_t>& seqs, bool request) {
  uint64_t prev = 0;
  for (uint64_t seq : seqs) {
    const Event& e = events_.at(seq);
    const std::optional<uint64_t>& link = request ? e.prev_in_request : e.prev_in_session;
    if (!link) return Add(what, Failed("record seq " + S(seq) + " carries no links (logged before them)"));
    if (*link != prev) {
      return Add(what,
                 Failed("record seq " + S(seq) + " names seq " + S(*link) + " as the event before it" +
                        (prev == 0 ? ", which the answer does not hold"
                                   : ", but the answer's is seq " + S(prev) + ": an event is missing")));
    }
    prev = seq;
  }
  const Event& last = events_.at(seqs.back());
  const bool closed = request && logfmt::OpenIndexOp(last) == logfmt::OpenOp::kClose;
  Add(what, Status::Ok(),
      S(seqs.size()) + " events from its first, seqs " + S(seqs.front()) + ".." + S(seqs.back()) +
          (closed ? "; ended by " + last.type + ": complete" : "; complete up to seq " + S(seqs.back())));
}

}  // namespace

bool ProofReport::ok() const {
  if (checks.empty()) return false;
  for (const ProofCheck& c : checks) {
    if (!c.status.ok()) return false;
  }
  return true;
}

std::string ProofReport::Text() const {
  std::string out;
  for (const ProofCheck& c : checks) {
    out += c.status.ok() ? "OK " + c.what + ": " + c.detail : "FAIL " + c.what + ": " + c.status.ToString();
    out += '\n';
  }
  return out;
}

ProofReport VerifyProofBundle(const ProofBundle& bundle) { return Run(bundle).Go(); }

Status RecordHash(std::string_view line, uint64_t* seq, Digest* hash) {
  Json rec;
  Status s = ParseJson(line, &rec);
  if (!s.ok()) return s;
  return RecordHashOf(std::move(rec), seq, hash);
}

}  // namespace tollgate
