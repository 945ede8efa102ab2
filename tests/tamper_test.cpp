// Tamper evidence: every single edit of a closed log's RocksDB data, made
// behind tollgate's back, must make VerifyLog fail and name the seq where
// the log stops being trustworthy; every edit of an export that changes its
// meaning must make VerifyExport fail.
//
// One pristine log is built per run (a few hundred events, several
// sessions, agents, tools and orgs). Each case copies it, opens the copy's
// RocksDB directly (as an attacker with file access would), applies ONE
// mutation, closes it, and verifies it through LogStore in kReadOnly mode.
// The pristine log and export are verified too, so the tests fail in both
// directions. TOLLGATE_TEST_SEED=N replays one choice of mutations (the seed
// is printed).
//
// What the first bad seq is, case by case (audit/verify.h, docs/log_format.md):
//   a changed byte of record k ............................ k
//   record k deleted (with or without its index entries) .. k
//   records i < j swapped ................................. i
//   a record added past the head N ........................ N+1
//   record k < N rewritten with a re-hashed body .......... k+1 (its own link holds,
//                                                           the next one breaks); k
//                                                           when its indexes no longer
//                                                           match or it is not canonical
//   records k..N deleted, meta left ....................... k
//   an index or dedupe entry removed / added for seq s .... s
//   a dedupe entry of event o redirected to another seq ... o
//   meta head_seq set to h (deleted: h = 0) ............... min(h, N) + 1
//   meta head_hash changed ................................ N
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "audit/event_log.h"
#include "audit/export.h"
#include "audit/log_format.h"
#include "audit/log_store.h"
#include "audit/verify.h"
#include "test_util.h"

namespace tollgate {
namespace {

namespace fs = std::filesystem;
using namespace logfmt;
using testing::TempDir;

uint64_t TestSeed() {
  if (const char* v = std::getenv("TOLLGATE_TEST_SEED"); v != nullptr && *v != '\0') {
    return std::strtoull(v, nullptr, 10);
  }
  return std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
}

std::string Raw(const Digest& d) { return std::string(reinterpret_cast<const char*>(d.data()), d.size()); }

// A RocksDB database opened directly with the log's column families: no
// LogStore, no EventLog, nothing of tollgate's checks in the way.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (int i = 0; i < kNumCfs; ++i) cfs.emplace_back(CfName(i), rocksdb::ColumnFamilyOptions());
    rocksdb::DBOptions options;
    options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
    options.max_file_opening_threads = 1;  // the default starts 16 threads per family per open
    rocksdb::DB* db = nullptr;
    status_ = rocksdb::DB::Open(options, path, cfs, &handles_, &db);
    db_.reset(db);
  }
  ~RawDb() {
    if (!db_) return;
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    db_->Close();
  }
  const rocksdb::Status& status() const { return status_; }
  void Put(int cf, std::string_view key, std::string_view value) {
    ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), handles_[cf], key, value).ok());
  }
  void Delete(int cf, std::string_view key) {
    ASSERT_TRUE(db_->Delete(rocksdb::WriteOptions(), handles_[cf], key).ok());
  }
  rocksdb::Status FlushAll() { return db_->Flush(rocksdb::FlushOptions(), handles_); }

 private:
  rocksdb::Status status_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::unique_ptr<rocksdb::DB> db_;
};

// What a case did and where verify must place the first problem.
struct Outcome {
  std::string what;
  uint64_t first_bad = 0;
};

// ---------------------------------------------------------------------------
// The pristine log, built once for all tests of this file.

const char* const kTools[] = {"echo", "http_request", "cli:code-search", "read_file", "write_file", ""};

struct Pristine {
  TempDir dir;
  std::string path;
  uint64_t head = 0;
  std::vector<std::string> values;  // [seq] -> record value
  std::vector<Event> events;        // [seq]
  std::string export_all;           // ExportLog of 1..head
  std::string export_part;          // ExportLog of a middle range
  double build_ms = 0;
};

