// Hostile input (issue 15): what an attacker can send with nothing but the
// messages an agent or approver may send. Each test is one attack that
// crashed or wedged the pipeline; here each is refused with a code, logged,
// and the pipeline goes on serving everyone else. Agents are real
// librdkafka producers signing with registered keys (agent_keys.h); the
// HTTP API is reached over loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent_keys.h"
#include "api/tokens.h"
#include "audit/audit_query.h"
#include "audit/export.h"
#include "audit/log_sink.h"
#include "core/messages.h"
#include "core/request_state.h"
#include "decide/policy_engine.h"
#include "execute/config.h"
#include "test_util.h"
#include "tests/child_process.h"
#include "tests/results_reader.h"

namespace tollgate {
namespace {

using testing::TempDir;
using Clock = std::chrono::steady_clock;

// A running pipeline (the shipped default policy, the HTTP API) and an
// agent's view of it: a producer and the results topic.
class Harness {
 public:
  explicit Harness(const std::string& data_dir, size_t max_request_bytes = 1 << 20) {
    PipelineOptions o;
    o.data_dir = data_dir;
    o.durability = Durability::kBuffered;
    o.http_listen = "127.0.0.1:0";
    o.max_request_bytes = max_request_bytes;
    o.tokens_file = data_dir + "-tokens.json";
    if (!std::filesystem::exists(o.tokens_file) &&
        !AddToken(o.tokens_file, {"alice", "o1", {"approver"}}, &approver_token).ok()) {
      std::abort();
    }
    start = Pipeline::Start(o, &p);
    if (!start.ok()) return;
    signers = std::make_unique<testing::TestSigners>(*p);
    bus.brokers = p->bootstrap();
    if (!Producer::Open(bus, "", &producer).ok()) std::abort();
    if (!testing::ResultsReader::Open(bus, p->gate().public_b64url(), "", &results).ok()) std::abort();
  }
  ~Harness() {
    results.reset();
    producer.reset();
    p.reset();
  }

  static Json Request(const std::string& org, const std::string& agent, const std::string& rid,
                      const std::string& tool, Json args) {
    return {{"request_id", rid},          {"org_id", org}, {"agent_id", agent},
            {"session_id", "s-" + agent}, {"tool", tool},  {"args", std::move(args)}};
  }
  // Publishes `value` as is (any bytes) on tollgate.requests, signed by
  // (org, agent) for request `rid`.
  void SendRaw(const std::string& org, const std::string& agent, const std::string& rid,
               const std::string& value) {
    Message m;
    m.topic = bus.topics.requests();
    m.key = agent;
    m.value = value;
    m.headers[kHeaderRequestId] = rid;
    m.headers[kHeaderAuth] =
        SignRequest(signers->Agent(org, agent), org, agent, rid, m.value, NowMicros() / 1'000'000);
    Send(m);
  }
  void SendRequest(const Json& req) {
    SendRaw(req["org_id"], req["agent_id"], req["request_id"], req.dump());
  }
  void Send(const Message& m) {
    ASSERT_TRUE(producer->Send(m).ok());
    ASSERT_TRUE(producer->Flush(std::chrono::seconds(10)).ok());
  }
  // The first result for (org, rid), as the agent reads it; null after 30 s.
  Json WaitResult(const std::string& org, const std::string& rid) {
    const std::string key = org + "/" + rid;
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (results_by[key].empty() && Clock::now() < deadline) {
      std::vector<Message> batch;
      results->Poll(100, std::chrono::milliseconds(100), &batch);
      for (auto& m : batch) {
        Json r;
        if (!ParseJson(m.value, &r).ok() || !r.is_object()) continue;
        results_by[r.value("org_id", "") + "/" + r.value("request_id", "")].push_back(r);
      }
    }
    return results_by[key].empty() ? Json() : results_by[key].front();
  }
  std::vector<Event> EventsOf(const std::string& org, const std::string& rid) {
    std::vector<Event> out;
    StoreLogView view(p->log().store());
    EXPECT_TRUE(view.EventsOfRequest(org, rid, &out).ok());
    return out;
  }
  std::vector<Event> OfType(const std::string& org, const std::string& type) {
    AuditQuery q;
    q.org_id = org;
    q.types = {type};
    q.limit = 1000;
    AuditPage page;
    EXPECT_TRUE(GetAuditLog(p->log().store(), QueryScope::Operator(), q, &page).ok());
    return page.events;
  }
  // An echo request of org/agent completes: the pipeline still serves.
  void ExpectEchoCompletes(const std::string& org, const std::string& agent, const std::string& rid) {
    SendRequest(Request(org, agent, rid, "echo", {{"message", "still here"}}));
    Json r = WaitResult(org, rid);
    ASSERT_FALSE(r.is_null()) << "no result for " << rid << ": the pipeline is wedged";
    EXPECT_EQ(r["status"], "completed") << r.dump();
  }

