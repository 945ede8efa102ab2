#include "deploy/gate_key.h"

#include "core/result_signature.h"

namespace tollgate {

Status GateSigner(const EventsKey& key, std::shared_ptr<const JwtSigner>* out) {
  std::string pem, pub;
  Status s = Ed25519FromSeed(key.Derive("gate-key"), &pem, &pub);
  if (!s.ok()) return s;
  auto signer = std::make_shared<JwtSigner>();
  s = SignerForKey(pem, signer.get());
  if (!s.ok()) return s;
  *out = std::move(signer);
  return Status::Ok();
}

Status RegisterGateKey(const JwtSigner& gate, CredentialRegistry* registry, EventSink& sink) {
  Credential c;
  c.kind = "gate_key";
  c.identity = kGateIdentity;
  c.org_id = "*";
  c.public_key = gate.public_b64url();
  c.key_id = KeyIdOfPublicKey(c.public_key);
  c.added_by = "up";
  Credential known;
  if (registry->Find(c.key_id, &known)) {
    if (known.revoked) {
      return Status::Error(
          errc::kUnauthenticated,
          "the gate key " + c.key_id + " is revoked in the log; give the deployment a new key");
    }
    return Status::Ok();
  }
  const Event e = CredentialAddedEvent(c, NowMicros());
  Status s = AppendOne(sink, e);
  if (s.ok()) registry->Apply(e);
  return s;
}

std::vector<Ed25519Verifier> GateVerifiers(const CredentialRegistry& registry) {
  std::vector<Ed25519Verifier> out;
  for (const Credential& c : registry.List("gate_key")) {
    Ed25519Verifier v;
    if (!c.revoked && Ed25519Verifier::FromPublic(c.public_key, &v).ok()) out.push_back(std::move(v));
  }
  return out;
}

Json GateKeyJson(const JwtSigner& gate) {
  return {{"key_id", KeyIdOfPublicKey(gate.public_b64url())},
          {"public_key", gate.public_b64url()},
          {"alg", "EdDSA"}};
}

}  // namespace tollgate
