// Recorded-result replay through the real pipeline: a run is recorded
// through the embedded broker into a log, then a second pipeline started
// with --replay-from that log serves those results to the same calls,
// running nothing, and reports the calls that do not match.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "agent_keys.h"
#include "audit/export.h"
#include "audit/log_sink.h"
#include "audit/verify.h"
#include "core/messages.h"
#include "deploy/pipeline.h"
#include "replay/chain_check.h"
#include "replay/log_source.h"
#include "replay/recording.h"
#include "replay/redecide.h"
#include "replay/timeline.h"
#include "test_util.h"
#include "tests/results_reader.h"

namespace tollgate {
namespace {

using testing::TempDir;

// One pipeline and an agent talking to it; the agent signs its requests
// with a key registered in that pipeline's log.
class AgentRun {
 public:
  explicit AgentRun(PipelineOptions o) {
    o.durability = Durability::kBuffered;
    Status s = Pipeline::Start(o, &p_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return;
    signers_ = std::make_unique<testing::TestSigners>(*p_);
    bus_.brokers = p_->bootstrap();
    EXPECT_TRUE(Producer::Open(bus_, "", &producer_).ok());
    EXPECT_TRUE(
        testing::ResultsReader::Open(bus_, p_->gate().public_b64url(), "test-results", &results_).ok());
  }
  ~AgentRun() {
    results_.reset();
    producer_.reset();
    signers_.reset();
    p_.reset();
  }
  bool ok() const { return p_ != nullptr; }

  // Sends one call and waits for its result (calls go one at a time, so
  // their order is the order of the recording's keys).
  Json Call(const std::string& rid, const std::string& session, const std::string& tool, Json args) {
    Json req{{"request_id", rid},     {"org_id", "org-1"}, {"agent_id", "agent-1"},
             {"session_id", session}, {"tool", tool},      {"args", std::move(args)}};
    Message m;
    m.topic = bus_.topics.requests();
    m.key = "agent-1";
    m.value = req.dump();
    signers_->SignRequest(&m);
    EXPECT_TRUE(producer_->Send(m).ok());
    EXPECT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto it = got_.find(rid); it != got_.end()) return it->second;
      std::vector<Message> batch;
      results_->Poll(100, std::chrono::milliseconds(100), &batch);
      for (auto& r : batch) got_[r.headers[kHeaderRequestId]] = Json::parse(r.value);
    }
    ADD_FAILURE() << "no result for " << rid;
    return nullptr;
  }
  std::vector<Event> EventsOf(const std::string& rid) {
    std::vector<Event> out;
    StoreLogView view(p_->log().store());
    EXPECT_TRUE(view.EventsOfRequest("org-1", rid, &out).ok());
    return out;
  }
  Pipeline& pipeline() { return *p_; }

 private:
  std::unique_ptr<Pipeline> p_;
  std::unique_ptr<testing::TestSigners> signers_;
  BusConfig bus_;
  std::unique_ptr<Producer> producer_;
  std::unique_ptr<testing::ResultsReader> results_;
  std::map<std::string, Json> got_;
};

std::vector<std::string> Types(const std::vector<Event>& events) {
  std::vector<std::string> t;
  for (const auto& e : events) t.push_back(e.type);
  return t;
}

class ReplayPipelineTest : public ::testing::Test {
 protected:
  // Yesterday's run: session s1 calls echo {n:1} twice, echo {n:2} and
  // current_time (whose result is the time it ran: a replay that ran it
  // again would show another time).
  void SetUp() override {
    PipelineOptions o;
    o.data_dir = dir_.sub("recorded");
    AgentRun run(o);
    ASSERT_TRUE(run.ok());
    recorded_["a"] = run.Call("a", "s1", "echo", {{"n", 1}});
    recorded_["b"] = run.Call("b", "s1", "echo", {{"n", 2}});
    recorded_["c"] = run.Call("c", "s1", "echo", {{"n", 1}});
    recorded_["t"] = run.Call("t", "s1", "current_time", Json::object());
    for (auto& [rid, r] : recorded_) ASSERT_EQ(r["status"], "completed") << rid << ": " << r.dump();
  }

