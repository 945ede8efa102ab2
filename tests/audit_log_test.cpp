// audit/: the event log against a real RocksDB in a temp dir.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "audit/audit_query.h"
#include "audit/event_log.h"
#include "audit/export.h"
#include "audit/verify.h"
#include "core/canonical_json.h"
#include "test_util.h"
#include "tests/child_process.h"

extern char** environ;

namespace tollgate {
namespace {

using testing::MakeEvent;
using testing::TempDir;

std::unique_ptr<EventLog> OpenLog(const std::string& path, Durability d = Durability::kBuffered) {
  LogOptions o;
  o.durability = d;
  std::unique_ptr<EventLog> log;
  Status s = EventLog::Open(path, o, &log);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return log;
}

TEST(EventLog, AppendsDenseSeqsAndChainsHashes) {
  TempDir dir;
  auto log = OpenLog(dir.path(), Durability::kSync);
  std::string prev = std::string(64, '0');
  for (int i = 1; i <= 20; ++i) {
    AppendResult r = log->Append(MakeEvent("request.received", "r" + std::to_string(i)));
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.seq, static_cast<uint64_t>(i));
    EXPECT_FALSE(r.duplicate);
    Event back;
    ASSERT_TRUE(log->store().ReadEvent(r.seq, &back).ok());
    EXPECT_EQ(back.prev_hash, prev);
    EXPECT_EQ(back.hash, r.hash);
    // The hash is SHA-256(prev_hash bytes || canonical body), recomputed here
    // independently of the writer.
    std::string body;
    ASSERT_TRUE(CanonicalBytes(back.BodyJson(), &body).ok());
    Digest p;
    ASSERT_TRUE(DigestFromHex(prev, &p));
    EXPECT_EQ(ToHex(logfmt::ChainHash(p, body)), back.hash);
    prev = back.hash;
  }
  EXPECT_EQ(log->head_seq(), 20u);
  EXPECT_EQ(log->head_hash(), prev);
  EXPECT_TRUE(VerifyLog(log->store()).ok());
}

TEST(EventLog, ReappendingAnIdReturnsTheExistingSeqAndWritesNothing) {
  TempDir dir;
  auto log = OpenLog(dir.path());
  AppendResult first = log->Append(MakeEvent("decision.made", "r1"));
  ASSERT_TRUE(first.status.ok());
  log->Append(MakeEvent("decision.made", "r2"));
  Event again = MakeEvent("decision.made", "r1");
  again.time_us += 999;  // a re-processed event may differ in time; the id is its identity
  AppendResult dup = log->Append(again);
  ASSERT_TRUE(dup.status.ok());
  EXPECT_TRUE(dup.duplicate);
  EXPECT_EQ(dup.seq, first.seq);
  EXPECT_EQ(dup.hash, first.hash);
  EXPECT_EQ(log->head_seq(), 2u);

  // Duplicates inside one group-commit batch resolve to the first.
  std::vector<AppendFuture> fs;
  for (int i = 0; i < 50; ++i) fs.push_back(log->AppendAsync(MakeEvent("decision.made", "r3")));
  std::set<uint64_t> seqs;
  int dups = 0;
  for (auto& f : fs) {
    AppendResult r = f.get();
    ASSERT_TRUE(r.status.ok());
    seqs.insert(r.seq);
    dups += r.duplicate;
  }
  EXPECT_EQ(seqs.size(), 1u);
  EXPECT_EQ(dups, 49);
  EXPECT_EQ(log->head_seq(), 3u);
  EXPECT_TRUE(VerifyLog(log->store()).ok());
}

TEST(AppendFuture, CompletesBeforeOrAfterTheWaiterBlocksAndMayBeDropped) {
  // Completed first: get() returns without blocking.
  {
    auto* slot = detail::AppendSlot::New();
    detail::SlotRef log_side(slot);
    AppendFuture f{detail::SlotRef(slot)};
    AppendResult r;
    r.seq = 7;
    log_side->Complete(std::move(r));
    EXPECT_TRUE(f.ready());
    EXPECT_EQ(f.get().seq, 7u);
    EXPECT_FALSE(f.valid());
  }
  // Waiter blocks first; the completer wakes it (and may drop its side first).
  for (int i = 0; i < 200; ++i) {
    auto* slot = detail::AppendSlot::New();
    detail::SlotRef log_side(slot);
    AppendFuture f{detail::SlotRef(slot)};
    std::thread completer([side = std::move(log_side), i]() mutable {
      if (i % 2) std::this_thread::sleep_for(std::chrono::microseconds(200));
      side->Complete(AppendResult::Error(Status::Error("E_TEST", "x")));
    });
    f.wait();
    EXPECT_TRUE(f.ready());
    EXPECT_EQ(f.get().status.code(), "E_TEST");
    completer.join();
  }
  // The caller drops its future; the log's side still completes and frees.
  {
    auto* slot = detail::AppendSlot::New();
    detail::SlotRef log_side(slot);
    { AppendFuture dropped{detail::SlotRef(slot)}; }
    log_side->Complete(AppendResult{});
  }
}

TEST(EventLog, DroppedFuturesStillAppend) {
  TempDir dir;
  auto log = OpenLog(dir.path(), Durability::kSync);
  for (int i = 0; i < 20; ++i) log->AppendAsync(MakeEvent("decision.made", "d" + std::to_string(i)));
  AppendResult last = log->Append(MakeEvent("decision.made", "d-last"));
  ASSERT_TRUE(last.status.ok()) << last.status.ToString();
  EXPECT_EQ(last.seq, 21u);
  EXPECT_EQ(log->head_seq(), 21u);
  EXPECT_TRUE(VerifyLog(log->store()).ok());
}

TEST(EventLog, ConcurrentAppendersGetDenseUniqueSeqs) {
  TempDir dir;
  auto log = OpenLog(dir.path(), Durability::kSync);
  constexpr int kThreads = 8, kPerThread = 200;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        AppendResult r = log->Append(MakeEvent(
            "request.received", "t" + std::to_string(t) + "-" + std::to_string(i), "s" + std::to_string(t)));
        ASSERT_TRUE(r.status.ok());
        got[t].push_back(r.seq);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (auto& v : got) {
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end())) << "one thread's appends keep their order";
    all.insert(v.begin(), v.end());
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_TRUE(VerifyLog(log->store()).ok()) << VerifyLog(log->store()).Summary();
}

