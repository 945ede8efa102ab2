#include "bench/log_bench.h"

#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <future>
#include <iostream>
#include <random>
#include <thread>

#include "audit/audit_query.h"
#include "audit/event_log.h"

namespace tollgate::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A request.received-sized event (~450 bytes of body) of session `session`.
Event BenchEvent(uint64_t i, const std::string& session, const std::string& run) {
  Event e;
  e.type = (i % 4 == 0)   ? "request.received"
           : (i % 4 == 1) ? "decision.made"
           : (i % 4 == 2) ? "execution.started"
                          : "execution.completed";
  e.request_id = run + "-req-" + std::to_string(i / 4);
  e.id = MakeEventId(e.type, e.request_id, run);
  e.time_us = 1'790'000'000'000'000 + static_cast<int64_t>(i) * 1000;
  e.org_id = i % 2 ? "org-a" : "org-b";
  e.agent_id = "agent-" + std::to_string(i % 10);
  e.session_id = session;
  e.tool = i % 3 ? "echo" : "http_request";
  e.data = {{"request",
             {{"tool", e.tool},
              {"args",
               {{"url", "https://api.example.com/v1/items/" + std::to_string(i)},
                {"method", "GET"},
                {"note", std::string(120, 'n')}}}}},
            {"args_hash", Sha256Hex(std::to_string(i))},
            {"received_at", FormatTime(e.time_us)}};
  return e;
}

std::string SessionOf(uint64_t i, std::mt19937_64& rng) { return "sess-" + std::to_string(rng() % 1000); }

// The baseline of sync_vs_rocksdb_group: `threads` threads, each writing
// `per` events straight into RocksDB, one synced WriteBatch per event
// holding what the log writes for it (the record, its index keys, its
// dedupe entry), so RocksDB's write-group commit merges the concurrent
// syncs. No chain and no idempotency lookup: a floor our log must beat.
Status RocksDbGroupRound(const std::string& dir, size_t threads, size_t per, double* rate) {
  std::unique_ptr<LogStore> raw;
  Status s = LogStore::Open(dir, OpenMode::kPrimary, &raw);
  if (!s.ok()) return s;
  struct Prepared {
    std::string seq_key, record, id;
    std::vector<std::pair<logfmt::Cf, std::string>> index;
  };
  std::vector<std::vector<Prepared>> work(threads);
  uint64_t seq = 0;
  for (size_t t = 0; t < threads; ++t) {
    std::mt19937_64 rng(t);
    for (size_t i = 0; i < per; ++i) {
      Event e = BenchEvent(t * per + i, SessionOf(i, rng), "r");
      e.seq = ++seq;
      std::string body;
      if (!EncodeEventBody(e, 1 << 20, &body).ok()) return Status::Error("E_BENCH", "encode");
      work[t].push_back({logfmt::EncodeSeq(e.seq), logfmt::EncodeRecord(Digest{}, Digest{}, body), e.id,
                         logfmt::IndexEntries(e, e.seq)});
    }
  }
  std::atomic<bool> failed{false};
  std::vector<std::thread> pool;
  const auto t0 = Clock::now();
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      rocksdb::WriteOptions wo;
      wo.sync = true;
      for (const Prepared& p : work[t]) {
        rocksdb::WriteBatch wb;
        wb.Put(raw->cf(logfmt::kEvents), p.seq_key, p.record);
        for (const auto& [cf, key] : p.index) wb.Put(raw->cf(cf), key, rocksdb::Slice());
        wb.Put(raw->cf(logfmt::kDedupe), p.id, p.seq_key);
        if (!raw->db()->Write(wo, &wb).ok()) failed = true;
      }
    });
  }
  for (auto& th : pool) th.join();
  const auto t1 = Clock::now();
  if (failed) return Status::Error("E_BENCH", "a synced RocksDB write failed");
  *rate = threads * per / Seconds(t0, t1);
  return Status::Ok();
}

