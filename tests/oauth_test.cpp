// api/oauth and core/access_token: OAuth access tokens (JWTs) checked
// against an authorization server's JWK set, served by a loopback httplib
// server as a real AS would: EdDSA, ES256 and RS256 tokens, each refusal
// with its own fault, key rotation and the refetch rate limit, the cache's
// max-age, the config file, the challenges and the metadata.
#include "api/oauth.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <atomic>
#include <ctime>
#include <mutex>
#include <thread>

#include "core/jwt.h"

namespace tollgate {
namespace {

constexpr const char* kIssuer = "https://as.test";
constexpr const char* kBase = "http://127.0.0.1:7777";  // the resources' base, as if bound there
const std::string kMcp = std::string(kBase) + "/mcp";

std::string Raw(const unsigned char* p, size_t n) { return std::string(reinterpret_cast<const char*>(p), n); }

// A BIGNUM parameter of a key, big-endian, left-padded to `width` bytes (0: its own length).
std::string BnParam(EVP_PKEY* key, const char* name, int width = 0) {
  BIGNUM* bn = nullptr;
  EXPECT_EQ(EVP_PKEY_get_bn_param(key, name, &bn), 1) << name;
  std::string out(width > 0 ? width : BN_num_bytes(bn), '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size()));
  BN_free(bn);
  return out;
}

// A signing key of the AS and its public JWK.
struct TestKey {
  std::shared_ptr<EVP_PKEY> key;
  std::string alg;
  Json jwk;
};

TestKey NewKey(const std::string& alg, const std::string& kid, int rsa_bits = 2048) {
  TestKey k;
  k.alg = alg;
  EVP_PKEY* key = alg == "EdDSA" ? EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519")
                  : alg == "ES256"
                      ? EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")
                      : EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(rsa_bits));
  k.key.reset(key, EVP_PKEY_free);
  if (alg == "EdDSA") {
    unsigned char raw[32];
    size_t n = sizeof raw;
    EVP_PKEY_get_raw_public_key(key, raw, &n);
    k.jwk = {{"kty", "OKP"}, {"crv", "Ed25519"}, {"x", Base64UrlEncode(Raw(raw, n))}};
  } else if (alg == "ES256") {
    k.jwk = {{"kty", "EC"},
             {"crv", "P-256"},
             {"x", Base64UrlEncode(BnParam(key, OSSL_PKEY_PARAM_EC_PUB_X, 32))},
             {"y", Base64UrlEncode(BnParam(key, OSSL_PKEY_PARAM_EC_PUB_Y, 32))}};
  } else {
    k.jwk = {{"kty", "RSA"},
             {"n", Base64UrlEncode(BnParam(key, OSSL_PKEY_PARAM_RSA_N))},
             {"e", Base64UrlEncode(BnParam(key, OSSL_PKEY_PARAM_RSA_E))}};
  }
  k.jwk["kid"] = kid;
  k.jwk["use"] = "sig";
  return k;
}

// JOSE's ES256 signature is r||s; OpenSSL makes DER.
std::string RawEcdsa(const std::string& der) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  std::string out(64, '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(sig), reinterpret_cast<unsigned char*>(out.data()), 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(sig), reinterpret_cast<unsigned char*>(out.data()) + 32, 32);
  ECDSA_SIG_free(sig);
  return out;
}

std::string SignWith(const TestKey& k, const std::string& input) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const EVP_MD* md = k.alg == "EdDSA" ? nullptr : EVP_sha256();
  size_t n = 0;
  EVP_DigestSignInit(ctx, nullptr, md, nullptr, k.key.get());
  EVP_DigestSign(ctx, nullptr, &n, reinterpret_cast<const unsigned char*>(input.data()), input.size());
  std::string sig(n, '\0');
  EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &n,
                 reinterpret_cast<const unsigned char*>(input.data()), input.size());
  EVP_MD_CTX_free(ctx);
  sig.resize(n);
  return k.alg == "ES256" ? RawEcdsa(sig) : sig;
}

std::string B64Json(const Json& j) { return Base64UrlEncode(j.dump()); }

