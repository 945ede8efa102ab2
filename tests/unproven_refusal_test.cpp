// Issue 28 (docs/trust.md): a refusal never speaks for an identity nobody
// proved; unproven junk is counted into summaries instead of becoming one
// permanent event per message; a stage's consumer group cannot be joined
// by a process that lacks the data directory, and a foreign member in it
// is reported. The stage cores as pure functions, then the real pipeline
// on the embedded broker with real foreign Kafka clients, then a follower
// of the events topic through a real broker.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "audit/audit_query.h"
#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "core/flow_stage.h"
#include "core/schema.h"
#include "core/unproven.h"
#include "deploy/identity.h"
#include "deploy/pipeline.h"
#include "ingest/ingest_stage.h"
#include "runtime/event_follower.h"
#include "tests/agent_keys.h"
#include "tests/child_process.h"
#include "tests/results_reader.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'790'000'000'000'000;
// A well-formed trace the forger names (the victim's, say).
constexpr const char* kVictimTrace = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01";

Json VictimRequest(const std::string& rid, const std::string& tool = "echo", Json args = {{"text", "hi"}}) {
  return {{"request_id", rid},   {"org_id", "org-1"}, {"agent_id", "a1"},
          {"session_id", "s-1"}, {"tool", tool},      {"args", std::move(args)}};
}

Message OnRequests(const std::string& value, const std::string& key = "a1") {
  Message m;
  m.topic = "tollgate.requests";
  m.key = key;
  m.value = value;
  return m;
}

// What a refusal's summary (or a refusal alone) accounts for.
uint64_t Accounted(const Event& e) {
  auto s = e.data.find("summary");
  return s == e.data.end() ? 1 : s->value("count", uint64_t{0});
}

// ---------------------------------------------------------------- the stage cores

TEST(UnprovenRefusal, AnUnsignedMessageNamingAnotherRequestIsRefusedUnderUnknownAndAnIdFromItsBytes) {
  CredentialRegistry registry;
  IngestConfig config;
  config.credentials = &registry;
  IngestStage ingest{config};
  testing::MemoryLog log;
  Message m = OnRequests(VictimRequest("victim-1").dump());
  m.headers[kHeaderTraceparent] = kVictimTrace;
  StageResult r = ingest.Process(m, {kT0, "inc/tollgate.requests/0/7"}, log);

  ASSERT_EQ(r.events.size(), 1u);
  const Event& e = r.events[0];
  EXPECT_EQ(e.type, "request.rejected");
  EXPECT_EQ(e.org_id, "unknown");
  EXPECT_EQ(e.agent_id, "unknown");
  EXPECT_EQ(e.session_id, "unknown");
  EXPECT_EQ(e.request_id, UnprovenRequestId(m));
  EXPECT_EQ(e.request_id.rfind("u-", 0), 0u) << e.request_id;
  EXPECT_EQ(e.data["error"]["code"], "E_UNAUTHENTICATED");
  EXPECT_EQ(e.data["check"], "header");
  EXPECT_EQ(e.data["claimed"]["request_id"], "victim-1") << "kept for the auditor";
  EXPECT_EQ(e.data["claimed"]["org_id"], "org-1");
  EXPECT_NE(e.data.value("traceparent", ""), kVictimTrace) << "not in the trace it names";

  // The result speaks for nobody: value, key and headers.
  ASSERT_EQ(r.outputs.size(), 1u);
  const Message& out = r.outputs[0].message;
  EXPECT_EQ(out.topic, "tollgate.results");
  EXPECT_EQ(out.key, "unknown");
  EXPECT_EQ(out.headers.at(kHeaderRequestId), e.request_id);
  EXPECT_EQ(out.headers.at(kHeaderSessionId), "unknown");
  EXPECT_NE(out.headers.at(kHeaderTraceparent), kVictimTrace);
  Json result = Json::parse(out.value);
  EXPECT_EQ(result["org_id"], "unknown");
  EXPECT_EQ(result["request_id"], e.request_id);
  EXPECT_EQ(result["agent_id"], "unknown");
  EXPECT_EQ(result["session_id"], "unknown");
  EXPECT_EQ(result["tool"], "");
  EXPECT_EQ(result["status"], "rejected");
  EXPECT_EQ(result["result"]["error"]["code"], "E_UNAUTHENTICATED");
  EXPECT_TRUE(SchemaRegistry::Builtin().Validate("result", result).ok());
  for (const std::string* s : {&out.key, &out.value}) {
    EXPECT_EQ(s->find("victim-1"), std::string::npos) << *s;
    EXPECT_EQ(s->find("org-1"), std::string::npos) << *s;
  }
  for (const auto& [k, v] : out.headers) {
    EXPECT_EQ(v.find("victim-1"), std::string::npos) << k;
    EXPECT_EQ(v.find("org-1"), std::string::npos) << k;
  }

  // The same bytes again (a replayed copy) are the same id, another event;
  // other bytes (another token) another id.
  StageResult again = ingest.Process(m, {kT0, "inc/tollgate.requests/0/8"}, log);
  ASSERT_EQ(again.events.size(), 1u);
  EXPECT_EQ(again.events[0].request_id, e.request_id);
  EXPECT_NE(again.events[0].id, e.id);
  Message other = m;
  other.headers[kHeaderAuth] = "not.a.jwt";
  EXPECT_NE(UnprovenRequestId(other), e.request_id);
}

