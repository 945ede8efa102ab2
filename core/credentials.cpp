#include "core/credentials.h"

#include <algorithm>
#include <mutex>

#include "core/schema.h"
#include "core/sha256.h"

namespace tollgate {

bool Credential::Has(const std::string& role) const {
  return std::find(roles.begin(), roles.end(), role) != roles.end();
}

Json Credential::ToJson() const {
  Json j{{"kind", kind},
         {"identity", identity},
         {"org_id", org_id},
         {"key_id", key_id},
         {"roles", roles},
         {"added_by", added_by},
         {"added_at", FormatTime(added_us)},
         {"revoked", revoked}};
  if (!public_key.empty()) j["public_key"] = public_key;
  if (revoked) {
    j["revoked_by"] = revoked_by;
    j["revoked_at"] = FormatTime(revoked_us);
  }
  return j;
}

std::string KeyIdOfPublicKey(const std::string& public_b64url) {
  std::string raw;
  if (!Base64UrlDecode(public_b64url, &raw)) raw = public_b64url;
  return Sha256Hex(raw).substr(0, 16);
}

std::string KeyIdOfToken(const std::string& token_sha256) { return Sha256Hex(token_sha256).substr(0, 16); }

namespace {

Event CredentialEvent(const Credential& c, const std::string& type, int64_t time_us, Json data) {
  Event e;
  e.type = type;
  e.org_id = c.org_id;
  e.agent_id = c.identity;
  e.session_id = kCredentialsSession;
  e.request_id = "cred:" + c.key_id;
  e.id = MakeRequestEventId(e.org_id, e.type, e.request_id);
  e.time_us = time_us;
  e.data = std::move(data);
  return e;
}

}  // namespace

Status SignerForKey(const std::string& private_pem, JwtSigner* out) {
  std::string pub;
  Status s = PublicKeyOf(private_pem, &pub);
  if (s.ok()) s = JwtSigner::FromPem(private_pem, out, KeyIdOfPublicKey(pub));
  return s;
}

Status NewSigningKey(const std::string& kind, const std::string& org, const std::string& identity,
                     std::vector<std::string> roles, const std::string& by, Credential* c, JwtSigner* signer,
                     std::string* private_pem) {
  std::string pem, pub;
  Status s = GenerateEd25519(&pem, &pub);
  if (s.ok()) s = JwtSigner::FromPem(pem, signer, KeyIdOfPublicKey(pub));
  if (!s.ok()) return s;
  *c = Credential();
  c->kind = kind;
  c->org_id = org;
  c->identity = identity;
  c->roles = std::move(roles);
  c->public_key = pub;
  c->key_id = KeyIdOfPublicKey(pub);
  c->added_by = by;
  if (private_pem != nullptr) *private_pem = std::move(pem);
  return Status::Ok();
}

Status NewCredential(const Json& request, const std::string& by, const std::string& token,
                     const CredentialRegistry& registry, Credential* out) {
  if (!request.is_object())
    return Status::Error(errc::kInvalidQuery, "a credential request is a JSON object");
  for (const char* k : {"kind", "identity", "org_id", "public_key"}) {
    if (request.contains(k) && !request[k].is_string()) {
      return Status::Error(errc::kSchemaViolation, std::string(k) + " must be a string");
    }
  }
  Credential c;
  c.kind = request.value("kind", "");
  c.identity = request.value("identity", "");
  c.org_id = request.value("org_id", "");
  c.added_by = by;
  if (c.org_id == kUnprovenOrg) {
    return Status::Error(errc::kInvalidQuery, "org 'unknown' is reserved for refusals of unproven messages");
  }
  if (c.kind == "agent_key" && c.org_id == "*")
    return Status::Error(errc::kInvalidQuery, "an agent belongs to one org");
  for (const auto& r : request.value("roles", Json::array())) {
    if (r.is_string()) c.roles.push_back(r.get<std::string>());
  }
  if (c.kind == "token") {
    c.token_sha256 = Sha256Hex(token);
    c.key_id = KeyIdOfToken(c.token_sha256);
  } else if (c.kind == "agent_key" || c.kind == "approver_key") {
    c.public_key = request.value("public_key", "");
    Ed25519Verifier v;
    Status s = Ed25519Verifier::FromPublic(c.public_key, &v);
    if (!s.ok()) return Status::Error(s.code(), "public_key: " + s.message());
    c.key_id = KeyIdOfPublicKey(c.public_key);
    if (c.kind == "agent_key") c.roles = {"agent"};
    if (c.kind == "approver_key" && c.roles.empty()) c.roles = {"approver"};
  } else {
    return Status::Error(errc::kInvalidQuery, "kind must be agent_key, approver_key or token");
  }
  Credential existing;
  if (registry.Find(c.key_id, &existing)) {
    return Status::Error(errc::kConflict, "that key is registered already (key_id " + c.key_id + ")");
  }
  // Names are per org; only the deployment-wide line is guarded, so the
  // message names no other tenant.
  std::string other;
  if (c.kind != "agent_key" && registry.IdentityClash(c.org_id, c.identity, &other)) {
    return Status::Error(errc::kConflict, c.org_id == "*"
                                              ? "identity '" + c.identity + "' is org '" + other +
                                                    "''s; a deployment-wide identity needs a name no org uses"
                                              : "identity '" + c.identity +
                                                    "' is a deployment-wide identity's name; choose another");
  }
  c.added_us = NowMicros();
  const Event e = CredentialAddedEvent(c, c.added_us);
  Status s = SchemaRegistry::Builtin().Validate("event_data.credential.added", e.data);
  if (s.ok()) s = ValidateEnvelope(e);
  if (!s.ok()) return s;
  *out = std::move(c);
  return Status::Ok();
}

Event CredentialAddedEvent(const Credential& c, int64_t time_us) {
  Json data{{"kind", c.kind},     {"identity", c.identity}, {"org_id", c.org_id},
            {"key_id", c.key_id}, {"roles", c.roles},       {"added_by", c.added_by}};
  if (!c.public_key.empty()) data["public_key"] = c.public_key;
  if (!c.token_sha256.empty()) data["token_sha256"] = c.token_sha256;
  return CredentialEvent(c, ev::kCredentialAdded, time_us, std::move(data));
}

Event CredentialRevokedEvent(const Credential& c, const std::string& by, const std::string& reason,
                             int64_t time_us) {
  Json data{{"kind", c.kind},
            {"identity", c.identity},
            {"org_id", c.org_id},
            {"key_id", c.key_id},
            {"revoked_by", by}};
  if (!reason.empty()) data["reason"] = reason;
  return CredentialEvent(c, ev::kCredentialRevoked, time_us, std::move(data));
}

void CredentialRegistry::Apply(const Event& e) {
  if (e.type != ev::kCredentialAdded && e.type != ev::kCredentialRevoked) return;
  const Json& d = e.data;
  const std::string key_id = d.value("key_id", "");
  if (key_id.empty()) return;
  std::unique_lock lock(mu_);
  if (e.type == ev::kCredentialRevoked) {
    auto it = by_key_id_.find(key_id);
    if (it == by_key_id_.end() || it->second.c.revoked) return;
    it->second.c.revoked = true;
    it->second.c.revoked_by = d.value("revoked_by", "");
    it->second.c.revoked_us = e.time_us;
    return;
  }
  if (by_key_id_.count(key_id)) return;
  // "unknown" files what no signature proves: nobody may act in it.
  if (d.value("org_id", "") == kUnprovenOrg) return;
  Entry entry;
  Credential& c = entry.c;
  c.kind = d.value("kind", "");
  c.identity = d.value("identity", "");
  c.org_id = d.value("org_id", "");
  c.key_id = key_id;
  for (const auto& r : d.value("roles", Json::array())) {
    if (r.is_string()) c.roles.push_back(r.get<std::string>());
  }
  c.public_key = d.value("public_key", "");
  c.token_sha256 = d.value("token_sha256", "");
  c.added_by = d.value("added_by", "");
  c.added_us = e.time_us;
  if (!c.public_key.empty()) {
    auto v = std::make_shared<Ed25519Verifier>();
    // A key that does not parse verifies nothing (the entry stays listed).
    if (Ed25519Verifier::FromPublic(c.public_key, v.get()).ok()) entry.verifier = std::move(v);
  }
  if (c.kind == "agent_key") {
    agents_.insert(c.org_id + '\0' + c.identity);
  } else {
    // NewCredential refuses a name across the deployment-wide line; one in
    // the log anyway (a hand-made tokens file) grants nothing.
    std::string other;
    if (ClashLocked(c.org_id, c.identity, &other)) return;
    identity_orgs_[c.identity].insert(c.org_id);
  }
  if (!c.token_sha256.empty()) token_to_key_id_[c.token_sha256] = key_id;
  by_key_id_.emplace(key_id, std::move(entry));
}

void CredentialRegistry::ApplyAll(const std::vector<Event>& events) {
  for (const Event& e : events) Apply(e);
}

bool CredentialRegistry::AgentKey(const std::string& org, const std::string& agent, const std::string& key_id,
                                  Ed25519Verifier* out) const {
  std::shared_lock lock(mu_);
  auto usable = [&](const Entry& en) {
    return en.c.kind == "agent_key" && !en.c.revoked && en.verifier && en.c.org_id == org &&
           en.c.identity == agent;
  };
  if (!key_id.empty()) {
    auto it = by_key_id_.find(key_id);
    if (it == by_key_id_.end() || !usable(it->second)) return false;
    *out = *it->second.verifier;
    return true;
  }
  // No kid: the agent's newest active key (rotation adds before it revokes).
  const Entry* best = nullptr;
  for (const auto& [id, en] : by_key_id_) {
    if (usable(en) && (best == nullptr || en.c.added_us > best->c.added_us)) best = &en;
  }
  if (best == nullptr) return false;
  *out = *best->verifier;
  return true;
}

bool CredentialRegistry::AgentKnown(const std::string& org, const std::string& agent) const {
  std::shared_lock lock(mu_);
  return agents_.count(org + '\0' + agent) > 0;
}

bool CredentialRegistry::SigningKey(const std::string& key_id, Credential* who, Ed25519Verifier* out) const {
  std::shared_lock lock(mu_);
  auto it = by_key_id_.find(key_id);
  if (it == by_key_id_.end()) return false;
  const Entry& en = it->second;
  if ((en.c.kind != "approver_key" && en.c.kind != "service_key") || en.c.revoked || !en.verifier)
    return false;
  *who = en.c;
  *out = *en.verifier;
  return true;
}

bool CredentialRegistry::Token(const std::string& token_sha256, Credential* out) const {
  std::shared_lock lock(mu_);
  auto t = token_to_key_id_.find(token_sha256);
  if (t == token_to_key_id_.end()) return false;
  auto it = by_key_id_.find(t->second);
  if (it == by_key_id_.end() || it->second.c.revoked || it->second.c.kind != "token") return false;
  *out = it->second.c;
  return true;
}

bool CredentialRegistry::ClashLocked(const std::string& org, const std::string& identity,
                                     std::string* other) const {
  auto it = identity_orgs_.find(identity);
  if (it == identity_orgs_.end()) return false;
  for (const std::string& held : it->second) {
    if ((org == "*") != (held == "*")) {
      *other = held;
      return true;
    }
  }
  return false;
}

bool CredentialRegistry::IdentityClash(const std::string& org, const std::string& identity,
                                       std::string* other) const {
  std::shared_lock lock(mu_);
  return ClashLocked(org, identity, other);
}

std::vector<Credential> CredentialRegistry::List(const std::string& kind, const std::string& org) const {
  std::shared_lock lock(mu_);
  std::vector<Credential> out;
  for (const auto& [id, en] : by_key_id_) {
    if ((kind.empty() || en.c.kind == kind) && (org.empty() || en.c.org_id == org)) out.push_back(en.c);
  }
  std::sort(out.begin(), out.end(), [](const Credential& a, const Credential& b) {
    return a.added_us != b.added_us ? a.added_us < b.added_us : a.key_id < b.key_id;
  });
  return out;
}

bool CredentialRegistry::Find(const std::string& key_id, Credential* out) const {
  std::shared_lock lock(mu_);
  auto it = by_key_id_.find(key_id);
  if (it == by_key_id_.end()) return false;
  *out = it->second.c;
  return true;
}

size_t CredentialRegistry::size() const {
  std::shared_lock lock(mu_);
  return by_key_id_.size();
}

}  // namespace tollgate
