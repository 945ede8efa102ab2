// core/jwt: base64url, Ed25519 keys and key files, EdDSA JWTs, and interop
// with Debian's PyJWT (/usr/bin/python3, installed by scripts/setup.sh).
#include "core/jwt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "core/sha256.h"
#include "test_util.h"

namespace tollgate {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

struct Keys {
  std::string pem, pub;
};

Keys NewKeys() {
  Keys k;
  Status s = GenerateEd25519(&k.pem, &k.pub);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return k;
}

JwtSigner SignerOf(const Keys& k, const std::string& kid = "") {
  JwtSigner signer;
  Status s = JwtSigner::FromPem(k.pem, &signer, kid);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return signer;
}

Ed25519Verifier VerifierOf(const std::string& pub) {
  Ed25519Verifier v;
  Status s = Ed25519Verifier::FromPublic(pub, &v);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return v;
}

Json SampleClaims() {
  return {{"org_id", "o1"},
          {"agent_id", "a1"},
          {"request_id", "r1"},
          {"value_sha256", Sha256Hex(R"({"tool":"echo"})")},
          {"iat", 1'790'000'000}};
}

// What ingest will do with a token.
bool Verifies(const Ed25519Verifier& v, const std::string& token) {
  JwtParts parts;
  return ParseJwt(token, &parts).ok() && v.Verify(parts.signing_input, parts.signature);
}

// A token from JSON texts, unsigned: for tests of the shape checks.
std::string Assemble(std::string_view header, std::string_view payload,
                     std::string_view signature = std::string(64, 's')) {
  return Base64UrlEncode(header) + "." + Base64UrlEncode(payload) + "." + Base64UrlEncode(signature);
}

Status ParseStatus(const std::string& token) {
  JwtParts parts;
  return ParseJwt(token, &parts);
}

TEST(Base64UrlTest, EncodesRfc4648VectorsWithTheUrlAlphabetAndNoPadding) {
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},          {"foo", "Zm9v"},
      {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}, {"\xfb\xff", "-_8"}};
  for (const auto& [bytes, text] : vectors) {
    EXPECT_EQ(Base64UrlEncode(bytes), text);
    std::string back;
    ASSERT_TRUE(Base64UrlDecode(text, &back)) << text;
    EXPECT_EQ(back, bytes);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n <= all.size(); ++n) {
    std::string back;
    ASSERT_TRUE(Base64UrlDecode(Base64UrlEncode(all.substr(0, n)), &back));
    EXPECT_EQ(back, all.substr(0, n));
  }
}

TEST(Base64UrlTest, DecodingRefusesEverySpellingButTheCanonicalOne) {
  const std::string refused[] = {"Zg==",  "Zm8=", "Zm9vYg=", "+/8", "/w",  "Zm9v\n", " Zm9v",   "Zm 9v",
                                 "Zm9vY", "Z",    "Zh",      "Zm9", "-_9", "Zm9v.",  "\xc3\xa9"};
  for (const std::string& text : refused) {
    std::string out = "untouched";
    EXPECT_FALSE(Base64UrlDecode(text, &out)) << text;
    EXPECT_EQ(out, "untouched");
  }
}

TEST(JwtTest, ASignedTokenVerifiesWithItsPublicKeyAndNoOther) {
  Keys k = NewKeys();
  EXPECT_THAT(k.pem, HasSubstr("-----BEGIN PRIVATE KEY-----"));
  EXPECT_EQ(k.pub.size(), 43u);  // 32 bytes
  JwtSigner signer = SignerOf(k, "agent-1");
  EXPECT_EQ(signer.public_b64url(), k.pub);
  std::string token = signer.Sign(SampleClaims());

  JwtParts parts;
  Status s = ParseJwt(token, &parts);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(parts.header, (Json{{"alg", "EdDSA"}, {"kid", "agent-1"}, {"typ", "JWT"}}));
  EXPECT_EQ(parts.claims, SampleClaims());
  EXPECT_EQ(parts.signing_input, token.substr(0, token.rfind('.')));
  EXPECT_EQ(parts.signature.size(), 64u);
  EXPECT_TRUE(VerifierOf(k.pub).Verify(parts.signing_input, parts.signature));
  EXPECT_FALSE(VerifierOf(NewKeys().pub).Verify(parts.signing_input, parts.signature));
  EXPECT_FALSE(Ed25519Verifier().Verify(parts.signing_input, parts.signature));

  Ed25519Verifier copy;
  {
    Ed25519Verifier original = VerifierOf(k.pub);
    copy = original;
  }  // the copy shares the key, which outlives the original
  EXPECT_TRUE(copy.Verify(parts.signing_input, parts.signature));
  EXPECT_EQ(copy.public_b64url(), k.pub);
  // Without a kid the header is exactly {"alg":"EdDSA","typ":"JWT"}.
  EXPECT_EQ(SignerOf(k).Sign(SampleClaims()).substr(0, 37), "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.");
}

TEST(JwtTest, AnAlteredClaimOrAnyChangedCharacterIsRefused) {
  Keys k = NewKeys();
  Ed25519Verifier v = VerifierOf(k.pub);
  std::string token = SignerOf(k).Sign(SampleClaims());
  ASSERT_TRUE(Verifies(v, token));

  Json altered = SampleClaims();
  altered["agent_id"] = "a2";
  size_t dot1 = token.find('.'), dot2 = token.rfind('.');
  std::string forged = token.substr(0, dot1 + 1) + Base64UrlEncode(altered.dump()) + token.substr(dot2);
  EXPECT_TRUE(ParseStatus(forged).ok());
  EXPECT_FALSE(Verifies(v, forged));

  // Each character becomes the next one of the alphabet. For the last
  // signature character that changes only unused bits, the same signature
  // spelt differently: strict base64url is what refuses that one.
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '.') continue;
    std::string changed = token;
    changed[i] = alphabet[(alphabet.find(token[i]) + 1) % 64];
    EXPECT_FALSE(Verifies(v, changed)) << "character " << i << " of " << token;
  }
  JwtParts parts;
  ASSERT_TRUE(ParseJwt(token, &parts).ok());
  for (size_t i = 0; i < parts.signature.size() * 8; ++i) {
    std::string sig = parts.signature;
    sig[i / 8] ^= static_cast<char>(1 << (i % 8));
    EXPECT_FALSE(v.Verify(parts.signing_input, sig)) << "bit " << i;
  }
}