TEST(UnprovenRefusal, ARefusedFlowIsAnsweredUnderUnknownNeverForTheRequestItNames) {
  Flow flow{VictimRequest("victim-1"), FormatTime(kT0), ArgsHash(Json{{"text", "hi"}}), nullptr};
  Message in;
  in.topic = "tollgate.decide";
  in.key = "a1";
  in.value = flow.ToJson().dump();
  testing::MemoryLog empty;
  FlowInput fi;
  StageResult refused;
  ASSERT_FALSE(ReadFlow("decide", Topics{}, in, {kT0, "inc/tollgate.decide/0/3"}, empty, &fi, &refused));
  ASSERT_EQ(refused.events.size(), 1u);
  EXPECT_EQ(refused.events[0].org_id, "unknown");
  EXPECT_EQ(refused.events[0].request_id, UnprovenRequestId(in));
  EXPECT_EQ(refused.events[0].data["error"]["code"], "E_NOT_IN_LOG");
  EXPECT_EQ(refused.events[0].data["stage"], "decide");
  EXPECT_EQ(refused.events[0].data["claimed"]["request_id"], "victim-1");
  ASSERT_EQ(refused.outputs.size(), 1u);
  EXPECT_EQ(refused.outputs[0].message.key, "unknown");
  Json result = Json::parse(refused.outputs[0].message.value);
  EXPECT_EQ(result["org_id"], "unknown");
  EXPECT_EQ(result["request_id"], UnprovenRequestId(in));
  EXPECT_EQ(result["agent_id"], "unknown");
}

