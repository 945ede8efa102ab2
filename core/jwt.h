// Ed25519 keys and EdDSA-signed JWTs (RFC 7519, RFC 8037), the agents'
// request signatures (docs/architecture.md, "Trust boundary").
//
// Only EdDSA over Ed25519 exists here: a token naming any other algorithm is
// refused before any key is looked at, so there is no algorithm confusion.
// Public keys travel as RFC 8037's "x": the raw 32 bytes, base64url without
// padding. Signing uses OpenSSL; verification, which ingest does once per
// request, uses libsodium (2.4x faster here; docs/trust.md). Private keys
// are PKCS#8 PEM, kept in files only their owner can
// read (WritePrivateKeyFile). Signers and verifiers are immutable once made,
// cheap to copy and safe to use from several threads at once.
#pragma once

#include <openssl/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "core/canonical_json.h"
#include "core/status.h"

namespace tollgate {

namespace errc {
inline constexpr const char* kUnauthenticated = "E_UNAUTHENTICATED";
inline constexpr const char* kInvalidKey = "E_INVALID_KEY";
// A key file cannot be read or written, or already exists.
inline constexpr const char* kKeyFile = "E_KEY_FILE";
}  // namespace errc

// RFC 4648 section 5 without padding.
std::string Base64UrlEncode(std::string_view bytes);
// Strict inverse of Base64UrlEncode: false on '=', '+', '/', whitespace, a
// length of 4n+1, or non-zero unused bits in the last character, so that
// each byte string has exactly one accepted spelling. *out is untouched on
// failure.
bool Base64UrlDecode(std::string_view text, std::string* out);

// A fresh Ed25519 key pair: the private key as PKCS#8 PEM, the public key as
// the raw 32 bytes in base64url.
Status GenerateEd25519(std::string* private_pem, std::string* public_b64url);

// The Ed25519 key pair whose private key is the 32-byte `seed` (RFC 8032),
// as GenerateEd25519 gives them: for a key derived from a deployment secret
// (the gate's result key, runtime/result_publisher.h).
Status Ed25519FromSeed(std::string_view seed, std::string* private_pem, std::string* public_b64url);

// Writes `pem` to `path` readable by its owner alone (mode 0600, whatever
// the umask), creating missing parent directories with mode 0700. The bytes
// go to a new temporary file in the same directory first, so the key is never
// readable by others nor half-written at `path`. E_KEY_FILE when `path`
// exists (unless `overwrite`) or on any I/O error.
Status WritePrivateKeyFile(const std::string& path, const std::string& pem, bool overwrite = false);
// E_KEY_FILE when `path` cannot be read or is larger than 64 KiB.
Status ReadPrivateKeyFile(const std::string& path, std::string* pem);

// The public key of an Ed25519 private key. E_INVALID_KEY when `private_pem`
// is not one (another key type, a public key, an encrypted key: no
// passphrase is ever asked for).
Status PublicKeyOf(const std::string& private_pem, std::string* public_b64url);

// Signs claims as a compact JWT with header {"alg":"EdDSA","kid":...,"typ":"JWT"}
// ("kid" only when non-empty). The header and claims are canonical JSON.
class JwtSigner {
 public:
  JwtSigner() = default;  // empty, until FromPem assigns to it
  // E_INVALID_KEY as PublicKeyOf; E_INVALID_UTF8 when `kid` is not UTF-8.
  static Status FromPem(const std::string& private_pem, JwtSigner* out, const std::string& kid = "");

  // Throws std::invalid_argument unless `claims` is an object that
  // CanonicalBytes accepts, std::runtime_error on an empty signer.
  std::string Sign(const Json& claims) const;
  const std::string& public_b64url() const { return public_b64url_; }

 private:
  std::shared_ptr<EVP_PKEY> key_;
  std::string header_b64_;  // with the trailing '.'
  std::string public_b64url_;
};

inline constexpr size_t kMaxJwtBytes = 8 * 1024;

// A parsed, not yet verified, compact JWT.
struct JwtParts {
  Json header;                // object
  Json claims;                // object
  std::string signing_input;  // "b64(header).b64(payload)", what the signature covers
  std::string signature;      // raw bytes (64 for Ed25519)
};

// Splits and decodes `token`; checks the shape only, the signature is for
// Ed25519Verifier. E_UNAUTHENTICATED, the message naming the fault, when the
// token is over kMaxJwtBytes, is not three strict base64url parts, its header
// or payload is not a JSON object, its header's alg is not "EdDSA", it has a
// "crit" header (no extension is understood) or its signature is not 64
// bytes.
Status ParseJwt(std::string_view token, JwtParts* out);

// An Ed25519 public key, parsed once.
class Ed25519Verifier {
 public:
  Ed25519Verifier() = default;  // empty: verifies nothing
  // E_INVALID_KEY unless `public_b64url` is strict base64url of 32 bytes and
  // not a small-order point: OpenSSL accepts, for any message, signatures
  // anyone can make under such a key.
  static Status FromPublic(std::string_view public_b64url, Ed25519Verifier* out);

  // True when `signature` is a valid Ed25519 signature of `message`.
  bool Verify(std::string_view message, std::string_view signature) const;
  const std::string& public_b64url() const { return public_b64url_; }

 private:
  std::string raw_;  // the 32 key bytes (verified with libsodium)
  std::string public_b64url_;
};

}  // namespace tollgate
