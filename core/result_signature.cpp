#include "core/result_signature.h"

#include "core/sha256.h"

namespace tollgate {

namespace {

const char* kIdFields[] = {"org_id", "agent_id", "request_id", "status"};

Status Unsigned(const std::string& why) { return Status::Error(errc::kResultUnsigned, why); }

}  // namespace

bool SignResult(const JwtSigner& gate, Message* m, const Json* parsed) {
  Json own;
  if (parsed == nullptr) {
    if (!ParseJson(m->value, &own).ok()) return false;
    parsed = &own;
  }
  const Json& v = *parsed;
  if (!v.is_object()) return false;
  Json claims{{"typ", kResultSigType}, {"value_sha256", Sha256Hex(m->value)}};
  for (const char* k : kIdFields) {
    auto it = v.find(k);
    if (it == v.end() || !it->is_string()) return false;
    claims[k] = *it;
  }
  m->headers[kHeaderResultSig] = gate.Sign(claims);
  return true;
}

Status VerifyResult(const Message& m, const std::vector<Ed25519Verifier>& gate_keys, const ResultFor& want,
                    Json* result) {
  auto h = m.headers.find(kHeaderResultSig);
  if (h == m.headers.end()) return Unsigned("no " + std::string(kHeaderResultSig) + " header");
  JwtParts jwt;
  Status s = ParseJwt(h->second, &jwt);
  if (!s.ok()) return Unsigned(s.message());
  bool verified = false;
  for (const Ed25519Verifier& k : gate_keys) {
    if (k.Verify(jwt.signing_input, jwt.signature)) {
      verified = true;
      break;
    }
  }
  if (!verified) return Unsigned("the signature is not the gate's");
  const Json& c = jwt.claims;
  if (c.value("typ", "") != kResultSigType) return Unsigned("the signed claims are not a result's");
  if (c.value("value_sha256", "") != Sha256Hex(m.value)) return Unsigned("the value is not the one signed");
  Json v;
  if (!ParseJson(m.value, &v, {kMaxJsonDepth, kMaxMessageBytes}).ok() || !v.is_object()) {
    return Unsigned("the value is not a JSON object");
  }
  for (const char* k : kIdFields) {
    auto it = v.find(k);
    if (it == v.end() || !it->is_string() || !c.contains(k) || c[k] != *it) {
      return Unsigned(std::string("the value's ") + k + " is not the signed one");
    }
  }
  if (v["org_id"] != want.org_id || v["request_id"] != want.request_id ||
      (!want.agent_id.empty() && v["agent_id"] != want.agent_id)) {
    return Unsigned("a result of another request");
  }
  *result = std::move(v);
  return Status::Ok();
}

}  // namespace tollgate