  TempDir dir_;
  std::map<std::string, Json> recorded_;
};

TEST_F(ReplayPipelineTest, ServesRecordedResultsAndReportsMismatches) {
  PipelineOptions o;
  o.data_dir = dir_.sub("replay");
  o.replay_from = dir_.sub("recorded");
  // The replay's stages see a clock a minute ahead (well within the
  // signatures' 5 minutes of skew): current_time run again would differ.
  o.clock = [] { return NowMicros() + 60'000'000; };
  AgentRun run(o);
  ASSERT_TRUE(run.ok());

  // The same calls, in the same order per key, get the recorded results.
  Json r1 = run.Call("r1", "s1", "echo", {{"n", 1}});
  Json r2 = run.Call("r2", "s1", "current_time", Json::object());
  Json r3 = run.Call("r3", "s1", "echo", {{"n", 1}});
  Json r4 = run.Call("r4", "s1", "echo", {{"n", 2}});
  for (const Json* r : {&r1, &r2, &r3, &r4}) ASSERT_EQ((*r)["status"], "completed") << r->dump();
  EXPECT_EQ(r1["result"]["meta"]["replayed"]["from_request_id"], "a");
  EXPECT_EQ(r3["result"]["meta"]["replayed"]["from_request_id"], "c")
      << "the second call of a key gets the second result";
  EXPECT_EQ(r4["result"]["meta"]["replayed"]["from_request_id"], "b");
  EXPECT_EQ(r2["result"]["data"], recorded_["t"]["result"]["data"]) << "current_time was not run again";
  EXPECT_EQ(r4["result"]["data"], recorded_["b"]["result"]["data"]);

  // Mismatches: args never recorded, and a third call of a key recorded twice.
  Json m1 = run.Call("m1", "s1", "echo", {{"n", 3}});
  Json m2 = run.Call("m2", "s1", "echo", {{"n", 1}});
  Json m3 = run.Call("m3", "s-other", "echo", {{"n", 1}});  // another session: its own recording (none)
  for (const Json* m : {&m1, &m2, &m3}) {
    EXPECT_EQ((*m)["status"], "failed") << m->dump();
    EXPECT_EQ((*m)["result"]["error"]["code"], replay::kReplayMismatch) << m->dump();
  }
  EXPECT_NE(m2["result"]["error"]["message"].get<std::string>().find("only 2"), std::string::npos)
      << m2.dump();

  // The log: served and mismatched calls end in execution.completed by the
  // replay executor, nothing was started, and the log verifies.
  for (const std::string rid : {"r1", "r2", "m1", "m2"}) {
    auto events = run.EventsOf(rid);
    EXPECT_EQ(Types(events),
              (std::vector<std::string>{"request.received", "decision.made", "execution.completed"}))
        << rid;
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().data["executor"], "replay");
    EXPECT_EQ(events.back().data["replay"]["matched"], rid[0] == 'r') << rid;
  }
  EXPECT_TRUE(VerifyLog(run.pipeline().log().store()).ok());
}