// 1,000 unsigned junk messages: the first 10 are logged one by one, the rest
// counted into one summary; reading any of them again counts nothing twice,
// and a summary the log does not hold yet is made again, the same.
TEST(JunkSummary, AThousandUnsignedMessagesAreTenEventsAndOneSummaryThatCountsTheRest) {
  CredentialRegistry registry;
  IngestConfig config;
  config.credentials = &registry;
  IngestStage ingest{config};
  testing::MemoryLog log;
  auto ctx = [](int i) {
    return StageContext{kT0 + i * 100,
                        "inc/tollgate.requests/" + std::to_string(i % 3) + "/" + std::to_string(i / 3)};
  };
  const Message junk = OnRequests("junk-bytes!", "");
  size_t results = 0;
  for (int i = 0; i < 1000; ++i) {
    StageResult r = ingest.Process(junk, ctx(i), log);
    results += r.outputs.size();
    log.Append(r.events);
  }
  EXPECT_EQ(log.events_.size(), 10u) << "the first ten, one by one";
  EXPECT_EQ(results, 10u) << "counted messages get no result";
  const int64_t last = ctx(999).now_us;
  EXPECT_TRUE(ingest.Tick({last + 500'000, "inc/tick/ingest"}, log).events.empty()) << "junk still arriving";
  StageResult tick = ingest.Tick({last + 1'000'000, "inc/tick/ingest"}, log);
  ASSERT_EQ(tick.events.size(), 1u);
  const Event summary = tick.events[0];
  EXPECT_EQ(summary.org_id, "unknown");
  EXPECT_EQ(summary.data["stage"], "ingest");
  EXPECT_EQ(summary.data["error"]["code"], "E_UNAUTHENTICATED");
  EXPECT_EQ(summary.data["summary"]["count"], 990);
  EXPECT_EQ(summary.data["summary"]["bytes"], 990 * junk.value.size());
  EXPECT_EQ(summary.data["summary"]["checks"]["header"], 990);
  EXPECT_EQ(summary.data["summary"]["first_source"], ctx(10).source);
  EXPECT_EQ(summary.data["summary"]["last_source"], ctx(999).source);
  EXPECT_TRUE(SchemaRegistry::Builtin().ValidateEvent(summary.BodyJson()).ok());

  // Not appended (say the append failed): made again, the same event.
  StageResult retry = ingest.Tick({last + 1'200'000, "inc/tick/ingest"}, log);
  ASSERT_EQ(retry.events.size(), 1u);
  EXPECT_EQ(retry.events[0].id, summary.id);
  log.Append(retry.events);
  EXPECT_TRUE(ingest.Tick({last + 1'400'000, "inc/tick/ingest"}, log).events.empty());

  // Every message read again (the runner rewinds a failed batch): the ten
  // get their own refusal again, the rest nothing.
  const size_t before = log.events_.size();
  for (int i = 0; i < 1000; ++i) log.Append(ingest.Process(junk, ctx(i), log).events);
  EXPECT_EQ(log.events_.size(), before);
  EXPECT_TRUE(ingest.Tick({last + 30'000'000, "inc/tick/ingest"}, log).events.empty());
  uint64_t accounted = 0;
  for (const Event& e : log.events_) accounted += Accounted(e);
  EXPECT_EQ(accounted, 1000u);
}

// ---------------------------------------------------------------- the pipeline

constexpr const char* kPolicy = R"(version: 1
mode: ask
allow: [builtin:echo]
approvals:
  default: {quorum: 2, timeout_s: 900}
)";

class UnprovenPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PipelineOptions o;
    o.data_dir = dir_.sub("data");
    o.durability = Durability::kBuffered;
    o.http_listen = "127.0.0.1:0";
    o.metrics_public = true;
    o.policy_path = dir_.sub("policy.yaml");
    std::ofstream(o.policy_path) << kPolicy;
    ASSERT_TRUE(Pipeline::Start(o, &p_).ok());
    signers_ = std::make_unique<testing::TestSigners>(*p_);
    bus_.brokers = p_->bootstrap();
    ASSERT_TRUE(Producer::Open(bus_, "", &producer_).ok());
    ASSERT_TRUE(testing::ResultsReader::Open(bus_, p_->gate().public_b64url(), "", &results_).ok());
    http_ = std::make_unique<httplib::Client>("127.0.0.1", p_->api()->port());
  }
  void TearDown() override {
    StopForeign();
    if (p_) testing::ExpectEveryEventConforms(p_->log().store());
    http_.reset();
    results_.reset();
    producer_.reset();
    p_.reset();
  }

  void Send(const Message& m) {
    ASSERT_TRUE(producer_->Send(m).ok());
    ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  }
  Message RequestMessage(const Json& req) { return MessageFor(bus_.topics.requests(), req, req); }
  void SendSigned(const Json& req) {
    Message m = RequestMessage(req);
    signers_->SignRequest(&m);
    Send(m);
  }
  // The first final result for (org, rid) the gate signed.
  Json WaitResult(const std::string& org, const std::string& rid, std::chrono::seconds within) {
    const std::string key = org + "/" + rid;
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (results_by_[key].empty() && std::chrono::steady_clock::now() < deadline) {
      std::vector<Message> batch;
      results_->Poll(100, std::chrono::milliseconds(100), &batch);
      for (auto& m : batch) {
        Json r = Json::parse(m.value);
        results_by_[r.value("org_id", "") + "/" + r.value("request_id", "")].push_back(r);
      }
    }
    return results_by_[key].empty() ? Json() : results_by_[key].front();
  }
  std::vector<Event> EventsOf(const std::string& org, const std::string& rid) {
    std::vector<Event> out;
    StoreLogView view(p_->log().store());
    EXPECT_TRUE(view.EventsOfRequest(org, rid, &out).ok());
    return out;
  }
  std::vector<Event> UnknownRejections() {
    AuditQuery q;
    q.org_id = "unknown";
    q.types = {"request.rejected"};
    q.limit = 1000;
    AuditPage page;
    EXPECT_TRUE(GetAuditLog(p_->log().store(), QueryScope::Operator(), q, &page).ok());
    return page.events;
  }
  template <typename F>
  bool WaitFor(F pred, std::chrono::seconds within = std::chrono::seconds(20)) {
    return testing::WaitUntil(pred, within);
  }
  std::string Get(const char* path) {
    auto res = http_->Get(path);
    return res && res->status == 200 ? res->body : "";
  }

  // A foreign Kafka client: a member of `group` on tollgate.requests that
  // polls (and so holds whatever partitions it is given) until stopped.
  void StartForeign(const std::string& group) {
    BusConfig b = bus_;
    b.client_id = "foreign";
    ASSERT_TRUE(Consumer::Open(b, group, {bus_.topics.requests()}, &foreign_).ok());
    foreign_->SetBeforeAssign([this] { foreign_assigned_ = true; });
    foreign_thread_ = std::thread([this] {
      while (!foreign_stop_) {
        std::vector<Message> batch;
        foreign_->Poll(100, std::chrono::milliseconds(50), &batch);
        foreign_read_ += batch.size();
      }
      foreign_->Close();
    });
  }
  void StopForeign() {
    foreign_stop_ = true;
    if (foreign_thread_.joinable()) foreign_thread_.join();
    foreign_.reset();
  }

  TempDir dir_;
  std::unique_ptr<Pipeline> p_;
  std::unique_ptr<testing::TestSigners> signers_;
  BusConfig bus_;
  std::unique_ptr<Producer> producer_;
  std::unique_ptr<testing::ResultsReader> results_;
  std::unique_ptr<httplib::Client> http_;
  std::map<std::string, std::vector<Json>> results_by_;
  std::unique_ptr<Consumer> foreign_;
  std::thread foreign_thread_;
  std::atomic<bool> foreign_stop_{false}, foreign_assigned_{false};
  std::atomic<size_t> foreign_read_{0};
};