// Append() callers sleep on one word with one of 32 wake bits each: with more
// callers than bits, some share a bit (and wake each other for nothing), and
// callers of Append(), AppendAsync() and duplicates mix in the same batches.
// Every call must still return, durable, with its own seq.
TEST(EventLog, MoreBlockedAppendersThanWakeBitsAllComplete) {
  TempDir dir;
  auto log = OpenLog(dir.path(), Durability::kSync);
  constexpr int kThreads = 48, kPerThread = 40;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string req = "w" + std::to_string(t) + "-" + std::to_string(i);
        AppendResult r;
        if (i % 5 == 4) {
          r = log->AppendAsync(MakeEvent("request.received", req, "s" + std::to_string(t))).get();
        } else {
          r = log->Append(MakeEvent("request.received", req, "s" + std::to_string(t)));
        }
        if (!r.status.ok() || r.duplicate || r.seq > log->head_seq()) ++bad;
        got[t].push_back(r.seq);
        if (i % 7 == 0) {  // the same event again: its seq, nothing written
          AppendResult again = log->Append(MakeEvent("request.received", req, "s" + std::to_string(t)));
          if (!again.status.ok() || !again.duplicate || again.seq != r.seq) ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  std::set<uint64_t> all;
  for (auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(log->head_seq(), static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_TRUE(VerifyLog(log->store()).ok()) << VerifyLog(log->store()).Summary();
}

TEST(EventLog, ReopenContinuesTheChain) {
  TempDir dir;
  std::string head;
  {
    auto log = OpenLog(dir.path(), Durability::kSync);
    for (int i = 0; i < 5; ++i) log->Append(MakeEvent("request.received", "r" + std::to_string(i)));
    head = log->head_hash();
  }
  auto log = OpenLog(dir.path());
  EXPECT_EQ(log->head_seq(), 5u);
  EXPECT_EQ(log->head_hash(), head);
  AppendResult r = log->Append(MakeEvent("request.received", "r0"));
  EXPECT_TRUE(r.duplicate) << "the dedupe index survives a restart";
  r = log->Append(MakeEvent("request.received", "r9"));
  EXPECT_EQ(r.seq, 6u);
  Event e;
  ASSERT_TRUE(log->store().ReadEvent(6, &e).ok());
  EXPECT_EQ(e.prev_hash, head);
  EXPECT_TRUE(VerifyLog(log->store()).ok());
}

TEST(EventLog, BadInputGetsAClearErrorAndWritesNothing) {
  TempDir dir;
  LogOptions o;
  o.max_event_bytes = 2048;
  std::unique_ptr<EventLog> log;
  ASSERT_TRUE(EventLog::Open(dir.path(), o, &log).ok());
  log->Append(MakeEvent("request.received", "ok"));

  struct Case {
    Event e;
    std::string code;
  };
  std::vector<Case> cases;
  Event e = MakeEvent("request.exploded", "x");
  cases.push_back({e, "E_UNKNOWN_EVENT_TYPE"});
  e = MakeEvent("request.received", "x");
  e.data = {{"blob", std::string(4096, 'z')}};
  cases.push_back({e, "E_EVENT_TOO_LARGE"});
  e = MakeEvent("request.received", "x");
  e.data = {{"bad", std::string("\xc3\x28")}};
  cases.push_back({e, "E_INVALID_UTF8"});
  e = MakeEvent("request.received", "");
  cases.push_back({e, "E_INVALID_EVENT"});
  e = MakeEvent("request.received", "x");
  e.data = Json::array({1, 2});
  cases.push_back({e, "E_INVALID_EVENT"});
  for (auto& c : cases) {
    AppendResult r = log->Append(c.e);
    EXPECT_EQ(r.status.code(), c.code) << r.status.ToString();
  }
  // Malformed JSON and wrong types never become an Event at all.
  Event parsed;
  EXPECT_EQ(EventFromText("{\"type\": ", &parsed).code(), "E_INVALID_JSON");
  EXPECT_EQ(EventFromText(R"({"type":"request.received","time":5})", &parsed).code(), "E_INVALID_EVENT");
  EXPECT_EQ(log->head_seq(), 1u);
  VerifyReport rep = VerifyLog(log->store());
  EXPECT_TRUE(rep.ok());
  EXPECT_EQ(rep.events, 1u);
}

TEST(EventLog, AppendRecordOnlyContinuesTheChainExactly) {
  TempDir a, b;
  auto src = OpenLog(a.path());
  for (int i = 0; i < 3; ++i) src->Append(MakeEvent("request.received", "r" + std::to_string(i)));
  auto dst = OpenLog(b.path());
  Event rec;
  ASSERT_TRUE(src->store().ReadEvent(2, &rec).ok());
  EXPECT_EQ(dst->AppendRecord(rec).status.code(), "E_CHAIN_BROKEN") << "seq 2 cannot start a log";
  ASSERT_TRUE(src->store().ReadEvent(1, &rec).ok());
  Event forged = rec;
  forged.data = {{"note", "forged"}};
  EXPECT_EQ(dst->AppendRecord(forged).status.code(), "E_CHAIN_BROKEN") << "hash must match the body";
  EXPECT_TRUE(dst->AppendRecord(rec).status.ok());
  EXPECT_EQ(dst->head_hash(), rec.hash);
}

// A log with three orgs, several agents and sessions, every event type.
class QueryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = OpenLog(dir_.path());
    int64_t t = 1'790'000'000'000'000;
    const char* verdicts[] = {"allow", "deny", "ask"};
    for (int i = 0; i < 300; ++i) {
      std::string rid = "req-" + std::to_string(i);
      std::string org = "org" + std::to_string(i % 3);
      std::string agent = "agent" + std::to_string(i % 5);
      std::string session = "sess" + std::to_string(i % 7);
      std::string tool = i % 2 ? "echo" : "http_request";
      log_->Append(MakeEvent("request.received", rid, session, agent, org, tool, t += 1000));
      log_->Append(MakeEvent("decision.made", rid, session, agent, org, tool, t += 1000,
                             {{"verdict", verdicts[i % 3]}}));
    }
    all_ = 600;
  }
  std::vector<Event> All(AuditQuery q, QueryScope scope = QueryScope::Operator(), size_t* pages = nullptr) {
    std::vector<Event> out;
    size_t n = 0;
    for (;;) {
      AuditPage page;
      Status s = GetAuditLog(log_->store(), scope, q, &page);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) break;
      ++n;
      out.insert(out.end(), page.events.begin(), page.events.end());
      if (page.next_cursor.empty()) break;
      q.cursor = page.next_cursor;
    }
    if (pages) *pages = n;
    return out;
  }
  // The json_lines form of the same query: one canonical record per event.
  std::vector<std::string> AllLines(AuditQuery q, QueryScope scope = QueryScope::Operator()) {
    std::vector<std::string> out;
    q.json_lines = true;
    for (;;) {
      AuditPage page;
      Status s = GetAuditLog(log_->store(), scope, q, &page);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) break;
      EXPECT_TRUE(page.events.empty());
      out.insert(out.end(), page.lines.begin(), page.lines.end());
      if (page.next_cursor.empty()) break;
      q.cursor = page.next_cursor;
    }
    return out;
  }
  static std::vector<std::string> Lines(const std::vector<Event>& events) {
    std::vector<std::string> out;
    for (const Event& e : events) {
      std::string line;
      EXPECT_TRUE(CanonicalBytes(e.RecordJson(), &line).ok());
      out.push_back(line);
    }
    return out;
  }
  // The same filter computed by brute force over every event.
  std::vector<uint64_t> Expected(const std::function<bool(const Event&)>& pred) {
    std::vector<uint64_t> out;
    for (uint64_t s = 1; s <= all_; ++s) {
      Event e;
      EXPECT_TRUE(log_->store().ReadEvent(s, &e).ok());
      if (pred(e)) out.push_back(s);
    }
    return out;
  }
  static std::vector<uint64_t> Seqs(const std::vector<Event>& v) {
    std::vector<uint64_t> out;
    for (auto& e : v) out.push_back(e.seq);
    return out;
  }
  TempDir dir_;
  std::unique_ptr<EventLog> log_;
  uint64_t all_ = 0;
};

