// Who may act: the credentials of agents, approvers and tokens, as a fold of
// the log's credential.added / credential.revoked events (docs/trust.md).
//
// The log is the only record: `tollgate agents add`, `tokens add` and the
// HTTP API append those events, every process that checks an identity folds
// them (at start, then from each appended group), and nothing else grants
// anything. Private keys and tokens never reach the log: an agent key is its
// Ed25519 public key, a token its SHA-256.
//
// An identity is (org, name): two orgs may both have an `a1` token or an
// approver `alice`. A deployment-wide name (org "*": the local `admin`, the
// service key, a deployment operator) is taken in every org at once, so no
// org identity shares a name with a deployment-wide one. Only an org's own
// identities and the deployment-wide ones act in that org, so within one
// org's requests a name is one identity, and a quorum that counts distinct
// approver names counts distinct people (docs/trust.md). An agent is
// (org, agent_id).
//
// Thread-safe: Apply takes a writer lock, lookups a reader lock.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "core/event.h"
#include "core/jwt.h"

namespace tollgate {

// The session id credential events are filed under, so a fold finds them
// through the session index instead of a scan of the whole log.
inline constexpr const char* kCredentialsSession = "tollgate:credentials";
// The org that refusals of unproven messages are filed under. Reserved: no
// credential may belong to it, so nothing authenticated ever lives there
// and a refusal filed there cannot touch a real request.
inline constexpr const char* kUnprovenOrg = "unknown";

struct Credential {
  std::string kind;  // agent_key | approver_key | token | service_key
  std::string identity;
  std::string org_id;  // "*" = every org
  std::string key_id;  // 16 hex
  std::vector<std::string> roles;
  std::string public_key;    // keys: raw Ed25519, base64url
  std::string token_sha256;  // tokens
  std::string added_by;
  int64_t added_us = 0;
  bool revoked = false;
  std::string revoked_by;
  int64_t revoked_us = 0;

  bool Has(const std::string& role) const;
  // May act on `org`: its own, or any for a deployment-wide credential.
  bool InOrg(const std::string& org) const { return org_id == "*" || org == org_id; }
  Json ToJson() const;  // what `list` shows: never a secret
};

// key_id of a public key or a token hash: the first 16 hex digits of
// SHA-256 of the key's raw bytes (base64url-decoded) / of the token hash.
std::string KeyIdOfPublicKey(const std::string& public_b64url);
std::string KeyIdOfToken(const std::string& token_sha256);

// A signer for an Ed25519 private key, its kid the key's key_id.
Status SignerForKey(const std::string& private_pem, JwtSigner* out);
// A fresh Ed25519 key pair as a credential of `kind` (agent_key,
// approver_key, service_key) for (org, identity) with `roles`, added by
// `by`: *c holds the public key and key_id (added_us unset; register it with
// CredentialAddedEvent), *signer signs with the private key, *private_pem
// (optional) is that key for a file.
Status NewSigningKey(const std::string& kind, const std::string& org, const std::string& identity,
                     std::vector<std::string> roles, const std::string& by, Credential* c, JwtSigner* signer,
                     std::string* private_pem = nullptr);

// The events that change credentials. `by` is who did it (an identity).
Event CredentialAddedEvent(const Credential& c, int64_t time_us);
Event CredentialRevokedEvent(const Credential& c, const std::string& by, const std::string& reason,
                             int64_t time_us);

class CredentialRegistry {
 public:
  // Folds one event; others are ignored. Idempotent (keyed by key_id): a
  // revoked credential stays revoked.
  void Apply(const Event& e);
  void ApplyAll(const std::vector<Event>& events);

  // The active key of agent (org, agent) with `key_id` (the JWT's kid), or
  // any of its active keys when key_id is empty; false when none.
  bool AgentKey(const std::string& org, const std::string& agent, const std::string& key_id,
                Ed25519Verifier* out) const;
  // Whether (org, agent) has any key, revoked or not (to tell "revoked"
  // from "unknown" in a refusal).
  bool AgentKnown(const std::string& org, const std::string& agent) const;
  // An active approver/service key by key_id.
  bool SigningKey(const std::string& key_id, Credential* who, Ed25519Verifier* out) const;
  // The active token credential whose SHA-256 is `token_sha256`.
  bool Token(const std::string& token_sha256, Credential* out) const;
  // Whether (org, identity), not an agent key, would share its name with a
  // credential across the deployment-wide line (any credential, even
  // revoked): org "*" and an org has that name, or an org and "*" has it.
  // *other: that credential's org. Agent keys take no name here.
  bool IdentityClash(const std::string& org, const std::string& identity, std::string* other) const;

  // Every credential, optionally of one kind and one org ("" = all).
  std::vector<Credential> List(const std::string& kind = "", const std::string& org = "") const;
  bool Find(const std::string& key_id, Credential* out) const;
  size_t size() const;

 private:
  struct Entry {
    Credential c;
    std::shared_ptr<Ed25519Verifier> verifier;  // keys only
  };
  mutable std::shared_mutex mu_;
  std::map<std::string, Entry> by_key_id_;
  std::map<std::string, std::string> token_to_key_id_;
  // Names of credentials other than agent keys -> the orgs holding them.
  std::map<std::string, std::set<std::string>> identity_orgs_;
  std::set<std::string> agents_;  // org '\0' agent_id of every agent key
  bool ClashLocked(const std::string& org, const std::string& identity, std::string* other) const;
};

namespace errc {
inline constexpr const char* kConflict = "E_CONFLICT";
}  // namespace errc

// A new credential from an admin's request {kind, org_id, identity, roles,
// public_key}, made by `by`, checked against what `registry` holds: a known
// kind, a valid Ed25519 public key, not the reserved org, an agent in one
// org, data the credential.added schema accepts (E_INVALID_QUERY,
// E_INVALID_KEY, E_SCHEMA_VIOLATION); a key not registered yet and a name
// that does not cross the deployment-wide line (IdentityClash; E_CONFLICT). For a token, `token` is the new
// token (the caller makes it) and only its hash is kept. Agent keys get the
// role agent; approver keys approver unless given. Who may add it (the
// org's scope) is the caller's check. The API and the CLI's local path
// both use this, so the log gets the same credential either way.
Status NewCredential(const Json& request, const std::string& by, const std::string& token,
                     const CredentialRegistry& registry, Credential* out);

}  // namespace tollgate
