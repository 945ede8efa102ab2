// The redaction corpus (docs/redaction.md, issue 28): table-driven, each
// row one string as an agent, a tool or an error message carries it.
// - true positives: the secret part is gone, the rest of the text is kept;
// - false positives: ordinary text (file names, error messages, words that
//   contain or follow a secret-looking word, hashes, UUIDs, URLs without
//   credentials, command lines without one) comes out unchanged;
// - every vendor prefix the scanner knows has its own row, so removing one
//   prefix from core/redact.cpp fails its row (and a new prefix without a
//   row fails the coverage check);
// - object keys and argument lists: the key spellings and the argv forms.
#include <gtest/gtest.h>

#include <set>

#include "core/redact.h"

namespace tollgate {
namespace {

std::string Scrub(std::string s) {
  DefaultRedactor()->RedactString(&s);
  return s;
}

struct TruePositive {
  std::string text;
  std::vector<std::string> secrets;  // every one must be gone
  std::string kept;                  // a part that must stay ("" = none checked)
};

const std::vector<TruePositive>& TruePositives() {
  static const std::vector<TruePositive> kRows = {
      // Short names and their spellings.
      {"pwd=Hunter2xyz", {"Hunter2xyz"}, "pwd="},
      {"DB_PWD=Hunter2xyz", {"Hunter2xyz"}, "DB_PWD="},
      {"export MYSQL_PWD=Hunter2xyz", {"Hunter2xyz"}, "export MYSQL_PWD="},
      {"pass=Hunter2xyz", {"Hunter2xyz"}, ""},
      {"db_pass=Hunter2xyz", {"Hunter2xyz"}, "db_pass="},
      {"smtpPass: Hunter2xyz", {"Hunter2xyz"}, "smtpPass:"},
      {"--pass Hunter2xyz", {"Hunter2xyz"}, "--pass"},
      {"passphrase: correct horse battery staple", {"correct", "horse", "battery", "staple"}, "passphrase:"},
      {"--passphrase=Tr0ub4dor", {"Tr0ub4dor"}, "--passphrase="},
      {"ssh_key_passphrase=Tr0ub4dor", {"Tr0ub4dor"}, ""},
      {"privateKey=MIIEvQIBADANBg", {"MIIEvQIBADANBg"}, "privateKey="},
      {"private_key=MIIEvQIBADANBg", {"MIIEvQIBADANBg"}, ""},
      {"PrivateKey: MIIEvQIBADANBg", {"MIIEvQIBADANBg"}, ""},
      {"PRIVATE-KEY=MIIEvQIBADANBg", {"MIIEvQIBADANBg"}, ""},
      {"accountKey=Zm9vYmFyYmF6cXV4", {"Zm9vYmFyYmF6cXV4"}, "accountKey="},
      {"account-key=Zm9vYmFyYmF6cXV4", {"Zm9vYmFyYmF6cXV4"}, ""},
      {"account_key: Zm9vYmFyYmF6cXV4", {"Zm9vYmFyYmF6cXV4"}, ""},
      {"Ocp-Apim-Subscription-Key: 0123abcd4567ef89", {"0123abcd4567ef89"}, "Ocp-Apim-Subscription-Key:"},
      {"X-Functions-Key: fUnCkEy0123456789", {"fUnCkEy0123456789"}, "X-Functions-Key:"},
      {"signing_key=sg0123456789", {"sg0123456789"}, ""},
      {"MASTER_KEY=mk0123456789", {"mk0123456789"}, ""},
      // Azure connection strings.
      {"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4+/"
       "AB==;EndpointSuffix=core.windows.net",
       {"Zm9vYmFyYmF6cXV4"},
       "AccountName=acct;"},
      {"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=c2FzS2V5MTIz+/"
       "=;EntityPath=q",
       {"c2FzS2V5MTIz"},
       "SharedAccessKeyName=Root;"},
      {"BlobEndpoint=https://a.blob.core.windows.net/"
       ";SharedAccessSignature=sv=2020-08-04&ss=b&sig=AbC%2BdEf%3D",
       {"AbC%2BdEf"},
       "BlobEndpoint=https://a.blob.core.windows.net/;"},
      {"https://a.blob.core.windows.net/c/b?sv=2020-08-04&se=2026-01-01&sp=r&sig=Zm9vYmFy%2Bsig",
       {"Zm9vYmFy"},
       "sp=r&"},
      // curl's user:password.
      {"curl -u alice:s3cretPw https://h.example/", {"s3cretPw"}, "curl -u alice:"},
      {"curl --user alice:s3cretPw https://h.example/", {"s3cretPw"}, "--user alice:"},
      {"curl --user=alice:s3cretPw https://h.example/", {"s3cretPw"}, "--user=alice:"},
      {"curl -ualice:s3cretPw https://h.example/", {"s3cretPw"}, ""},
      {"curl -u 'alice:s3cret Pw' https://h.example/", {"s3cret Pw"}, ""},
      {"curl -x http://proxy:3128 -U bob:pr0xyPw https://h.example/", {"pr0xyPw"}, ""},
      {"curl --proxy-user bob:pr0xyPw https://h.example/", {"pr0xyPw"}, ""},
      // mysql's attached password.
      {"mysql -h db -uroot -pS3cretPW shop", {"S3cretPW"}, "mysql -h db -uroot -p"},
      {"mysqldump -uroot -p'my s3cret' shop", {"my s3cret"}, ""},
      {"/usr/bin/mariadb -uroot -pS3cretPW", {"S3cretPW"}, ""},
      {"mysql --password=S3cretPW shop", {"S3cretPW"}, ""},
      // Hugging Face.
      {"HF token hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 in use",
       {"AbCdEfGhIjKlMnOpQrStUvWxYz01234567"},
       "in use"},
      // Percent-encoded names (and separators).
      {"https://h.example/login?user=bob&p%61ssword=s3cretQ1&x=1", {"s3cretQ1"}, "user=bob&"},
      {"p%61ssword=s3cretQ1", {"s3cretQ1"}, ""},
      {"%70%61%73%73%77%6f%72%64=s3cretQ1", {"s3cretQ1"}, ""},
      {"p%2561ssword=s3cretQ1", {"s3cretQ1"}, ""},
      {"db%5Fpassword=s3cretQ1&x=1", {"s3cretQ1"}, "&x=1"},
      {"acc%65ss_token=s3cretQ1", {"s3cretQ1"}, ""},
      {"https://h.example/cb?next=https%3A%2F%2Fo.example%2Fx%3Faccess_token%3Ds3cretQ1%26page%3D2",
       {"s3cretQ1"},
       "%26page%3D2"},
      {"https://h.example/cb?next=https%3A%2F%2Fo.example%2Fx%3Fsig%3DsIgN4tUr3%26a%3D1",
       {"sIgN4tUr3"},
       "%26a%3D1"},
      // Still caught after the over-redaction fixes.
      {"password: hunter", {"hunter"}, "password:"},
      {"password: hunter2 # the old one", {"hunter2"}, "# the old one"},
      {"token: abc123 (expires soon)", {"abc123"}, "(expires soon)"},
      {"Authorization: Basic dXNlcjpwYXNz", {"dXNlcjpwYXNz"}, ""},
      {R"({"token": "No such"})", {"No such"}, ""},
      {"https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r.git",
       {"ghp_16C7e42F"},
       "@github.com"},
      {"https://oauth2:glT0ken123@gitlab.example/o/r.git", {"glT0ken123"}, "@gitlab.example"},
      {"https://AbCd3fGh1jKlMn0p@host.example/", {"AbCd3fGh1jKlMn0p"}, ""},
  };
  return kRows;
}

TEST(RedactCorpus, EveryTruePositiveLosesItsSecretAndKeepsTheRest) {
  for (const auto& row : TruePositives()) {
    const std::string text = "before " + row.text + "\nafter";
    const std::string out = Scrub(text);
    for (const auto& secret : row.secrets) {
      EXPECT_EQ(out.find(secret), std::string::npos) << row.text << " -> " << out;
    }
    EXPECT_NE(out.find(kRedacted), std::string::npos) << row.text;
    EXPECT_EQ(out.rfind("before ", 0), 0u) << row.text << " -> " << out;
    EXPECT_NE(out.find("\nafter"), std::string::npos) << row.text << " -> " << out;
    if (!row.kept.empty()) {
      EXPECT_NE(out.find(row.kept), std::string::npos) << row.text << " -> " << out;
    }
    EXPECT_EQ(Scrub(out), out) << "redacting twice changes nothing: " << row.text;
  }
}

const std::vector<std::string>& FalsePositives() {
  static const std::vector<std::string> kRows = {
      // File names and error messages that name a secret-looking file.
      "admin.token: No such file",
      "cat: admin.token: No such file or directory",
      "token: No such file",
      "open /etc/app/secret.key: permission denied",
      "secrets.yaml: Permission denied",
      "Error: password: must be at least 12 characters",
      "api_key: Is a directory",
      "token: none",
      "password: null",
      "client_secret: missing",
      "credentials.json",
      "id_rsa.key",
      // Words that contain or follow a secret-looking word.
      "password reset link sent",
      "the token expired",
      "the key is missing",
      "keyboard",
      "keyboard=us",
      "passport",
      "passport=P1234567",
      "bypass",
      "bypass=true",
      "compass: north",
      "passwordless login enabled",
      "tokens_used=42",
      "max_tokens: 1024",
      "tokenizer: bert-base",
      "monkey=banana",
      "PASS: test_login",
      "the secret sauce is butter",
      "Basic usage",
      "Basic internationalization",
      "the bearer bonds were sold",
      "pass_through=true",
      // Ordinary identifiers.
      "commit 3f786850e387550fdab836ed7e6dc881de23001b",
      "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
      "md5 d41d8cd98f00b204e9800998ecf8427e",
      "request 123e4567-e89b-12d3-a456-426614174000 done",
      "X-Request-Id: 123e4567-e89b-12d3-a456-426614174000",
      "aGVsbG8gd29ybGQ=",
      "Content-Type: application/json",
      "2026-11-23T18:08:22Z",
      "hf_hub_download(repo_id)",
      "AKIA is a prefix",
      // URLs without credentials.
      "https://example.com/a/b?page=2&sort=asc",
      "GET https://api.example.com/v1/items",
      "ssh://git@github.com/org/repo.git",
      "postgres://app@db.internal/shop",
      "git@github.com:org/repo.git",
      "https://example.com/users/@alice",
      "mailto:someone@example.com",
      "https://h.example/search?q=password%20reset",
      // Command lines without a credential.
      "docker run -u 1000:1000 img",
      "docker run --user=1000:1000 img",
      "curl --user-agent a:b https://h.example/",
      "curl -u alice https://h.example/",
      "sort -u names.txt",
      "ssh -p 2222 host",
      "ssh -p2222 host",
      "mkdir -pv dir",
      "cp -pr a b",
      "docker run -p8080:80 img",
      "mysql -p shop",
  };
  return kRows;
}

TEST(RedactCorpus, NoFalsePositiveIsChanged) {
  for (const auto& text : FalsePositives()) EXPECT_EQ(Scrub(text), text);
}

// One row per vendor prefix: the prefix, how many body characters it needs
// at least, and what they are.
struct Vendor {
  std::string prefix;
  size_t min_body;
  bool aws;  // exactly 16 upper-case letters or digits
};
const std::vector<Vendor>& Vendors() {
  static const std::vector<Vendor> kRows = {
      {"sk-", 20, false},      {"sk_live_", 10, false}, {"sk_test_", 10, false},    {"rk_live_", 10, false},
      {"rk_test_", 10, false}, {"ghp_", 20, false},     {"gho_", 20, false},        {"ghs_", 20, false},
      {"ghu_", 20, false},     {"ghr_", 20, false},     {"github_pat_", 20, false}, {"xoxa-", 10, false},
      {"xoxb-", 10, false},    {"xoxp-", 10, false},    {"xoxo-", 10, false},       {"xoxs-", 10, false},
      {"xoxr-", 10, false},    {"AIza", 30, false},     {"glpat-", 20, false},      {"npm_", 30, false},
      {"hf_", 30, false},      {"AKIA", 16, true},      {"ASIA", 16, true},         {"AGPA", 16, true},
      {"AIDA", 16, true},      {"AROA", 16, true},      {"ANPA", 16, true},         {"ANVA", 16, true},
      {"AIPA", 16, true},
  };
  return kRows;
}

std::string Body(size_t n, bool aws) {
  static const char kMixed[] = "a7Bc3De9Fg2Hk4Lm6Np8Qr1St5Uv0Wx";
  static const char kAws[] = "Q7R3S9T2U4V6W8X1Y5Z0";
  std::string b;
  for (size_t i = 0; i < n; ++i) b += aws ? kAws[i % (sizeof kAws - 1)] : kMixed[i % (sizeof kMixed - 1)];
  return b;
}

TEST(RedactCorpus, EveryVendorPrefixIsRedactedByItsOwnRule) {
  for (const auto& v : Vendors()) {
    // Inside a sentence, after no NAME= or scheme that another rule reads.
    const std::string body = Body(v.aws ? 16 : v.min_body + 6, v.aws);
    const std::string token = v.prefix + body;
    const std::string out = Scrub("use " + token + " now");
    EXPECT_EQ(out, "use [REDACTED] now") << v.prefix;
    // The shortest body it takes, and one shorter, which is left alone.
    const std::string shortest = v.prefix + Body(v.min_body, v.aws);
    EXPECT_EQ(Scrub("use " + shortest + " now"), "use [REDACTED] now") << v.prefix;
    const std::string too_short = v.prefix + Body(v.min_body - 1, v.aws);
    EXPECT_EQ(Scrub("use " + too_short + " now"), "use " + too_short + " now") << v.prefix;
    // It must start a word.
    EXPECT_EQ(Scrub("use x" + token + " now"), "use x" + token + " now") << v.prefix;
  }
}

TEST(RedactCorpus, EveryPrefixTheScannerKnowsHasARow) {
  std::set<std::string> rows;
  for (const auto& v : Vendors()) rows.insert(v.prefix);
  for (const auto& p : BuiltinTokenPrefixes())
    EXPECT_EQ(rows.count(p), 1u) << p << " has no row in Vendors()";
  EXPECT_EQ(rows.size(), BuiltinTokenPrefixes().size());
}

TEST(RedactCorpus, SecretKeysAreFoundInEverySpellingAndWordsThatContainThemAreNot) {
  const Redactor& r = *DefaultRedactor();
  for (const char* key : {"pwd",
                          "PWD",
                          "db_pwd",
                          "dbPwd",
                          "pass",
                          "PASS",
                          "user_pass",
                          "smtpPass",
                          "passphrase",
                          "ssh-passphrase",
                          "privateKey",
                          "private_key",
                          "private-key",
                          "PrivateKey",
                          "PRIVATE.KEY",
                          "accountKey",
                          "account_key",
                          "account-key",
                          "AccountKey",
                          "Ocp-Apim-Subscription-Key",
                          "X-Functions-Key",
                          "X-Auth-Email",
                          "x_auth_key",
                          "p%61ssword",
                          "password",
                          "X-Api-Key",
                          "apiKey",
                          "APIKey",
                          "Set-Cookie",
                          "aws_secret_access_key",
                          "accessKeyId"}) {
    EXPECT_TRUE(r.SecretKey(key)) << key;
  }
  for (const char* key : {"passport", "bypass", "compass", "pass_through", "passenger", "keyboard", "monkey",
                          "Accept", "User-Agent", "max_authors", "path", "pwd_hint_shown", "surpass"}) {
    EXPECT_FALSE(r.SecretKey(key)) << key;
  }
  Json v = {{"dbPwd", "p1"},
            {"PrivateKey", "k1"},
            {"account-key", "k2"},
            {"passport", "P1234567"},
            {"bypass", true}};
  auto ptrs = r.Redact(v);
  EXPECT_EQ(v, Json({{"dbPwd", kRedacted},
                     {"PrivateKey", kRedacted},
                     {"account-key", kRedacted},
                     {"passport", "P1234567"},
                     {"bypass", true}}));
  EXPECT_EQ(ptrs.size(), 3u);
}

TEST(RedactCorpus, ThePolicysKeyFragmentsMatchInEverySpellingToo) {
  std::shared_ptr<const Redactor> r;
  ASSERT_TRUE(Redactor::FromPolicy(Json::parse(R"({"redact": {"keys": ["social_security"]}})"), &r).ok());
  EXPECT_TRUE(r->SecretKey("socialSecurityNumber"));
  EXPECT_TRUE(r->SecretKey("SOCIAL-SECURITY"));
  EXPECT_TRUE(r->SecretKey("db_pwd")) << "the built-in rules stay";
  EXPECT_FALSE(r->SecretKey("social"));
  Redactor only({"ssn"});
  EXPECT_TRUE(only.SecretKey("customer_SSN"));
  EXPECT_FALSE(only.SecretKey("db_pwd")) << "a redactor of its own fragments has only those";
}

TEST(RedactCorpus, ArgumentListsLoseTheirPasswords) {
  Json v = {{"curl", {"curl", "-u", "alice:s3cretPw", "https://h.example/"}},
            {"proxy", {"curl", "--proxy-user", "bob:pr0xyPw"}},
            {"docker", {"docker", "run", "-u", "1000:1000", "img"}},
            {"mysql", {"mysql", "-uroot", "-pS3cretPW", "shop"}},
            {"run", {{"command", "/usr/bin/mysqldump"}, {"args", {"-uroot", "-pS3cretPW", "shop"}}}},
            {"ssh", {"ssh", "-p2222", "host"}}};
  auto ptrs = DefaultRedactor()->Redact(v);
  EXPECT_EQ(v["curl"], Json({"curl", "-u", "alice:[REDACTED]", "https://h.example/"}));
  EXPECT_EQ(v["proxy"], Json({"curl", "--proxy-user", "bob:[REDACTED]"}));
  EXPECT_EQ(v["docker"], Json({"docker", "run", "-u", "1000:1000", "img"})) << "uid:gid is not a password";
  EXPECT_EQ(v["mysql"], Json({"mysql", "-uroot", "-p[REDACTED]", "shop"}));
  EXPECT_EQ(v["run"]["args"], Json({"-uroot", "-p[REDACTED]", "shop"}))
      << "the program named beside the list";
  EXPECT_EQ(v["ssh"], Json({"ssh", "-p2222", "host"})) << "-p is mysql's password only after mysql";
  std::sort(ptrs.begin(), ptrs.end());
  EXPECT_EQ(ptrs, (std::vector<std::string>{"/curl/2", "/mysql/2", "/proxy/2", "/run/args/1"}));
  EXPECT_TRUE(DefaultRedactor()->Redact(v).empty()) << "a redacted value is not redacted again";
}

}  // namespace
}  // namespace tollgate