TEST_F(QueryTest, EachFilterMatchesABruteForceScan) {
  struct Case {
    const char* name;
    std::function<void(AuditQuery&)> set;
    std::function<bool(const Event&)> pred;
    const char* index;
  };
  const Case cases[] = {
      {"session", [](AuditQuery& q) { q.session_id = "sess3"; },
       [](const Event& e) { return e.session_id == "sess3"; }, "idx_session"},
      {"agent", [](AuditQuery& q) { q.agent_id = "agent2"; },
       [](const Event& e) { return e.agent_id == "agent2"; }, "idx_agent"},
      {"request", [](AuditQuery& q) { q.request_id = "req-42"; },
       [](const Event& e) { return e.request_id == "req-42"; }, "idx_request"},
      {"tool", [](AuditQuery& q) { q.tool = "echo"; }, [](const Event& e) { return e.tool == "echo"; },
       "idx_tool"},
      {"org", [](AuditQuery& q) { q.org_id = "org1"; }, [](const Event& e) { return e.org_id == "org1"; },
       "idx_org"},
      {"type", [](AuditQuery& q) { q.types = {"decision.made"}; },
       [](const Event& e) { return e.type == "decision.made"; }, "idx_type"},
      {"verdict", [](AuditQuery& q) { q.verdict = "deny"; },
       [](const Event& e) { return e.type == "decision.made" && e.data["verdict"] == "deny"; }, "idx_type"},
      {"agent+session+tool",
       [](AuditQuery& q) {
         q.agent_id = "agent1";
         q.session_id = "sess1";
         q.tool = "echo";
       },
       [](const Event& e) { return e.agent_id == "agent1" && e.session_id == "sess1" && e.tool == "echo"; },
       "idx_session"},
      {"time range",
       [](AuditQuery& q) {
         q.since_us = 1'790'000'000'100'000;
         q.until_us = 1'790'000'000'200'000;
       },
       [](const Event& e) { return e.time_us >= 1'790'000'000'100'000 && e.time_us < 1'790'000'000'200'000; },
       "idx_time"},
      {"org+types",
       [](AuditQuery& q) {
         q.org_id = "org2";
         q.types = {"request.received", "decision.made"};
       },
       [](const Event& e) { return e.org_id == "org2"; }, "idx_org"},
      {"nothing", [](AuditQuery&) {}, [](const Event&) { return true; }, "events"},
  };
  for (const auto& c : cases) {
    for (bool desc : {false, true}) {
      AuditQuery q;
      c.set(q);
      q.descending = desc;
      q.limit = 37;  // several pages, a partial last one
      std::vector<uint64_t> want = Expected(c.pred);
      ASSERT_FALSE(want.empty()) << c.name;
      if (desc) std::reverse(want.begin(), want.end());
      const std::vector<Event> got = All(q);
      EXPECT_EQ(Seqs(got), want) << c.name << (desc ? " desc" : " asc");
      EXPECT_EQ(AllLines(q), Lines(got)) << c.name << (desc ? " desc" : " asc") << ": json_lines differ";
      AuditPage first;
      ASSERT_TRUE(GetAuditLog(log_->store(), QueryScope::Operator(), q, &first).ok());
      EXPECT_EQ(first.index_used, c.index) << c.name;
    }
  }
}