// Appends `events` through `log` keeping up to `window` appends in flight (a
// sliding window, so encoding the next events overlaps the writer's work).
Status AppendAll(EventLog& log, std::vector<Event>& events, size_t window = 4096) {
  std::deque<AppendFuture> inflight;
  for (size_t i = 0; i < events.size(); ++i) {
    inflight.push_back(log.AppendAsync(std::move(events[i])));
    while (inflight.size() >= window || (i + 1 == events.size() && !inflight.empty())) {
      AppendResult r = inflight.front().get();
      inflight.pop_front();
      if (!r.status.ok()) return r.status;
    }
  }
  return Status::Ok();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Scratch {
  std::string root;
  int n = 0;
  std::string Next() { return root + "/" + std::to_string(n++); }
};

// Builds a log of `total` events in which session "target" holds exactly 100
// events spread evenly; the rest belong to 1,000 other sessions.
Status BuildQueryLog(const std::string& path, size_t total, std::unique_ptr<EventLog>* out) {
  LogOptions o;
  o.durability = Durability::kBuffered;
  Status s = EventLog::Open(path, o, out);
  if (!s.ok()) return s;
  std::mt19937_64 rng(42);
  const size_t stride = total / 100;
  std::vector<Event> chunk;
  for (size_t i = 0; i < total; ++i) {
    const bool target = stride && i % stride == 0 && i / stride < 100;
    chunk.push_back(BenchEvent(i, target ? "target" : SessionOf(i, rng), "q"));
    if (chunk.size() == 20000 || i + 1 == total) {
      s = AppendAll(**out, chunk);
      if (!s.ok()) return s;
      chunk.clear();
    }
  }
  return Status::Ok();
}

// Median latency (µs) of get_audit_log (records as JSON lines, as the CLI and
// the HTTP API return them), of the same query returning decoded Events, and
// of a raw scan of the same keys.
Status MeasureQuery(const LogStore& store, int reps, double* query_us, double* decoded_us, double* raw_us) {
  AuditQuery q;
  q.session_id = "target";
  q.limit = 100;
  q.json_lines = true;
  AuditQuery qd = q;
  qd.json_lines = false;
  std::vector<double> tq, td, tr;
  size_t sink = 0;
  const std::string prefix = logfmt::IndexPrefix("target");
  for (int rep = 0; rep < reps + 20; ++rep) {
    auto t0 = Clock::now();
    AuditPage page;
    Status s = GetAuditLog(store, QueryScope::Operator(), q, &page);
    auto t1 = Clock::now();
    if (!s.ok()) return s;
    if (page.lines.size() != 100) {
      return Status::Error("E_BENCH",
                           "the target session returned " + std::to_string(page.lines.size()) + " events");
    }
    sink += page.lines.size();
    auto d0 = Clock::now();
    AuditPage decoded;
    s = GetAuditLog(store, QueryScope::Operator(), qd, &decoded);
    auto d1 = Clock::now();
    if (!s.ok()) return s;
    if (decoded.events.size() != 100) return Status::Error("E_BENCH", "decoded query returned too few");
    // Raw: the same index range, then each record's bytes; no decoding.
    auto t2 = Clock::now();
    std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator({}, store.cf(logfmt::kBySession)));
    std::string value;
    size_t n = 0;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      rocksdb::Slice k = it->key();
      store.db()->Get({}, store.cf(logfmt::kEvents), rocksdb::Slice(k.data() + prefix.size(), 8), &value);
      sink += value.size();
      ++n;
    }
    auto t3 = Clock::now();
    if (n != 100) return Status::Error("E_BENCH", "raw scan found " + std::to_string(n));
    if (rep >= 20) {  // after warm-up
      tq.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      td.push_back(std::chrono::duration<double, std::micro>(d1 - d0).count());
      tr.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
    }
  }
  if (sink == 0) std::cerr << "";
  *query_us = Median(tq);
  *decoded_us = Median(td);
  *raw_us = Median(tr);
  return Status::Ok();
}

Json Fail(const Status& s) { return Json{{"error", s.ToString()}}; }

}  // namespace