Pristine* BuildPristine() {
  auto t0 = std::chrono::steady_clock::now();
  auto* p = new Pristine;
  p->path = p->dir.sub("pristine");
  {
    std::unique_ptr<EventLog> log;
    LogOptions o;
    o.durability = Durability::kBuffered;
    Status s = EventLog::Open(p->path, o, &log);
    if (!s.ok()) {
      ADD_FAILURE() << s.ToString();
      return p;
    }
    const char* const steps[] = {"request.received", "decision.made", "execution.started",
                                 "execution.completed"};
    std::vector<AppendFuture> pending;
    int n = 0;
    for (int req = 0; req < 75; ++req) {
      const std::string rid = "req-" + std::to_string(req);
      for (int step = 0; step < 4; ++step, ++n) {
        Event e = testing::MakeEvent(steps[step], rid, "sess-" + std::to_string(req % 8),
                                     "agent-" + std::to_string(req % 5),
                                     req % 3 == 0 ? "org-globex" : "org-acme", kTools[req % 6],
                                     // Two events share each millisecond: equal times in the time index.
                                     1'790'000'000'000'000 + (n / 2) * 1'000,
                                     Json{{"args", {{"path", "/srv/r" + std::to_string(req)}, {"n", req}}},
                                          {"cost_usd", 0.125 * step},
                                          {"note", "caf\xc3\xa9 \"" + std::to_string(n) + "\"\n"}});
        if (step == 2) e.id = MakeEventId(e.type, rid, "attempt-1");
        pending.push_back(log->AppendAsync(std::move(e)));
      }
      if (req % 25 == 24) {  // no session, request, agent or tool
        Event pol;
        pol.type = "policy.updated";
        pol.id = MakeEventId(pol.type, "", "v" + std::to_string(req));
        pol.org_id = "org-acme";
        pol.time_us = 1'790'000'000'000'000 + (n / 2) * 1'000;
        pol.data = {{"policy_version", "v" + std::to_string(req)}, {"source", "policy.yaml"}};
        pending.push_back(log->AppendAsync(std::move(pol)));
        ++n;
      }
    }
    for (auto& f : pending) {
      AppendResult r = f.get();
      if (!r.status.ok()) ADD_FAILURE() << r.status.ToString();
    }
    p->head = log->head_seq();
  }
  {
    // Move everything from the WAL into table files, as in a log that has
    // lived a while; opening a copy then has no WAL to recover and flush.
    RawDb db(p->path);
    rocksdb::Status s = db.status().ok() ? db.FlushAll() : db.status();
    if (!s.ok()) ADD_FAILURE() << s.ToString();
  }
  std::unique_ptr<LogStore> store;
  Status s = LogStore::Open(p->path, OpenMode::kReadOnly, &store);
  if (!s.ok()) {
    ADD_FAILURE() << s.ToString();
    return p;
  }
  p->values.resize(p->head + 1);
  p->events.resize(p->head + 1);
  for (uint64_t seq = 1; seq <= p->head; ++seq) {
    if (!store->ReadRaw(seq, &p->values[seq]).ok() || !store->ReadEvent(seq, &p->events[seq]).ok()) {
      ADD_FAILURE() << "cannot read seq " << seq;
    }
  }
  std::ostringstream all, part;
  if (!ExportLog(*store, {}, all).ok()) ADD_FAILURE() << "export failed";
  ExportRange r;
  r.from_seq = 41;
  r.to_seq = p->head - 30;
  if (!ExportLog(*store, r, part).ok()) ADD_FAILURE() << "export failed";
  p->export_all = all.str();
  p->export_part = part.str();
  p->build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

class TamperTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    seed_ = TestSeed();
    std::cout << "tamper_test: seed " << seed_ << " (replay with TOLLGATE_TEST_SEED=" << seed_ << ")"
              << std::endl;
    pristine_ = BuildPristine();
    std::cout << "tamper_test: pristine log of " << pristine_->head << " events built in "
              << pristine_->build_ms << " ms" << std::endl;
  }
  static void TearDownTestSuite() {
    delete pristine_;
    pristine_ = nullptr;
  }
  void SetUp() override {
    ASSERT_GE(P().head, 300u);
    ASSERT_EQ(P().values.size(), P().head + 1);
    // Each test draws its own stream, so a test replays alone too.
    rng_.seed(seed_ ^
              std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  }

  static const Pristine& P() { return *pristine_; }
  uint64_t Rand(uint64_t lo, uint64_t hi) { return lo + rng_() % (hi - lo + 1); }  // [lo, hi]

  // Copies the pristine log, applies `mutate` to the copy through RocksDB,
  // verifies the copy read-only and checks that verify names the outcome's
  // first bad seq.
  void Tamper(const std::function<Outcome(RawDb&)>& mutate) {
    const std::string copy = scratch_.sub("case");
    fs::remove_all(copy);
    fs::copy(P().path, copy, fs::copy_options::recursive);
    Outcome out;
    {
      RawDb db(copy);
      ASSERT_TRUE(db.status().ok()) << db.status().ToString();
      out = mutate(db);
      if (HasFatalFailure()) return;
    }
    std::unique_ptr<LogStore> store;
    Status s = LogStore::Open(copy, OpenMode::kReadOnly, &store);
    ASSERT_TRUE(s.ok()) << out.what << ": " << s.ToString();
    VerifyReport report = VerifyLog(*store);
    std::string problems;
    for (size_t i = 0; i < report.problems.size() && i < 5; ++i) {
      problems +=
          "\n  " + std::to_string(report.problems[i].seq) + ": " + report.problems[i].status.ToString();
    }
    EXPECT_FALSE(report.ok()) << "undetected: " << out.what;
    EXPECT_EQ(report.first_bad_seq(), out.first_bad) << out.what << " -> " << report.Summary() << problems;
    ++cases_;
  }

  // The index and dedupe entries of pristine seq `seq`.
  std::vector<std::pair<Cf, std::string>> EntriesOf(uint64_t seq) const {
    const Event& e = P().events[seq];
    auto entries = IndexEntries(e, seq);
    entries.emplace_back(kDedupe, e.id);
    return entries;
  }
  void DeleteEntries(RawDb& db, uint64_t seq) {
    for (const auto& [cf, key] : EntriesOf(seq)) db.Delete(cf, key);
  }

  void TearDown() override {
    if (cases_ > 0) std::cout << "tamper_test: " << cases_ << " tampered copies checked" << std::endl;
  }

  static inline uint64_t seed_ = 0;
  static inline Pristine* pristine_ = nullptr;
  std::mt19937_64 rng_;
  TempDir scratch_;
  int cases_ = 0;
};

