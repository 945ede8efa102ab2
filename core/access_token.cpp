#include "core/access_token.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace tollgate {
namespace {

using CtxPtr = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)>;
using BldPtr = std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)>;
using ParamPtr = std::unique_ptr<OSSL_PARAM, decltype(&OSSL_PARAM_free)>;
using BnPtr = std::unique_ptr<BIGNUM, decltype(&BN_free)>;
using SigPtr = std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)>;

constexpr size_t kP256CoordBytes = 32;

const unsigned char* Bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

Status Refuse(TokenFault* fault, TokenFault f, const std::string& why) {
  if (fault != nullptr) *fault = f;
  return Status::Error(errc::kUnauthenticated,
                       std::string("access token refused (") + TokenFaultName(f) + "): " + why);
}

// A claim or header value for a message, cut short: it is the sender's text.
std::string Shown(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 80) + "..." : s;
}

// The strict base64url member `name` of a JWK, or "".
std::string Member(const Json& jwk, const char* name) {
  std::string raw;
  auto it = jwk.find(name);
  if (it == jwk.end() || !it->is_string() || !Base64UrlDecode(it->get<std::string>(), &raw)) return "";
  return raw;
}

std::shared_ptr<EVP_PKEY> FromData(const char* type, OSSL_PARAM_BLD* bld) {
  ParamPtr params(OSSL_PARAM_BLD_to_param(bld), OSSL_PARAM_free);
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr), EVP_PKEY_CTX_free);
  EVP_PKEY* key = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    ERR_clear_error();
    return nullptr;
  }
  return std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free);
}

// A P-256 public key from the JWK's x and y; null unless the point is on
// the curve (EVP_PKEY_public_check).
std::shared_ptr<EVP_PKEY> P256Key(const Json& jwk) {
  const std::string x = Member(jwk, "x"), y = Member(jwk, "y");
  if (x.size() != kP256CoordBytes || y.size() != kP256CoordBytes) return nullptr;
  const std::string point = "\x04" + x + y;  // SEC1 uncompressed
  BldPtr bld(OSSL_PARAM_BLD_new(), OSSL_PARAM_BLD_free);
  if (!bld || OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) != 1 ||
      OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()) != 1) {
    return nullptr;
  }
  auto key = FromData("EC", bld.get());
  if (!key) return nullptr;
  PkeyCtxPtr check(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr), EVP_PKEY_CTX_free);
  const bool on_curve = check && EVP_PKEY_public_check(check.get()) == 1;
  ERR_clear_error();
  return on_curve ? key : nullptr;
}

// An RSA public key from n and e; null when under kMinRsaBits (a weak key
// lets anyone forge RS256 tokens).
std::shared_ptr<EVP_PKEY> RsaKey(const Json& jwk, std::string* why) {
  const std::string n = Member(jwk, "n"), e = Member(jwk, "e");
  if (n.empty() || e.empty() || e.size() > 8) return nullptr;
  BnPtr bn_n(BN_bin2bn(Bytes(n), static_cast<int>(n.size()), nullptr), BN_free);
  BnPtr bn_e(BN_bin2bn(Bytes(e), static_cast<int>(e.size()), nullptr), BN_free);
  BldPtr bld(OSSL_PARAM_BLD_new(), OSSL_PARAM_BLD_free);
  if (!bn_n || !bn_e || !bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1) {
    return nullptr;
  }
  auto key = FromData("RSA", bld.get());
  if (key && EVP_PKEY_get_bits(key.get()) < kMinRsaBits) {
    *why = "RSA key of " + std::to_string(EVP_PKEY_get_bits(key.get())) + " bits (at least " +
           std::to_string(kMinRsaBits) + ")";
    return nullptr;
  }
  return key;
}

