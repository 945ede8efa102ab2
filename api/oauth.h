// The HTTP API as an OAuth 2.1 resource server (docs/oauth.md): /mcp and
// /v1 accept access tokens (JWTs, core/access_token.h) from the
// authorization servers of `tollgate up --oauth FILE`, beside the static
// bearer tokens of api/tokens.h.
//
// The config file (JSON):
//   {"issuers": [{"issuer": "https://as.example", "jwks_uri": "https://as.example/jwks",
//                 "algorithms": ["EdDSA", "ES256", "RS256"]}],
//    "resource_base": "https://gate.example",       // default http://<bound host:port>
//    "resource_name": "tollgate",
//    "org": {"claim": "org"} | {"fixed": "acme"},  // default {"claim": "org"}
//    "agent": {"claim": "sub"},                     // the identity
//    "roles": {"claim": "roles", "default": ["agent"]},
//    "scopes_supported": ["mcp:tools", "files:write"],
//    "tool_scopes": {"write_file": "files:write", "mcp:fs/*": "fs:write"},
//    "leeway_seconds": 60}
// The resources are <resource_base>/mcp and <resource_base>/v1: a token's
// aud must name the one the request is for. They come from configuration
// or the bound address, never from a request's Host header.
//
// Keys: each issuer's JWK set is fetched with cpp-httplib, kept for its
// Cache-Control max-age (default 300 s, at most a day), and fetched again
// when a token names a kid it lacks (a rotation), at most once per 10 s per
// issuer, so junk kids cannot make tollgate hammer the AS. Thread-safe:
// Authenticate runs on every API worker.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/tokens.h"
#include "core/access_token.h"
#include "core/status.h"

namespace tollgate {

struct OAuthIssuer {
  std::string issuer;    // iss, exactly
  std::string jwks_uri;  // http(s)://host[:port]/path
  std::vector<std::string> algorithms{"EdDSA", "ES256", "RS256"};
};

struct OAuthConfig {
  std::vector<OAuthIssuer> issuers;
  std::string resource_base;  // "": "http://<bound host>:<port>" (ApiServer::Start)
  std::string resource_name = "tollgate";
  std::string org_claim = "org";
  std::string fixed_org;  // non-empty: every token's org, whatever it claims
  std::string agent_claim = "sub";
  std::string roles_claim = "roles";
  std::vector<std::string> default_roles{"agent"};
  std::vector<std::string> scopes_supported;
  // (tool glob, scope), in file order; the globs in the tool's own
  // spelling (an MCP client's mcp__s__t is rewritten to mcp:s/t).
  std::vector<std::pair<std::string, std::string>> tool_scopes;
  int64_t leeway_seconds = 60;

  // E_NOT_FOUND, E_INVALID_JSON or E_SCHEMA_VIOLATION naming the field.
  static Status Load(const std::string& path, OAuthConfig* out);
  static Status FromJson(const Json& j, OAuthConfig* out);
};

// Which protected resource a request is for.
enum class OAuthResource { kMcp, kApi };

// A refused token: what the challenge says and the log line may say.
struct OAuthRefusal {
  TokenFault fault = TokenFault::kNone;
  std::string message;  // never the token
};

// Fetches a JWK set document; the seam tests may replace. Sets *max_age
// from Cache-Control when the server sent one.
using JwksFetcher = std::function<Status(const std::string& uri, Json* jwks, std::chrono::seconds* max_age)>;
// GET with cpp-httplib (https when built with OpenSSL support), 5 s
// timeouts, no redirects, at most 1 MiB.
Status FetchJwks(const std::string& uri, Json* jwks, std::chrono::seconds* max_age);

class OAuthResourceServer {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kDefaultMaxAge{300};
  static constexpr std::chrono::seconds kRefetchInterval{10};

  // `clock` times the key cache (tests pass their own).
  explicit OAuthResourceServer(OAuthConfig config, JwksFetcher fetch = FetchJwks,
                               std::function<Clock::time_point()> clock = Clock::now);

  // Before serving: the base of the resources when the config names none
  // ("http://127.0.0.1:PORT", the bound address). Not thread-safe: call it
  // before the server's thread starts.
  void SetDefaultResourceBase(const std::string& base);
  std::string Resource(OAuthResource r) const;  // ".../mcp" or ".../v1"
  // The PRM URL of a resource: <base>/.well-known/oauth-protected-resource/mcp (or /v1).
  std::string MetadataUrl(OAuthResource r) const;
  // RFC 9728 metadata of a resource.
  Json Metadata(OAuthResource r) const;

  // The principal of `token` (the bare JWT) for `resource`, or false with
  // *why. `now` defaults to the system clock.
  bool Authenticate(const std::string& token, OAuthResource resource, Principal* who, OAuthRefusal* why,
                    int64_t now = -1);

  // The scopes a tools/call of `tool` (its own name) needs: those of every
  // tool_scopes glob that matches it, in file order.
  std::vector<std::string> ScopesForTool(const std::string& tool) const;
  // WWW-Authenticate of a 401: resource_metadata, error="invalid_token"
  // when a token was refused, and scope = scopes_supported.
  std::string Challenge(OAuthResource r, bool token_refused) const;
  // WWW-Authenticate of a step-up 403: every scope the call needs.
  std::string InsufficientScope(OAuthResource r, const std::vector<std::string>& needed) const;

  const OAuthConfig& config() const { return config_; }

 private:
  // One issuer's keys. Its own lock, held across a fetch: one fetch per
  // issuer at a time, and other issuers' tokens are not held up.
  struct KeyCache {
    std::mutex mu;
    std::shared_ptr<const JwkSet> keys;
    Clock::time_point expires{};
    Clock::time_point last_fetch{};
    bool fetched = false;
  };
  const OAuthIssuer* IssuerOf(const Json& claims) const;
  // The issuer's keys: cached, or fetched when stale, or (`refresh`)
  // fetched again when the last fetch is over kRefetchInterval old.
  std::shared_ptr<const JwkSet> Keys(const OAuthIssuer& issuer, bool refresh, std::string* why);
  bool MapPrincipal(const Json& claims, Principal* who, OAuthRefusal* why) const;

  OAuthConfig config_;
  JwksFetcher fetch_;
  std::function<Clock::time_point()> clock_;
  std::string base_;
  // By issuer; made in the constructor, only read after.
  std::map<std::string, std::unique_ptr<KeyCache>> cache_;
};

}  // namespace tollgate