TEST(ParseJwtTest, RefusesEveryAlgorithmButEdDsa) {
  const std::string claims = SampleClaims().dump();
  ASSERT_TRUE(ParseStatus(Assemble(R"({"alg":"EdDSA"})", claims)).ok());  // the control
  for (std::string alg : {R"("none")", R"("None")", R"("HS256")", R"("RS256")", R"("ES256")", R"("eddsa")",
                          R"("Ed25519")", "null", R"(["EdDSA"])"}) {
    Status s = ParseStatus(Assemble(R"({"typ":"JWT","alg":)" + alg + "}", claims));
    EXPECT_EQ(s.code(), errc::kUnauthenticated) << alg;
    EXPECT_THAT(s.message(), HasSubstr("alg")) << alg;
  }
  // The classic forgery: alg none and no signature at all.
  Status none = ParseStatus(Base64UrlEncode(R"({"alg":"none"})") + "." + Base64UrlEncode(claims) + ".");
  EXPECT_EQ(none.code(), errc::kUnauthenticated);
  EXPECT_THAT(none.message(), HasSubstr("\"none\""));
  EXPECT_THAT(ParseStatus(Assemble(R"({"typ":"JWT"})", claims)).message(), HasSubstr("no alg"));
  Status crit = ParseStatus(Assemble(R"({"alg":"EdDSA","crit":["exp"],"exp":1})", claims));
  EXPECT_EQ(crit.code(), errc::kUnauthenticated);
  EXPECT_THAT(crit.message(), HasSubstr("crit"));
}

TEST(ParseJwtTest, RefusesMalformedTokensNamingTheFault) {
  const std::string header = R"({"alg":"EdDSA"})", claims = SampleClaims().dump();
  const std::string good = Assemble(header, claims);
  ASSERT_TRUE(ParseStatus(good).ok());
  const std::pair<std::string, std::string> cases[] = {
      {"", "three dot-separated parts"},
      {Base64UrlEncode(header) + "." + Base64UrlEncode(claims), "three dot-separated parts"},
      {good + ".", "three dot-separated parts"},
      {good + "." + good, "three dot-separated parts"},
      {Base64UrlEncode(header) + "=." + Base64UrlEncode(claims) + ".x", "header is not unpadded base64url"},
      {Base64UrlEncode(header) + ".eyJhIjoxfQ==." + Base64UrlEncode(std::string(64, 's')),
       "payload is not unpadded"},
      {Assemble("[]", claims), "header is not a JSON object"},
      {Assemble("{", claims), "header is not JSON"},
      {Assemble(header, "[1]"), "payload is not a JSON object"},
      {Assemble(header, R"("claims")"), "payload is not a JSON object"},
      {Assemble(header, "42"), "payload is not a JSON object"},
      {Assemble(header, "{\"a\":1} x"), "payload is not JSON"},
      {Assemble(header, claims, std::string(63, 's')), "signature is not 64 bytes"},
      {Assemble(header, claims, std::string(65, 's')), "signature is not 64 bytes"},
      {Assemble(header, claims, ""), "signature is not 64 bytes"},
      {Assemble(header, claims) + "=", "signature is not 64 bytes"},
  };
  for (const auto& [token, fault] : cases) {
    Status s = ParseStatus(token);
    EXPECT_EQ(s.code(), errc::kUnauthenticated) << token;
    EXPECT_THAT(s.message(), HasSubstr(fault)) << token;
  }
}