// json_lines reads the envelope without a JSON tree when the record has the
// writer's plain layout, and decodes it otherwise (escapes); either way each
// line is the record's canonical JSON.
TEST_F(QueryTest, JsonLinesAreTheCanonicalRecordsWhateverTheyHold) {
  const int64_t t = 1'800'000'000'000'000;
  log_->Append(MakeEvent("request.received", "odd-1", "s\"quoted", "agent-ü", "org0", "echo", t,
                         {{"note", "}{\"]["}, {"nested", {{"a", {1, 2, {{"b", "}"}}}}}}}));
  log_->Append(MakeEvent("request.received", "odd-2", "plain", "agent-ü", "org0", "tool\\x", t + 1,
                         {{"text", "日本語 \\ \" \n"}}));
  log_->Append(MakeEvent("request.received", "odd-3", "plain", "agent-ü", "org0", "echo", t + 2));
  AuditQuery q;
  q.agent_id = "agent-ü";
  const std::vector<Event> got = All(q);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(AllLines(q), Lines(got));
  q.tool = "echo";  // a filter on the envelope of a record that takes the fast path and one that does not
  EXPECT_EQ(AllLines(q), Lines(All(q)));
  EXPECT_EQ(All(q).size(), 2u);
  q = AuditQuery();
  q.since_us = t + 1;
  q.until_us = t + 2;
  EXPECT_EQ(AllLines(q), Lines(All(q)));
  EXPECT_EQ(All(q).size(), 1u);
}

