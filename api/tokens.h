// Bearer tokens of the HTTP API: each maps to an identity, an org and roles.
//
// The tokens file (JSON, default <data>/tokens.json) stores SHA-256 hashes,
// never tokens:
//   {"tokens": [{"token_sha256": "<64 hex>", "identity": "alice",
//                "org_id": "acme", "roles": ["approver", "auditor"]}]}
// org_id "*" (admin only) means every org. An identity is (org_id,
// identity): orgs may share a name, never with a deployment-wide identity
// (core/credentials.h), and a file that does is refused. Roles: agent,
// approver, auditor, admin, operator (docs/http_api.md says what each may do). A token is 32 random bytes
// as 64 hex digits; only its hash is kept, so a leaked tokens file grants
// nothing. Thread-safe after Load.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/credentials.h"
#include "core/status.h"

namespace tollgate {

struct Principal {
  std::string identity;
  std::string org_id;  // "*" = every org
  std::vector<std::string> roles;
  // An OAuth access token's (api/oauth.h): its iss, sub, jti and scopes.
  // Empty for a static token.
  std::string issuer, subject, token_id;
  std::vector<std::string> scopes;
  bool oauth() const { return !issuer.empty(); }
  bool Has(const std::string& role) const;
  bool admin() const { return Has("admin"); }
  // May act on `org`: its own org; every org only when deployment-wide
  // (org "*"). An org's admin administers that org alone.
  bool InOrg(const std::string& org) const { return org_id == "*" || org == org_id; }
};

inline constexpr const char* kRoles[] = {"agent", "approver", "auditor", "admin", "operator"};

class TokenStore {
 public:
  // Reads `path`; E_NOT_FOUND when it does not exist, E_INVALID_JSON /
  // E_SCHEMA_VIOLATION when it is malformed (unknown role, bad hash).
  static Status Load(const std::string& path, TokenStore* out);
  // The principal of `token`, or false.
  bool Authenticate(const std::string& token, Principal* out) const;
  size_t size() const { return by_hash_.size(); }
  // token_sha256 -> principal, for importing the file into the log.
  const std::map<std::string, Principal>& entries() const { return by_hash_; }

 private:
  static Status LoadFile(const std::string& path, TokenStore* out);
  std::map<std::string, Principal> by_hash_;
};

// The principal of an "Authorization: Bearer <token>" header value: looked
// up in `credentials` (the log's) when set, else in `tokens`. False for a
// missing, malformed or unknown token.
bool BearerPrincipal(const CredentialRegistry* credentials, const TokenStore& tokens,
                     const std::string& authorization, Principal* out);

// A fresh random token (64 hex digits).
std::string NewToken();

// Adds a token for `who` to the tokens file at `path` (created, mode 0600,
// when missing) and returns the token in *token: shown once, kept nowhere.
Status AddToken(const std::string& path, const Principal& who, std::string* token);

// First start: when `tokens_path` does not exist, creates it with one admin
// token and writes that token to `admin_token_path` (mode 0600). *created
// says whether it did.
Status EnsureAdminToken(const std::string& tokens_path, const std::string& admin_token_path, bool* created);

}  // namespace tollgate