// The issue's attack: an unsigned copy of a pending request. tollgate must
// not publish a `rejected` under the victim's ids (its waiter would take the
// gate-signed result for its own and give up) nor end the request.
TEST_F(UnprovenPipelineTest, AnUnsignedMessageNamingAPendingRequestNeitherEndsItNorAnswersForIt) {
  const Json victim = VictimRequest("victim-1", "write_file", {{"path", "notes.txt"}, {"content", "x"}});
  SendSigned(victim);
  ASSERT_TRUE(WaitFor([&] {
    for (const Event& e : EventsOf("org-1", "victim-1")) {
      if (e.type == "approval.requested") return true;
    }
    return false;
  })) << "the victim's call never asked";

  const Message forged = RequestMessage(victim);  // the same body, unsigned
  Send(forged);
  const std::string uid = UnprovenRequestId(forged);
  Json refusal = WaitResult("unknown", uid, std::chrono::seconds(20));
  ASSERT_FALSE(refusal.is_null()) << "the refusal's result goes to org unknown, under the id of its bytes";
  EXPECT_EQ(refusal["status"], "rejected");
  EXPECT_EQ(refusal["result"]["error"]["code"], "E_UNAUTHENTICATED");
  ASSERT_EQ(EventsOf("unknown", uid).size(), 1u);

  // Everything org-1's results topic holds (read to its end now, after the
  // refusal's transaction): no final result for the victim's id.
  std::vector<Json> org1;
  TailReadStats read;
  ASSERT_TRUE(ReadCommittedTail(
                  bus_, {bus_.topics.results_for("org-1")}, 10000, std::chrono::seconds(10),
                  [&](const Message& m) { org1.push_back(Json::parse(m.value)); }, &read)
                  .ok());
  ASSERT_TRUE(read.complete);
  for (const Json& r : org1) {
    EXPECT_FALSE(r.value("request_id", "") == "victim-1" && r.value("status", "") != "pending") << r.dump();
  }
  // And the victim's request still waits for its approvers.
  for (const Event& e : EventsOf("org-1", "victim-1")) {
    EXPECT_NE(e.type, "request.rejected") << e.data.dump();
    EXPECT_NE(e.type, "approval.denied");
  }
}