  Status start;
  std::string approver_token;  // alice of o1 (first start only)
  std::unique_ptr<Pipeline> p;
  std::unique_ptr<testing::TestSigners> signers;
  BusConfig bus;
  std::unique_ptr<Producer> producer;
  std::unique_ptr<testing::ResultsReader> results;
  std::map<std::string, std::vector<Json>> results_by;
};

std::string Nested(size_t levels, const std::string& open, const std::string& close,
                   const std::string& inner) {
  std::string s;
  s.reserve(levels * (open.size() + close.size()) + inner.size());
  for (size_t i = 0; i < levels; ++i) s += open;
  s += inner;
  for (size_t i = 0; i < levels; ++i) s += close;
  return s;
}

// The error code of a rejected or failed result.
std::string CodeOf(const Json& result) {
  if (!result.is_object() || !result.contains("result") || !result["result"].is_object()) return "";
  const Json& e = result["result"]["error"];
  return e.is_object() ? e.value("code", "") : "";
}

std::string ErrorCodeOf(const Event& e) {
  auto err = e.data.find("error");
  return err != e.data.end() && err->is_object() ? err->value("code", "") : "";
}

class HostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    h_ = std::make_unique<Harness>(dir_.sub("data"));
    ASSERT_TRUE(h_->start.ok()) << h_->start.ToString();
  }
  void TearDown() override {
    if (h_ && h_->p) testing::ExpectEveryEventConforms(h_->p->log().store());
    h_.reset();
  }
  TempDir dir_;
  std::unique_ptr<Harness> h_;
};

TEST_F(HostileInput, ARequestWithAnOverflowingNumberIsRejectedAndThePipelineGoesOn) {
  // 80 bytes that ended the process (nlohmann's out_of_range.406).
  h_->SendRaw("o1", "a1", "big-number",
              R"({"org_id":"o1","agent_id":"a1","session_id":"s1","tool":"echo","args":{"n":1e999999}})");
  Json r = h_->WaitResult("o1", "big-number");
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["status"], "rejected");
  EXPECT_EQ(CodeOf(r), errc::kNumberOutOfRange) << r.dump();
  bool logged = false;
  for (const Event& e : h_->EventsOf("o1", "big-number")) {
    logged = logged || (e.type == "request.rejected" && ErrorCodeOf(e) == errc::kNumberOutOfRange);
  }
  EXPECT_TRUE(logged) << "the rejection is not in the log";
  h_->ExpectEchoCompletes("o1", "a1", "after-big-number");
}

TEST_F(HostileInput, ArgsNestedFifteenThousandLevelsAreRejectedAndThePipelineGoesOn) {
  const std::string args = Nested(15000, R"({"a":)", "}", "1");
  h_->SendRaw("o1", "a1", "deep-args",
              R"({"org_id":"o1","agent_id":"a1","session_id":"s1","tool":"echo","args":)" + args + "}");
  Json r = h_->WaitResult("o1", "deep-args");
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["status"], "rejected");
  EXPECT_EQ(CodeOf(r), errc::kJsonTooDeep) << r.dump();
  // Arrays too, and on another agent's partition.
  h_->SendRaw("o1", "a2", "deep-array",
              R"({"org_id":"o1","agent_id":"a2","session_id":"s1","tool":"echo","args":{"x":)" +
                  Nested(15000, "[", "]", "") + "}}");
  EXPECT_EQ(CodeOf(h_->WaitResult("o1", "deep-array")), errc::kJsonTooDeep);
  h_->ExpectEchoCompletes("o1", "a1", "after-deep");
}