TEST(ParseJwtTest, RefusesATokenOverEightKibibytesEvenWhenValidlySigned) {
  Keys k = NewKeys();
  JwtSigner signer = SignerOf(k);
  Json claims = SampleClaims();
  claims["pad"] = std::string(5000, 'x');
  std::string fits = signer.Sign(claims);
  ASSERT_LE(fits.size(), kMaxJwtBytes);
  EXPECT_TRUE(Verifies(VerifierOf(k.pub), fits));
  claims["pad"] = std::string(6500, 'x');
  std::string big = signer.Sign(claims);
  ASSERT_GT(big.size(), kMaxJwtBytes);
  Status s = ParseStatus(big);
  EXPECT_EQ(s.code(), errc::kUnauthenticated);
  EXPECT_THAT(s.message(), HasSubstr("over 8192 bytes"));
}

TEST(JwtTest, SigningAnythingButAnObjectThrows) {
  JwtSigner signer = SignerOf(NewKeys());
  EXPECT_THROW(signer.Sign(Json::array()), std::invalid_argument);
  EXPECT_THROW(signer.Sign(Json{{"bad", std::string("\xff")}}), std::invalid_argument);
  EXPECT_THROW(JwtSigner().Sign(SampleClaims()), std::runtime_error);
}

// `key` as PEM written by OpenSSL, encrypted with passphrase "pw" when asked.
std::string PemOf(EVP_PKEY* key, bool is_private, bool encrypted = false) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (is_private) {
    PEM_write_bio_PKCS8PrivateKey(bio, key, encrypted ? EVP_aes_256_cbc() : nullptr, nullptr, 0, nullptr,
                                  const_cast<char*>("pw"));
  } else {
    PEM_write_bio_PUBKEY(bio, key);
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  return pem;
}