TEST_F(TamperTest, PristineLogAndExportsVerify) {
  std::unique_ptr<LogStore> store;
  ASSERT_TRUE(LogStore::Open(P().path, OpenMode::kReadOnly, &store).ok());
  VerifyReport report = VerifyLog(*store);
  EXPECT_TRUE(report.ok()) << report.Summary();
  EXPECT_EQ(report.events, P().head);
  EXPECT_EQ(report.head_seq, P().head);
  EXPECT_EQ(report.first_bad_seq(), 0u);
  for (const std::string* text : {&P().export_all, &P().export_part}) {
    std::istringstream in(*text);
    VerifyReport r = VerifyExport(in);
    EXPECT_TRUE(r.ok()) << r.Summary();
  }
  // The untouched full export imports (the edited ones below must not).
  TempDir fresh;
  std::unique_ptr<EventLog> log;
  ASSERT_TRUE(EventLog::Open(fresh.sub("log"), LogOptions{}, &log).ok());
  std::stringstream file(P().export_all);
  uint64_t imported = 0;
  Status s = ImportLog(*log, file, &imported);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(imported, P().head);
  EXPECT_EQ(log->head_hash(), P().events[P().head].hash);
}

// A copy opened and closed the way the cases open theirs, untouched, verifies.
TEST_F(TamperTest, UntouchedCopyVerifies) {
  const std::string copy = scratch_.sub("copy");
  fs::copy(P().path, copy, fs::copy_options::recursive);
  {
    RawDb db(copy);
    ASSERT_TRUE(db.status().ok());
  }
  std::unique_ptr<LogStore> store;
  ASSERT_TRUE(LogStore::Open(copy, OpenMode::kReadOnly, &store).ok());
  VerifyReport report = VerifyLog(*store);
  EXPECT_TRUE(report.ok()) << report.Summary();
}

// --------------------------------------------------------------------------
// Edits of the database.

TEST_F(TamperTest, FlippedByteOfARecord) {
  for (int i = 0; i < 80; ++i) {
    Tamper([&](RawDb& db) {
      const uint64_t k = Rand(1, P().head);
      std::string v = P().values[k];
      // A third of the flips hit the version byte or a stored hash.
      const size_t pos = i % 3 == 0 ? Rand(0, 64) : Rand(65, v.size() - 1);
      const uint8_t mask = static_cast<uint8_t>(Rand(1, 255));
      v[pos] = static_cast<char>(static_cast<uint8_t>(v[pos]) ^ mask);
      db.Put(kEvents, EncodeSeq(k), v);
      return Outcome{
          "byte " + std::to_string(pos) + " of seq " + std::to_string(k) + " xor " + std::to_string(mask), k};
    });
  }
}

TEST_F(TamperTest, DeletedRecord) {
  for (int i = 0; i < 20; ++i) {
    Tamper([&](RawDb& db) {
      // Half the time the very last one; half the time its index entries go too.
      const uint64_t k = i % 4 == 0 ? P().head : Rand(1, P().head);
      db.Delete(kEvents, EncodeSeq(k));
      const bool with_entries = i % 2 == 1;
      if (with_entries) DeleteEntries(db, k);
      return Outcome{"deleted seq " + std::to_string(k) + (with_entries ? " and its index entries" : ""), k};
    });
  }
}

TEST_F(TamperTest, SwappedRecords) {
  for (int i = 0; i < 20; ++i) {
    Tamper([&](RawDb& db) {
      const uint64_t a = Rand(1, P().head - 1);
      const uint64_t b = i % 3 == 0 ? a + 1 : Rand(a + 1, P().head);
      db.Put(kEvents, EncodeSeq(a), P().values[b]);
      db.Put(kEvents, EncodeSeq(b), P().values[a]);
      return Outcome{"swapped seq " + std::to_string(a) + " and " + std::to_string(b), a};
    });
  }
}