TEST_F(QueryTest, PagesAreExactAndTheLastCursorIsEmpty) {
  AuditQuery q;
  q.session_id = "sess0";  // 600 events / 7 sessions: sess0 has 86
  q.limit = 43;
  size_t pages = 0;
  auto got = All(q, QueryScope::Operator(), &pages);
  EXPECT_EQ(got.size(), 86u);
  EXPECT_EQ(pages, 2u) << "a full last page must not leave a cursor to an empty page";
  q.limit = 0;
  AuditPage page;
  ASSERT_TRUE(GetAuditLog(log_->store(), QueryScope::Operator(), q, &page).ok());
  EXPECT_EQ(page.events.size(), kDefaultQueryLimit > 86 ? 86u : kDefaultQueryLimit);
}

TEST_F(QueryTest, TenantScopeIsEnforced) {
  AuditQuery q;
  q.agent_id = "agent1";
  AuditPage page;
  EXPECT_EQ(GetAuditLog(log_->store(), QueryScope::Tenant("org1"), q, &page).code(), "E_INVALID_QUERY");
  q.org_id = "org2";
  EXPECT_EQ(GetAuditLog(log_->store(), QueryScope::Tenant("org1"), q, &page).code(), "E_FORBIDDEN");
  q.org_id = "org1";
  auto got = All(q, QueryScope::Tenant("org1"));
  ASSERT_FALSE(got.empty());
  for (const auto& e : got) EXPECT_EQ(e.org_id, "org1");
}

TEST_F(QueryTest, InvalidQueriesAreRefused) {
  struct Case {
    std::function<void(AuditQuery&)> set;
    const char* needle;
  };
  const Case cases[] = {
      {[](AuditQuery& q) { q.limit = kMaxQueryLimit + 1; }, "exceeds the maximum"},
      {[](AuditQuery& q) { q.types = {"nonsense"}; }, "unknown event type"},
      {[](AuditQuery& q) { q.verdict = "maybe"; }, "verdict"},
      {[](AuditQuery& q) {
         q.since_us = 10;
         q.until_us = 10;
       },
       "time range is empty"},
      {[](AuditQuery& q) { q.cursor = "garbage"; }, "cursor"},
  };
  for (const auto& c : cases) {
    AuditQuery q;
    c.set(q);
    AuditPage page;
    Status s = GetAuditLog(log_->store(), QueryScope::Operator(), q, &page);
    EXPECT_EQ(s.code(), "E_INVALID_QUERY");
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
  }
}

