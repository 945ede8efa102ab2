// audit/request_cache: the in-memory request histories stages read instead
// of the log. Pinned to the log itself: for every request, what the cache
// answers is what StoreLogView reads from RocksDB.
#include "audit/request_cache.h"

#include <gtest/gtest.h>

#include "audit/log_sink.h"
#include "test_util.h"

namespace tollgate {
namespace {

using testing::MakeEvent;

class RequestCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(EventLog::Open(dir_.sub("log"), LogOptions{}, &log_).ok());
    store_view_ = std::make_unique<StoreLogView>(log_->store());
  }
  // Appends `events` as one group through a sink feeding `cache`.
  std::vector<EventSink::Appended> Append(RequestCache& cache, std::vector<Event> events) {
    LogSink sink(*log_, &cache);
    std::vector<EventSink::Appended> out;
    sink.AppendAll(std::move(events), &out);
    for (const auto& a : out) EXPECT_TRUE(a.status.ok()) << a.status.ToString();
    return out;
  }
  // The cache's answer for `rid` of `org` matches the log's: same events, same order,
  // same seq, same envelope and data.
  void ExpectSameAsLog(const RequestCache& cache, const std::string& rid, const std::string& org = "o1") {
    std::vector<Event> cached, logged;
    ASSERT_TRUE(cache.Get(org, rid, &cached)) << rid << " is not cached";
    ASSERT_TRUE(store_view_->EventsOfRequest(org, rid, &logged).ok());
    ASSERT_EQ(cached.size(), logged.size()) << rid;
    for (size_t i = 0; i < cached.size(); ++i) {
      EXPECT_EQ(cached[i].seq, logged[i].seq) << rid << " #" << i;
      EXPECT_EQ(cached[i].id, logged[i].id) << rid << " #" << i;
      EXPECT_EQ(cached[i].type, logged[i].type);
      EXPECT_EQ(cached[i].time_us, logged[i].time_us);
      EXPECT_EQ(cached[i].org_id, logged[i].org_id);
      EXPECT_EQ(cached[i].agent_id, logged[i].agent_id);
      EXPECT_EQ(cached[i].session_id, logged[i].session_id);
      EXPECT_EQ(cached[i].tool, logged[i].tool);
      EXPECT_EQ(cached[i].data, logged[i].data) << rid << " #" << i;
    }
  }
  testing::TempDir dir_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<StoreLogView> store_view_;
};

TEST_F(RequestCacheTest, HoldsEveryEventOfARequestThatBeganHereInLogOrder) {
  RequestCache cache;
  // Groups as stages append them: interleaved requests, several per group.
  Append(cache, {MakeEvent("request.received", "r1"), MakeEvent("request.received", "r2")});
  Append(cache, {MakeEvent("decision.made", "r2", "s1", "a1", "o1", "echo", 1'790'000'000'000'100,
                           Json{{"verdict", "allow"}, {"cost", 0.5}, {"n", 3}})});
  Append(cache, {MakeEvent("decision.made", "r1"), MakeEvent("execution.started", "r1")});
  Append(cache, {MakeEvent("execution.completed", "r1", "s1", "a1", "o1", "echo", 1'790'000'000'000'200,
                           Json{{"result", {{"success", true}, {"data", {{"x", {1, 2.5, "z"}}}}}}})});
  // A stage re-appending what is already there (a replayed batch) changes nothing.
  auto again = Append(cache, {MakeEvent("decision.made", "r1"), MakeEvent("execution.started", "r1")});
  EXPECT_TRUE(again[0].duplicate);
  ExpectSameAsLog(cache, "r1");
  ExpectSameAsLog(cache, "r2");
  std::vector<Event> r1;
  ASSERT_TRUE(cache.Get("o1", "r1", &r1));
  ASSERT_EQ(r1.size(), 4u);
  EXPECT_EQ(r1.front().type, "request.received");
  EXPECT_EQ(r1.back().type, "execution.completed");
}

