// The runner's two-phase stages against the embedded broker and a real log:
// deferred work runs only after its message's events are durable, on a pool
// (a slow job does not hold up fast ones: results come out of order), and
// offsets are committed only up to the lowest unfinished message, so a
// restarted runner re-reads nothing that finished and nothing is lost.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "core/messages.h"
#include "runtime/stage_runner.h"
#include "tests/child_process.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

// "slow-N" waits for a gate; "fast-N" finishes at once; "plain-N" has no
// deferred work. Each logs a start
// event in Process and a completion event plus an output when its work ends.
class DeferringStage : public Stage {
 public:
  explicit DeferringStage(const LogView& durable) : durable_(durable) {}
  std::string name() const override { return "deferring"; }
  std::vector<std::string> input_topics() const override { return {"def-in"}; }
  StageResult Process(const Message& in, const StageContext&, const LogView&) override {
    seen.push_back(in.value);
    StageResult r;
    r.events.push_back(testing::MakeEvent("execution.started", in.value, "s1", "a1", "o1", "echo",
                                          1'790'000'000'000'000, {{"executor", "t"}, {"attempt", 1}}));
    const std::string id = in.value;
    if (id.rfind("plain", 0) == 0) {  // no second phase: done in the batch
      r.outputs.push_back({{"def-out", -1, -1, "a1", Json{{"id", id}}.dump(), {}}, 0, Json{{"id", id}}});
      return r;
    }
    r.deferred = [this, id] {
      // The start event must already be in the log.
      std::vector<Event> have;
      durable_.EventsOfRequest("o1", id, &have);
      if (have.empty()) started_before_durable = true;
      if (id.rfind("slow", 0) == 0) {
        while (!gate.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      StageResult done;
      done.events.push_back(testing::MakeEvent("execution.completed", id, "s1", "a1", "o1", "echo",
                                               1'790'000'000'000'000,
                                               {{"result", ToolResultOk(nullptr, 0)}, {"duration_ms", 0}}));
      done.outputs.push_back({{"def-out", -1, -1, "a1", Json{{"id", id}}.dump(), {}}, 0, Json{{"id", id}}});
      return done;
    };
    return r;
  }
  std::vector<std::string> seen;
  std::atomic<bool> gate{false};
  std::atomic<bool> started_before_durable{false};

 private:
  const LogView& durable_;
};

// The group's committed offset of def-in/0, read with a consumer handle that
// never joins the group (so the runner keeps its partition); -1 when none.
int64_t Committed(const std::string& brokers, const std::string& group) {
  char err[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "group.id", group.c_str(), err, sizeof err);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (rk == nullptr) return -2;
  rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(parts, "def-in", 0);
  int64_t offset = -2;
  if (rd_kafka_committed(rk, parts, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    offset = parts->elems[0].offset < 0 ? -1 : parts->elems[0].offset;
  }
  rd_kafka_topic_partition_list_destroy(parts);
  rd_kafka_destroy(rk);
  return offset;
}

class RunnerDeferredTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(EmbeddedBroker::Start(1, &broker_).ok());
    bus_.brokers = broker_->bootstrap();
    ASSERT_TRUE(broker_->CreateTopic("def-in", 1).ok());
    ASSERT_TRUE(broker_->CreateTopic("def-out", 1).ok());
    ASSERT_TRUE(EventLog::Open(dir_.sub("log"), LogOptions{}, &log_).ok());
    sink_ = std::make_unique<LogSink>(*log_);
    view_ = std::make_unique<StoreLogView>(log_->store());
    options_.bus = bus_;
    options_.group = "g-def";
    options_.transactional_id = "tx-def";
    options_.workers = 4;
  }
  void Publish(const std::vector<std::string>& values) {
    std::unique_ptr<Producer> p;
    ASSERT_TRUE(Producer::Open(bus_, "", &p).ok());
    for (const auto& v : values) ASSERT_TRUE(p->Send({"def-in", 0, -1, "k", v, {}}).ok());
    ASSERT_TRUE(p->Flush(std::chrono::seconds(10)).ok());
  }
  std::vector<std::string> Read(Consumer& c, size_t want) {
    std::vector<std::string> ids;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (ids.size() < want && std::chrono::steady_clock::now() < deadline) {
      std::vector<Message> got;
      c.Poll(100, std::chrono::milliseconds(50), &got);
      for (auto& m : got) ids.push_back(Json::parse(m.value)["id"]);
    }
    return ids;
  }
  std::unique_ptr<EmbeddedBroker> broker_;
  BusConfig bus_;
  testing::TempDir dir_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<LogSink> sink_;
  std::unique_ptr<StoreLogView> view_;
  RunnerOptions options_;
};

TEST_F(RunnerDeferredTest, SlowWorkDoesNotHoldUpFastWorkAndOffsetsWaitForIt) {
  Publish({"slow-0", "fast-1", "fast-2"});
  DeferringStage stage(*view_);
  StageRunner runner(stage, *sink_, *view_, options_);
  ASSERT_TRUE(runner.Start().ok());
  std::thread t([&] { EXPECT_TRUE(runner.Run().ok()); });
  std::unique_ptr<Consumer> out;
  ASSERT_TRUE(Consumer::Open(bus_, "g-def-out", {"def-out"}, &out).ok());
  std::vector<std::string> first = Read(*out, 2);
  std::sort(first.begin(), first.end());  // the pool finishes them in any order
  EXPECT_EQ(first, (std::vector<std::string>{"fast-1", "fast-2"})) << "fast results while slow-0 runs";
  // (The stat drops just after the results are published.)
  testing::WaitUntil([&] { return runner.stats().in_flight.load() == 1; }, std::chrono::seconds(2));
  EXPECT_EQ(runner.stats().in_flight.load(), 1u);
  // Messages done within their batch, after the unfinished slow-0.
  Publish({"plain-3", "plain-4"});
  EXPECT_EQ(Read(*out, 2), (std::vector<std::string>{"plain-3", "plain-4"}));
  // Everything after offset 0 is done, slow-0 is not: nothing past it may be
  // committed, or a crash now would lose it. The runner counts a batch's
  // messages once its transaction and offset commit are done (and the fast
  // works' commits were done before in_flight dropped): what it committed
  // for all five is in the group by then.
  ASSERT_TRUE(
      testing::WaitUntil([&] { return runner.stats().messages.load() >= 5; }, std::chrono::seconds(10)))
      << runner.stats().messages.load();
  EXPECT_LE(Committed(bus_.brokers, "g-def"), 0) << "committed past the unfinished offset 0";
  stage.gate = true;
  std::vector<std::string> second = Read(*out, 1);
  EXPECT_EQ(second, (std::vector<std::string>{"slow-0"}));
  testing::WaitUntil([&] { return Committed(bus_.brokers, "g-def") == 5; }, std::chrono::seconds(10));
  EXPECT_EQ(Committed(bus_.brokers, "g-def"), 5) << "once slow-0 is done, everything is committed";
  runner.Stop();
  t.join();
  EXPECT_FALSE(stage.started_before_durable) << "work ran before its events were durable";
  EXPECT_EQ(runner.stats().deferred.load(), 3u);
  EXPECT_EQ(log_->head_seq(), 8u) << "5 starts + 3 completions";

  // Everything finished and was committed: a new runner re-reads nothing.
  Publish({"fast-5"});
  DeferringStage again(*view_);
  StageRunner runner2(again, *sink_, *view_, options_);
  ASSERT_TRUE(runner2.Start().ok());
  std::thread t2([&] { EXPECT_TRUE(runner2.Run().ok()); });
  EXPECT_EQ(Read(*out, 1), (std::vector<std::string>{"fast-5"}));
  runner2.Stop();
  t2.join();
  EXPECT_EQ(again.seen, (std::vector<std::string>{"fast-5"}));
}

TEST_F(RunnerDeferredTest, StopWaitsForWorkInFlightAndRecordsIt) {
  Publish({"slow-9"});
  DeferringStage stage(*view_);
  StageRunner runner(stage, *sink_, *view_, options_);
  ASSERT_TRUE(runner.Start().ok());
  std::thread t([&] { EXPECT_TRUE(runner.Run().ok()); });
  testing::WaitUntil([&] { return runner.stats().in_flight.load() != 0; }, std::chrono::seconds(20));
  ASSERT_EQ(runner.stats().in_flight.load(), 1u);
  runner.Stop();
  // time must pass: Run must see Stop() before the work ends, and the runner shows no sign that it has.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stage.gate = true;  // the work ends after Stop() was asked
  t.join();
  EXPECT_EQ(runner.stats().deferred.load(), 1u);
  EXPECT_EQ(log_->head_seq(), 2u) << "its completion was recorded before the runner stopped";
}

}  // namespace
}  // namespace tollgate