TEST_F(QueryTest, ExportVerifiesAndImportRoundTrips) {
  std::stringstream exported;
  ExportStats stats;
  ASSERT_TRUE(ExportLog(log_->store(), {}, exported, &stats).ok());
  EXPECT_EQ(stats.count, all_);
  std::istringstream check(exported.str());
  VerifyReport rep = VerifyExport(check);
  EXPECT_TRUE(rep.ok()) << rep.Summary();
  EXPECT_EQ(rep.events, all_);
  EXPECT_EQ(rep.head_hash, log_->head_hash());

  TempDir fresh;
  {
    auto copy = OpenLog(fresh.path());
    std::istringstream in(exported.str());
    uint64_t n = 0;
    Status s = ImportLog(*copy, in, &n);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(n, all_);
    EXPECT_EQ(copy->head_hash(), log_->head_hash());
    EXPECT_TRUE(VerifyLog(copy->store()).ok());
    std::stringstream again;
    ASSERT_TRUE(ExportLog(copy->store(), {}, again).ok());
    EXPECT_EQ(again.str(), exported.str()) << "export -> import -> export is byte-identical";
    // Importing it a second time cannot continue the chain.
    std::istringstream twice(exported.str());
    EXPECT_EQ(ImportLog(*copy, twice).code(), "E_CHAIN_BROKEN");
  }
  // A tampered export is refused whole: nothing is written.
  std::string bad = exported.str();
  bad.replace(bad.find("req-7\""), 6, "req-8\"");
  TempDir other;
  auto target = OpenLog(other.path());
  std::istringstream in(bad);
  EXPECT_EQ(ImportLog(*target, in).code(), "E_EXPORT_INVALID");
  EXPECT_EQ(target->head_seq(), 0u);
}

TEST_F(QueryTest, PartialExportsVerifyOnTheirOwn) {
  ExportRange by_seq;
  by_seq.from_seq = 100;
  by_seq.to_seq = 250;
  std::stringstream out;
  ExportStats stats;
  ASSERT_TRUE(ExportLog(log_->store(), by_seq, out, &stats).ok());
  EXPECT_EQ(stats.count, 151u);
  std::istringstream in(out.str());
  EXPECT_TRUE(VerifyExport(in).ok());

  ExportRange by_time;
  by_time.since_us = 1'790'000'000'050'000;
  by_time.until_us = 1'790'000'000'060'000;
  std::stringstream out2;
  ASSERT_TRUE(ExportLog(log_->store(), by_time, out2, &stats).ok());
  EXPECT_EQ(stats.count, 10u);  // one event every millisecond
  std::istringstream in2(out2.str());
  EXPECT_TRUE(VerifyExport(in2).ok());
}

// A reader in another process follows the log while a writer process runs:
// log_crash_child writes (and is killed at the end); this process reads
// through a RocksDB secondary instance.
TEST(SecondaryReader, FollowsAWriterInAnotherProcess) {
  TempDir dir;
  const std::string path = dir.sub("log");
  pid_t pid;
  char* argv[] = {const_cast<char*>(LOG_CRASH_CHILD), const_cast<char*>(path.c_str()), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  ASSERT_EQ(posix_spawn(&pid, LOG_CRASH_CHILD, &fa, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);

  std::unique_ptr<LogStore> reader;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  ASSERT_TRUE(testing::WaitUntil([&] { return LogStore::Open(path, OpenMode::kSecondary, &reader).ok(); },
                                 std::chrono::seconds(20)))
      << "writer never created the log";
  uint64_t seen = 0;
  int rounds = 0;
  while (rounds < 5) {
    // Until the reader sees the head move past what it saw (or a read fails).
    uint64_t head = 0;
    Status caught, read;
    auto moved = [&] {
      Digest hash;
      caught = reader->CatchUp();
      if (caught.ok()) read = reader->ReadHead(&head, &hash);
      return !caught.ok() || !read.ok() || head > seen;
    };
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const bool grew = left.count() > 0 && testing::WaitUntil(moved, left);
    ASSERT_TRUE(caught.ok()) << caught.ToString();
    ASSERT_TRUE(read.ok()) << read.ToString();
    if (!grew) break;
    // Everything the reader sees is a consistent, verifiable prefix.
    VerifyReport rep = VerifyLog(*reader);
    ASSERT_TRUE(rep.ok()) << rep.Summary() << " " << rep.problems.front().status.ToString();
    EXPECT_GE(rep.head_seq, head);
    AuditQuery q;
    q.limit = 10;
    q.descending = true;
    AuditPage page;
    ASSERT_TRUE(GetAuditLog(*reader, QueryScope::Operator(), q, &page).ok());
    EXPECT_FALSE(page.events.empty());
    seen = head;
    ++rounds;
  }
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
  EXPECT_EQ(rounds, 5) << "the reader saw the log grow " << rounds << " times";
}

}  // namespace
}  // namespace tollgate
