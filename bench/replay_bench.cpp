#include "bench/replay_bench.h"

#include <rocksdb/iterator.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <future>
#include <iostream>

#include "audit/event_log.h"
#include "core/messages.h"
#include "decide/policy_engine.h"
#include "replay/log_source.h"
#include "replay/redecide.h"

namespace tollgate::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Json Fail(const Status& s) { return Json{{"error", s.ToString()}}; }

// A policy with the checks a real one has: deny globs, allows, a rule, a
// registry with costs, and budgets (as the default policy's) that every
// call is checked against.
constexpr const char* kBenchPolicy = R"(
version: 1
mode: ask
approval_threshold: HIGH
deny: ["*:*secret*", "*:*.env", "*:*/.ssh/*", "delete_file:*"]
allow: [builtin:echo, builtin:read_file, builtin:current_time]
rules:
  - {name: no-tmp-writes, tool: write_file, verdict: deny, when: {file_prefix: /tmp}}
tools:
  read_file: {danger: LOW, read_only: true, cost_usd: 0.001}
budgets:
  - {name: session-usd, scope: session, window: session, max_usd: 1000000}
  - {name: agent-daily-usd, scope: agent, window: day, max_usd: 1000000}
)";

// kBenchPolicy in force in *pif, through the policy.updated event that
// records it (*pe, at `time_us`), as decide folds it.
Status BenchPolicyInForce(int64_t time_us, PolicyInForce* pif, Event* pe) {
  PolicyPtr policy;
  Status s = LoadPolicyYaml(kBenchPolicy, "bench.yaml", &policy);
  if (!s.ok()) return s;
  pe->type = "policy.updated";
  pe->id = MakeEventId(pe->type, "", policy->content_hash());
  pe->org_id = "org-bench";
  pe->time_us = time_us;
  pe->data = {{"policy_version", policy->version()},
              {"content_hash", policy->content_hash()},
              {"source", "bench.yaml"},
              {"tier", "file"},
              {"policy", policy->doc()}};
  return pif->Apply(*pe);
}

// Builds the log: the policy, then one session of `n` requests (received,
// decision made by the engine as decide would, started, completed).
Status BuildSession(const std::string& path, size_t n, std::unique_ptr<EventLog>* out) {
  LogOptions lo;
  lo.durability = Durability::kBuffered;
  Status s = EventLog::Open(path, lo, out);
  if (!s.ok()) return s;
  EventLog& log = **out;
  PolicyInForce pif;
  BudgetLedger ledger;
  const int64_t t0 = 1'790'000'000'000'000;
  Event pe;
  s = BenchPolicyInForce(t0, &pif, &pe);
  if (!s.ok()) return s;
  std::deque<AppendFuture> inflight;
  auto append = [&](Event e) -> Status {
    inflight.push_back(log.AppendAsync(std::move(e)));
    while (inflight.size() > 4096) {
      AppendResult r = inflight.front().get();
      inflight.pop_front();
      if (!r.status.ok()) return r.status;
    }
    return Status::Ok();
  };
  s = append(pe);
  const char* tools[] = {"echo", "read_file", "write_file", "current_time"};
  for (size_t i = 0; s.ok() && i < n; ++i) {
    const std::string rid = "bench-" + std::to_string(i);
    const std::string tool = tools[i % 4];
    const int64_t t = t0 + 1000 + static_cast<int64_t>(i) * 1000;
    Json args = tool == "echo"           ? Json{{"text", "hello " + std::to_string(i)}}
                : tool == "current_time" ? Json::object()
                                         : Json{{"path", "/srv/data/file-" + std::to_string(i % 97) + ".txt"},
                                                {"content", std::string(64, 'x')}};
    Json req{{"request_id", rid},   {"org_id", "org-bench"}, {"agent_id", "agent-bench"},
             {"session_id", "big"}, {"tool", tool},          {"args", args}};
    auto ev = [&](const std::string& type, int64_t at, Json data, const std::string& disc = "") {
      Event e;
      e.type = type;
      e.request_id = rid;
      e.id = MakeEventId(type, rid, disc);
      e.org_id = "org-bench";
      e.agent_id = "agent-bench";
      e.session_id = "big";
      e.tool = tool;
      e.time_us = at;
      e.data = std::move(data);
      return e;
    };
    s = append(ev("request.received", t,
                  {{"request", req}, {"args_hash", ArgsHash(args)}, {"received_at", FormatTime(t)}}));
    DecideInput in{&req, t};
    Json d = Decide(pif, ledger, in);
    d["source"] = "bench";
    Event de = ev("decision.made", t + 100, d);
    ledger.Apply(de);
    if (s.ok()) s = append(std::move(de));
    if (s.ok()) s = append(ev("execution.started", t + 200, {{"executor", "builtin"}, {"attempt", 1}}, "1"));
    Event done = ev("execution.completed", t + 300,
                    {{"result", ToolResultOk(args, 0.1)}, {"duration_ms", 0.1}, {"cost_usd", 0.001}});
    ledger.Apply(done);
    if (s.ok()) s = append(std::move(done));
  }
  while (s.ok() && !inflight.empty()) {
    AppendResult r = inflight.front().get();
    inflight.pop_front();
    s = r.status;
  }
  return s;
}