// One JWK as a key for the alg its kty and crv imply; false with *why.
bool ParseJwk(const Json& jwk, AccessTokenKey* out, std::string* why) {
  if (!jwk.is_object()) return (*why = "not an object", false);
  const std::string kty = jwk.value("kty", ""), crv = jwk.value("crv", "");
  if (jwk.contains("use") && jwk["use"] != "sig") return (*why = "use is not sig", false);
  AccessTokenKey key;
  key.kid = jwk.contains("kid") && jwk["kid"].is_string() ? jwk["kid"].get<std::string>() : "";
  if (kty == "OKP" && crv == "Ed25519") {
    key.alg = "EdDSA";
    auto x = jwk.find("x");
    if (x == jwk.end() || !x->is_string() ||
        !Ed25519Verifier::FromPublic(x->get<std::string>(), &key.ed25519).ok()) {
      return (*why = "bad or small-order Ed25519 x", false);
    }
  } else if (kty == "EC" && crv == "P-256") {
    key.alg = "ES256";
    if (!(key.pkey = P256Key(jwk))) return (*why = "x, y not a point of P-256", false);
  } else if (kty == "RSA") {
    key.alg = "RS256";
    if (!(key.pkey = RsaKey(jwk, why))) return (why->empty() ? (*why = "bad n or e", false) : false);
  } else {
    return (*why = "kty " + Shown(kty) + " crv " + Shown(crv) + " is not used here", false);
  }
  // A JWK naming its alg serves that alg only.
  if (jwk.contains("alg") && jwk["alg"] != key.alg) return (*why = "alg does not fit kty", false);
  *out = std::move(key);
  return true;
}

// JOSE's ES256 signature is r||s, 32 bytes each; OpenSSL verifies DER.
bool EcdsaDer(std::string_view raw, std::string* der) {
  if (raw.size() != 2 * kP256CoordBytes) return false;
  SigPtr sig(ECDSA_SIG_new(), ECDSA_SIG_free);
  BIGNUM* r = BN_bin2bn(Bytes(raw), kP256CoordBytes, nullptr);
  BIGNUM* s = BN_bin2bn(Bytes(raw) + kP256CoordBytes, kP256CoordBytes, nullptr);
  if (!sig || !r || !s || ECDSA_SIG_set0(sig.get(), r, s) != 1) {
    BN_free(r);
    BN_free(s);
    return false;
  }
  unsigned char* out = nullptr;
  const int n = i2d_ECDSA_SIG(sig.get(), &out);
  if (n <= 0) return false;
  der->assign(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  OPENSSL_free(out);
  return true;
}

// SHA-256 with the key's own scheme (ECDSA, or RSA PKCS#1 v1.5, OpenSSL's default).
bool EvpVerify(EVP_PKEY* key, std::string_view message, std::string_view signature) {
  CtxPtr ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  const bool ok =
      ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) == 1 &&
      EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(), Bytes(message), message.size()) == 1;
  ERR_clear_error();
  return ok;
}

bool SignatureHolds(const AccessTokenKey& key, const AccessTokenParts& parts) {
  if (key.alg == "EdDSA") return key.ed25519.Verify(parts.signing_input, parts.signature);
  if (key.alg == "ES256") {
    std::string der;
    return EcdsaDer(parts.signature, &der) && EvpVerify(key.pkey.get(), parts.signing_input, der);
  }
  // RS256: the signature is exactly the modulus' length (RFC 8017 8.2.2).
  return key.alg == "RS256" &&
         parts.signature.size() == static_cast<size_t>(EVP_PKEY_get_size(key.pkey.get())) &&
         EvpVerify(key.pkey.get(), parts.signing_input, parts.signature);
}

Status DecodeObject(std::string_view part, const char* name, Json* out, TokenFault* fault) {
  std::string bytes;
  if (!Base64UrlDecode(part, &bytes))
    return Refuse(fault, TokenFault::kMalformed, std::string(name) + " is not base64url");
  if (!ParseInputJson(bytes, out).ok() || !out->is_object())
    return Refuse(fault, TokenFault::kMalformed, std::string(name) + " is not a JSON object");
  return Status::Ok();
}

// typ is a media type: case-insensitive, "application/" optional (RFC 7515 4.1.9).
bool TypeAccepted(const Json& header) {
  auto typ = header.find("typ");
  if (typ == header.end()) return true;
  if (!typ->is_string()) return false;
  std::string t = typ->get<std::string>();
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t == "at+jwt" || t == "application/at+jwt" || t == "jwt";
}

