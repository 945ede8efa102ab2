// Signed messages (docs/trust.md): agents sign every request, approvers
// every approval response, with an EdDSA JWT in the Kafka header
// `tollgate-auth` whose claims bind the signer to the exact message bytes.
//
//   request:  {org_id, agent_id, request_id, value_sha256, iat}, verified
//             against the registered key of (org_id, agent_id)
//   response: {sub (the approver identity), org_id, request_id,
//             value_sha256, iat}, verified against the approver key named by
//             the header's kid. A service key (the HTTP API, which
//             authenticated a bearer token) may sign for another identity:
//             claims {sub: "tollgate-api", on_behalf_of, on_behalf_org}.
//
// Pure checks over a CredentialRegistry; the stages decide what a failure
// means (a rejected request, a refused response).
#pragma once

#include <string>

#include "core/credentials.h"
#include "core/message.h"

namespace tollgate {

inline constexpr const char* kHeaderAuth = "tollgate-auth";
inline constexpr int64_t kDefaultMaxSkewUs = 300'000'000;  // 5 minutes

namespace errc {
inline constexpr const char* kSignatureExpired = "E_SIGNATURE_EXPIRED";
}  // namespace errc

struct SignedBy {
  // On success: who, as the registry knows it.
  std::string org_id, identity;
  std::vector<std::string> roles;
  std::string key_id;
  // "tollgate-api" when the service key signed on behalf of the agent (the
  // MCP gateway over HTTP); "" when the agent's own key signed.
  std::string via;
  Json claims;  // the verified claims
  // On failure: E_UNAUTHENTICATED or E_SIGNATURE_EXPIRED, the check that
  // failed (header, token, unknown_agent, revoked, unknown_key, signature,
  // value_sha256, claims, iat) and a message. `signature_ok` says whether
  // the signature itself held (only iat failed): the identity is then
  // proven, and org_id/identity are set.
  std::string code, check, message;
  bool signature_ok = false;
  // What the token claimed, verified or not (for the refusal's record).
  std::string claimed_org, claimed_identity, claimed_request_id;
};

// An agent's request: true when `in` carries a valid signature of a
// registered, unrevoked key of the claimed (org, agent) over exactly
// in.value, issued within max_skew_us of now_us. Or of an active service
// key whose claims on_behalf_of / on_behalf_org name that same (org,
// agent): the HTTP API vouching for an agent token it authenticated
// (out->via "tollgate-api").
bool AuthenticateRequest(const Message& in, const CredentialRegistry& registry, int64_t now_us,
                         int64_t max_skew_us, SignedBy* out);

// An approval response: as above for an approver or service key.
bool AuthenticateResponse(const Message& in, const CredentialRegistry& registry, int64_t now_us,
                          int64_t max_skew_us, SignedBy* out);

// The tollgate-auth header value for an agent's request (what `submit`,
// `agents sign`, examples/agent.py and the bench put on a message).
std::string SignRequest(const JwtSigner& signer, const std::string& org_id, const std::string& agent_id,
                        const std::string& request_id, const std::string& value, int64_t iat_s);
// The same signed by the service key on behalf of (org_id, agent_id).
std::string SignRequestOnBehalf(const JwtSigner& service, const std::string& org_id,
                                const std::string& agent_id, const std::string& request_id,
                                const std::string& value, int64_t iat_s);
// The header for an approval response signed by `identity`'s own key, or by
// the service key on behalf of (on_behalf_of, on_behalf_org) when those are
// non-empty.
std::string SignResponse(const JwtSigner& signer, const std::string& identity, const std::string& org_id,
                         const std::string& request_id, const std::string& value, int64_t iat_s,
                         const std::string& on_behalf_of = "", const std::string& on_behalf_org = "");

}  // namespace tollgate