std::string Token(const TestKey& k, const Json& claims, Json header = Json()) {
  if (header.is_null()) header = {{"alg", k.alg}, {"typ", "at+jwt"}, {"kid", k.jwk["kid"]}};
  const std::string input = B64Json(header) + "." + B64Json(claims);
  return input + "." + Base64UrlEncode(SignWith(k, input));
}

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

Json Claims(const std::string& aud = kMcp) {
  return {{"iss", kIssuer},     {"sub", "agent-7"}, {"aud", aud},
          {"exp", Now() + 300}, {"iat", Now()},     {"nbf", Now()},
          {"jti", "tok-1"},     {"org", "acme"},    {"scope", "mcp:tools files:write"},
          {"client_id", "c1"}};
}

// The AS's JWKS endpoint on 127.0.0.1: its document can change (rotation),
// and it counts the fetches.
class JwksServer {
 public:
  JwksServer() {
    svr_.Get("/jwks", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      ++fetches_;
      if (!cache_control_.empty()) res.set_header("Cache-Control", cache_control_);
      res.set_content(doc_.dump(), "application/json");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
  }
  ~JwksServer() {
    svr_.stop();
    thread_.join();
  }
  void Serve(const std::vector<TestKey>& keys, const std::string& cache_control = "") {
    std::lock_guard<std::mutex> lock(mu_);
    doc_ = {{"keys", Json::array()}};
    for (const TestKey& k : keys) doc_["keys"].push_back(k.jwk);
    cache_control_ = cache_control;
  }
  int fetches() {
    std::lock_guard<std::mutex> lock(mu_);
    return fetches_;
  }
  std::string uri() const { return "http://127.0.0.1:" + std::to_string(port_) + "/jwks"; }

 private:
  httplib::Server svr_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  Json doc_ = {{"keys", Json::array()}};
  std::string cache_control_;
  int fetches_ = 0;
};

class OAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ed_ = NewKey("EdDSA", "ed-1");
    es_ = NewKey("ES256", "es-1");
    rs_ = NewKey("RS256", "rs-1");
    jwks_.Serve({ed_, es_, rs_});
  }
  // A resource server whose key cache runs on a clock the test moves.
  std::unique_ptr<OAuthResourceServer> Server(Json extra = Json::object()) {
    Json cfg = {{"issuers", {{{"issuer", kIssuer}, {"jwks_uri", jwks_.uri()}}}}};
    cfg.update(extra);
    OAuthConfig c;
    Status s = OAuthConfig::FromJson(cfg, &c);
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto rs = std::make_unique<OAuthResourceServer>(c, FetchJwks, [this] { return clock_; });
    rs->SetDefaultResourceBase(kBase);
    return rs;
  }
  // The fault a token is refused with (kNone when accepted).
  TokenFault FaultOf(OAuthResourceServer& rs, const std::string& token,
                     OAuthResource r = OAuthResource::kMcp) {
    Principal who;
    OAuthRefusal why;
    const bool ok = rs.Authenticate(token, r, &who, &why);
    EXPECT_EQ(ok, why.fault == TokenFault::kNone) << why.message;
    EXPECT_EQ(why.message.find(token), std::string::npos) << "a refusal never names the token";
    return ok ? TokenFault::kNone : why.fault;
  }

  JwksServer jwks_;
  TestKey ed_, es_, rs_;
  OAuthResourceServer::Clock::time_point clock_ = OAuthResourceServer::Clock::now();
};

TEST_F(OAuthTest, AGoodEdDsaTokenMapsToThePrincipal) {
  auto rs = Server();
  Json claims = Claims();
  claims["roles"] = {"auditor", "superuser"};  // only tollgate's roles count
  Principal who;
  OAuthRefusal why;
  ASSERT_TRUE(rs->Authenticate(Token(ed_, claims), OAuthResource::kMcp, &who, &why)) << why.message;
  EXPECT_EQ(who.identity, "agent-7");
  EXPECT_EQ(who.org_id, "acme");
  EXPECT_EQ(who.roles, std::vector<std::string>{"auditor"});
  EXPECT_EQ(who.issuer, kIssuer);
  EXPECT_EQ(who.subject, "agent-7");
  EXPECT_EQ(who.token_id, "tok-1");
  EXPECT_EQ(who.scopes, (std::vector<std::string>{"mcp:tools", "files:write"}));
  EXPECT_TRUE(who.oauth());

  claims.erase("roles");
  ASSERT_TRUE(rs->Authenticate(Token(ed_, claims), OAuthResource::kMcp, &who, &why)) << why.message;
  EXPECT_EQ(who.roles, std::vector<std::string>{"agent"}) << "no roles claim: the default";
}