TEST_F(HostileInput, ArgsJustUnderTheDepthLimitStillRun) {
  // The limit refuses attacks, not structure: 60 levels of args run, and
  // their events (a few levels deeper) are logged and verify.
  const std::string args = R"({"message":"deep","x":)" + Nested(60, "[", "]", "1") + "}";
  h_->SendRaw("o1", "a1", "deep-ok",
              R"({"org_id":"o1","agent_id":"a1","session_id":"s1","tool":"echo","args":)" + args + "}");
  Json r = h_->WaitResult("o1", "deep-ok");
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["status"], "completed") << r.dump();
}

TEST_F(HostileInput, AnApprovalResponseWithAnOverflowingNumberIsRefusedAndThePipelineGoesOn) {
  const std::string value =
      R"({"request_id":"r1","decision":"approve","approver":"alice","scope":"once","args_hash":"00","n":1e999999})";
  Message m;
  m.topic = h_->bus.topics.approval_responses();
  m.key = "a1";
  m.value = value;
  m.headers[kHeaderRequestId] = "r1";
  m.headers[kHeaderAuth] =
      SignResponse(h_->signers->Approver("o1", "alice"), "alice", "o1", "r1", value, NowMicros() / 1'000'000);
  h_->Send(m);
  // The refusal is logged (org unknown: it is about no request the log knows).
  const bool refused = testing::WaitUntil(
      [&] {
        for (const Event& e : h_->OfType("unknown", "approval.refused")) {
          if (e.data.value("message", "").find("out of range") != std::string::npos) return true;
        }
        return false;
      },
      std::chrono::seconds(30));
  EXPECT_TRUE(refused) << "no approval.refused for the response";
  h_->ExpectEchoCompletes("o1", "a1", "after-bad-response");
}

TEST_F(HostileInput, ADeeplyNestedApprovalBodyGetsA400AndTheServerLives) {
  httplib::Client http("127.0.0.1", h_->p->api()->port());
  http.set_read_timeout(20, 0);
  const httplib::Headers bearer = {{"Authorization", "Bearer " + h_->approver_token}};
  const std::string body = R"({"decision":"approve","comment":)" + Nested(200000, "[", "]", "") + "}";
  auto res = http.Post("/v1/approvals/r1?org=o1", bearer, body, "application/json");
  ASSERT_TRUE(res) << "no answer: " << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 400) << res->body;
  Json reply;
  ASSERT_TRUE(ParseJson(res->body, &reply).ok()) << res->body;
  EXPECT_EQ(reply["error"]["code"], errc::kJsonTooDeep) << res->body;
  // An overflowing number in a body: 400 too.
  res = http.Post("/v1/approvals/r1?org=o1", bearer, R"({"decision":"approve","n":1e999999})",
                  "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// A socket that sends the start of a request and then one more header byte
// every 200 ms: it never finishes, and never lets a per-read timeout fire.
class SlowClient {
 public:
  explicit SlowClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    const std::string start = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    if (connected_) ::send(fd_, start.data(), start.size(), MSG_NOSIGNAL);
  }
  ~SlowClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  // One more byte; false once the server has closed the connection.
  bool Trickle() { return ::send(fd_, "a", 1, MSG_NOSIGNAL) == 1; }
  // Whether the server closed it (a read sees EOF or a reset) within `wait`.
  bool ClosedWithin(std::chrono::milliseconds wait) {
    auto deadline = Clock::now() + wait;
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 200) > 0) {
        char buf[512];
        ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n <= 0) return true;
        continue;  // an answer (e.g. 408): keep reading to its EOF
      }
      if (!Trickle()) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

TEST_F(HostileInput, TenSlowConnectionsDoNotStopHealthzFromAnswering) {
  const int port = h_->p->api()->port();
  std::vector<std::unique_ptr<SlowClient>> slow;
  for (int i = 0; i < 10; ++i) {
    slow.push_back(std::make_unique<SlowClient>(port));
    ASSERT_TRUE(slow.back()->connected());
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop) {
      for (auto& s : slow) s->Trickle();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  // No wait for the server to take them: it accepts in the order of the
  // listen queue, so all ten are its before the healthz connection below.
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(10, 0);
  http.set_read_timeout(10, 0);
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    auto res = http.Get("/healthz");
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    ASSERT_TRUE(res) << "healthz did not answer: " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_LT(ms, 2000) << "healthz took " << ms << " ms behind 10 slow connections";
  }
  stop = true;
  trickle.join();
}