TEST_F(TamperTest, RecordAddedPastTheHead) {
  const uint64_t n = P().head;
  for (int i = 0; i < 15; ++i) {
    Tamper([&](RawDb& db) {
      const uint64_t r = Rand(1, n);
      db.Put(kEvents, EncodeSeq(n + 1), P().values[r]);
      std::string what = "copy of seq " + std::to_string(r) + " added at seq " + std::to_string(n + 1);
      if (i % 3 >= 1) {  // with the index entries it implies
        for (const auto& [cf, key] : IndexEntries(P().events[r], n + 1)) db.Put(cf, key, "");
        what += " with index entries";
      }
      if (i % 3 == 2) {  // and meta moved to it
        RecordView rec;
        EXPECT_TRUE(DecodeRecord(P().values[r], &rec).ok());
        db.Put(kMeta, kMetaHeadSeq, EncodeSeq(n + 1));
        db.Put(kMeta, kMetaHeadHash, Raw(rec.hash));
        what += " and meta head";
      }
      return Outcome{what, n + 1};
    });
  }
}

TEST_F(TamperTest, ForgedRecordInTheMiddle) {
  const uint64_t n = P().head;
  for (int i = 0; i < 30; ++i) {
    Tamper([&](RawDb& db) {
      // Mostly strictly inside the chain; every sixth case the last record.
      const uint64_t k = i % 6 == 5 ? n : Rand(1, n - 1);
      Event e = P().events[k];
      const int variant = i % 4;
      uint64_t expect = k < n ? k + 1 : k;  // the next link breaks (or meta's head hash)
      std::string what;
      switch (variant) {
        case 0:
          e.data["cost_usd"] = 999.5;
          what = "data.cost_usd";
          break;
        case 1:
          e.data["note"] = "forged";
          e.data["extra"] = Json::array({1, 2});
          what = "data.note and a new data field";
          break;
        case 2: {  // an indexed field, with its index entries rewritten to match
          const std::string old_session = e.session_id;
          e.session_id = "sess-forged";
          if (!old_session.empty()) db.Delete(kBySession, IndexKey(old_session, k));
          db.Put(kBySession, IndexKey(e.session_id, k), "");
          what = "session_id, index rewritten";
          // The new session has no earlier event: a link to one betrays it at k.
          if (e.prev_in_session.value_or(0) != 0) expect = k;
          break;
        }
        default:  // an indexed field, index left alone: the entries betray it at k
          e.agent_id = "agent-forged";
          e.tool = "forged-tool";
          expect = k;
          what = "agent_id and tool, index not rewritten";
          break;
      }
      std::string body;
      Status s = EncodeEventBody(e, kDefaultMaxEventBytes, &body);
      EXPECT_TRUE(s.ok()) << s.ToString();
      RecordView rec;
      EXPECT_TRUE(DecodeRecord(P().values[k], &rec).ok());
      db.Put(kEvents, EncodeSeq(k), EncodeRecord(rec.prev_hash, ChainHash(rec.prev_hash, body), body));
      return Outcome{"seq " + std::to_string(k) + " re-hashed with a forged " + what, expect};
    });
  }
  // A re-hashed body that is not canonical is caught at its own seq.
  Tamper([&](RawDb& db) {
    const uint64_t k = n / 2;
    RecordView rec;
    EXPECT_TRUE(DecodeRecord(P().values[k], &rec).ok());
    std::string body(rec.body);
    body.insert(1, " ");
    db.Put(kEvents, EncodeSeq(k), EncodeRecord(rec.prev_hash, ChainHash(rec.prev_hash, body), body));
    return Outcome{"seq " + std::to_string(k) + " re-hashed with a non-canonical body", k};
  });
}

TEST_F(TamperTest, ALinkRehashedToSkipAnEventIsCaughtAtItsSeq) {
  const uint64_t n = P().head;
  for (int i = 0; i < 10; ++i) {
    Tamper([&](RawDb& db) {
      uint64_t k = Rand(2, n);
      while (k > 1 && P().events[k].prev_in_session.value_or(0) == 0) --k;
      Event e = P().events[k];
      EXPECT_TRUE(e.prev_in_session.has_value()) << "the pristine log has no linked session events";
      // Names the event before the true previous one (or none): a selection
      // without the previous event would chain without a gap.
      const uint64_t skipped = *e.prev_in_session;
      e.prev_in_session = P().events[skipped].prev_in_session.value_or(0);
      std::string body;
      Status s = EncodeEventBody(e, kDefaultMaxEventBytes, &body);
      EXPECT_TRUE(s.ok()) << s.ToString();
      RecordView rec;
      EXPECT_TRUE(DecodeRecord(P().values[k], &rec).ok());
      db.Put(kEvents, EncodeSeq(k), EncodeRecord(rec.prev_hash, ChainHash(rec.prev_hash, body), body));
      return Outcome{"seq " + std::to_string(k) + " re-hashed with its session link skipping seq " +
                         std::to_string(skipped),
                     k};
    });
  }
}

