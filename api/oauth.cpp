#include "api/oauth.h"

#include <fnmatch.h>
#include <httplib.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "core/json_error.h"
#include "core/log.h"
#include "core/tool_discovery.h"

namespace tollgate {
namespace {

constexpr size_t kMaxJwksBytes = 1 << 20;
constexpr std::chrono::seconds kMaxMaxAge{86400};

Status Bad(const std::string& why) { return Status::Error(errc::kSchemaViolation, "--oauth: " + why); }

// The strings of `j[key]` (absent: *out unchanged); false when not an array of strings.
bool Strings(const Json& j, const char* key, std::vector<std::string>* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_array()) return false;
  std::vector<std::string> v;
  for (const Json& s : *it) {
    if (!s.is_string() || s.get<std::string>().empty()) return false;
    v.push_back(s.get<std::string>());
  }
  *out = std::move(v);
  return true;
}

bool IsHttpUrl(const std::string& u) { return u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0; }

// Misspelt keys are refused, not ignored: a typo must not quietly drop a check.
Status OnlyKeys(const Json& j, std::initializer_list<const char*> keys, const std::string& where) {
  if (!j.is_object()) return Bad(where + " must be an object");
  for (const auto& [k, v] : j.items()) {
    if (std::none_of(keys.begin(), keys.end(), [&k = k](const char* x) { return k == x; }))
      return Bad(where + ": unknown key \"" + k + "\"");
  }
  return Status::Ok();
}

Status ParseIssuer(const Json& j, OAuthIssuer* out) {
  if (Status s = OnlyKeys(j, {"issuer", "jwks_uri", "algorithms"}, "an issuer"); !s.ok()) return s;
  OAuthIssuer is;
  is.issuer = j.value("issuer", "");
  is.jwks_uri = j.value("jwks_uri", "");
  if (is.issuer.empty()) return Bad("an issuer needs \"issuer\"");
  if (!IsHttpUrl(is.jwks_uri)) return Bad(is.issuer + ": jwks_uri must be an http(s) URL");
  if (!Strings(j, "algorithms", &is.algorithms) || is.algorithms.empty())
    return Bad(is.issuer + ": algorithms must be a non-empty array of strings");
  for (const std::string& a : is.algorithms) {
    if (std::none_of(std::begin(kAccessTokenAlgorithms), std::end(kAccessTokenAlgorithms),
                     [&a](const char* x) { return a == x; }))
      return Bad(is.issuer + ": algorithm \"" + a + "\" (EdDSA, ES256 or RS256 only)");
  }
  *out = std::move(is);
  return Status::Ok();
}

// "org": {"claim": C} or {"fixed": O}; "agent": {"claim": C}.
Status ParseClaimMapping(const Json& j, OAuthConfig* c) {
  if (auto org = j.find("org"); org != j.end()) {
    if (Status s = OnlyKeys(*org, {"claim", "fixed"}, "org"); !s.ok()) return s;
    c->org_claim = org->value("claim", c->org_claim);
    c->fixed_org = org->value("fixed", "");
    if (org->contains("claim") && org->contains("fixed")) return Bad("org: either claim or fixed");
    if (c->fixed_org == "*") return Bad("org: a token is never deployment-wide (\"*\")");
  }
  if (auto agent = j.find("agent"); agent != j.end()) {
    if (Status s = OnlyKeys(*agent, {"claim"}, "agent"); !s.ok()) return s;
    c->agent_claim = agent->value("claim", c->agent_claim);
  }
  if (auto roles = j.find("roles"); roles != j.end()) {
    if (Status s = OnlyKeys(*roles, {"claim", "default"}, "roles"); !s.ok()) return s;
    c->roles_claim = roles->value("claim", c->roles_claim);
    if (!Strings(*roles, "default", &c->default_roles))
      return Bad("roles.default must be an array of strings");
    for (const std::string& r : c->default_roles) {
      if (std::none_of(std::begin(kRoles), std::end(kRoles), [&r](const char* k) { return r == k; }))
        return Bad("roles.default: unknown role \"" + r + "\"");
    }
  }
  if (c->org_claim.empty() || c->agent_claim.empty() || c->roles_claim.empty())
    return Bad("a claim name is empty");
  return Status::Ok();
}

Status ParseToolScopes(const Json& j, OAuthConfig* c) {
  auto ts = j.find("tool_scopes");
  if (ts == j.end()) return Status::Ok();
  if (!ts->is_object()) return Bad("tool_scopes must be an object {tool glob: scope}");
  for (const auto& [glob, scope] : ts->items()) {
    if (glob.empty() || !scope.is_string() || scope.get<std::string>().empty() ||
        scope.get<std::string>().find_first_of(" \"\\") != std::string::npos)
      return Bad("tool_scopes: \"" + glob + "\" must map to one scope (no space or quote)");
    // The globs match the tool's own name; a client's spelling is accepted too.
    c->tool_scopes.emplace_back(ToolFromClientName(glob), scope.get<std::string>());
  }
  return Status::Ok();
}

// "http(s)://host[:port]" without a path: the resources are its /mcp and
// /v1, the metadata at its /.well-known/... (this server's own routes).
Status ParseResourceBase(const Json& j, OAuthConfig* c) {
  c->resource_base = j.value("resource_base", "");
  if (c->resource_base.empty()) return Status::Ok();
  if (c->resource_base.back() == '/') c->resource_base.pop_back();
  const size_t host = c->resource_base.find("://");
  if (!IsHttpUrl(c->resource_base) || c->resource_base.find_first_of("/?#", host + 3) != std::string::npos)
    return Bad("resource_base must be an origin, http(s)://host[:port], without a path");
  return Status::Ok();
}

// The strings of a claim that is an array of strings or one space-separated string.
std::vector<std::string> ClaimWords(const Json& claims, const std::string& name) {
  std::vector<std::string> out;
  auto it = claims.find(name);
  if (it == claims.end()) return out;
  if (it->is_string()) return TokenScopes(Json{{"scope", *it}});
  if (!it->is_array()) return out;
  for (const Json& s : *it) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

// "max-age=N" of a Cache-Control value; `fallback` without one.
std::chrono::seconds MaxAge(const std::string& cache_control, std::chrono::seconds fallback) {
  const size_t at = cache_control.find("max-age=");
  if (at == std::string::npos) return fallback;
  int64_t n = 0;
  for (size_t i = at + 8;
       i < cache_control.size() && std::isdigit(static_cast<unsigned char>(cache_control[i])) &&
       n < kMaxMaxAge.count();
       ++i) {
    n = n * 10 + (cache_control[i] - '0');
  }
  return std::chrono::seconds(n);
}

const char* PathOf(OAuthResource r) { return r == OAuthResource::kMcp ? "/mcp" : "/v1"; }

}  // namespace

Status OAuthConfig::Load(const std::string& path, OAuthConfig* out) {
  std::ifstream in(path);
  if (!in) return Status::Error(errc::kNotFound, "--oauth: no file " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Json j;
  if (Status s = ParseJson(text, &j); !s.ok()) return Status::Error(s.code(), path + ": " + s.message());
  try {
    Status s = FromJson(j, out);
    return s.ok() ? s : Status::Error(s.code(), path + ": " + s.message());
  } catch (const Json::exception& e) {  // a field of the wrong type
    return Bad(path + ": " + JsonErrorText(e, &j));
  }
}

Status OAuthConfig::FromJson(const Json& j, OAuthConfig* out) {
  Status s = OnlyKeys(j,
                      {"issuers", "resource_base", "resource_name", "org", "agent", "roles",
                       "scopes_supported", "tool_scopes", "leeway_seconds"},
                      "the config");
  if (!s.ok()) return s;
  OAuthConfig c;
  if (!j.contains("issuers") || !j["issuers"].is_array() || j["issuers"].empty())
    return Bad("\"issuers\" must be a non-empty array");
  std::set<std::string> seen;
  for (const Json& is : j["issuers"]) {
    OAuthIssuer issuer;
    if (s = ParseIssuer(is, &issuer); !s.ok()) return s;
    if (!seen.insert(issuer.issuer).second) return Bad("issuer " + issuer.issuer + " is listed twice");
    c.issuers.push_back(std::move(issuer));
  }
  if (s = ParseResourceBase(j, &c); !s.ok()) return s;
  c.resource_name = j.value("resource_name", c.resource_name);
  if (s = ParseClaimMapping(j, &c); !s.ok()) return s;
  if (!Strings(j, "scopes_supported", &c.scopes_supported))
    return Bad("scopes_supported must be an array of strings");
  if (s = ParseToolScopes(j, &c); !s.ok()) return s;
  c.leeway_seconds = j.value("leeway_seconds", c.leeway_seconds);
  if (c.leeway_seconds < 0 || c.leeway_seconds > 300) return Bad("leeway_seconds must be between 0 and 300");
  *out = std::move(c);
  return Status::Ok();
}

Status FetchJwks(const std::string& uri, Json* jwks, std::chrono::seconds* max_age) {
  const size_t host = uri.find("://");
  const size_t slash = host == std::string::npos ? std::string::npos : uri.find('/', host + 3);
  httplib::Client c(uri.substr(0, slash));
  if (!c.is_valid()) return Status::Error("E_UNAVAILABLE", "jwks_uri " + uri + " is not usable");
  c.set_connection_timeout(5);
  c.set_read_timeout(5);
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  c.enable_server_certificate_verification(true);
#endif
  std::string body;
  auto res = c.Get(slash == std::string::npos ? "/" : uri.substr(slash),
                   httplib::Headers{{"Accept", "application/json"}}, [&body](const char* data, size_t n) {
                     body.append(data, n);
                     return body.size() <= kMaxJwksBytes;  // a huge answer is cut, then refused
                   });
  if (!res) return Status::Error("E_UNAVAILABLE", "jwks_uri " + uri + ": " + httplib::to_string(res.error()));
  if (res->status != 200)
    return Status::Error("E_UNAVAILABLE", "jwks_uri " + uri + " answered " + std::to_string(res->status));
  if (Status s = ParseInputJson(body, jwks); !s.ok())
    return Status::Error(s.code(), "jwks_uri " + uri + ": " + s.message());
  *max_age = MaxAge(res->get_header_value("Cache-Control"), *max_age);
  return Status::Ok();
}

OAuthResourceServer::OAuthResourceServer(OAuthConfig config, JwksFetcher fetch,
                                         std::function<Clock::time_point()> clock)
    : config_(std::move(config)),
      fetch_(std::move(fetch)),
      clock_(std::move(clock)),
      base_(config_.resource_base) {
  for (const OAuthIssuer& is : config_.issuers) cache_[is.issuer] = std::make_unique<KeyCache>();
}

void OAuthResourceServer::SetDefaultResourceBase(const std::string& base) {
  if (config_.resource_base.empty()) base_ = base;
}

std::string OAuthResourceServer::Resource(OAuthResource r) const { return base_ + PathOf(r); }

std::string OAuthResourceServer::MetadataUrl(OAuthResource r) const {
  return base_ + "/.well-known/oauth-protected-resource" + PathOf(r);
}

Json OAuthResourceServer::Metadata(OAuthResource r) const {
  Json servers = Json::array();
  for (const OAuthIssuer& is : config_.issuers) servers.push_back(is.issuer);
  Json m{{"resource", Resource(r)},
         {"authorization_servers", servers},
         {"bearer_methods_supported", {"header"}},
         {"resource_name", config_.resource_name}};
  if (!config_.scopes_supported.empty()) m["scopes_supported"] = config_.scopes_supported;
  return m;
}

const OAuthIssuer* OAuthResourceServer::IssuerOf(const Json& claims) const {
  auto iss = claims.find("iss");
  if (iss == claims.end() || !iss->is_string()) return nullptr;
  for (const OAuthIssuer& is : config_.issuers) {
    if (*iss == is.issuer) return &is;
  }
  return nullptr;
}

std::shared_ptr<const JwkSet> OAuthResourceServer::Keys(const OAuthIssuer& issuer, bool refresh,
                                                        std::string* why) {
  KeyCache& c = *cache_.at(issuer.issuer);
  std::lock_guard<std::mutex> lock(c.mu);
  const auto now = clock_();
  const bool stale = !c.keys || now >= c.expires;
  if (!stale && !refresh) return c.keys;
  // Never more than one fetch per interval: an unknown kid is cheap to
  // send, and must not turn tollgate into a flood of the AS.
  if (c.fetched && now - c.last_fetch < kRefetchInterval) {
    if (!c.keys) *why = "the keys of " + issuer.issuer + " could not be fetched; retrying later";
    return c.keys;
  }
  c.fetched = true;
  c.last_fetch = now;
  Json doc;
  std::chrono::seconds max_age = kDefaultMaxAge;
  JwkSet set;
  std::vector<std::string> skipped;
  Status s = fetch_(issuer.jwks_uri, &doc, &max_age);
  if (s.ok()) s = JwkSet::Parse(doc, &set, &skipped);
  if (!s.ok()) {
    // The keys held stay in use until a fetch succeeds.
    log::Warn({"api"}) << "oauth: cannot fetch the keys of " << issuer.issuer << ": " << s.ToString() << "\n";
    if (!c.keys) *why = "the keys of " + issuer.issuer + " could not be fetched";
    return c.keys;
  }
  for (const std::string& k : skipped)
    log::Info({"api"}) << "oauth: " << issuer.issuer << " key skipped: " << k << "\n";
  c.keys = std::make_shared<const JwkSet>(std::move(set));
  c.expires = now + std::clamp(max_age, kRefetchInterval, kMaxMaxAge);
  return c.keys;
}

bool OAuthResourceServer::MapPrincipal(const Json& claims, Principal* who, OAuthRefusal* why) const {
  auto text = [&claims](const std::string& name) {
    auto it = claims.find(name);
    return it != claims.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  Principal p;
  p.identity = text(config_.agent_claim);
  p.org_id = config_.fixed_org.empty() ? text(config_.org_claim) : config_.fixed_org;
  if (p.identity.empty() || p.org_id.empty() || p.org_id == "*") {
    *why = {TokenFault::kClaims, "the token names no agent (" + config_.agent_claim + ") or no org (" +
                                     config_.org_claim + "), or org \"*\""};
    return false;
  }
  // Only tollgate's roles count; none of them: the configured default.
  for (const std::string& r : ClaimWords(claims, config_.roles_claim)) {
    const bool known =
        std::any_of(std::begin(kRoles), std::end(kRoles), [&r](const char* k) { return r == k; });
    if (known && !p.Has(r)) p.roles.push_back(r);
  }
  if (p.roles.empty()) p.roles = config_.default_roles;
  p.issuer = text("iss");
  p.subject = text("sub");
  p.token_id = text("jti");
  p.scopes = TokenScopes(claims);
  *who = std::move(p);
  return true;
}

bool OAuthResourceServer::Authenticate(const std::string& token, OAuthResource resource, Principal* who,
                                       OAuthRefusal* why, int64_t now) {
  AccessTokenParts parts;
  Status s = ParseAccessToken(token, {std::begin(kAccessTokenAlgorithms), std::end(kAccessTokenAlgorithms)},
                              &parts, &why->fault);
  if (!s.ok()) return (why->message = s.message(), false);
  const OAuthIssuer* issuer = IssuerOf(parts.claims);
  if (issuer == nullptr)
    return (*why = {TokenFault::kIssuer, "the token's iss is not a configured issuer"}, false);
  if (std::find(issuer->algorithms.begin(), issuer->algorithms.end(), parts.alg) == issuer->algorithms.end())
    return (*why = {TokenFault::kAlgorithm, "alg " + parts.alg + " is not accepted from " + issuer->issuer},
            false);
  if (now < 0) {
    now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
  }
  const AccessTokenRules rules{issuer->issuer, Resource(resource), now, config_.leeway_seconds};
  std::string unavailable;
  std::shared_ptr<const JwkSet> keys = Keys(*issuer, false, &unavailable);
  s = keys ? VerifyAccessToken(parts, *keys, rules, &why->fault)
           : Status::Error(errc::kUnauthenticated, unavailable);
  if (keys == nullptr) why->fault = TokenFault::kUnknownKey;
  if (why->fault == TokenFault::kUnknownKey) {
    // A key the set lacks: the AS may have rotated; fetch again (rate-limited).
    std::shared_ptr<const JwkSet> fresh = Keys(*issuer, true, &unavailable);
    if (fresh && fresh != keys) s = VerifyAccessToken(parts, *fresh, rules, &why->fault);
  }
  if (!s.ok()) return (why->message = s.message(), false);
  return MapPrincipal(parts.claims, who, why);
}

std::vector<std::string> OAuthResourceServer::ScopesForTool(const std::string& tool) const {
  std::vector<std::string> out;
  for (const auto& [glob, scope] : config_.tool_scopes) {
    // fnmatch without FNM_PATHNAME: '*' spans '/' and ':' as the policy's globs do.
    if (fnmatch(glob.c_str(), tool.c_str(), 0) == 0 && std::find(out.begin(), out.end(), scope) == out.end())
      out.push_back(scope);
  }
  return out;
}

std::string OAuthResourceServer::Challenge(OAuthResource r, bool token_refused) const {
  // Bearer first, resource_metadata always: the SDK reads the first
  // scheme only and follows resource_metadata to the PRM.
  std::string h = "Bearer resource_metadata=\"" + MetadataUrl(r) + "\"";
  if (token_refused) h += ", error=\"invalid_token\"";
  if (!config_.scopes_supported.empty()) h += ", scope=\"" + Joined(config_.scopes_supported) + "\"";
  return h;
}

std::string OAuthResourceServer::InsufficientScope(OAuthResource r,
                                                   const std::vector<std::string>& needed) const {
  return "Bearer error=\"insufficient_scope\", scope=\"" + Joined(needed) + "\", resource_metadata=\"" +
         MetadataUrl(r) + "\"";
}

}  // namespace tollgate