TEST_F(HostileInput, AConnectionThatNeverFinishesItsRequestIsCutOff) {
  SlowClient slow(h_->p->api()->port());
  ASSERT_TRUE(slow.connected());
  // The read deadline (10 s) ends it however steadily it trickles.
  EXPECT_TRUE(slow.ClosedWithin(std::chrono::seconds(20)));
}

TEST_F(HostileInput, AHugeUrlEndsWithAClearErrorAndWedgesNothingAcrossARestart) {
  // 600 KB of URL: decide copied it into decision.invocation, its output
  // outgrew the broker's message limit and decide retried for ever.
  const std::string url = "http://127.0.0.1:9/" + std::string(600 * 1024, 'a');
  h_->SendRequest(
      Harness::Request("o1", "a1", "huge-url", "http_request", {{"method", "GET"}, {"url", url}}));
  Json r = h_->WaitResult("o1", "huge-url");
  ASSERT_FALSE(r.is_null()) << "no result for the huge URL";
  EXPECT_EQ(r["status"], "denied") << r.dump().substr(0, 2000);
  EXPECT_EQ(CodeOf(r), errc::kInvocationTooLarge) << r.dump().substr(0, 2000);
  EXPECT_LT(r.dump().size(), 64u << 10) << "the result carries the URL";
  // Another org is served.
  h_->ExpectEchoCompletes("o2", "b1", "other-org");
  // The same data dir starts again and serves.
  h_.reset();
  h_ = std::make_unique<Harness>(dir_.sub("data"));
  ASSERT_TRUE(h_->start.ok()) << "restart refused: " << h_->start.ToString();
  h_->ExpectEchoCompletes("o1", "a1", "after-restart");
}

TEST_F(HostileInput, AnOutputLargerThanTheBusCarriesEndsItsRequestInsteadOfWedgingTheStage) {
  // Ingest accepts requests up to 8 MiB here, so the flow it forwards (the
  // request plus its envelope) is over kMaxMessageBytes: the runner ends the
  // request (E_OUTPUT_TOO_LARGE) instead of failing the batch for ever.
  h_.reset();
  h_ = std::make_unique<Harness>(dir_.sub("big"), 8 << 20);
  ASSERT_TRUE(h_->start.ok()) << h_->start.ToString();
  const std::string padding(kMaxMessageBytes - 200, 'x');
  h_->SendRequest(Harness::Request("o1", "a1", "too-big", "echo", {{"message", padding}}));
  Json r = h_->WaitResult("o1", "too-big");
  ASSERT_FALSE(r.is_null()) << "no result: the stage is retrying";
  EXPECT_EQ(r["status"], "failed");
  EXPECT_EQ(CodeOf(r), errc::kOutputTooLarge) << r.dump().substr(0, 2000);
  std::vector<Event> events = h_->EventsOf("o1", "too-big");
  RequestState st = Summarize(events);
  EXPECT_TRUE(st.terminal()) << "the request is not finished in the log";
  h_->ExpectEchoCompletes("o1", "a1", "after-too-big");
  // And a restart does not re-drive it.
  h_.reset();
  h_ = std::make_unique<Harness>(dir_.sub("big"), 8 << 20);
  ASSERT_TRUE(h_->start.ok()) << h_->start.ToString();
  EXPECT_EQ(h_->p->reconciled().redriven, 0u);
}