TEST_F(TamperTest, TruncatedTail) {
  const uint64_t n = P().head;
  for (int i = 0; i < 20; ++i) {
    Tamper([&](RawDb& db) {
      const uint64_t m = i == 0 ? n : i % 4 == 1 ? 1 : Rand(1, 40);  // once the whole log
      const uint64_t k = n - m + 1;
      const bool with_entries = i % 2 == 0;
      for (uint64_t seq = k; seq <= n; ++seq) {
        db.Delete(kEvents, EncodeSeq(seq));
        if (with_entries) DeleteEntries(db, seq);
      }
      return Outcome{"deleted seq " + std::to_string(k) + ".." + std::to_string(n) +
                         (with_entries ? " with their index entries" : "") + ", meta left",
                     k};
    });
  }
}

TEST_F(TamperTest, IndexEntryDeleted) {
  for (int i = 0; i < 30; ++i) {
    Tamper([&](RawDb& db) {
      const uint64_t s = Rand(1, P().head);
      auto entries = EntriesOf(s);
      const auto& [cf, key] = entries[Rand(0, entries.size() - 1)];
      db.Delete(cf, key);
      return Outcome{std::string(CfName(cf)) + " entry of seq " + std::to_string(s) + " deleted", s};
    });
  }
}

TEST_F(TamperTest, BogusIndexEntryAdded) {
  const uint64_t n = P().head;
  for (int i = 0; i < 40; ++i) {
    Tamper([&](RawDb& db) {
      const uint64_t s = Rand(1, n);
      const Event& e = P().events[s];
      switch (i % 5) {
        case 0: {  // a field index says seq s has another value (another event's, say)
          const Cf cf = kFieldIndexes[Rand(0, std::size(kFieldIndexes) - 1)];
          std::string value(IndexedField(P().events[Rand(1, n)], cf));
          if (value.empty() || value == IndexedField(e, cf)) value = "bogus-" + std::to_string(i);
          db.Put(cf, IndexKey(value, s), "");
          return Outcome{std::string(CfName(cf)) + " entry '" + value + "' for seq " + std::to_string(s), s};
        }
        case 1: {  // the right value in the wrong family
          std::string value = e.session_id.empty() ? "org-acme" : e.session_id;
          db.Put(kByAgent, IndexKey(value, s), "");
          return Outcome{"idx_agent entry '" + value + "' for seq " + std::to_string(s), s};
        }
        case 2:  // the time index says seq s happened at another time
          db.Put(kByTime, TimeKey(e.time_us + static_cast<int64_t>(Rand(1, 5'000'000)), s), "");
          return Outcome{"idx_time entry at another time for seq " + std::to_string(s), s};
        case 3: {  // a dedupe entry for an id that is in no event
          std::string id = MakeEventId("request.received", "never-appended-" + std::to_string(i));
          db.Put(kDedupe, id, EncodeSeq(s));
          return Outcome{"dedupe entry " + id + " -> seq " + std::to_string(s), s};
        }
        default: {  // an index entry naming a seq past the head
          const uint64_t past = n + Rand(1, 10);
          db.Put(kBySession, IndexKey(e.session_id.empty() ? "sess-0" : e.session_id, past), "");
          return Outcome{"idx_session entry for seq " + std::to_string(past) + " past the head", past};
        }
      }
    });
  }
}

// A dedupe entry pointed at another event: the event whose id it is keyed by
// (o) no longer deduplicates to itself, so o is where verify reports it.
TEST_F(TamperTest, DedupeEntryRedirected) {
  for (int i = 0; i < 10; ++i) {
    Tamper([&](RawDb& db) {
      const uint64_t o = Rand(1, P().head);
      uint64_t t = Rand(1, P().head - 1);
      if (t >= o) ++t;
      db.Put(kDedupe, P().events[o].id, EncodeSeq(t));
      return Outcome{"dedupe entry of seq " + std::to_string(o) + " pointed at seq " + std::to_string(t), o};
    });
  }
}

TEST_F(TamperTest, MetaHeadEdited) {
  const uint64_t n = P().head;
  for (int i = 0; i < 30; ++i) {
    Tamper([&](RawDb& db) {
      switch (i % 5) {
        case 0: {  // head moved back: the tail looks added
          const uint64_t h = i == 0 ? 0 : Rand(1, n - 1);
          db.Put(kMeta, kMetaHeadSeq, EncodeSeq(h));
          return Outcome{"meta head_seq " + std::to_string(h), h + 1};
        }
        case 1: {  // head moved forward: records look removed from the end
          const uint64_t h = n + Rand(1, 100);
          db.Put(kMeta, kMetaHeadSeq, EncodeSeq(h));
          return Outcome{"meta head_seq " + std::to_string(h), n + 1};
        }
        case 2: {  // a byte of the head hash
          RecordView rec;
          EXPECT_TRUE(DecodeRecord(P().values[n], &rec).ok());
          std::string h = Raw(rec.hash);
          h[Rand(0, 31)] ^= static_cast<char>(Rand(1, 255));
          db.Put(kMeta, kMetaHeadHash, h);
          return Outcome{"a byte of meta head_hash", n};
        }
        case 3: {  // the hash of an earlier record, or a truncated hash
          RecordView rec;
          EXPECT_TRUE(DecodeRecord(P().values[Rand(1, n - 1)], &rec).ok());
          std::string h = Raw(rec.hash);
          if (i % 2 == 1) h.resize(31);
          db.Put(kMeta, kMetaHeadHash, h);
          return Outcome{"meta head_hash replaced", n};
        }
        default:  // head gone: meta describes an empty log
          db.Delete(kMeta, kMetaHeadSeq);
          if (i % 2 == 0) db.Delete(kMeta, kMetaHeadHash);
          return Outcome{"meta head_seq deleted", 1};
      }
    });
  }
}