TEST_F(OAuthTest, Es256AndRs256TokensVerify) {
  auto rs = Server();
  EXPECT_EQ(FaultOf(*rs, Token(es_, Claims())), TokenFault::kNone);
  EXPECT_EQ(FaultOf(*rs, Token(rs_, Claims())), TokenFault::kNone);
  // An audience array naming the resource, a typ of JWT, and no typ at all.
  Json claims = Claims();
  claims["aud"] = {"https://elsewhere", kMcp};
  EXPECT_EQ(FaultOf(*rs, Token(es_, claims, {{"alg", "ES256"}, {"kid", "es-1"}, {"typ", "JWT"}})),
            TokenFault::kNone);
  EXPECT_EQ(FaultOf(*rs, Token(rs_, claims, {{"alg", "RS256"}, {"kid", "rs-1"}})), TokenFault::kNone);
}

TEST_F(OAuthTest, EachBadTokenIsRefusedWithItsReason) {
  auto rs = Server();
  auto with = [](const char* key, const Json& v) {
    Json c = Claims();
    c[key] = v;
    return c;
  };
  EXPECT_EQ(FaultOf(*rs, Token(ed_, Claims(std::string(kBase) + "/v1"))), TokenFault::kAudience)
      << "a token for the API is not one for /mcp";
  EXPECT_EQ(FaultOf(*rs, Token(ed_, Claims()), OAuthResource::kApi), TokenFault::kAudience);
  EXPECT_EQ(FaultOf(*rs, Token(ed_, with("aud", "http://127.0.0.1:7778/mcp"))), TokenFault::kAudience);
  EXPECT_EQ(FaultOf(*rs, Token(ed_, with("exp", Now() - 120))), TokenFault::kExpired);
  EXPECT_EQ(FaultOf(*rs, Token(ed_, with("exp", Now() - 30))), TokenFault::kNone) << "within the leeway";
  EXPECT_EQ(FaultOf(*rs, Token(ed_, with("nbf", Now() + 600))), TokenFault::kNotYetValid);
  EXPECT_EQ(FaultOf(*rs, Token(ed_, with("iss", "https://other.test"))), TokenFault::kIssuer);
  Json no_exp = Claims();
  no_exp.erase("exp");
  EXPECT_EQ(FaultOf(*rs, Token(ed_, no_exp)), TokenFault::kMissingExp);

  // alg none: no signature at all.
  const std::string unsigned_token =
      B64Json({{"alg", "none"}, {"typ", "at+jwt"}}) + "." + B64Json(Claims()) + ".";
  EXPECT_EQ(FaultOf(*rs, unsigned_token), TokenFault::kAlgorithm);
  // HS256 keyed with the public key's bytes: the classic confusion.
  const std::string input =
      B64Json({{"alg", "HS256"}, {"typ", "at+jwt"}, {"kid", "ed-1"}}) + "." + B64Json(Claims());
  const std::string secret = ed_.jwk["x"].get<std::string>();
  unsigned char mac[32];
  unsigned int mac_len = sizeof mac;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &mac_len);
  EXPECT_EQ(FaultOf(*rs, input + "." + Base64UrlEncode(Raw(mac, mac_len))), TokenFault::kAlgorithm);

  EXPECT_EQ(FaultOf(*rs, Token(ed_, Claims(), {{"alg", "EdDSA"}, {"kid", "nobody"}})),
            TokenFault::kUnknownKey);
  // An ES256 header naming the EdDSA key's kid: kty and alg must agree.
  EXPECT_EQ(FaultOf(*rs, Token(es_, Claims(), {{"alg", "ES256"}, {"kid", "ed-1"}})), TokenFault::kUnknownKey);
  EXPECT_EQ(FaultOf(*rs, Token(ed_, Claims(), {{"alg", "EdDSA"}, {"kid", "ed-1"}, {"typ", "id+jwt"}})),
            TokenFault::kType);

  // The payload changed after signing: another org.
  std::string token = Token(ed_, Claims());
  const size_t dot1 = token.find('.'), dot2 = token.rfind('.');
  Json forged = Claims();
  forged["org"] = "other-org";
  token = token.substr(0, dot1 + 1) + B64Json(forged) + token.substr(dot2);
  EXPECT_EQ(FaultOf(*rs, token), TokenFault::kSignature);

  EXPECT_EQ(FaultOf(*rs, Token(ed_, with("pad", std::string(9000, 'a')))), TokenFault::kMalformed)
      << "over 8 KiB";
  EXPECT_EQ(FaultOf(*rs, "not.a-token"), TokenFault::kMalformed);
  Json no_org = Claims();
  no_org.erase("org");
  EXPECT_EQ(FaultOf(*rs, Token(ed_, no_org)), TokenFault::kClaims) << "no org, and none fixed";
}

