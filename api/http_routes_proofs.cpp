// The routes that prove the log: its signed checkpoints, inclusion proofs
// (C2SP tlog-proof) and consistency proofs between checkpoints
// (docs/log_format.md, "Checkpoints and proofs"), and /v1/audit's
// proofs=1. api/http_api.h lists them all.
//
// Checkpoints and consistency proofs reveal only tree sizes and hashes, so
// any auditor reads them; an inclusion proof names one event, so a caller
// bound to one org gets those of its own org's events only.
#include <optional>
#include <string>
#include <vector>

#include "api/http_api_impl.h"
#include "audit/audit_proofs.h"
#include "audit/checkpointer.h"
#include "audit/merkle.h"
#include "audit/merkle_store.h"
#include "core/checkpoint.h"
#include "core/jwt.h"
#include "core/signed_note.h"
#include "core/tlog_proof.h"

namespace tollgate {
namespace http_api {
namespace {

constexpr const char* kNoTree = "this deployment keeps no Merkle tree: it has no checkpoints or proofs";

void Text(httplib::Response& res, const std::string& body) {
  res.status = 200;
  res.set_content(body, "text/plain; charset=utf-8");
}

// An auditor or admin, of a deployment with a tree; false after answering.
bool ProofCaller(Impl* im, const httplib::Request& req, httplib::Response& res, Principal* who) {
  if (!Authorize(im->options, req, res, {"auditor", "admin"}, who)) return false;
  if (im->options.tree == nullptr) {
    Error(res, 404, errc::kNotFound, kNoTree);
    return false;
  }
  return true;
}

// A decimal query parameter (no sign, no leading zero), left unset when
// absent and not `required`; false after answering 400.
bool NumberParam(const httplib::Request& req, httplib::Response& res, const char* key, bool required,
                 std::optional<uint64_t>* out) {
  const std::string v = Param(req, key);
  if (v.empty() && !required) return true;
  uint64_t n = 0;
  if (v.empty() || !ParseTlogDecimal(v, &n)) {
    Error(res, 400, errc::kInvalidQuery,
          std::string(key) + "=" + (v.empty() ? " is required" : ": not a decimal number"));
    return false;
  }
  *out = n;
  return true;
}

// The stored checkpoint of `size` (the latest when unset) and the size it
// covers; false after answering 404 (none stored) or 500.
bool StoredCheckpoint(const MerkleStore& tree, const std::optional<uint64_t>& size, httplib::Response& res,
                      std::string* note, uint64_t* covers) {
  Status s = size ? tree.GetCheckpoint(*size, note) : tree.LatestCheckpoint(note);
  if (s.ok()) {
    if (size) *covers = *size;
    if (!size) s = CheckpointNoteSize(*note, covers);
  }
  if (s.ok()) return true;
  if (s.code() == errc::kNotFound) {
    Error(res, 404, errc::kNotFound,
          size ? "no checkpoint of size " + std::to_string(*size) + " is stored"
               : std::string("no checkpoint has been signed yet"));
  } else {
    Error(res, StatusFor(s), s.code(), s.message());
  }
  return false;
}

// A caller bound to one org may see the proof of its own org's events
// only; false after answering 403 (or the read's error).
bool SeqVisibleTo(Impl* im, const Principal& who, uint64_t seq, httplib::Response& res) {
  if (who.org_id == "*") return true;
  Event e;
  Status s = im->store->ReadEvent(seq, &e);
  if (!s.ok()) {
    Error(res, StatusFor(s), s.code(), s.message());
    return false;
  }
  if (e.org_id == who.org_id) return true;
  Error(res, 403, errc::kForbidden, "seq " + std::to_string(seq) + " is not an event of org " + who.org_id);
  return false;
}

// GET /v1/audit/checkpoint[?size=N][&fresh=1]: the latest signed
// checkpoint note, or the stored one of size N; fresh=1 signs one of the
// tree as it stands first.
void HandleCheckpoint(Impl* im, const httplib::Request& req, httplib::Response& res) {
  Principal who;
  std::optional<uint64_t> size;
  if (!ProofCaller(im, req, res, &who) || !NumberParam(req, res, "size", false, &size)) return;
  std::string note;
  if (Param(req, "fresh") == "1") {
    if (im->options.checkpointer == nullptr) {
      return Error(res, 404, errc::kNotFound, "this process signs no checkpoints (fresh=1)");
    }
    Status s = im->options.checkpointer->SignNow(&note);
    if (!s.ok()) return Error(res, StatusFor(s), s.code(), s.message());
    if (!size) return Text(res, note);
  }
  uint64_t covers = 0;
  if (!StoredCheckpoint(*im->options.tree, size, res, &note, &covers)) return;
  Text(res, note);
}

// GET /v1/audit/checkpoint-key: the key checkpoints are signed with.
void HandleCheckpointKey(Impl* im, const httplib::Request& req, httplib::Response& res) {
  Principal who;
  if (!ProofCaller(im, req, res, &who)) return;
  if (im->options.checkpointer == nullptr) {
    return Error(res, 404, errc::kNotFound, "this process signs no checkpoints");
  }
  const NoteSigner& key = im->options.checkpointer->signer();
  Reply(res, 200,
        {{"origin", key.name()},
         {"verifier_key", key.VerifierKey()},
         {"public_key", Base64UrlEncode(key.public_key())}});
}

// GET /v1/audit/proof?seq=S[&size=N]: the tlog-proof of seq S against the
// stored checkpoint of size N (default the latest).
void HandleProof(Impl* im, const httplib::Request& req, httplib::Response& res) {
  Principal who;
  std::optional<uint64_t> seq, size;
  if (!ProofCaller(im, req, res, &who) || !NumberParam(req, res, "seq", true, &seq) ||
      !NumberParam(req, res, "size", false, &size)) {
    return;
  }
  if (*seq == 0) return Error(res, 400, errc::kInvalidQuery, "seq=: seqs start at 1");
  std::string note;
  uint64_t covers = 0;
  if (!StoredCheckpoint(*im->options.tree, size, res, &note, &covers)) return;
  if (*seq > covers) {
    return Error(
        res, 400, errc::kInvalidQuery,
        "seq " + std::to_string(*seq) + " is not in the checkpoint of size " + std::to_string(covers));
  }
  if (!SeqVisibleTo(im, who, *seq, res)) return;
  std::string text;
  Status s = TlogProofText(*im->options.tree, note, covers, *seq, &text);
  if (!s.ok()) return Error(res, StatusFor(s), s.code(), s.message());
  Text(res, text);
}

// GET /v1/audit/consistency?from=M&to=N: that the tree of size M is a
// prefix of the stored checkpoint of size N. M need not be a stored
// checkpoint of this log: an auditor brings the one it holds (a
// checkpoint of a log since rewritten has no counterpart here), and the
// proof only convinces against it.
void HandleConsistency(Impl* im, const httplib::Request& req, httplib::Response& res) {
  Principal who;
  std::optional<uint64_t> from, to;
  if (!ProofCaller(im, req, res, &who) || !NumberParam(req, res, "from", true, &from) ||
      !NumberParam(req, res, "to", true, &to)) {
    return;
  }
  if (*from > *to) return Error(res, 400, errc::kInvalidQuery, "from= must not exceed to=");
  const MerkleStore& tree = *im->options.tree;
  std::string note;
  uint64_t covers = 0;
  if (!StoredCheckpoint(tree, to, res, &note, &covers)) return;
  ConsistencyProof proof;
  proof.old_size = *from;
  proof.new_size = *to;
  Status s = merkle::ConsistencyProof(tree, *from, *to, &proof.hashes);
  if (!s.ok()) return Error(res, StatusFor(s), s.code(), s.message());
  Text(res, FormatConsistencyProof(proof));
}

}  // namespace

bool AddAuditProofs(Impl* im, httplib::Response& res, std::vector<std::string>* lines, std::string* note) {
  const MerkleStore* tree = im->options.tree;
  if (tree == nullptr) {
    Error(res, 404, errc::kNotFound, kNoTree);
    return false;
  }
  Status s = ProveAuditRecords(*tree, lines, note);
  if (!s.ok()) Error(res, StatusFor(s), s.code(), s.message());
  return s.ok();
}

void RegisterProofRoutes(Impl* im, httplib::Server& svr) {
  svr.Get("/v1/audit/checkpoint", Bind(im, HandleCheckpoint));
  svr.Get("/v1/audit/checkpoint-key", Bind(im, HandleCheckpointKey));
  svr.Get("/v1/audit/proof", Bind(im, HandleProof));
  svr.Get("/v1/audit/consistency", Bind(im, HandleConsistency));
}

}  // namespace http_api
}  // namespace tollgate