// --------------------------------------------------------------------------
// Edits of an export.

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST_F(TamperTest, ExportEdits) {
  enum Kind {
    kFlip,
    kDeleteLine,
    kSwap,
    kDuplicate,
    kTruncate,
    kDropEnd,
    kHeaderPrevHash,
    kHeaderRange,
    kEndLine,
    kForgeLine,
    kNumKinds
  };
  const char* const names[] = {"flip a byte of a record", "delete a line",    "swap two records",
                               "duplicate a line",        "truncate",         "drop the end line",
                               "header prev_hash",        "header seq range", "end line",
                               "forged record line"};
  std::map<int, int> done, imported;
  int skipped = 0, imports = 0;
  for (int i = 0; done[kFlip] + skipped < 300 && i < 2000; ++i) {
    const bool part = (i / 2) % 2 == 1;  // every kind meets both exports
    const std::string& pristine = part ? P().export_part : P().export_all;
    std::vector<std::string> lines = SplitLines(pristine);
    const size_t first = 1, last = lines.size() - 2;  // record lines
    // Flips are half the cases; the other kinds share the rest.
    const int kind = i % 2 == 0 ? kFlip : 1 + static_cast<int>((i / 2) % (kNumKinds - 1));
    std::string text, what;
    switch (kind) {
      case kFlip: {
        const size_t li = Rand(first, last);
        std::string& l = lines[li];
        const std::string original = l;
        const size_t pos = Rand(0, l.size() - 1);
        const char c = l[pos];
        char to;
        // Mostly edits that keep the JSON well-formed (a digit for a digit,
        // a letter for a letter), which only the hashes can catch.
        if (Rand(0, 3) == 0) {
          to = static_cast<char>(c ^ static_cast<char>(Rand(1, 255)));
        } else if (c >= '0' && c <= '9') {
          to = static_cast<char>('0' + (c - '0' + Rand(1, 9)) % 10);
        } else if (c >= 'a' && c <= 'z') {
          to = static_cast<char>('a' + (c - 'a' + Rand(1, 25)) % 26);
        } else {
          to = static_cast<char>(Rand(0x20, 0x7e));
          if (to == c) to = c == 'x' ? 'y' : 'x';
        }
        l[pos] = to;
        Json j;
        std::string canon;
        if (ParseJson(l, &j).ok() && CanonicalBytes(j, &canon).ok() && canon == original) {
          ++skipped;  // same meaning; not expected to happen
          continue;
        }
        what = "line " + std::to_string(li + 1) + " byte " + std::to_string(pos) + " '" + std::string(1, c) +
               "' -> '" + std::string(1, to) + "'";
        break;
      }
      case kDeleteLine: {
        const size_t li = Rand(0, lines.size() - 1);
        lines.erase(lines.begin() + li);
        what = "line " + std::to_string(li + 1) + " deleted";
        break;
      }
      case kSwap: {
        const size_t a = Rand(first, last - 1), b = Rand(a + 1, last);
        std::swap(lines[a], lines[b]);
        what = "lines " + std::to_string(a + 1) + " and " + std::to_string(b + 1) + " swapped";
        break;
      }
      case kDuplicate: {
        const size_t from = Rand(0, lines.size() - 1), at = Rand(0, lines.size());
        lines.insert(lines.begin() + at, lines[from]);
        what = "line " + std::to_string(from + 1) + " copied before line " + std::to_string(at + 1);
        break;
      }
      case kTruncate: {
        // Anything short of dropping just the final newline; half the time
        // right after a line, as a cut-off copy would end.
        size_t at = Rand(0, pristine.size() - 2);
        if (Rand(0, 1) == 0) at = pristine.rfind('\n', at) + 1;  // 0 if before the first newline
        text = pristine.substr(0, at);
        what = "cut at byte " + std::to_string(at) + " of " + std::to_string(pristine.size());
        break;
      }
      case kDropEnd:
        lines.pop_back();
        what = "end line dropped";
        break;
      case kHeaderPrevHash: {
        Json h = Json::parse(lines[0]);
        const std::string original = h["prev_hash"].get<std::string>();
        std::string replacement = Rand(0, 1) == 0 ? std::string(64, '0') : P().events[Rand(1, P().head)].hash;
        while (replacement == original) replacement = P().events[Rand(1, P().head)].hash;
        h["prev_hash"] = replacement;
        lines[0] = h.dump();
        what = "header prev_hash replaced";
        break;
      }
      case kHeaderRange: {
        Json h = Json::parse(lines[0]);
        const char* field = Rand(0, 1) == 0 ? "from_seq" : "to_seq";
        uint64_t v = h[field].get<uint64_t>();
        h[field] = Rand(0, 1) == 0 ? v + 1 : v - 1;
        lines[0] = h.dump();
        what = std::string("header ") + field + " moved by one";
        break;
      }
      case kEndLine: {
        Json e = Json::parse(lines.back());
        auto& end = e["tollgate_export_end"];
        switch (Rand(0, 2)) {
          case 0:
            end["count"] = end["count"].get<uint64_t>() + 1;
            what = "end count";
            break;
          case 1:
            end["last_seq"] = end["last_seq"].get<uint64_t>() - 1;
            what = "end last_seq";
            break;
          default: {
            // Another record's hash: drawn again when it is the real one.
            const std::string real = end["last_hash"].get<std::string>();
            std::string other = real;
            while (other == real) other = P().events[Rand(1, P().head)].hash;
            end["last_hash"] = other;
            what = "end last_hash";
            break;
          }
        }
        lines.back() = e.dump();
        break;
      }
      case kForgeLine: {
        // A record re-hashed with a different body: its own link holds, the
        // next record's prev_hash (or the end line's last_hash) does not.
        const size_t li = Rand(first, last);
        Event e;
        ASSERT_TRUE(EventFromText(lines[li], &e).ok());
        e.data["note"] = "forged " + std::to_string(i);
        std::string body;
        ASSERT_TRUE(EncodeEventBody(e, kDefaultMaxEventBytes, &body).ok());
        Digest prev;
        ASSERT_TRUE(DigestFromHex(e.prev_hash, &prev));
        e.hash = ToHex(ChainHash(prev, body));
        ASSERT_TRUE(CanonicalBytes(e.RecordJson(), &lines[li]).ok());
        what = "line " + std::to_string(li + 1) + " forged and re-hashed";
        break;
      }
    }
    if (text.empty() && kind != kTruncate) text = JoinLines(lines);
    ASSERT_NE(text, pristine) << what;
    std::istringstream in(text);
    VerifyReport report;
    ASSERT_NO_THROW(report = VerifyExport(in)) << what;
    EXPECT_FALSE(report.ok()) << "undetected edit of the " << (part ? "partial" : "full")
                              << " export: " << what << " (" << names[kind] << ")";
    ++done[kind];
    // The first of each kind on the full export: import refuses it and
    // writes nothing.
    if (!part && imported[kind] < 1) {
      ++imported[kind];
      TempDir fresh;
      std::unique_ptr<EventLog> log;
      ASSERT_TRUE(EventLog::Open(fresh.sub("log"), LogOptions{}, &log).ok());
      std::stringstream file(text);
      EXPECT_FALSE(ImportLog(*log, file).ok()) << what;
      EXPECT_EQ(log->head_seq(), 0u) << what;
      ++imports;
    }
  }
  int total = 0;
  std::cout << "tamper_test: export edits:";
  for (const auto& [kind, count] : done) {
    std::cout << " " << names[kind] << " " << count << ";";
    total += count;
  }
  std::cout << " skipped " << skipped << " (same meaning); " << imports << " imports refused" << std::endl;
  EXPECT_GE(total, 550);
  for (int k = 0; k < kNumKinds; ++k) EXPECT_GT(done[k], 0) << names[k];
}