TEST(KeyTest, PublicKeyOfRecoversTheKeyAndRefusesAnythingButAnEd25519PrivateKey) {
  Keys k = NewKeys();
  std::string pub;
  ASSERT_TRUE(PublicKeyOf(k.pem, &pub).ok());
  EXPECT_EQ(pub, k.pub);

  EVP_PKEY* ed = nullptr;
  {
    BIO* bio = BIO_new_mem_buf(k.pem.data(), static_cast<int>(k.pem.size()));
    ed = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
  }
  ASSERT_NE(ed, nullptr);
  EVP_PKEY* ec = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  ASSERT_NE(ec, nullptr);
  const std::pair<std::string, std::string> refused[] = {
      {PemOf(ec, true), "an EC private key"},
      {PemOf(ed, false), "the Ed25519 public key"},
      {PemOf(ed, true, /*encrypted=*/true), "an encrypted Ed25519 key (no passphrase prompt)"},
      {"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "a broken PEM"},
      {"", "nothing"},
  };
  EVP_PKEY_free(ec);
  EVP_PKEY_free(ed);
  for (const auto& [pem, what] : refused) {
    EXPECT_EQ(PublicKeyOf(pem, &pub).code(), errc::kInvalidKey) << what;
    JwtSigner signer;
    EXPECT_EQ(JwtSigner::FromPem(pem, &signer).code(), errc::kInvalidKey) << what;
  }
}

TEST(KeyTest, AVerifierTakesOnlyThirtyTwoCanonicalBytesAndNoSmallOrderPoint) {
  std::string raw;
  ASSERT_TRUE(Base64UrlDecode(NewKeys().pub, &raw));
  auto hex_key = [](const std::string& hex) {
    std::string bytes;
    for (size_t i = 0; i < hex.size(); i += 2)
      bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    return Base64UrlEncode(bytes);
  };
  const std::pair<std::string, std::string> refused[] = {
      {Base64UrlEncode(raw.substr(0, 31)), "31 bytes"},
      {Base64UrlEncode(raw + "x"), "33 bytes"},
      {Base64UrlEncode(raw) + "=", "padded"},
      {"", "empty"},
      {hex_key(std::string(64, '0')), "y = 0, order 4"},
      {hex_key("01" + std::string(62, '0')), "the identity"},
      {hex_key("01" + std::string(60, '0') + "80"), "the identity, sign bit set"},
      {hex_key("ec" + std::string(60, 'f') + "7f"), "order 2"},
      {hex_key("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"), "order 8"},
  };
  for (const auto& [pub, what] : refused) {
    Ed25519Verifier v;
    EXPECT_EQ(Ed25519Verifier::FromPublic(pub, &v).code(), errc::kInvalidKey) << what;
  }
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(KeyFileTest, AKeyFileIsOwnerOnlyInOwnerOnlyDirectoriesAndNeverSilentlyReplaced) {
  TempDir dir;
  const std::string path = dir.sub("keys/agents/a1.pem");
  Keys first = NewKeys(), second = NewKeys();
  mode_t old_umask = umask(0);  // the modes must not depend on the umask
  Status s = WritePrivateKeyFile(path, first.pem);
  umask(old_umask);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(dir.sub("keys")), 0700u);
  EXPECT_EQ(ModeOf(dir.sub("keys/agents")), 0700u);
  std::string pem;
  ASSERT_TRUE(ReadPrivateKeyFile(path, &pem).ok());
  EXPECT_EQ(pem, first.pem);

  s = WritePrivateKeyFile(path, second.pem);
  EXPECT_EQ(s.code(), errc::kKeyFile);
  EXPECT_THAT(s.message(), HasSubstr("refusing to overwrite"));
  ASSERT_TRUE(ReadPrivateKeyFile(path, &pem).ok());
  EXPECT_EQ(pem, first.pem);

  ASSERT_TRUE(WritePrivateKeyFile(path, second.pem, /*overwrite=*/true).ok());
  ASSERT_TRUE(ReadPrivateKeyFile(path, &pem).ok());
  EXPECT_EQ(pem, second.pem);
  EXPECT_EQ(ModeOf(path), 0600u);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.sub("keys/agents"))) {
    names.push_back(e.path().filename());
  }
  EXPECT_EQ(names, std::vector<std::string>{"a1.pem"});  // no temporary left behind

  EXPECT_EQ(ReadPrivateKeyFile(dir.sub("missing.pem"), &pem).code(), errc::kKeyFile);
  std::ofstream(dir.sub("huge.pem")) << std::string(70 * 1024, 'x');
  EXPECT_EQ(ReadPrivateKeyFile(dir.sub("huge.pem"), &pem).code(), errc::kKeyFile);
}

// Debian's interpreter, not the first python3 on PATH: that is where
// python3-jwt and python3-cryptography are installed.
constexpr const char* kPython = "/usr/bin/python3";

using PythonRun = testing::CommandResult;

// Runs `script` with `args` (which must not contain a single quote) under
// kPython; stdout is captured, stderr passes through.
PythonRun RunPython(const TempDir& dir, const std::string& script,
                    const std::vector<std::string>& args = {}) {
  const std::string file = dir.sub("script.py");
  std::ofstream(file) << script;
  std::string command = std::string(kPython) + " '" + file + "'";
  for (const std::string& a : args) {
    EXPECT_EQ(a.find('\''), std::string::npos);
    command += " '" + a + "'";
  }
  PythonRun run = testing::RunCommand(command);
  while (!run.out.empty() && run.out.back() == '\n') run.out.pop_back();
  return run;
}