// --replay-session: every session of the re-run replays the recorded one,
// each on its own; the recording may also be an export file.
TEST_F(ReplayPipelineTest, ReplaySessionMapsEveryRerunSessionOntoTheRecordedOne) {
  {
    std::unique_ptr<LogStore> store;
    ASSERT_TRUE(LogStore::Open(dir_.sub("recorded") + "/log", OpenMode::kReadOnly, &store).ok());
    std::ofstream out(dir_.sub("recorded.jsonl"));
    ASSERT_TRUE(ExportLog(*store, {}, out).ok());
  }
  PipelineOptions o;
  o.data_dir = dir_.sub("replay");
  o.replay_from = dir_.sub("recorded.jsonl");
  o.replay_session = "s1";
  AgentRun run(o);
  ASSERT_TRUE(run.ok());
  Json x = run.Call("x", "rerun-1", "echo", {{"n", 2}});
  Json y = run.Call("y", "rerun-2", "echo", {{"n", 2}});
  EXPECT_EQ(x["result"]["meta"]["replayed"]["from_request_id"], "b") << x.dump();
  EXPECT_EQ(y["result"]["meta"]["replayed"]["from_request_id"], "b")
      << "each re-run session replays s1 from the start";
  Json z = run.Call("z", "rerun-1", "echo", {{"n", 2}});
  EXPECT_EQ(z["result"]["error"]["code"], replay::kReplayMismatch) << z.dump();
}

// A restarted replay goes on where it stopped: the index a call got is
// folded back from the log.
TEST_F(ReplayPipelineTest, ARestartedReplayGoesOnWhereItStopped) {
  PipelineOptions o;
  o.data_dir = dir_.sub("replay");
  o.replay_from = dir_.sub("recorded");
  {
    AgentRun run(o);
    ASSERT_TRUE(run.ok());
    EXPECT_EQ(run.Call("r1", "s1", "echo", {{"n", 1}})["result"]["meta"]["replayed"]["from_request_id"], "a");
  }
  AgentRun again(o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.Call("r2", "s1", "echo", {{"n", 1}})["result"]["meta"]["replayed"]["from_request_id"], "c");
}

// The decisions decide's stage made in a real run re-decide to the same
// thing from the log alone (policy.updated from the stage's load, budgets
// folded from the ledger's events), and the timeline has every step.
TEST_F(ReplayPipelineTest, VerifyOfARealRunIsCleanAndItsTimelineComplete) {
  std::unique_ptr<LogStore> store;
  ASSERT_TRUE(LogStore::Open(dir_.sub("recorded") + "/log", OpenMode::kReadOnly, &store).ok());
  std::vector<Event> inputs;
  ASSERT_TRUE(replay::ReadDecisionInputs(*store, replay::Target::Session("s1"), &inputs).ok());
  replay::RedecideReport r = replay::Redecide(inputs, replay::Target::Session("s1"), {});
  EXPECT_EQ(r.decisions, 4u) << replay::FormatReport(r);
  EXPECT_TRUE(r.clean()) << replay::FormatReport(r);

  std::vector<Event> events;
  ASSERT_TRUE(replay::ReadSession(*store, "s1", &events).ok());
  replay::SessionTimeline t = replay::BuildTimeline("s1", events);
  ASSERT_EQ(t.requests.size(), 4u);
  for (const auto& req : t.requests) {
    EXPECT_EQ(req.status, "completed") << req.request_id;
    EXPECT_EQ(req.verdict, "allow") << req.request_id;
    EXPECT_FALSE(req.policy_version.empty());
    EXPECT_TRUE(req.executed && req.success) << req.request_id;
  }
  EXPECT_EQ(t.requests[3].result["result"]["data"], recorded_["t"]["result"]["data"]);
  auto problems = replay::CheckSessionChain(
      events, [&store](uint64_t seq, replay::ChainLink* l) { return replay::ReadLink(*store, seq, l); });
  EXPECT_TRUE(problems.empty());
}

TEST(ReplayPipelineStart, ARecordingThatCannotBeReadStopsTheStart) {
  TempDir dir;
  PipelineOptions o;
  o.data_dir = dir.sub("replay");
  o.durability = Durability::kBuffered;
  o.replay_from = dir.sub("no-such-recording");
  std::unique_ptr<Pipeline> p;
  Status s = Pipeline::Start(o, &p);
  EXPECT_EQ(s.code(), errc::kNotFound) << s.ToString();
}

}  // namespace
}  // namespace tollgate