TEST_F(OAuthTest, AnIssuerAcceptsOnlyItsAlgorithmsAndStrongRsaKeys) {
  auto rs =
      Server({{"issuers", {{{"issuer", kIssuer}, {"jwks_uri", jwks_.uri()}, {"algorithms", {"EdDSA"}}}}}});
  EXPECT_EQ(FaultOf(*rs, Token(ed_, Claims())), TokenFault::kNone);
  EXPECT_EQ(FaultOf(*rs, Token(es_, Claims())), TokenFault::kAlgorithm);

  TestKey weak = NewKey("RS256", "weak", 1024);
  jwks_.Serve({weak});
  auto rs2 = Server();
  EXPECT_EQ(FaultOf(*rs2, Token(weak, Claims())), TokenFault::kUnknownKey)
      << "an RSA key under 2048 bits is skipped";
}

TEST_F(OAuthTest, ARotatedKeyIsFetchedOnceAndRefetchesAreRateLimited) {
  auto rs = Server();
  ASSERT_EQ(FaultOf(*rs, Token(ed_, Claims())), TokenFault::kNone);
  EXPECT_EQ(jwks_.fetches(), 1);
  ASSERT_EQ(FaultOf(*rs, Token(es_, Claims())), TokenFault::kNone);
  EXPECT_EQ(jwks_.fetches(), 1) << "cached";

  // The AS rotates to a new key, its old ones gone.
  TestKey next = NewKey("EdDSA", "ed-2");
  jwks_.Serve({next});
  EXPECT_EQ(FaultOf(*rs, Token(next, Claims())), TokenFault::kUnknownKey) << "within 10 s of the last fetch";
  EXPECT_EQ(jwks_.fetches(), 1);
  clock_ += std::chrono::seconds(11);
  EXPECT_EQ(FaultOf(*rs, Token(next, Claims())), TokenFault::kNone) << "an unknown kid refetches";
  EXPECT_EQ(jwks_.fetches(), 2);
  // Junk kids now cost nothing but a refusal.
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(FaultOf(*rs, Token(next, Claims(), {{"alg", "EdDSA"}, {"kid", "junk-" + std::to_string(i)}})),
              TokenFault::kUnknownKey);
  }
  EXPECT_EQ(jwks_.fetches(), 2);
  EXPECT_EQ(FaultOf(*rs, Token(ed_, Claims())), TokenFault::kUnknownKey) << "the old key left the set";
}

TEST_F(OAuthTest, TheKeySetIsKeptForItsMaxAge) {
  jwks_.Serve({ed_}, "public, max-age=60");
  auto rs = Server();
  ASSERT_EQ(FaultOf(*rs, Token(ed_, Claims())), TokenFault::kNone);
  clock_ += std::chrono::seconds(59);
  ASSERT_EQ(FaultOf(*rs, Token(ed_, Claims())), TokenFault::kNone);
  EXPECT_EQ(jwks_.fetches(), 1);
  clock_ += std::chrono::seconds(2);
  ASSERT_EQ(FaultOf(*rs, Token(ed_, Claims())), TokenFault::kNone);
  EXPECT_EQ(jwks_.fetches(), 2) << "stale after max-age";
}