// A NumericDate claim (RFC 7519 2): absent is fine, another type is not.
bool NumericDate(const Json& claims, const char* name, bool* present, int64_t* at) {
  auto it = claims.find(name);
  *present = it != claims.end();
  if (!*present) return true;
  if (!it->is_number() || !std::isfinite(it->get<double>())) return false;
  *at = static_cast<int64_t>(std::floor(it->get<double>()));
  return true;
}

Status CheckTimes(const Json& claims, const AccessTokenRules& rules, TokenFault* fault) {
  bool has = false;
  int64_t at = 0;
  if (!NumericDate(claims, "exp", &has, &at))
    return Refuse(fault, TokenFault::kClaims, "exp is not a number");
  if (!has) return Refuse(fault, TokenFault::kMissingExp, "no exp: a token must expire");
  if (rules.now >= at + rules.leeway)
    return Refuse(fault, TokenFault::kExpired, "expired at " + std::to_string(at));
  if (!NumericDate(claims, "nbf", &has, &at))
    return Refuse(fault, TokenFault::kClaims, "nbf is not a number");
  if (has && at > rules.now + rules.leeway)
    return Refuse(fault, TokenFault::kNotYetValid, "not valid before " + std::to_string(at));
  if (!NumericDate(claims, "iat", &has, &at))
    return Refuse(fault, TokenFault::kClaims, "iat is not a number");
  if (has && at > rules.now + rules.leeway)
    return Refuse(fault, TokenFault::kNotYetValid, "issued in the future, at " + std::to_string(at));
  return Status::Ok();
}

bool AudienceHas(const Json& aud, const std::string& resource) {
  // One trailing '/' is tolerated: the same resource (RFC 8707 2, the SDK's sameResource).
  auto same = [&](const Json& a) { return a.is_string() && (a == resource || a == resource + "/"); };
  if (aud.is_string()) return same(aud);
  if (!aud.is_array()) return false;
  return std::any_of(aud.begin(), aud.end(), same);
}

Status CheckClaims(const Json& claims, const AccessTokenRules& rules, TokenFault* fault) {
  auto iss = claims.find("iss");
  if (iss == claims.end() || !iss->is_string() || *iss != rules.issuer)
    return Refuse(fault, TokenFault::kIssuer,
                  "iss " + (iss == claims.end() ? "missing" : Shown(*iss)) + " is not " + rules.issuer);
  auto aud = claims.find("aud");
  if (aud == claims.end() || !AudienceHas(*aud, rules.audience))
    return Refuse(fault, TokenFault::kAudience, "aud does not name " + rules.audience);
  for (const char* name : {"sub", "jti", "scope", "client_id"}) {
    if (claims.contains(name) && !claims[name].is_string())
      return Refuse(fault, TokenFault::kClaims, std::string(name) + " is not a string");
  }
  return CheckTimes(claims, rules, fault);
}

}  // namespace

const char* TokenFaultName(TokenFault f) {
  switch (f) {
    case TokenFault::kNone:
      return "none";
    case TokenFault::kMalformed:
      return "malformed";
    case TokenFault::kAlgorithm:
      return "algorithm";
    case TokenFault::kType:
      return "type";
    case TokenFault::kUnknownKey:
      return "unknown_key";
    case TokenFault::kSignature:
      return "signature";
    case TokenFault::kIssuer:
      return "issuer";
    case TokenFault::kAudience:
      return "audience";
    case TokenFault::kExpired:
      return "expired";
    case TokenFault::kNotYetValid:
      return "not_yet_valid";
    case TokenFault::kMissingExp:
      return "missing_exp";
    case TokenFault::kClaims:
      return "claims";
  }
  return "unknown";
}

Status JwkSet::Parse(const Json& jwks, JwkSet* out, std::vector<std::string>* skipped) {
  if (!jwks.is_object() || !jwks.contains("keys") || !jwks["keys"].is_array())
    return Status::Error(errc::kSchemaViolation, "a JWK set is {\"keys\": [...]}");
  JwkSet set;
  for (const Json& jwk : jwks["keys"]) {
    AccessTokenKey key;
    std::string why;
    if (ParseJwk(jwk, &key, &why)) {
      set.keys_.push_back(std::move(key));
    } else if (skipped != nullptr) {
      skipped->push_back("kid " + Shown(jwk.is_object() ? jwk.value("kid", Json()) : Json()) + ": " + why);
    }
  }
  *out = std::move(set);
  return Status::Ok();
}