TEST(HostileStart, ARequestTheReconcilerCannotSendDoesNotStopTheStart) {
  // A log written before outputs were bounded: an allowed request whose
  // flow (request + invocation) is over kMaxMessageBytes. The start used
  // to fail on it ("Message size too large") until someone edited the log.
  TempDir dir;
  const std::string data = dir.sub("data");
  {
    LogOptions lo;
    lo.max_event_bytes = 16 << 20;
    std::unique_ptr<EventLog> log;
    ASSERT_TRUE(EventLog::Open(data + "/log", lo, &log).ok());
    const std::string big(3 << 20, 'u');
    Json request = Harness::Request("o1", "a1", "stuck", "http_request", {{"method", "GET"}, {"url", big}});
    Event rec =
        testing::MakeEvent("request.received", "stuck", "s-a1", "a1", "o1", "http_request", NowMicros(),
                           {{"request", request},
                            {"args_hash", ArgsHash(request["args"])},
                            {"received_at", "2026-01-01T00:00:00Z"},
                            {"source", "old/tollgate.requests/0/1"}});
    ASSERT_TRUE(log->Append(rec).status.ok());
    Event dec = testing::MakeEvent("decision.made", "stuck", "s-a1", "a1", "o1", "http_request", NowMicros(),
                                   {{"verdict", "allow"},
                                    {"reason", "read-only"},
                                    {"rule", "mode"},
                                    {"danger_level", "MEDIUM"},
                                    {"policy_version", "v1"},
                                    {"invocation", "http_request:GET " + big},
                                    {"source", "old/tollgate.decide/0/1"}});
    ASSERT_TRUE(log->Append(dec).status.ok());
  }
  Harness h(data, 8 << 20);
  ASSERT_TRUE(h.start.ok()) << "the start refused: " << h.start.ToString();
  EXPECT_EQ(h.p->reconciled().failed_closed, 1u);
  RequestState st;
  std::vector<Event> events = h.EventsOf("o1", "stuck");
  st = Summarize(events);
  ASSERT_NE(st.rejected, nullptr) << "the request was not ended";
  EXPECT_EQ(ErrorCodeOf(*st.rejected), errc::kOutputTooLarge);
  h.ExpectEchoCompletes("o1", "a1", "after-stuck");
}

// One 20 KB string aliased 25,000 times: 120 KB of YAML standing for 500 MB.
std::string AliasBomb() {
  std::string y = "version: 1\ndescription: &big \"" + std::string(20 * 1024, 'b') + "\"\nallow: [";
  for (int i = 0; i < 25000; ++i) y += i ? ", *big" : "*big";
  y += "]\n";
  return y;
}

long MaxRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(HostileYaml, AnAliasBombIsRefusedByItsExpandedSize) {
  const std::string y = AliasBomb();
  const long rss0 = MaxRssKb();
  const auto t0 = Clock::now();
  PolicyPtr p;
  Status s = LoadPolicyYaml(y, "what-if", &p);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), errc::kPolicyInvalid);
  EXPECT_NE(s.message().find("expands to more than"), std::string::npos) << s.message();
  std::cout << "[ info ] " << y.size() << " bytes of YAML refused in " << ms << " ms; max RSS grew by "
            << (MaxRssKb() - rss0) / 1024 << " MiB\n";
  // Execute reads the same file with its own YAML reader.
  Json j;
  Status e = YamlToJson(y, &j);
  EXPECT_FALSE(e.ok());
  EXPECT_NE(e.message().find("expands"), std::string::npos) << e.message();
}

TEST(HostileJson, EveryLimitHasItsOwnCode) {
  Json j;
  EXPECT_EQ(ParseJson(R"({"n":1e999999})", &j).code(), errc::kNumberOutOfRange);
  EXPECT_EQ(ParseJson(R"([-1e400])", &j).code(), errc::kNumberOutOfRange);
  EXPECT_EQ(ParseJson(Nested(300, "[", "]", ""), &j).code(), errc::kJsonTooDeep);
  EXPECT_TRUE(ParseJson(Nested(200, "[", "]", ""), &j).ok());
  EXPECT_EQ(ParseInputJson(Nested(65, "[", "]", ""), &j).code(), errc::kJsonTooDeep);
  EXPECT_TRUE(ParseInputJson(Nested(64, "[", "]", ""), &j).ok());
  // Brackets inside strings (escaped quotes included) are not nesting.
  EXPECT_TRUE(ParseInputJson(R"({"s":")" + std::string(1000, '[') + R"(\"[[["})", &j).ok());
  EXPECT_EQ(ParseJson("{\"a\":", &j).code(), errc::kInvalidJson);
  JsonLimits small;
  small.max_bytes = 10;
  EXPECT_EQ(ParseJson(R"({"a":"0123456789"})", &j, small).code(), errc::kJsonTooLarge);
  // A failed parse leaves the output as it was.
  j = Json{{"kept", true}};
  EXPECT_FALSE(ParseJson("[1e999999]", &j).ok());
  EXPECT_EQ(j, (Json{{"kept", true}}));
}

