// Secrets never reach the log (docs/redaction.md). Two halves:
// - the value scanner as a unit: each known format is caught inside a
//   string with the rest kept, ordinary text is left alone, redaction is
//   idempotent, the policy's own patterns apply;
// - the real pipeline with a loopback server that records what it got: a
//   corpus of secrets in args, URLs (userinfo, query), headers, tool
//   results and error messages never appears in `audit export`, the replay
//   timeline or the results topic, while the server saw the real values.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "audit/export.h"
#include "core/flow_stage.h"
#include "core/messages.h"
#include "core/redact.h"
#include "core/sha256.h"
#include "replay/from_log.h"
#include "replay/timeline.h"
#include "tests/child_process.h"
#include "tests/pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::TempDir;

std::string Scrub(std::string s, const Redactor& r = *DefaultRedactor()) {
  r.RedactString(&s);
  return s;
}

// One secret of each format, as an agent or a tool might carry it.
struct Secret {
  const char* what;
  std::string text;    // as it appears
  std::string secret;  // the part that must never be logged
};
const std::vector<Secret>& Corpus() {
  static const std::vector<Secret> kCorpus = {
      {"bearer", "Bearer abcDEF1234567890xyzTOKEN", "abcDEF1234567890xyzTOKEN"},
      {"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
       "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"},
      {"pem",
       "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
       "-----END RSA PRIVATE KEY-----",
       "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu"},
      {"aws", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"},
      {"aws secret pair", "aws_secret_access_key=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY",
       "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"},
      {"openai", "sk-proj-Abcdefghijklmnopqrstuvwx12", "Abcdefghijklmnopqrstuvwx12"},
      {"sk-live", "sk-live-4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"},
      {"github", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "16C7e42F292c6912E7710c838347Ae178B4a"},
      {"github pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
       "11ABCDEFG0123456789_abcdefghijklmnop"},
      {"slack", "xoxb-123456789012-abcdefghijkl", "123456789012-abcdefghijkl"},
      {"stripe", "sk_live_51H8abcdefghijklmn", "51H8abcdefghijklmn"},
      {"stripe restricted", "rk_live_51H9zyxwvutsrqponm", "51H9zyxwvutsrqponm"},
      {"google", "AIzaSyA1234567890abcdefghijklmnopqrstu", "SyA1234567890abcdefghijklmnopqrstu"},
      {"password flag", "--password=Hunter2Pass", "Hunter2Pass"},
      {"token flag", "--token=tok987654321", "tok987654321"},
      {"api-key flag", "--api-key K3yValue123", "K3yValue123"},
      {"userinfo", "https://alice:PaSsW0rd99@example.com/p", "PaSsW0rd99"},
      {"query", "https://example.com/p?access_token=QT0k3nValue&x=1", "QT0k3nValue"},
      {"signature", "https://bucket.example.com/o?X-Amz-Signature=f00dfeedbeef1234&y=2", "f00dfeedbeef1234"},
      {"header line", "X-Api-Key: xak-9876543210abc", "xak-9876543210abc"},
      {"authorization line", "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "dXNlcjpwYXNzd29yZDEyMw=="},
      {"json text", R"({"client_secret": "cs-112233445566"})", "cs-112233445566"},
  };
  return kCorpus;
}

TEST(ValueScanner, CatchesEveryFormatInsideAStringAndKeepsTheRest) {
  for (const auto& s : Corpus()) {
    // (A header line's value runs to the end of its line.)
    const std::string text = "before " + s.text + "\nafter";
    const std::string out = Scrub(text);
    EXPECT_EQ(out.find(s.secret), std::string::npos) << s.what << ": " << out;
    EXPECT_NE(out.find(kRedacted), std::string::npos) << s.what;
    EXPECT_EQ(out.rfind("before ", 0), 0u) << s.what << ": the text around is kept: " << out;
    EXPECT_NE(out.find("\nafter"), std::string::npos) << s.what << ": " << out;
  }
}

TEST(ValueScanner, KeepsTheUsefulPartOfAUrl) {
  EXPECT_EQ(Scrub("https://user:pass@host.example/p?access_token=abc123&x=1"),
            "https://[REDACTED]@host.example/p?access_token=[REDACTED]&x=1");
  EXPECT_EQ(Scrub("GET https://h/x?api_key=K&sig=S&page=2"),
            "GET https://h/x?api_key=[REDACTED]&sig=[REDACTED]&page=2");
  EXPECT_EQ(Scrub("Authorization: Bearer abcdefghijklmnop1234"), "Authorization: [REDACTED]");
  EXPECT_EQ(Scrub("curl -H 'x' --password=s3cr3t --verbose"), "curl -H 'x' --password=[REDACTED] --verbose");
}

TEST(ValueScanner, LeavesOrdinaryTextAlone) {
  for (const char* text : {"task-list",
                           "skeleton",
                           "the skeleton key to the task-list",
                           "ask-for-help",
                           "risk-live-demo",
                           "tokens_used=42",
                           "https://example.com/a/b?page=2&sort=asc",
                           "password reset instructions were sent",
                           "monkey=banana",
                           "the token expired",
                           "GET https://api.example.com/v1/items",
                           "bash:git status",
                           "AKIA is a prefix",
                           "eyJ is how JSON starts in base64",
                           "Basic usage",
                           "mailto:someone@example.com",
                           "user@example.com wrote: hello",
                           "ghp_short",
                           "sk-short",
                           "xoxb-1",
                           "--verbose --output=x.txt",
                           "2026-11-23T18:08:22Z",
                           "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}) {
    EXPECT_EQ(Scrub(text), text);
  }
}

TEST(ValueScanner, RedactingTwiceChangesNothing) {
  for (const auto& s : Corpus()) {
    const std::string once = Scrub("x " + s.text + " y");
    EXPECT_EQ(Scrub(once), once) << s.what;
  }
}

TEST(Redaction, ByKeyAndByValueAtAnyDepthWithPointers) {
  Json v = {{"headers", {{"X-Api-Key", "k1"}, {"Api-Key", "k2"}, {"Accept", "text/plain"}}},
            {"args", {"--api-key", "K3yValue123", "--output", "out.txt"}},
            {"url", "https://u:p@h/x?token=t1"},
            {"nested", {{"list", {{{"note", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"}}}}}}};
  auto ptrs = DefaultRedactor()->Redact(v);
  EXPECT_EQ(v["headers"]["X-Api-Key"], kRedacted);
  EXPECT_EQ(v["headers"]["Api-Key"], kRedacted);
  EXPECT_EQ(v["headers"]["Accept"], "text/plain");
  EXPECT_EQ(v["args"], Json({"--api-key", kRedacted, "--output", "out.txt"}));
  EXPECT_EQ(v["url"], "https://[REDACTED]@h/x?token=[REDACTED]");
  EXPECT_EQ(v["nested"]["list"][0]["note"], kRedacted);
  std::sort(ptrs.begin(), ptrs.end());
  EXPECT_EQ(ptrs, (std::vector<std::string>{"/args/1", "/headers/Api-Key", "/headers/X-Api-Key",
                                            "/nested/list/0/note", "/url"}));
  EXPECT_TRUE(DefaultRedactor()->Redact(v).empty()) << "a redacted value is not redacted again";
}

TEST(Redaction, ThePolicyAddsKeysAndPatterns) {
  std::shared_ptr<const Redactor> r;
  ASSERT_TRUE(
      Redactor::FromPolicy(
          Json::parse(R"js({"redact": {"keys": ["ssn"], "values": ["corp-[0-9]{6}", "pin=([0-9]{4})"]}})js"),
          &r)
          .ok());
  Json v = {{"customer_ssn", "123-45-6789"}, {"note", "ticket corp-123456 and pin=1234 ok"}};
  r->Redact(v);
  EXPECT_EQ(v["customer_ssn"], kRedacted);
  EXPECT_EQ(v["note"], "ticket [REDACTED] and pin=[REDACTED] ok") << "group 1 alone when there is one";
  EXPECT_EQ(Scrub("ticket corp-123456"), "ticket corp-123456") << "the built-ins do not know it";

  std::shared_ptr<const Redactor> bad;
  EXPECT_FALSE(Redactor::FromPolicy(Json::parse(R"({"redact": {"values": ["(unclosed"]}})"), &bad).ok());
  EXPECT_FALSE(Redactor::FromPolicy(Json::parse(R"({"redact": {"values": ["x*"]}})"), &bad).ok())
      << "a pattern that matches the empty string";
  EXPECT_FALSE(Redactor::FromPolicy(Json::parse(R"({"redact": {"other": []}})"), &bad).ok());
}

TEST(Redaction, AMegabyteStringIsScannedWithoutCrashing) {
  std::shared_ptr<const Redactor> r;
  ASSERT_TRUE(
      Redactor::FromPolicy(Json::parse(R"js({"redact": {"values": ["corp-[0-9]{6}", "(x|y)+z"]}})js"), &r)
          .ok());
  std::string big;
  for (int i = 0; big.size() < (1 << 20); ++i) big += i % 3 ? "a=b:c \"d\": " : "xyxyxyxyxy ";
  for (int i = 0; i < 10000; ++i) big += "xy";     // a long run the regex engine recurses over
  for (int i = 0; i < 100000; ++i) big += "eyJ-";  // JWT candidates that all fail (must stay linear)
  big += "\n";
  big += " corp-123456 and ghp_16C7e42F292c6912E7710c838347Ae178B4a";
  r->RedactString(&big);
  EXPECT_EQ(big.find("corp-123456"), std::string::npos);
  EXPECT_EQ(big.find("ghp_16C7"), std::string::npos);
  EXPECT_NE(big.find("and [REDACTED]"), std::string::npos);
}

TEST(Redaction, TheLoggedDecisionHidesTheSecretAndStillVouchesForTheRealOne) {
  Json d = {{"verdict", "allow"},
            {"reason", "allowed"},
            {"invocation", "http_request:GET https://h/x?access_token=QT0k3nValue"},
            {"checks", {{{"check", "allow"}, {"result", "match"}, {"detail", "url https://u:pw123@h/"}}}}};
  Json logged = LoggedDecision(d, *DefaultRedactor());
  EXPECT_EQ(logged["invocation"], "http_request:GET https://h/x?access_token=[REDACTED]");
  EXPECT_EQ(logged["checks"][0]["detail"], "url https://[REDACTED]@h/");
  EXPECT_EQ(logged["redacted"], Json({"/invocation", "/checks/0/detail"}));
  std::string bytes;
  ASSERT_TRUE(CanonicalBytes(d, &bytes).ok());
  EXPECT_EQ(logged["unredacted_sha256"], Sha256Hex(bytes));
  EXPECT_EQ(DecisionFromLog(logged).dump().find("QT0k3nValue"), std::string::npos);
  EXPECT_EQ(LoggedDecision({{"verdict", "allow"}, {"invocation", "builtin:echo"}}, *DefaultRedactor()),
            Json({{"verdict", "allow"}, {"invocation", "builtin:echo"}}))
      << "nothing to redact: the decision as it was, no bookkeeping";
}

TEST(Redaction, ScanningARequestIsFast) {
  // A typical request's args: a few short strings, one URL, one header map.
  Json args = {{"url", "https://api.example.com/v1/items?page=2&sort=asc"},
               {"method", "GET"},
               {"headers", {{"Accept", "application/json"}, {"User-Agent", "agent/1.0"}}},
               {"body",
                "a paragraph of ordinary text that an agent might send along with the request, nothing "
                "secret in it at all, just words and numbers 12345"}};
  const int n = 20000;
  auto t0 = std::chrono::steady_clock::now();
  size_t changed = 0;
  for (int i = 0; i < n; ++i) {
    Json copy = args;
    changed += DefaultRedactor()->Redact(copy, "/args").size();
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
  std::printf("[ redaction ] %.2f us per request (copy + scan)\n", us);
  RecordProperty("redact_us_per_request", std::to_string(us));
  EXPECT_EQ(changed, 0u);
}

// ---------------------------------------------------------------------------
// Through the pipeline.

// A loopback server that records what it received and answers with a body
// full of secrets (so the tool result carries them).
class RecordingServer {
 public:
  RecordingServer() {
    server_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      ++hits_;
      api_key_ = req.get_header_value("X-Api-Key");
      other_key_ = req.get_header_value("Api-Key");
      auth_ = req.get_header_value("Authorization");
      token_ = req.get_param_value("access_token");
      Json body = {{"echo_token", "ghp_ResultToken0123456789abcdefABCDEF"},
                   {"note", "your key is sk-live-ResultKey0123456789abcd"},
                   {"password", "ResultPassword77"}};
      res.set_content(body.dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    tollgate::testing::WaitUntil([this] { return server_.is_running(); }, std::chrono::seconds(1));
  }
  ~RecordingServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  int hits() {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_;
  }
  std::string api_key() {
    std::lock_guard<std::mutex> lock(mu_);
    return api_key_;
  }
  std::string other_key() {
    std::lock_guard<std::mutex> lock(mu_);
    return other_key_;
  }
  std::string auth() {
    std::lock_guard<std::mutex> lock(mu_);
    return auth_;
  }
  std::string token() {
    std::lock_guard<std::mutex> lock(mu_);
    return token_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  int hits_ = 0;
  std::string api_key_, other_key_, auth_, token_;
};

constexpr const char* kPolicy = R"(version: 1
mode: ask
allow: ["builtin:echo", "http_request:*"]
tools:
  echo: {danger: SAFE, read_only: true}
  http_request: {danger: LOW, read_only: false}
http_request:
  allowed_methods: [GET]
execute:
  network: {allow_cidrs: ["127.0.0.0/8"], max_redirects: 0}
redact:
  values: ["corp-[0-9]{6}"]
)";

class SecretsPipelineTest : public testing::PolicyPipelineTest {
 protected:
  void SetUp() override { StartWith(kPolicy); }
  static Json Request(const std::string& rid, const std::string& tool, Json args) {
    return PolicyPipelineTest::Request(rid, tool, std::move(args), "sess-s");
  }
};

TEST_F(SecretsPipelineTest, NoSecretReachesTheLogTheTimelineOrTheResultsWhileTheServerGetsTheRealValues) {
  RecordingServer server;
  std::vector<std::string> secrets;
  for (const auto& s : Corpus()) secrets.push_back(s.secret);
  const std::string api_key = "xak-HeaderValue-0011223344", other_key = "ak-OtherHeader-5566778899";
  const std::string bearer = "BearerTok-abcdefghijklmnop-123", query_token = "QueryTok0123456789";
  const std::string err_pw = "ErrPassw0rd4455", err_token = "ErrQueryTok6677";
  for (const auto& s : {api_key, other_key, bearer, query_token, err_pw, err_token,
                        std::string("corp-654321"), std::string("ResultToken0123456789abcdefABCDEF"),
                        std::string("ResultKey0123456789abcd"), std::string("ResultPassword77")}) {
    secrets.push_back(s);
  }

  // 1. echo: every format in args (strings, a command line, headers, URLs);
  //    the tool result repeats them.
  Json all = Json::array();
  for (const auto& s : Corpus()) all.push_back("text with " + s.text + " inside");
  Json echo_args = {{"texts", all},
                    {"argv", {"tool", "--api-key", "K3yValue123", "--password=Hunter2Pass"}},
                    {"headers", {{"X-Api-Key", api_key}, {"Api-Key", other_key}}},
                    {"ticket", "see corp-654321"}};
  Send(Request("echo-1", "echo", echo_args));
  // 2. http_request to the recording server: credentials in headers and in
  //    the query; the response body carries secrets.
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  Send(Request("http-1", "http_request",
               {{"method", "GET"},
                {"url", base + "/api/items?access_token=" + query_token + "&page=2"},
                {"headers",
                 {{"X-Api-Key", api_key}, {"Api-Key", other_key}, {"Authorization", "Bearer " + bearer}}}}));
  // 3. http_request that fails (nothing listens on port 1): its URL's
  //    userinfo and token may appear in the error message.
  Send(Request("http-err", "http_request",
               {{"method", "GET"}, {"url", "http://user:" + err_pw + "@127.0.0.1:1/x?token=" + err_token}}));

  auto got = Collect(3);
  ASSERT_EQ(got.size(), 3u);
  // The executor sent the real values.
  EXPECT_EQ(server.hits(), 1);
  EXPECT_EQ(server.api_key(), api_key);
  EXPECT_EQ(server.other_key(), other_key);
  EXPECT_EQ(server.auth(), "Bearer " + bearer);
  EXPECT_EQ(server.token(), query_token);
  EXPECT_EQ(Json::parse(got["http-1"])["status"], "completed") << got["http-1"];
  EXPECT_EQ(Json::parse(got["echo-1"])["status"], "completed") << got["echo-1"];

  // The results topic.
  for (const auto& [rid, value] : got) {
    for (const auto& s : secrets)
      EXPECT_EQ(value.find(s), std::string::npos) << rid << " result leaks " << s << ": " << value;
  }
  // audit export: every event of the log.
  std::ostringstream exported;
  ASSERT_TRUE(ExportLog(p_->log().store(), ExportRange{}, exported).ok());
  const std::string dump = exported.str();
  ASSERT_NE(dump.find("execution.completed"), std::string::npos);
  for (const auto& s : secrets) EXPECT_EQ(dump.find(s), std::string::npos) << "the export leaks " << s;
  // The replay timeline of the session.
  replay::SessionTimeline t;
  ASSERT_TRUE(replay::ReadTimeline(p_->log().store(), replay::Target::Session("sess-s"), &t).ok());
  const std::string timeline = replay::TimelineToJson(t).dump() + replay::FormatTimeline(t);
  ASSERT_NE(timeline.find("http-1"), std::string::npos);
  for (const auto& s : secrets) EXPECT_EQ(timeline.find(s), std::string::npos) << "the timeline leaks " << s;
  // Re-deciding the session (replay --verify) from the redacted log finds
  // every decision as logged: the re-made one is compared in its logged form.
  replay::RedecideReport verify;
  ASSERT_TRUE(replay::RedecideTarget(p_->log().store(), replay::Target::Session("sess-s"), {}, &verify).ok());
  EXPECT_EQ(verify.decisions, 3u);
  EXPECT_TRUE(verify.clean()) << verify.ToJson().dump();
  // And the log says what it redacted.
  EXPECT_NE(dump.find("\"redacted\":[\"/args/"), std::string::npos);
  EXPECT_NE(dump.find("\"unredacted_sha256\""), std::string::npos)
      << "decision.made of http-1 had a secret in its invocation";
}

}  // namespace
}  // namespace tollgate
