#include "core/auth.h"

#include "core/sha256.h"

namespace tollgate {
namespace {

bool Fail(SignedBy* out, const char* check, std::string message, const char* code = errc::kUnauthenticated) {
  out->code = code;
  out->check = check;
  out->message = std::move(message);
  return false;
}

std::string Str(const Json& j, const char* k) {
  auto it = j.find(k);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// The shared steps: the header parses, the claims bind the exact bytes and
// were issued within the skew. `verify` checks the signature with the key
// the caller picks from the claims and header.
template <typename PickKey>
bool Check(const Message& in, int64_t now_us, int64_t max_skew_us, SignedBy* out, PickKey pick_key) {
  auto h = in.headers.find(kHeaderAuth);
  if (h == in.headers.end() || h->second.empty()) {
    return Fail(out, "header", std::string("no ") + kHeaderAuth + " header: every message must be signed");
  }
  JwtParts jwt;
  Status s = ParseJwt(h->second, &jwt);
  if (!s.ok()) return Fail(out, "token", s.message());
  out->claimed_org = Str(jwt.claims, "org_id");
  out->claimed_request_id = Str(jwt.claims, "request_id");
  Ed25519Verifier key;
  if (!pick_key(jwt, &key)) return false;
  if (!key.Verify(jwt.signing_input, jwt.signature)) {
    return Fail(out, "signature", "the signature does not verify with the registered key");
  }
  // Signed by the registered key from here on; now the claims.
  if (Str(jwt.claims, "value_sha256") != Sha256Hex(in.value)) {
    return Fail(out, "value_sha256", "value_sha256 does not match the message bytes");
  }
  auto iat = jwt.claims.find("iat");
  if (iat == jwt.claims.end() || !iat->is_number_integer())
    return Fail(out, "claims", "iat (integer seconds) is required");
  out->signature_ok = true;
  out->claims = jwt.claims;
  const int64_t iat_us = iat->get<int64_t>() * 1'000'000;
  if (iat_us < now_us - max_skew_us) {
    return Fail(out, "iat",
                "signed at " + FormatTime(iat_us) + ", older than the allowed skew of " +
                    std::to_string(max_skew_us / 1'000'000) + " s",
                errc::kSignatureExpired);
  }
  if (iat_us > now_us + max_skew_us) {
    return Fail(out, "iat", "signed at " + FormatTime(iat_us) + ", in the future beyond the allowed skew");
  }
  return true;
}

}  // namespace

bool AuthenticateRequest(const Message& in, const CredentialRegistry& registry, int64_t now_us,
                         int64_t max_skew_us, SignedBy* out) {
  *out = SignedBy();
  return Check(in, now_us, max_skew_us, out, [&](const JwtParts& jwt, Ed25519Verifier* key) {
    const std::string org = Str(jwt.claims, "org_id"), agent = Str(jwt.claims, "agent_id");
    out->claimed_identity = agent;
    if (org.empty() || agent.empty()) return Fail(out, "claims", "org_id and agent_id claims are required");
    if (jwt.claims.contains("on_behalf_of") || jwt.claims.contains("on_behalf_org")) {
      // The HTTP API (its service key) vouches for an agent whose token it
      // authenticated (the MCP gateway). Only a service key may; the claims
      // must name the same agent twice over.
      Credential who;
      const std::string kid = Str(jwt.header, "kid");
      if (kid.empty() || !registry.SigningKey(kid, &who, key) || who.kind != "service_key") {
        return Fail(out, "unknown_key",
                    "a request on behalf of an agent must be signed by an active service key");
      }
      if (Str(jwt.claims, "on_behalf_of") != agent || Str(jwt.claims, "on_behalf_org") != org) {
        return Fail(out, "claims", "on_behalf_of and on_behalf_org must be the agent_id and org_id claimed");
      }
      out->org_id = org;
      out->identity = agent;
      out->roles = {"agent"};
      out->key_id = who.key_id;
      out->via = "tollgate-api";
      return true;
    }
    if (Credential who; registry.SigningKey(Str(jwt.header, "kid"), &who, key) && who.kind == "service_key") {
      return Fail(out, "claims", "a service signature must name on_behalf_of and on_behalf_org");
    }
    if (!registry.AgentKey(org, agent, Str(jwt.header, "kid"), key)) {
      if (registry.AgentKnown(org, agent)) {
        return Fail(
            out, "revoked",
            "no active key of agent '" + agent + "' of org '" + org + "' matches (revoked, or another kid)");
      }
      return Fail(out, "unknown_agent", "agent '" + agent + "' of org '" + org + "' has no registered key");
    }
    out->org_id = org;
    out->identity = agent;
    out->roles = {"agent"};
    out->key_id = KeyIdOfPublicKey(key->public_b64url());
    return true;
  });
}

bool AuthenticateResponse(const Message& in, const CredentialRegistry& registry, int64_t now_us,
                          int64_t max_skew_us, SignedBy* out) {
  *out = SignedBy();
  Credential who;
  bool ok = Check(in, now_us, max_skew_us, out, [&](const JwtParts& jwt, Ed25519Verifier* key) {
    out->claimed_identity = Str(jwt.claims, "sub");
    const std::string kid = Str(jwt.header, "kid");
    if (kid.empty() || !registry.SigningKey(kid, &who, key)) {
      return Fail(out, "unknown_key", "kid '" + kid.substr(0, 32) + "' is no active approver or service key");
    }
    return true;
  });
  if (!ok) return false;
  if (who.kind == "service_key") {
    // The service (the HTTP API) authenticated a token and says whose.
    out->identity = Str(out->claims, "on_behalf_of");
    out->org_id = Str(out->claims, "on_behalf_org");
    if (out->identity.empty() || out->org_id.empty()) {
      return Fail(out, "claims", "a service signature must name on_behalf_of and on_behalf_org");
    }
    out->roles = {"approver"};
  } else {
    if (Str(out->claims, "sub") != who.identity) {
      return Fail(out, "claims",
                  "sub '" + Str(out->claims, "sub") + "' is not the key's identity '" + who.identity + "'");
    }
    if (!who.Has("approver") && !who.Has("admin")) {
      return Fail(out, "roles", "'" + who.identity + "' is neither an approver nor an admin");
    }
    out->identity = who.identity;
    out->org_id = who.org_id;
    out->roles = who.roles;
  }
  out->key_id = who.key_id;
  return true;
}

std::string SignRequest(const JwtSigner& signer, const std::string& org_id, const std::string& agent_id,
                        const std::string& request_id, const std::string& value, int64_t iat_s) {
  return signer.Sign({{"org_id", org_id},
                      {"agent_id", agent_id},
                      {"request_id", request_id},
                      {"value_sha256", Sha256Hex(value)},
                      {"iat", iat_s}});
}

std::string SignRequestOnBehalf(const JwtSigner& service, const std::string& org_id,
                                const std::string& agent_id, const std::string& request_id,
                                const std::string& value, int64_t iat_s) {
  return service.Sign({{"sub", "tollgate-api"},
                       {"org_id", org_id},
                       {"agent_id", agent_id},
                       {"on_behalf_of", agent_id},
                       {"on_behalf_org", org_id},
                       {"request_id", request_id},
                       {"value_sha256", Sha256Hex(value)},
                       {"iat", iat_s}});
}

std::string SignResponse(const JwtSigner& signer, const std::string& identity, const std::string& org_id,
                         const std::string& request_id, const std::string& value, int64_t iat_s,
                         const std::string& on_behalf_of, const std::string& on_behalf_org) {
  Json claims{{"sub", identity},
              {"org_id", org_id},
              {"request_id", request_id},
              {"value_sha256", Sha256Hex(value)},
              {"iat", iat_s}};
  if (!on_behalf_of.empty()) {
    claims["on_behalf_of"] = on_behalf_of;
    claims["on_behalf_org"] = on_behalf_org;
  }
  return signer.Sign(claims);
}

}  // namespace tollgate