// Raw: the session index walked and each record's bytes read.
Status RawScan(const LogStore& store, size_t* n) {
  const std::string prefix = logfmt::IndexPrefix("big");
  std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator({}, store.cf(logfmt::kBySession)));
  std::string value;
  size_t bytes = 0;
  *n = 0;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    rocksdb::Slice k = it->key();
    rocksdb::Status g =
        store.db()->Get({}, store.cf(logfmt::kEvents), rocksdb::Slice(k.data() + prefix.size(), 8), &value);
    if (!g.ok()) return FromRocks(g, "raw scan");
    bytes += value.size();
    ++*n;
  }
  return bytes > 0 ? Status::Ok() : Status::Error("E_BENCH", "raw scan read nothing");
}

// Raw, the other way: the session's first and last seq from its index, then
// one iterator over the records between them. The same events when the
// session's records are contiguous (as in this bench's log); re-decision
// reads records with one iterator too, so the baseline may as well.
Status RawRangeScan(const LogStore& store, size_t* n) {
  const std::string prefix = logfmt::IndexPrefix("big");
  std::unique_ptr<rocksdb::Iterator> idx(store.db()->NewIterator({}, store.cf(logfmt::kBySession)));
  idx->Seek(prefix);
  if (!idx->Valid() || !idx->key().starts_with(prefix))
    return Status::Error("E_BENCH", "range scan: no session");
  const std::string first(idx->key().data() + prefix.size(), 8);
  std::string upper = prefix;
  upper.back() = static_cast<char>(upper.back() + 1);  // the prefix ends in the separator: this is past it
  idx->SeekForPrev(upper);
  if (!idx->Valid() || !idx->key().starts_with(prefix))
    return Status::Error("E_BENCH", "range scan: no last");
  const std::string last(idx->key().data() + prefix.size(), 8);
  std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator({}, store.cf(logfmt::kEvents)));
  size_t bytes = 0;
  *n = 0;
  for (it->Seek(first); it->Valid() && it->key().compare(last) <= 0; it->Next()) {
    bytes += it->value().size();
    ++*n;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "range scan");
  return bytes > 0 ? Status::Ok() : Status::Error("E_BENCH", "range scan read nothing");
}

// The floor's second half: the policy engine alone deciding the session's
// requests, already decoded (`events`, the session read before the clock),
// with the budget fold the decisions need. Seconds taken.
Status DecideAlone(const std::vector<Event>& events, double* seconds) {
  PolicyInForce pif;
  Event pe;
  Status s = BenchPolicyInForce(0, &pif, &pe);
  if (!s.ok()) return s;
  BudgetLedger ledger;
  Decision d;  // reused, the engine's allocation-free path (as re-decision's)
  size_t decided = 0;
  const auto t0 = Clock::now();
  for (const Event& e : events) {
    if (e.type == "request.received") {
      DecideInto(pif, ledger, DecideInput{&e.data["request"], e.time_us}, &d);
      ledger.ApplyDecision(e.request_id, e.org_id, e.agent_id, e.session_id, e.tool, d);
      ++decided;
    } else if (e.type == "execution.completed") {
      ledger.Apply(e);
    }
  }
  *seconds = Seconds(t0, Clock::now());
  return decided > 0 ? Status::Ok() : Status::Error("E_BENCH", "the floor decided nothing");
}

}  // namespace

