#include "deploy/checkpoints.h"

#include "core/credentials.h"
#include "core/jwt.h"

namespace tollgate {
namespace {

// The checkpoint key's credential.added, unless the log has it; a key the
// log shows revoked is refused (the deployment key must change first).
Status RegisterCheckpointKey(const NoteSigner& signer, CredentialRegistry* registry, EventSink& sink) {
  Credential c;
  c.kind = "checkpoint_key";
  c.identity = signer.name();
  c.org_id = kAllOrgs;
  c.public_key = Base64UrlEncode(signer.public_key());
  c.key_id = KeyIdOfPublicKey(c.public_key);
  c.added_by = "up";
  Credential known;
  if (registry->Find(c.key_id, &known)) {
    if (!known.revoked) return Status::Ok();
    return Status::Error(errc::kUnauthenticated, "the checkpoint key " + c.key_id +
                                                     " is revoked in the log; give the deployment a new key");
  }
  const Event e = CredentialAddedEvent(c, NowMicros());
  Status s = AppendOne(sink, e);
  if (s.ok()) registry->Apply(e);
  return s;
}

}  // namespace

Status StartCheckpoints(LocalLog& local, const EventsKey& key, const CheckpointOptions& options,
                        Checkpoints* out) {
  NoteSigner signer;
  Status s = CheckpointSigner(key.Derive("checkpoint-key"), "", &signer);
  if (s.ok()) s = RegisterCheckpointKey(signer, local.credentials.get(), *local.sink);
  if (s.ok()) s = MerkleStore::Open(local.log->store(), &out->tree);
  if (s.ok()) {
    s = Checkpointer::Start(*out->tree, local.log->head_seq(), std::move(signer), options, local.sink.get(),
                            &out->checkpointer);
  }
  if (!s.ok()) return s;
  local.sink->Subscribe(out->checkpointer.get());
  return Status::Ok();
}

Json CheckpointKeyJson(const NoteSigner& signer) {
  return {{"origin", signer.name()},
          {"verifier_key", signer.VerifierKey()},
          {"public_key", Base64UrlEncode(signer.public_key())}};
}

}  // namespace tollgate