TEST_F(RequestCacheTest, ARequestThatBeganBeforeIsReadFromTheLog) {
  {
    RequestCache earlier;  // another process's cache, gone with it
    Append(earlier, {MakeEvent("request.received", "old")});
  }
  RequestCache cache;
  // Its request.received again (a re-sent copy): a duplicate, so the cache
  // cannot know the request's whole history and opens no entry.
  auto dup = Append(cache, {MakeEvent("request.received", "old")});
  EXPECT_TRUE(dup[0].duplicate);
  Append(cache, {MakeEvent("decision.made", "old")});
  std::vector<Event> out;
  EXPECT_FALSE(cache.Get("o1", "old", &out));
  // The view falls back to the log and finds both events.
  CachedLogView view(cache, *store_view_);
  ASSERT_TRUE(view.EventsOfRequest("o1", "old", &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].type, "request.received");
  EXPECT_EQ(out[1].type, "decision.made");
  // An event of a request with no request.received opens nothing either.
  Append(cache, {MakeEvent("request.rejected", "k-orphan")});
  EXPECT_FALSE(cache.Get("o1", "k-orphan", &out));
  ASSERT_TRUE(view.EventsOfRequest("o1", "k-orphan", &out).ok());
  EXPECT_EQ(out.size(), 1u);
}

TEST_F(RequestCacheTest, PastItsCapacityTheOldestRequestsAreReadFromTheLogAgain) {
  RequestCache cache(3);
  for (int i = 0; i < 5; ++i) Append(cache, {MakeEvent("request.received", "r" + std::to_string(i))});
  EXPECT_EQ(cache.size(), 3u);
  std::vector<Event> out;
  EXPECT_FALSE(cache.Get("o1", "r0", &out));
  EXPECT_FALSE(cache.Get("o1", "r1", &out));
  for (int i = 2; i < 5; ++i) ExpectSameAsLog(cache, "r" + std::to_string(i));
  // An evicted request's later events do not reopen it (its first is gone).
  Append(cache, {MakeEvent("decision.made", "r0")});
  EXPECT_FALSE(cache.Get("o1", "r0", &out));
  CachedLogView view(cache, *store_view_);
  ASSERT_TRUE(view.EventsOfRequest("o1", "r0", &out).ok());
  EXPECT_EQ(out.size(), 2u);
}

// request_ids are the agents' own and scoped by org: the same id in two
// orgs is two requests, cached apart, and neither sees the other's events.
TEST_F(RequestCacheTest, TheSameRequestIdInTwoOrgsIsTwoRequests) {
  RequestCache cache;
  Append(cache, {MakeEvent("request.received", "r1", "s1", "a1", "o1"),
                 MakeEvent("request.received", "r1", "s1", "a1", "o2")});
  auto second = Append(cache, {MakeEvent("decision.made", "r1", "s1", "a1", "o2")});
  EXPECT_FALSE(second[0].duplicate) << "o2's event is not o1's";
  ExpectSameAsLog(cache, "r1", "o1");
  ExpectSameAsLog(cache, "r1", "o2");
  std::vector<Event> o1, o2, none;
  ASSERT_TRUE(cache.Get("o1", "r1", &o1));
  ASSERT_TRUE(cache.Get("o2", "r1", &o2));
  EXPECT_EQ(o1.size(), 1u);
  ASSERT_EQ(o2.size(), 2u);
  for (const Event& e : o1) EXPECT_EQ(e.org_id, "o1");
  for (const Event& e : o2) EXPECT_EQ(e.org_id, "o2");
  EXPECT_FALSE(cache.Get("o3", "r1", &none));
  CachedLogView view(cache, *store_view_);
  ASSERT_TRUE(view.EventsOfRequest("o3", "r1", &none).ok());
  EXPECT_TRUE(none.empty()) << "no other org's events through the log either";
}

TEST_F(RequestCacheTest, AFailedGroupIsNotCached) {
  RequestCache cache;
  Append(cache, {MakeEvent("request.received", "r1")});
  // An invalid event fails its whole group: nothing of it is in the log.
  Event bad = MakeEvent("decision.made", "r1");
  bad.type = "no.such.type";
  LogSink sink(*log_, &cache);
  std::vector<EventSink::Appended> out;
  sink.AppendAll({MakeEvent("execution.started", "r1"), bad}, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FALSE(out[1].status.ok());
  ExpectSameAsLog(cache, "r1");
  std::vector<Event> events;
  ASSERT_TRUE(cache.Get("o1", "r1", &events));
  EXPECT_EQ(events.size(), 1u);
}

}  // namespace
}  // namespace tollgate