Json RunReplayBench(const ReplayBenchOptions& opt_in) {
  ReplayBenchOptions opt = opt_in;
  if (opt.quick) {
    opt.requests = std::min<size_t>(opt.requests, 2000);
    opt.rounds = std::min<size_t>(opt.rounds, 3);
  }
  opt.rounds = std::max<size_t>(opt.rounds, 1);
  std::string root = opt.dir;
  const bool own_dir = root.empty();
  if (own_dir) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tollgate-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return Fail(Status::Error("E_BENCH", "cannot make a scratch dir"));
    root = tmpl;
  }
  std::filesystem::create_directories(root);
  Json out = Json::object();
  {
    std::cerr << "bench replay: recording a session of " << opt.requests << " requests (" << opt.requests * 4
              << " events)…\n";
    std::unique_ptr<EventLog> log;
    Status s = BuildSession(root + "/log", opt.requests, &log);
    if (!s.ok()) return Fail(s);
    const LogStore& store = log->store();
    const replay::Target target = replay::Target::Session("big");
    std::vector<double> raw_rates, range_rates, redecide_rates, decoded_rates, fold_us, wait_us, floor_rates;
    size_t events = 0;
    // Alternating rounds, the first of each thrown away (warm-up: block
    // cache, page faults), medians reported.
    for (size_t round = 0; round <= opt.rounds; ++round) {
      auto t0 = Clock::now();
      size_t n = 0;
      s = RawScan(store, &n);
      auto t1 = Clock::now();
      if (!s.ok()) return Fail(s);
      events = n;
      auto r0 = Clock::now();
      size_t range_n = 0;
      s = RawRangeScan(store, &range_n);
      auto r1 = Clock::now();
      if (!s.ok()) return Fail(s);

      // Re-decision as the CLI and the HTTP API run it (replay::RedecideTarget's
      // steps, written out to time the fold): one thread reads and decodes,
      // the fold runs on this one as chunks arrive.
      auto t2 = Clock::now();
      replay::Redecider fold(target, {});
      double fold_s = 0;
      s = replay::StreamDecisionInputs(store, target, [&](std::vector<replay::DecisionInput>& chunk) {
        auto a = Clock::now();
        for (replay::DecisionInput& in : chunk) fold.Fold(in);
        fold_s += Seconds(a, Clock::now());
      });
      if (!s.ok()) return Fail(s);
      replay::RedecideReport report = fold.Finish();
      auto t4 = Clock::now();
      if (report.decisions != opt.requests || !report.clean()) {
        return Fail(Status::Error("E_BENCH", "re-decision of the clean session found " +
                                                 std::to_string(report.changes.size()) + " changes in " +
                                                 std::to_string(report.decisions) + " decisions"));
      }

      auto t5 = Clock::now();
      std::vector<Event> decoded;
      s = replay::ReadSession(store, "big", &decoded);
      auto t6 = Clock::now();
      if (!s.ok() || decoded.size() != n)
        return Fail(s.ok() ? Status::Error("E_BENCH", "decoded scan count") : s);
      double decide_s = 0;
      s = DecideAlone(decoded, &decide_s);
      if (!s.ok()) return Fail(s);
      if (round == 0) continue;
      // The floor: the faster raw read of this round plus the engine alone.
      const double read_s = range_n == n ? std::min(Seconds(t0, t1), Seconds(r0, r1)) : Seconds(t0, t1);
      floor_rates.push_back(n / (read_s + decide_s));
      raw_rates.push_back(n / Seconds(t0, t1));
      // Only when it read exactly the session's events (contiguous records).
      if (range_n == n) range_rates.push_back(n / Seconds(r0, r1));
      redecide_rates.push_back(n / Seconds(t2, t4));
      decoded_rates.push_back(n / Seconds(t5, t6));
      fold_us.push_back(fold_s * 1e6);
      wait_us.push_back(Seconds(t2, t4) * 1e6 - fold_s * 1e6);
    }
    // The baseline is the faster of the two raw scans.
    const double index_raw = Median(raw_rates);
    const double range_raw = range_rates.empty() ? 0 : Median(range_rates);
    const double raw = std::max(index_raw, range_raw), redecide = Median(redecide_rates);
    out["scan_index_events_per_s"] = index_raw;  // index walk + a lookup per record
    out["scan_range_events_per_s"] =
        range_raw;  // one iterator over the session's seq range (0: not contiguous)
    out["events"] = events;
    out["decisions"] = opt.requests;
    out["rounds"] = opt.rounds;
    out["scan_events_per_s"] = raw;  // the baseline: the faster raw scan
    out["decoded_scan_events_per_s"] = Median(decoded_rates);
    out["redecide_events_per_s"] = redecide;
    out["redecide_fold_us"] = Median(fold_us);  // the fold's busy time (re-deciding, comparing; pure)
    out["redecide_wait_us"] = Median(wait_us);  // the rest: planning the read, waiting for chunks
    out["redecide_threads"] = 2;  // one reads and decodes, one folds, overlapped; the raw scan uses one
    out["redecide_vs_decoded_scan"] = redecide / Median(decoded_rates);
    out["redecide_vs_scan"] = redecide / raw;         // information: a scan alone decides nothing
    out["floor_events_per_s"] = Median(floor_rates);  // raw read + the engine alone on decoded requests
    out["redecide_vs_floor"] = redecide / Median(floor_rates);
  }
  out["goals"] = {{"redecide_vs_floor", ">= 0.6"}};
  out["met"] = {{"redecide_vs_floor", out["redecide_vs_floor"].get<double>() >= 0.6}};
  if (own_dir) {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  return out;
}

}  // namespace tollgate::bench