// The issue's 11-byte junk, 1,000 times: a handful of events that account
// for every one (waits for the summary, no sleep).
TEST_F(UnprovenPipelineTest, AThousandJunkMessagesOnTheRequestsTopicAreAFewEventsThatCountThemAll) {
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(producer_->Send(OnRequests("junk-bytes!", "")).ok());
  ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  std::vector<Event> refusals;
  uint64_t accounted = 0;
  const bool all = WaitFor([&] {
    refusals = UnknownRejections();
    accounted = 0;
    for (const Event& e : refusals) accounted += Accounted(e);
    return accounted >= 1000;
  });
  ASSERT_TRUE(all) << accounted << " of 1000 accounted for in " << refusals.size() << " events";
  EXPECT_EQ(accounted, 1000u);
  EXPECT_LE(refusals.size(), 15u) << "one permanent event per junk message";
  size_t summaries = 0;
  for (const Event& e : refusals) summaries += e.data.contains("summary");
  EXPECT_GE(summaries, 1u);
}

// The old group name gets a group of its own: it reads copies and takes
// nothing from ingest.
TEST_F(UnprovenPipelineTest, AProcessWithoutTheDataDirectoryCannotJoinIngestsGroupAndSwallowRequests) {
  StartForeign("tollgate-ingest");
  ASSERT_TRUE(WaitFor([&] { return foreign_assigned_.load(); })) << "the foreign client never joined a group";
  // Two agents per partition of tollgate.requests, so a member holding any
  // of them would swallow some.
  std::vector<std::string> agents;
  std::map<int32_t, int> per_partition;
  for (int n = 0; agents.size() < 6 && n < 1000; ++n) {
    const std::string a = "ag-" + std::to_string(n);
    if (per_partition[PartitionOfKey(a, 3)]++ < 2) agents.push_back(a);
  }
  ASSERT_EQ(agents.size(), 6u);
  for (int i = 1; i <= 6; ++i) {
    SendSigned({{"request_id", "g-" + std::to_string(i)},
                {"org_id", "org-1"},
                {"agent_id", agents[i - 1]},
                {"session_id", "s"},
                {"tool", "echo"},
                {"args", {{"text", "hi"}}}});
  }
  for (int i = 1; i <= 6; ++i) {
    Json r = WaitResult("org-1", "g-" + std::to_string(i), std::chrono::seconds(15));
    ASSERT_FALSE(r.is_null()) << "g-" << i << " was swallowed";
    EXPECT_EQ(r["status"], "completed");
  }
  EXPECT_NE(Get("/metrics").find("tollgate_stage_foreign_group_members{stage=\"ingest\"} 0"),
            std::string::npos);
}

// With the data directory's secret, a foreign member can join: ingest says
// so on /metrics, /healthz and its log, until it has its partitions back.
TEST_F(UnprovenPipelineTest, AForeignMemberInAStagesOwnGroupIsReportedOnMetricsAndHealthz) {
  std::shared_ptr<const EventsKey> key;
  ASSERT_TRUE(EventsKey::Load(dir_.sub("data") + "/keys/events.key", false, &key).ok());
  const std::string group = StageGroupId(*key, "ingest");
  EXPECT_EQ(group.rfind("tollgate-ingest-", 0), 0u);
  EXPECT_EQ(group.size(), std::string("tollgate-ingest-").size() + 16);
  const std::string flagged = "tollgate_stage_foreign_group_members{stage=\"ingest\"} 1";
  EXPECT_EQ(Get("/metrics").find(flagged), std::string::npos);
  EXPECT_EQ(Json::parse(Get("/healthz")).count("degraded"), 0u);

  StartForeign(group);
  ASSERT_TRUE(WaitFor([&] { return Get("/metrics").find(flagged) != std::string::npos; }))
      << "no foreign member reported";
  Json health = Json::parse(Get("/healthz"));
  EXPECT_EQ(health["ok"], true) << "it still serves";
  ASSERT_TRUE(health.contains("degraded")) << health.dump();
  EXPECT_NE(health["degraded"].dump().find("ingest"), std::string::npos) << health.dump();

  StopForeign();
  EXPECT_TRUE(WaitFor([&] { return Get("/metrics").find(flagged) == std::string::npos; }))
      << "still reported after the foreign member left";
  EXPECT_EQ(Json::parse(Get("/healthz")).count("degraded"), 0u);
}

// ---------------------------------------------------------------- the events topic

