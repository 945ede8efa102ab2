// OAuth 2.1 access tokens as JWTs (RFC 9068, RFC 7519, RFC 7515), checked
// by a resource server against its authorization server's JWK set
// (RFC 7517): the pure part of api/oauth.h, no network, no clock of its
// own (the caller passes `now`).
//
// Only compact JWS, and only EdDSA (Ed25519), ES256 (P-256, signature raw
// r||s) and RS256 (RSA of at least 2048 bits), further narrowed by the
// caller's allow-list: "none", HS* and anything else are refused before a
// key is looked at, so a public key can never be used as an HMAC secret.
// The key is the JWK named by the header's kid whose kty (and crv, and alg
// when the JWK names one) fits the token's alg; a token without kid is
// accepted only when exactly one key of the set fits its alg. Immutable
// once parsed; safe to share between threads.
#pragma once

#include <openssl/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/canonical_json.h"
#include "core/jwt.h"
#include "core/status.h"

namespace tollgate {

// Why a token was refused; each one a test can name.
enum class TokenFault {
  kNone,
  kMalformed,    // not three strict base64url parts of JSON objects, over the size limit, crit
  kAlgorithm,    // alg not in the allow-list (none, HS256, ...)
  kType,         // typ neither at+jwt, application/at+jwt nor JWT
  kUnknownKey,   // no key of the set fits kid and alg (maybe rotated: refetch)
  kSignature,    // the signature does not verify
  kIssuer,       // iss is not the issuer expected
  kAudience,     // aud does not contain the resource
  kExpired,      // exp in the past (beyond the leeway)
  kNotYetValid,  // nbf or iat in the future (beyond the leeway)
  kMissingExp,   // no numeric exp
  kClaims,       // a claim of the wrong type
};
const char* TokenFaultName(TokenFault f);

// The algorithms understood at all; an issuer's allow-list is a subset.
inline constexpr const char* kAccessTokenAlgorithms[] = {"EdDSA", "ES256", "RS256"};
inline constexpr size_t kMaxAccessTokenBytes = 8 * 1024;
inline constexpr int kMinRsaBits = 2048;

// One public key of a JWK set, parsed once.
struct AccessTokenKey {
  std::string kid;
  std::string alg;                 // the JWS alg this key verifies: "EdDSA", "ES256" or "RS256"
  Ed25519Verifier ed25519;         // EdDSA (libsodium, small-order keys refused)
  std::shared_ptr<EVP_PKEY> pkey;  // ES256, RS256 (OpenSSL EVP)
};

class JwkSet {
 public:
  // {"keys": [...]}. Keys that cannot serve here are skipped, not fatal
  // (an AS publishes encryption keys, other curves, small RSA keys too);
  // *skipped (when given) gets one line per skipped key. E_SCHEMA_VIOLATION
  // when `jwks` has no "keys" array.
  static Status Parse(const Json& jwks, JwkSet* out, std::vector<std::string>* skipped = nullptr);
  // The key for a token's kid ("" = none given) and alg, or null.
  const AccessTokenKey* Find(const std::string& kid, const std::string& alg) const;
  size_t size() const { return keys_.size(); }

 private:
  std::vector<AccessTokenKey> keys_;
};

// A compact JWS split and decoded, not yet verified.
struct AccessTokenParts {
  Json header;                // object
  Json claims;                // object
  std::string signing_input;  // "b64(header).b64(payload)"
  std::string signature;      // raw bytes
  std::string alg, kid;
};

// Shape, size, alg (against `algorithms`) and typ. kMalformed, kAlgorithm
// or kType in *fault, and E_UNAUTHENTICATED naming it.
Status ParseAccessToken(std::string_view token, const std::vector<std::string>& algorithms,
                        AccessTokenParts* out, TokenFault* fault);

// What the claims must say.
struct AccessTokenRules {
  std::string issuer;    // iss exactly
  std::string audience;  // aud (a string or an array) contains it
  int64_t now = 0;       // seconds since the epoch
  int64_t leeway = 60;   // clock skew allowed on exp, nbf and iat
};

// The signature under the key `keys` holds for (kid, alg), then the claims
// under `rules`. Ok, or E_UNAUTHENTICATED with the fault in *fault.
Status VerifyAccessToken(const AccessTokenParts& parts, const JwkSet& keys, const AccessTokenRules& rules,
                         TokenFault* fault);

// The scopes a token grants: its space-delimited "scope" string (RFC 9068),
// else a "scp" array of strings (as some servers send); de-duplicated, in
// order.
std::vector<std::string> TokenScopes(const Json& claims);

}  // namespace tollgate