Json RunLogBench(const LogBenchOptions& opt_in) {
  LogBenchOptions opt = opt_in;
  if (opt.quick) {
    opt.append_events = std::min<size_t>(opt.append_events, 3000);
    opt.sync_appenders = std::min<size_t>(opt.sync_appenders, 8);
    opt.sync_events = std::min<size_t>(opt.sync_events, 200);
    opt.query_base_events = std::min<size_t>(opt.query_base_events, 2000);
  }
  Scratch scratch;
  bool own_dir = opt.dir.empty();
  if (own_dir) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tollgate-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return Fail(Status::Error("E_BENCH", "cannot make a scratch dir"));
    scratch.root = tmpl;
  } else {
    scratch.root = opt.dir;
    std::filesystem::create_directories(scratch.root);
  }
  Json out = Json::object();
  Status s;

  // 1. append_vs_raw: the log's appends vs. writing the identical batches.
  // The first timed round records the batches it writes (their bytes, copied
  // into one arena reserved up front, so the writer pays a memcpy per batch
  // and no allocation); every raw round replays exactly those batches, with
  // their boundaries. Alternating timed rounds (log, raw, log, raw, …),
  // medians: whichever runs first pays for page faults and allocator warm-up.
  {
    std::cerr << "bench log: appending " << opt.append_events << " events (buffered)…\n";
    const int rounds = opt.quick ? 1 : 3;
    auto make_events = [&opt] {
      std::mt19937_64 rng(7);
      std::vector<Event> events;
      for (size_t i = 0; i < opt.append_events; ++i) events.push_back(BenchEvent(i, SessionOf(i, rng), "a"));
      return events;
    };
    std::string arena;
    std::vector<std::pair<size_t, size_t>> spans;  // (offset, size) of each recorded batch in `arena`
    arena.reserve(opt.append_events * 4096);
    spans.reserve(opt.append_events);
    std::vector<double> log_rates, raw_rates;
    for (int round = 0; round < rounds; ++round) {
      LogOptions o;
      o.durability = Durability::kBuffered;
      if (round == 0) {
        o.batch_observer = [&arena, &spans](const rocksdb::WriteBatch& wb) {
          spans.emplace_back(arena.size(), wb.Data().size());
          arena.append(wb.Data());
        };
      }
      std::unique_ptr<EventLog> log;
      s = EventLog::Open(scratch.Next(), o, &log);
      if (!s.ok()) return Fail(s);
      std::vector<Event> events = make_events();
      auto t0 = Clock::now();
      s = AppendAll(*log, events);
      auto t1 = Clock::now();
      if (!s.ok()) return Fail(s);
      log.reset();
      log_rates.push_back(opt.append_events / Seconds(t0, t1));

      std::unique_ptr<LogStore> raw;
      s = LogStore::Open(scratch.Next(), OpenMode::kPrimary, &raw);
      if (!s.ok()) return Fail(s);
      std::vector<rocksdb::WriteBatch> replay;
      replay.reserve(spans.size());
      for (const auto& [at, n] : spans) replay.emplace_back(arena.substr(at, n));
      rocksdb::WriteOptions wo;
      auto t2 = Clock::now();
      for (auto& wb : replay) {
        rocksdb::Status w = raw->db()->Write(wo, &wb);
        if (!w.ok()) return Fail(FromRocks(w, "raw write"));
      }
      auto t3 = Clock::now();
      raw_rates.push_back(opt.append_events / Seconds(t2, t3));
    }
    const double log_rate = Median(log_rates);
    const double raw_rate = Median(raw_rates);
    out["append_per_s"] = log_rate;
    out["raw_batches_per_s_in_events"] = raw_rate;
    out["append_batches"] = spans.size();
    out["append_rounds"] = rounds;
    out["append_vs_raw"] = log_rate / raw_rate;
  }

  // 2. sync_group_vs_naive: concurrent synced appends vs. one fdatasync'd Put
  // per event. An fdatasync on this kind of (virtual) disk costs anything from
  // a quarter of a millisecond to several, from one minute to the next, so
  // the two are measured in alternating rounds (group, naive, group, …) and
  // compared by their medians, as the append test does.
  {
    std::cerr << "bench log: " << opt.sync_appenders << " synced appenders…\n";
    const int rounds = opt.quick ? 1 : 3;
    const size_t per = std::max<size_t>(1, opt.sync_events / opt.sync_appenders);
    const size_t naive_n = std::max<size_t>(20, std::min<size_t>(300, opt.sync_events / 10));
    std::vector<double> group_rates, naive_rates, rocks_group_rates;
    size_t events_written = 0, batches_written = 0;
    for (int round = 0; round < rounds; ++round) {
      LogOptions o;
      o.durability = Durability::kSync;
      std::atomic<size_t> sync_batches{0};
      o.batch_observer = [&sync_batches](const rocksdb::WriteBatch&) { ++sync_batches; };
      std::unique_ptr<EventLog> log;
      s = EventLog::Open(scratch.Next(), o, &log);
      if (!s.ok()) return Fail(s);
      // The events are made before the clock starts, here and for the naive
      // writer below: building test payloads is not part of an append.
      std::vector<std::vector<Event>> work(opt.sync_appenders);
      for (size_t t = 0; t < opt.sync_appenders; ++t) {
        std::mt19937_64 rng(t);
        for (size_t i = 0; i < per; ++i) work[t].push_back(BenchEvent(t * per + i, SessionOf(i, rng), "s"));
      }
      std::vector<std::thread> threads;
      std::atomic<bool> failed{false};
      auto t0 = Clock::now();
      for (size_t t = 0; t < opt.sync_appenders; ++t) {
        threads.emplace_back([&, t] {
          for (Event& e : work[t]) {
            AppendResult r = log->Append(std::move(e));
            if (!r.status.ok()) failed = true;
          }
        });
      }
      for (auto& th : threads) th.join();
      auto t1 = Clock::now();
      if (failed) return Fail(Status::Error("E_BENCH", "a synced append failed"));
      group_rates.push_back(per * opt.sync_appenders / Seconds(t0, t1));
      events_written += per * opt.sync_appenders;
      batches_written += sync_batches;
      log.reset();

      double rocks_rate = 0;
      s = RocksDbGroupRound(scratch.Next(), opt.sync_appenders, per, &rocks_rate);
      if (!s.ok()) return Fail(s);
      rocks_group_rates.push_back(rocks_rate);

      std::unique_ptr<LogStore> raw;
      s = LogStore::Open(scratch.Next(), OpenMode::kPrimary, &raw);
      if (!s.ok()) return Fail(s);
      rocksdb::WriteOptions wo;
      wo.sync = true;
      std::string body;
      std::vector<Event> naive_events;
      for (size_t i = 0; i < naive_n; ++i) naive_events.push_back(BenchEvent(i, "naive", "n"));
      auto t2 = Clock::now();
      for (size_t i = 0; i < naive_n; ++i) {
        const Event& e = naive_events[i];
        if (!EncodeEventBody(e, 1 << 20, &body).ok()) return Fail(Status::Error("E_BENCH", "encode"));
        rocksdb::Status w = raw->db()->Put(wo, raw->cf(logfmt::kEvents), logfmt::EncodeSeq(i + 1), body);
        if (!w.ok()) return Fail(FromRocks(w, "naive put"));
      }
      auto t3 = Clock::now();
      naive_rates.push_back(naive_n / Seconds(t2, t3));
    }
    const double group_rate = Median(group_rates);
    const double naive_rate = Median(naive_rates);
    out["sync_group_per_s"] = group_rate;
    out["sync_events_per_write_batch"] =
        static_cast<double>(events_written) / std::max<size_t>(1, batches_written);
    out["sync_naive_per_s"] = naive_rate;
    out["sync_appenders"] = opt.sync_appenders;
    out["sync_rounds"] = rounds;
    out["sync_group_vs_naive"] = group_rate / naive_rate;
    out["sync_rocksdb_group_per_s"] = Median(rocks_group_rates);
    out["sync_vs_rocksdb_group"] = group_rate / Median(rocks_group_rates);
  }

  // 3 and 4. Query latency vs. a raw scan, and on a 10x larger log.
  {
    const int reps = opt.quick ? 50 : 200;
    double q_small, raw_small, q_large, raw_large, d_small, d_large;
    for (int pass = 0; pass < 2; ++pass) {
      const size_t total = opt.query_base_events * (pass == 0 ? 1 : 10);
      std::cerr << "bench log: building a " << total << "-event log for queries…\n";
      std::unique_ptr<EventLog> log;
      s = BuildQueryLog(scratch.Next(), total, &log);
      if (!s.ok()) return Fail(s);
      s = MeasureQuery(log->store(), reps, pass == 0 ? &q_small : &q_large, pass == 0 ? &d_small : &d_large,
                       pass == 0 ? &raw_small : &raw_large);
      if (!s.ok()) return Fail(s);
    }
    out["query_us"] = q_small;
    out["query_decoded_us"] = d_small;  // the same query returning Event objects (a JSON tree each)
    out["query_decoded_vs_raw_scan"] = d_small / raw_small;
    out["raw_scan_us"] = raw_small;
    out["query_10x_us"] = q_large;
    out["raw_scan_10x_us"] = raw_large;
    out["query_events"] = opt.query_base_events;
    out["query_vs_raw_scan"] = q_small / raw_small;
    out["query_growth_10x"] = q_large / q_small;
  }

  // sync_group_vs_naive stays as information: a naive writer is not the
  // limit; RocksDB's own write group with as many threads is.
  out["goals"] = {{"append_vs_raw", ">= 0.7"},
                  {"sync_vs_rocksdb_group", ">= 1.5"},
                  {"query_vs_raw_scan", "<= 3"},
                  {"query_growth_10x", "<= 1.5"}};
  out["met"] = {{"append_vs_raw", out["append_vs_raw"].get<double>() >= 0.7},
                {"sync_vs_rocksdb_group", out["sync_vs_rocksdb_group"].get<double>() >= 1.5},
                {"query_vs_raw_scan", out["query_vs_raw_scan"].get<double>() <= 3},
                {"query_growth_10x", out["query_growth_10x"].get<double>() <= 1.5}};
  if (own_dir) {
    std::error_code ec;
    std::filesystem::remove_all(scratch.root, ec);
  }
  return out;
}

}  // namespace tollgate::bench