// Two copies of the record, one of them restarted between two floods of
// unsealed junk, append the same few events, which account for every
// junk message.
TEST(FollowerJunk, AThousandUnsealedMessagesAreAFewEventsAndEveryCopyHoldsTheSame) {
  TempDir dir;
  std::unique_ptr<EmbeddedBroker> broker;
  ASSERT_TRUE(EmbeddedBroker::Start(1, &broker).ok());
  BusConfig bus;
  bus.brokers = broker->bootstrap();
  ASSERT_TRUE(broker->CreateTopic(bus.topics.events(), 1).ok());
  std::shared_ptr<const EventsKey> key;
  ASSERT_TRUE(EventsKey::Load(dir.sub("events.key"), true, &key).ok());
  std::unique_ptr<Producer> producer;
  ASSERT_TRUE(Producer::Open(bus, "", &producer).ok());
  auto junk = [&](int n) {
    Message m;
    m.topic = bus.topics.events();
    m.value = "junk-bytes!";
    for (int i = 0; i < n; ++i) ASSERT_TRUE(producer->Send(m).ok());
    ASSERT_TRUE(producer->Flush(std::chrono::seconds(10)).ok());
  };
  struct Copy {
    std::unique_ptr<EventLog> log;
    std::unique_ptr<LogSink> sink;
    std::unique_ptr<EventFollower> follower;
    std::string dir;
    void Open(const BusConfig& bus, std::shared_ptr<const EventsKey> key) {
      if (!log) {
        ASSERT_TRUE(EventLog::Open(dir + "/log", LogOptions{}, &log).ok());
        sink = std::make_unique<LogSink>(*log);
      }
      FollowerOptions fo;
      fo.bus = bus;
      fo.key = std::move(key);
      fo.offset_path = dir + "/events.offset";
      ASSERT_TRUE(EventFollower::Open(fo, log->head_seq() == 0, *sink, &follower).ok());
    }
    std::vector<Event> Events() const {
      std::vector<Event> out;
      for (uint64_t s = 1; s <= log->head_seq(); ++s) {
        Event e;
        EXPECT_TRUE(log->store().ReadEvent(s, &e).ok());
        out.push_back(e);
      }
      return out;
    }
  };
  Copy a, b;
  a.dir = dir.sub("a");
  b.dir = dir.sub("b");

  junk(500);
  a.Open(bus, key);
  ASSERT_TRUE(a.follower->CatchUp().ok());
  EXPECT_EQ(a.Events().size(), kRefusalsLoggedPerBlock);
  a.follower.reset();  // stopped mid-block, its counts with it

  junk(500);
  Event e;
  e.type = "request.rejected";
  e.org_id = "org-1";
  e.agent_id = "a1";
  e.session_id = "s";
  e.request_id = "r1";
  e.id = MakeRequestEventId(e.org_id, e.type, e.request_id);
  e.time_us = NowMicros();
  e.data = {{"error", {{"code", "E_INVALID_REQUEST"}, {"message", "a sealed event"}}}};
  Message sealed;
  ASSERT_TRUE(EventMessage(e, bus.topics.events(), kDefaultMaxEventBytes, *key, &sealed).ok());
  ASSERT_TRUE(producer->Send(sealed).ok());
  ASSERT_TRUE(producer->Flush(std::chrono::seconds(10)).ok());

  a.Open(bus, key);
  ASSERT_TRUE(a.follower->CatchUp().ok());
  b.Open(bus, key);
  ASSERT_TRUE(b.follower->CatchUp().ok());

  const std::vector<Event> ea = a.Events(), eb = b.Events();
  ASSERT_EQ(ea.size(), eb.size());
  for (size_t i = 0; i < ea.size(); ++i) {
    EXPECT_EQ(ea[i].id, eb[i].id) << i;
    EXPECT_EQ(ea[i].hash, eb[i].hash) << i;
  }
  uint64_t accounted = 0;
  size_t refusals = 0;
  for (const Event& x : eb) {
    if (x.org_id != "unknown") continue;
    ++refusals;
    accounted += Accounted(x);
    EXPECT_EQ(x.data["error"]["code"], "E_EVENT_REFUSED");
  }
  EXPECT_EQ(accounted, 1000u);
  EXPECT_EQ(refusals, kRefusalsLoggedPerBlock + 1) << "ten one by one and a summary";
  EXPECT_EQ(eb.back().id, e.id) << "the summary comes before the next event";
  EXPECT_EQ(eb[eb.size() - 2].data["summary"]["count"], 990);
  for (const Event& x : eb)
    EXPECT_TRUE(SchemaRegistry::Builtin().ValidateEvent(x.RecordJson()).ok()) << x.type;
}

}  // namespace
}  // namespace tollgate
