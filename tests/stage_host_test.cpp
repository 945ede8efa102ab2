// The stage host (runtime/stage_host.h) against a real RocksDB log and the
// embedded broker: every stage folds the log before anything runs, hears
// every later append (its own and other writers'), a stage that cannot
// restore stops the start with its name, and the host runs and stops the
// runners it made.
#include "runtime/stage_host.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "audit/event_log.h"
#include "audit/log_history.h"
#include "audit/log_sink.h"
#include "core/messages.h"
#include "tests/child_process.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

constexpr int64_t kT = 1'790'000'000'000'000;

Event Received(const std::string& id) {
  return testing::MakeEvent("request.received", id, "s1", "a1", "o1", "echo", kT, {{"args", Json::object()}});
}

// Counts what it folded; on "in-<topic>" messages it logs a received event
// and produces the id to "<topic>-out".
class CountingStage : public Stage {
 public:
  CountingStage(std::string topic, bool fail_restore = false)
      : topic_(std::move(topic)), fail_restore_(fail_restore) {}
  std::string name() const override { return "counting-" + topic_; }
  std::vector<std::string> input_topics() const override { return {topic_}; }
  Status Restore(const LogHistory& history) override {
    if (fail_restore_) return Status::Error("E_TEST", "cannot read its snapshot");
    for (uint64_t seq = 1; seq <= history.head_seq(); ++seq) {
      Event e;
      Status s = history.ReadEvent(seq, &e);
      if (!s.ok()) return s;
      restored.push_back(e.request_id);
    }
    restored_before_any_append = appended.load() == 0;
    return Status::Ok();
  }
  void OnAppended(const std::vector<Event>& events) override {
    std::lock_guard<std::mutex> lock(mu);
    for (const Event& e : events) seen.push_back(e.request_id);
    appended += events.size();
  }
  StageResult Process(const Message& in, const StageContext&, const LogView&) override {
    StageResult r;
    r.events.push_back(Received(in.value));
    r.outputs.push_back(
        {{topic_ + "-out", -1, -1, "a1", Json{{"id", in.value}}.dump(), {}}, 0, Json{{"id", in.value}}});
    return r;
  }
  std::vector<std::string> restored;
  bool restored_before_any_append = false;
  std::mutex mu;
  std::vector<std::string> seen;  // guarded by mu
  std::atomic<size_t> appended{0};

 private:
  std::string topic_;
  bool fail_restore_;
};

class StageHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(EventLog::Open(dir_.sub("log"), LogOptions{}, &log_).ok());
    sink_ = std::make_unique<LogSink>(*log_);
    view_ = std::make_unique<StoreLogView>(log_->store());
    history_ = std::make_unique<StoreHistory>(*log_);
  }
  HostEnv Env() {
    HostEnv env;
    env.history = history_.get();
    env.feed = sink_.get();
    env.sink = sink_.get();
    env.view = view_.get();
    env.runner_options = [this](const Stage& s) {
      RunnerOptions ro;
      ro.bus = bus_;
      ro.group = "g-" + s.name();
      ro.transactional_id = "tx-" + s.name();
      return ro;
    };
    return env;
  }
  testing::TempDir dir_;
  BusConfig bus_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<LogSink> sink_;
  std::unique_ptr<StoreLogView> view_;
  std::unique_ptr<StoreHistory> history_;
};

TEST_F(StageHostTest, EveryStageFoldsTheLogBeforeItHearsAnyAppend) {
  ASSERT_TRUE(AppendOne(*sink_, Received("r-1")).ok());
  ASSERT_TRUE(AppendOne(*sink_, Received("r-2")).ok());
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<CountingStage>("a"));
  stages.push_back(std::make_unique<CountingStage>("b"));
  std::unique_ptr<StageHost> host;
  ASSERT_TRUE(StageHost::Restore(std::move(stages), Env(), &host).ok());
  // Another writer (the reconciler, a credential change) appends: both hear it.
  ASSERT_TRUE(AppendOne(*sink_, Received("r-3")).ok());
  for (const auto& s : host->stages()) {
    auto* c = static_cast<CountingStage*>(s.get());
    EXPECT_EQ(c->restored, (std::vector<std::string>{"r-1", "r-2"})) << c->name();
    EXPECT_TRUE(c->restored_before_any_append) << c->name();
    std::lock_guard<std::mutex> lock(c->mu);
    EXPECT_EQ(c->seen, std::vector<std::string>{"r-3"}) << c->name();
  }
}

TEST_F(StageHostTest, AStageThatCannotRestoreStopsTheStartAndSaysWhichStage) {
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<CountingStage>("a"));
  stages.push_back(std::make_unique<CountingStage>("b", /*fail_restore=*/true));
  std::unique_ptr<StageHost> host;
  Status s = StageHost::Restore(std::move(stages), Env(), &host);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), "E_TEST");
  EXPECT_NE(s.message().find("counting-b"), std::string::npos) << s.message();
  EXPECT_EQ(host, nullptr);
}

TEST_F(StageHostTest, TheHostRunsEachStageAndItsAppendsReachEveryStage) {
  std::unique_ptr<EmbeddedBroker> broker;
  ASSERT_TRUE(EmbeddedBroker::Start(1, &broker).ok());
  bus_.brokers = broker->bootstrap();
  for (const char* t : {"a", "a-out", "b", "b-out"}) ASSERT_TRUE(broker->CreateTopic(t, 1).ok());
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<CountingStage>("a"));
  stages.push_back(std::make_unique<CountingStage>("b"));
  std::unique_ptr<StageHost> host;
  ASSERT_TRUE(StageHost::Restore(std::move(stages), Env(), &host).ok());
  ASSERT_TRUE(host->Run().ok());
  std::unique_ptr<Producer> p;
  ASSERT_TRUE(Producer::Open(bus_, "", &p).ok());
  ASSERT_TRUE(p->Send({"a", 0, -1, "k", "from-a", {}}).ok());
  ASSERT_TRUE(p->Send({"b", 0, -1, "k", "from-b", {}}).ok());
  ASSERT_TRUE(p->Flush(std::chrono::seconds(10)).ok());
  // Each stage appended one event; both stages fold both.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        for (const auto& s : host->stages()) {
          if (static_cast<CountingStage*>(s.get())->appended.load() < 2) return false;
        }
        return true;
      },
      std::chrono::seconds(20)));
  // The runner counts a message once its batch is done.
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        const Json stats = host->stats();
        return stats["counting-a"]["messages"] == 1 && stats["counting-b"]["messages"] == 1;
      },
      std::chrono::seconds(20)))
      << host->stats().dump();
  EXPECT_EQ(host->runners().size(), 2u);
  host->Stop();  // joins: a second Stop and the destructor are no-ops
  host->Stop();
}

}  // namespace
}  // namespace tollgate
