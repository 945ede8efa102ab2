// The gate's result key (docs/trust.md, "Results are signed by the gate"):
// an Ed25519 key derived from the deployment key (runtime/event_follower.h
// EventsKey::Derive), so `up` and every process of the distributed
// deployment sign results with the same key and no new file has to be
// handed around. Its public half is a `gate_key` credential in the log
// (identity kGateIdentity, org "*"), in endpoints.json and at
// GET /v1/gate-key.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/credentials.h"
#include "core/jwt.h"
#include "core/stage.h"
#include "runtime/event_follower.h"

namespace tollgate {

// The signer of `key`'s gate key, its kid the key's key_id.
Status GateSigner(const EventsKey& key, std::shared_ptr<const JwtSigner>* out);

// Appends the gate key's credential.added unless the log has it; refuses a
// key the log shows revoked (the deployment key must change first).
Status RegisterGateKey(const JwtSigner& gate, CredentialRegistry* registry, EventSink& sink);

// Every active gate key the log holds: what a waiter checks results with.
std::vector<Ed25519Verifier> GateVerifiers(const CredentialRegistry& registry);

// {"key_id", "public_key", "alg": "EdDSA"} of a signer: for endpoints.json.
Json GateKeyJson(const JwtSigner& gate);

}  // namespace tollgate