TEST(HostileDecision, AnOversizeInvocationIsDeniedAndTextIsCut) {
  Json d{{"verdict", "allow"},
         {"reason", std::string(10000, 'r')},
         {"rule", "mode"},
         {"danger_level", "MEDIUM"},
         {"policy_version", "v1"},
         {"invocation", "http_request:GET http://x/" + std::string(kMaxInvocationBytes, 'a')},
         {"reservation", {{"usd", 1.0}}},
         {"checks",
          Json::array({{{"check", "mode"}, {"result", "allow"}, {"detail", std::string(5000, 'd')}}})}};
  EXPECT_TRUE(BoundDecision(&d));
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["error_code"], errc::kInvocationTooLarge);
  EXPECT_FALSE(d.contains("reservation"));
  EXPECT_LE(d["invocation"].get<std::string>().size(), 1024u);
  EXPECT_LE(d["reason"].get<std::string>().size(), kMaxReasonBytes);
  EXPECT_LE(d["checks"][0]["detail"].get<std::string>().size(), kMaxCheckDetailBytes);
  // Within the caps nothing changes.
  Json ok{{"verdict", "allow"}, {"reason", "fine"}, {"invocation", "builtin:echo"}};
  Json before = ok;
  EXPECT_FALSE(BoundDecision(&ok));
  EXPECT_EQ(ok, before);
  // A cut never splits a UTF-8 character.
  std::string canon;
  std::string euro;
  for (int i = 0; i < 2000; ++i) euro += "\xE2\x82\xAC";
  EXPECT_TRUE(CanonicalBytes(Json(TruncateUtf8(euro, 101)), &canon).ok());
}

TEST(HostileBus, TheRunnersLimitFollowsAProducersLowerMessageLimit) {
  // A deployment whose broker takes less (BusConfig::extra) gets outputs
  // bounded to that, not to kMaxMessageBytes: else the producer would
  // refuse them on every retry.
  BusConfig bus;
  bus.brokers = "127.0.0.1:1";
  std::unique_ptr<Producer> p;
  ASSERT_TRUE(Producer::Open(bus, "", &p).ok());
  EXPECT_EQ(p->max_message_bytes(), kMaxMessageBytes);
  bus.extra["message.max.bytes"] = "1000000";
  ASSERT_TRUE(Producer::Open(bus, "", &p).ok());
  EXPECT_LT(p->max_message_bytes(), 1000000u);
  EXPECT_GT(p->max_message_bytes(), 900000u);
}

TEST(HostileExport, VerifyingAnExportWithItsHeadCutSaysWhichRangeItChecked) {
  TempDir dir;
  std::unique_ptr<EventLog> log;
  ASSERT_TRUE(EventLog::Open(dir.sub("log"), LogOptions{}, &log).ok());
  for (int i = 1; i <= 6; ++i) {
    ASSERT_TRUE(
        log->Append(testing::MakeEvent("request.rejected", "r" + std::to_string(i), "s1", "a1", "o1", "echo",
                                       1'790'000'000'000'000 + i,
                                       {{"error", {{"code", "E_INVALID_REQUEST"}, {"message", "x"}}}}))
            .status.ok());
  }
  auto export_file = [&](std::optional<uint64_t> from, const std::string& name) {
    ExportRange range;
    range.from_seq = from;
    std::ofstream out(dir.sub(name));
    EXPECT_TRUE(ExportLog(log->store(), range, out).ok());
    return dir.sub(name);
  };
  const std::string whole = export_file(std::nullopt, "whole.jsonl");
  const std::string cut = export_file(4, "cut.jsonl");
  auto verify = [](const std::string& file) {
    return testing::RunCommand(std::string(TOLLGATE_BIN) + " audit verify --file " + file + " 2>&1");
  };
  testing::CommandResult w = verify(whole);
  EXPECT_EQ(w.exit_code, 0) << w.out;
  EXPECT_NE(w.out.find("seqs 1..6"), std::string::npos) << w.out;
  EXPECT_EQ(w.out.find("PARTIAL"), std::string::npos) << w.out;
  testing::CommandResult c = verify(cut);
  EXPECT_EQ(c.exit_code, 0) << c.out;                              // what it holds is intact...
  EXPECT_NE(c.out.find("seqs 4..6"), std::string::npos) << c.out;  // ...and it says what that is
  EXPECT_NE(c.out.find("PARTIAL: starts at seq 4"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace tollgate