// Edits that keep each line valid JSON but give a field of the header or end
// line another type must be reported as problems, not escape as exceptions
// (`tollgate audit verify --file` would abort instead of exiting 1).
TEST_F(TamperTest, ExportFieldsOfTheWrongTypeAreReportedNotThrown) {
  std::vector<std::string> lines = SplitLines(P().export_all);
  const std::string header = lines.front(), end = lines.back();
  struct Edit {
    std::string what;
    std::function<void(std::vector<std::string>&)> apply;
  };
  auto edit_header = [&](const char* field, Json value) {
    return [=](std::vector<std::string>& ls) {
      Json h = Json::parse(header);
      h[field] = value;
      ls.front() = h.dump();
    };
  };
  auto edit_end = [&](const char* field, Json value) {
    return [=](std::vector<std::string>& ls) {
      Json e = Json::parse(end);
      e["tollgate_export_end"][field] = value;
      ls.back() = e.dump();
    };
  };
  const std::vector<Edit> edits = {
      {"header tollgate_export \"1\"", edit_header("tollgate_export", "1")},
      {"header tollgate_export [1]", edit_header("tollgate_export", Json::array({1}))},
      {"end count as a string", edit_end("count", std::to_string(P().head))},
      {"end last_seq as a string", edit_end("last_seq", std::to_string(P().head))},
      {"end last_hash as a number", edit_end("last_hash", 7)},
      {"end count null", edit_end("count", nullptr)},
  };
  for (const Edit& e : edits) {
    std::vector<std::string> ls = lines;
    e.apply(ls);
    std::istringstream in(JoinLines(ls));
    try {
      VerifyReport report = VerifyExport(in);
      EXPECT_FALSE(report.ok()) << e.what;
    } catch (const std::exception& ex) {
      ADD_FAILURE() << e.what << ": VerifyExport threw " << ex.what();
    }
  }
}