// Missing PyJWT is a broken setup, not a reason to skip the interop tests.
::testing::AssertionResult HasPyJwt(const TempDir& dir) {
  if (RunPython(dir, "import jwt, cryptography").exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << kPython << " cannot import jwt and cryptography (Debian's "
                                       << "python3-jwt, python3-cryptography): run scripts/setup.sh";
}

TEST(PyJwtInteropTest, ATokenPyJwtSignsWithTheKeyFileWeWroteVerifiesHere) {
  TempDir dir;
  ASSERT_TRUE(HasPyJwt(dir));
  Keys k = NewKeys();
  const std::string path = dir.sub("keys/agent.pem");
  ASSERT_TRUE(WritePrivateKeyFile(path, k.pem).ok());
  PythonRun run = RunPython(dir, R"(
import json, sys, jwt
from cryptography.hazmat.primitives.serialization import load_pem_private_key
with open(sys.argv[1], "rb") as f:
    key = load_pem_private_key(f.read(), password=None)
print(jwt.encode(json.loads(sys.argv[2]), key, algorithm="EdDSA", headers={"kid": "py"}))
)",
                            {path, SampleClaims().dump()});
  ASSERT_EQ(run.exit_code, 0) << run.out;

  JwtParts parts;
  Status s = ParseJwt(run.out, &parts);
  ASSERT_TRUE(s.ok()) << s.ToString() << " token: " << run.out;
  EXPECT_EQ(parts.header.value("alg", ""), "EdDSA");
  EXPECT_EQ(parts.header.value("kid", ""), "py");
  EXPECT_EQ(parts.claims, SampleClaims());
  EXPECT_TRUE(VerifierOf(k.pub).Verify(parts.signing_input, parts.signature));
  EXPECT_FALSE(VerifierOf(NewKeys().pub).Verify(parts.signing_input, parts.signature));
}

TEST(PyJwtInteropTest, PyJwtVerifiesOurTokenWithTheRawPublicKeyAndNoOther) {
  TempDir dir;
  ASSERT_TRUE(HasPyJwt(dir));
  const std::string script = R"(
import base64, json, sys, jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
x, token = sys.argv[1], sys.argv[2]
key = Ed25519PublicKey.from_public_bytes(base64.urlsafe_b64decode(x + "=" * (-len(x) % 4)))
try:
    claims = jwt.decode(token, key, algorithms=["EdDSA"])
except jwt.InvalidSignatureError:
    print("InvalidSignatureError")
    sys.exit(3)
print(json.dumps({"header": jwt.get_unverified_header(token), "claims": claims}))
)";
  Keys k = NewKeys();
  std::string token = SignerOf(k, "agent-1").Sign(SampleClaims());
  PythonRun run = RunPython(dir, script, {k.pub, token});
  ASSERT_EQ(run.exit_code, 0) << run.out;
  Json seen;
  ASSERT_TRUE(ParseJson(run.out, &seen).ok()) << run.out;
  EXPECT_EQ(seen["claims"], SampleClaims());
  EXPECT_EQ(seen["header"], (Json{{"alg", "EdDSA"}, {"kid", "agent-1"}, {"typ", "JWT"}}));

  run = RunPython(dir, script, {NewKeys().pub, token});
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_EQ(run.out, "InvalidSignatureError");
}

TEST(JwtTest, OneSignerAndOneVerifierServeManyThreadsAtOnce) {
  Keys k = NewKeys();
  const JwtSigner signer = SignerOf(k);
  const Ed25519Verifier verifier = VerifierOf(k.pub);
  std::atomic<int> verified{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        Json claims = SampleClaims();
        claims["request_id"] = std::to_string(t * 1000 + i);
        if (Verifies(verifier, signer.Sign(claims))) ++verified;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(verified.load(), 400);
}

// Figures printed, not asserted: speed goals live in bench/.
TEST(JwtTest, SignAndVerifyCostIsPrinted) {
  constexpr int kRounds = 2000;
  Keys k = NewKeys();
  const JwtSigner signer = SignerOf(k);
  const Ed25519Verifier verifier = VerifierOf(k.pub);
  std::vector<JwtParts> parsed(kRounds);
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  std::vector<std::string> tokens;
  for (int i = 0; i < kRounds; ++i) {
    Json claims = SampleClaims();
    claims["request_id"] = std::to_string(i);
    tokens.push_back(signer.Sign(claims));
  }
  auto signed_at = Clock::now();
  for (int i = 0; i < kRounds; ++i) ASSERT_TRUE(ParseJwt(tokens[i], &parsed[i]).ok());
  auto parsed_at = Clock::now();
  int ok = 0;
  for (const JwtParts& p : parsed) ok += verifier.Verify(p.signing_input, p.signature) ? 1 : 0;
  auto verified_at = Clock::now();
  EXPECT_EQ(ok, kRounds);
  auto us = [](auto d) { return std::chrono::duration<double, std::micro>(d).count() / kRounds; };
  std::printf("[ jwt ] per token: sign %.1f us, parse %.1f us, verify %.1f us (%d tokens of %zu bytes)\n",
              us(signed_at - start), us(parsed_at - signed_at), us(verified_at - parsed_at), kRounds,
              tokens[0].size());
}

}  // namespace
}  // namespace tollgate