const AccessTokenKey* JwkSet::Find(const std::string& kid, const std::string& alg) const {
  const AccessTokenKey* only = nullptr;
  int fitting = 0;
  for (const AccessTokenKey& k : keys_) {
    if (k.alg != alg) continue;
    if (!kid.empty() && k.kid == kid) return &k;
    ++fitting;
    only = &k;
  }
  // Without a kid the choice must be unambiguous.
  return kid.empty() && fitting == 1 ? only : nullptr;
}

Status ParseAccessToken(std::string_view token, const std::vector<std::string>& algorithms,
                        AccessTokenParts* out, TokenFault* fault) {
  if (token.size() > kMaxAccessTokenBytes)
    return Refuse(fault, TokenFault::kMalformed, "over " + std::to_string(kMaxAccessTokenBytes) + " bytes");
  const size_t dot1 = token.find('.');
  const size_t dot2 = dot1 == token.npos ? token.npos : token.find('.', dot1 + 1);
  if (dot2 == token.npos || token.find('.', dot2 + 1) != token.npos)
    return Refuse(fault, TokenFault::kMalformed, "not a compact JWS of three parts");
  AccessTokenParts parts;
  if (Status s = DecodeObject(token.substr(0, dot1), "header", &parts.header, fault); !s.ok()) return s;
  const Json alg = parts.header.value("alg", Json());
  const bool allowed =
      alg.is_string() && std::find(algorithms.begin(), algorithms.end(), alg) != algorithms.end();
  if (!allowed) return Refuse(fault, TokenFault::kAlgorithm, "alg " + Shown(alg) + " is not accepted");
  parts.alg = alg.get<std::string>();
  if (parts.header.contains("crit"))
    return Refuse(fault, TokenFault::kMalformed, "crit: no extension is understood");
  if (!TypeAccepted(parts.header))
    return Refuse(fault, TokenFault::kType, "typ " + Shown(parts.header["typ"]));
  const Json kid = parts.header.value("kid", Json(""));
  if (!kid.is_string()) return Refuse(fault, TokenFault::kMalformed, "kid is not a string");
  parts.kid = kid.get<std::string>();
  Status s = DecodeObject(token.substr(dot1 + 1, dot2 - dot1 - 1), "payload", &parts.claims, fault);
  if (!s.ok()) return s;
  if (!Base64UrlDecode(token.substr(dot2 + 1), &parts.signature) || parts.signature.empty())
    return Refuse(fault, TokenFault::kMalformed, "the signature is not base64url");
  parts.signing_input = std::string(token.substr(0, dot2));
  *out = std::move(parts);
  if (fault != nullptr) *fault = TokenFault::kNone;
  return Status::Ok();
}

Status VerifyAccessToken(const AccessTokenParts& parts, const JwkSet& keys, const AccessTokenRules& rules,
                         TokenFault* fault) {
  const AccessTokenKey* key = keys.Find(parts.kid, parts.alg);
  if (key == nullptr)
    return Refuse(fault, TokenFault::kUnknownKey, "no " + parts.alg + " key with kid " + Shown(parts.kid));
  if (!SignatureHolds(*key, parts))
    return Refuse(fault, TokenFault::kSignature, "the signature does not verify");
  if (Status s = CheckClaims(parts.claims, rules, fault); !s.ok()) return s;
  if (fault != nullptr) *fault = TokenFault::kNone;
  return Status::Ok();
}

std::vector<std::string> TokenScopes(const Json& claims) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& s) {
    if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  if (auto scope = claims.find("scope"); scope != claims.end() && scope->is_string()) {
    const std::string text = scope->get<std::string>();
    size_t at = 0;
    while (at <= text.size()) {
      const size_t sp = std::min(text.find(' ', at), text.size());
      add(text.substr(at, sp - at));
      at = sp + 1;
    }
  } else if (auto scp = claims.find("scp"); scp != claims.end() && scp->is_array()) {
    for (const Json& s : *scp) {
      if (s.is_string()) add(s.get<std::string>());
    }
  }
  return out;
}

}  // namespace tollgate