// The first records of an export dropped and the rest renumbered from 1,
// so that it passes for the whole log. Two ways, each caught by its own
// rule: keeping the stored hashes (seq is in the hashed body), and
// re-hashing every record from the dropped record's hash (an export from
// seq 1 must start at the genesis hash, as the log itself does).
TEST_F(TamperTest, ExportRenumberedFromSeqOneIsRefused) {
  const std::vector<std::string> lines = SplitLines(P().export_all);
  const uint64_t dropped = 40, count = P().head - dropped;
  for (const bool rehash : {false, true}) {
    SCOPED_TRACE(rehash ? "re-hashed from the dropped record's hash" : "stored hashes kept");
    std::vector<std::string> forged;
    Json header = Json::parse(lines.front());
    header["to_seq"] = count;
    header["prev_hash"] = P().events[dropped].hash;  // from_seq stays 1
    forged.push_back(header.dump());
    Digest prev;
    ASSERT_TRUE(DigestFromHex(P().events[dropped].hash, &prev));
    for (uint64_t seq = dropped + 1; seq <= P().head; ++seq) {
      Event e;
      ASSERT_TRUE(EventFromText(lines[seq], &e).ok());  // line seq holds record seq
      ASSERT_EQ(e.seq, seq);
      e.seq = seq - dropped;
      // The links renumbered too (a link into the dropped part: none).
      for (auto* link : {&e.prev_in_request, &e.prev_in_session})
        if (*link) **link = **link > dropped ? **link - dropped : 0;
      if (rehash) {
        std::string body;
        ASSERT_TRUE(EncodeEventBody(e, kDefaultMaxEventBytes, &body).ok());
        e.prev_hash = ToHex(prev);
        prev = ChainHash(prev, body);
        e.hash = ToHex(prev);
      }
      std::string line;
      ASSERT_TRUE(CanonicalBytes(e.RecordJson(), &line).ok());
      forged.push_back(line);
    }
    Json end = Json::parse(lines.back());
    end["tollgate_export_end"]["count"] = count;
    end["tollgate_export_end"]["last_seq"] = count;
    if (rehash) end["tollgate_export_end"]["last_hash"] = ToHex(prev);
    forged.push_back(end.dump());

    std::istringstream in(JoinLines(forged));
    VerifyReport report = VerifyExport(in);
    EXPECT_FALSE(report.ok()) << "an export of seqs " << dropped + 1 << ".." << P().head
                              << " renumbered from 1 verifies as the whole log: " << report.Summary();
    // Import into a fresh log refuses it either way.
    TempDir fresh;
    std::unique_ptr<EventLog> log;
    ASSERT_TRUE(EventLog::Open(fresh.sub("log"), LogOptions{}, &log).ok());
    std::stringstream file(JoinLines(forged));
    EXPECT_FALSE(ImportLog(*log, file).ok());
    EXPECT_EQ(log->head_seq(), 0u);
  }
}

// A partial export shifted to other seqs, hashes kept: only the seq inside
// each hashed body can tell (the header's prev_hash is no genesis anchor).
TEST_F(TamperTest, PartialExportShiftedToOtherSeqsIsRefused) {
  std::vector<std::string> lines = SplitLines(P().export_part);
  const uint64_t shift = 10;
  Json header = Json::parse(lines.front());
  header["from_seq"] = header["from_seq"].get<uint64_t>() - shift;
  header["to_seq"] = header["to_seq"].get<uint64_t>() - shift;
  lines.front() = header.dump();
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    Json r = Json::parse(lines[i]);
    r["seq"] = r["seq"].get<uint64_t>() - shift;
    ASSERT_TRUE(CanonicalBytes(r, &lines[i]).ok());
  }
  Json end = Json::parse(lines.back());
  end["tollgate_export_end"]["last_seq"] = end["tollgate_export_end"]["last_seq"].get<uint64_t>() - shift;
  lines.back() = end.dump();
  std::istringstream in(JoinLines(lines));
  VerifyReport report = VerifyExport(in);
  EXPECT_FALSE(report.ok()) << report.Summary();
  EXPECT_EQ(report.first_bad_seq(), header["from_seq"].get<uint64_t>()) << report.Summary();
}

}  // namespace
}  // namespace tollgate