TEST_F(OAuthTest, TheConfigIsCheckedAndToolScopesMatchTheToolsOwnNames) {
  OAuthConfig c;
  auto load = [&c](const Json& j) { return OAuthConfig::FromJson(j, &c); };
  const Json issuers = {{{"issuer", kIssuer}, {"jwks_uri", "https://as.test/jwks"}}};
  EXPECT_FALSE(load({{"issuers", issuers}, {"tool_scope", Json::object()}}).ok()) << "a misspelt key";
  EXPECT_FALSE(
      load({{"issuers",
             {{{"issuer", kIssuer}, {"jwks_uri", "https://as.test/jwks"}, {"algorithms", {"HS256"}}}}}})
          .ok());
  EXPECT_FALSE(load({{"issuers", Json::array()}}).ok());
  EXPECT_FALSE(load({{"issuers", issuers}, {"resource_base", "https://gate.test/prefix"}}).ok());
  EXPECT_FALSE(load({{"issuers", issuers}, {"org", {{"fixed", "*"}}}}).ok());
  ASSERT_TRUE(load({{"issuers", issuers},
                    {"scopes_supported", {"mcp:tools"}},
                    {"tool_scopes", {{"write_file", "files:write"}, {"mcp__fs__*", "fs:write"}}}})
                  .ok());
  EXPECT_EQ(c.issuers[0].algorithms, (std::vector<std::string>{"EdDSA", "ES256", "RS256"}));
  OAuthResourceServer rs(c);
  rs.SetDefaultResourceBase(kBase);
  EXPECT_EQ(rs.ScopesForTool("write_file"), std::vector<std::string>{"files:write"});
  EXPECT_EQ(rs.ScopesForTool("mcp:fs/delete"), std::vector<std::string>{"fs:write"});
  EXPECT_TRUE(rs.ScopesForTool("echo").empty());

  EXPECT_EQ(rs.Challenge(OAuthResource::kMcp, false),
            "Bearer resource_metadata=\"http://127.0.0.1:7777/.well-known/oauth-protected-resource/mcp\", "
            "scope=\"mcp:tools\"");
  EXPECT_EQ(rs.Challenge(OAuthResource::kApi, true),
            "Bearer resource_metadata=\"http://127.0.0.1:7777/.well-known/oauth-protected-resource/v1\", "
            "error=\"invalid_token\", scope=\"mcp:tools\"");
  EXPECT_EQ(rs.InsufficientScope(OAuthResource::kMcp, {"mcp:tools", "files:write"}),
            "Bearer error=\"insufficient_scope\", scope=\"mcp:tools files:write\", "
            "resource_metadata=\"http://127.0.0.1:7777/.well-known/oauth-protected-resource/mcp\"");
  const Json m = rs.Metadata(OAuthResource::kMcp);
  EXPECT_EQ(m["resource"], kMcp);
  EXPECT_EQ(m["authorization_servers"], Json::array({kIssuer}));
  EXPECT_EQ(m["bearer_methods_supported"], Json::array({"header"}));
  EXPECT_EQ(m["scopes_supported"], Json::array({"mcp:tools"}));
}

TEST_F(OAuthTest, AFixedOrgAndAConfiguredBaseWin) {
  auto rs = Server({{"org", {{"fixed", "team-a"}}}, {"resource_base", "https://gate.test/"}});
  EXPECT_EQ(rs->Resource(OAuthResource::kMcp), "https://gate.test/mcp") << "not the bound address";
  Principal who;
  OAuthRefusal why;
  ASSERT_TRUE(rs->Authenticate(Token(ed_, Claims("https://gate.test/mcp")), OAuthResource::kMcp, &who, &why))
      << why.message;
  EXPECT_EQ(who.org_id, "team-a") << "the token's own org claim is not believed";
}

}  // namespace
}  // namespace tollgate
