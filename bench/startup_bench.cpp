#include "bench/startup_bench.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include "audit/approvals.h"
#include "audit/event_log.h"
#include "bench/bench_driver.h"
#include "core/event.h"
#include "core/messages.h"
#include "decide/decide_snapshot.h"
#include "deploy/pipeline.h"

namespace tollgate::bench {
namespace {

Json Fail(const Status& s) { return Json{{"error", s.ToString()}}; }
void Say(const std::string& line) { std::cerr << "[bench startup] " << line << std::endl; }

// Budgets, so every allowed call is a ledger entry (what start-up restores).
constexpr const char* kPolicy = R"(
version: 1
mode: ask
allow: [builtin:echo]
budgets:
  - {name: session-usd, scope: session, window: session, max_usd: 1000000}
  - {name: agent-daily-usd, scope: agent, window: day, max_usd: 1000000}
)";

// One request every kSpacingUs, the last one now: a longer history reaches
// further back, as a deployment's does.
constexpr int64_t kSpacingUs = 30'000'000;

// The log of a deployment that served `finished` echo calls and holds
// `pending` calls waiting for approval.
Status BuildHistory(const std::string& path, size_t finished, size_t pending, size_t* events) {
  LogOptions lo;
  lo.durability = Durability::kBuffered;
  std::unique_ptr<EventLog> log;
  Status s = EventLog::Open(path, lo, &log);
  if (!s.ok()) return s;
  std::deque<AppendFuture> inflight;
  auto append = [&](Event e) -> Status {
    inflight.push_back(log->AppendAsync(std::move(e)));
    while (inflight.size() > 4096) {
      AppendResult r = inflight.front().get();
      inflight.pop_front();
      if (!r.status.ok()) return r.status;
    }
    return Status::Ok();
  };
  const int64_t now = NowMicros();
  const size_t total = finished + pending;
  for (size_t i = 0; s.ok() && i < total; ++i) {
    const bool done = i < finished;
    const std::string rid = (done ? "done-" : "pending-") + std::to_string(i);
    const std::string agent = "agent-" + std::to_string(i % 16),
                      session = agent + "-s" + std::to_string(i / 2000);
    const int64_t t = now - static_cast<int64_t>(total - i) * kSpacingUs;
    Json args{{"text", "hello " + std::to_string(i)}};
    Json req{{"request_id", rid},     {"org_id", "org-bench"}, {"agent_id", agent},
             {"session_id", session}, {"tool", "echo"},        {"args", args}};
    auto ev = [&](const std::string& type, int64_t at, Json data) {
      Event e;
      e.type = type;
      e.request_id = rid;
      e.id = MakeRequestEventId("org-bench", type, rid);
      e.org_id = "org-bench";
      e.agent_id = agent;
      e.session_id = session;
      e.tool = "echo";
      e.time_us = at;
      e.data = std::move(data);
      return e;
    };
    const Json reservation{{"usd", 0.001},
                           {"received_at", FormatTime(t)},
                           {"budgets", Json::array({"session-usd", "agent-daily-usd"})}};
    s = append(ev("request.received", t,
                  {{"request", req}, {"args_hash", ArgsHash(args)}, {"received_at", FormatTime(t)}}));
    if (!s.ok()) break;
    if (done) {
      s = append(ev("decision.made", t + 100,
                    {{"verdict", "allow"},
                     {"reason", "bench"},
                     {"rule", "org.allow:builtin:echo"},
                     {"reservation", reservation},
                     {"source", "bench"}}));
      if (s.ok()) s = append(ev("execution.started", t + 200, {{"executor", "builtin"}, {"attempt", 1}}));
      if (s.ok()) {
        s = append(ev("execution.completed", t + 300,
                      {{"result", ToolResultOk(args, 0.1)}, {"duration_ms", 0.1}, {"cost_usd", 0.001}}));
      }
    } else {
      s = append(ev("decision.made", t + 100,
                    {{"verdict", "ask"},
                     {"reason", "bench"},
                     {"rule", "org.mode:ask"},
                     {"reservation", reservation},
                     {"source", "bench"}}));
      if (s.ok()) {
        s = append(ev("approval.requested", t + 200,
                      {{"approvers_needed", 1},
                       {"deadline", FormatTime(now + 86'400'000'000)},
                       {"args_hash", ArgsHash(args)},
                       {"approvers", Json::array()},
                       {"timeout_s", 86400},
                       {"source", "bench"}}));
      }
    }
  }
  while (s.ok() && !inflight.empty()) {
    AppendResult r = inflight.front().get();
    inflight.pop_front();
    s = r.status;
  }
  *events = log->head_seq();
  return s;
}

// One start of `up` on `data` (the API on a loopback port, as `up` serves
// it), timed until Start returns, then stopped.
Status TimedStart(const std::string& data, const std::string& policy, size_t pending, double* seconds,
                  Json* phases = nullptr) {
  PipelineOptions po;
  po.data_dir = data;
  po.policy_path = policy;
  po.durability = Durability::kBuffered;
  po.write_endpoints = false;
  po.http_listen = "127.0.0.1:0";
  std::unique_ptr<Pipeline> p;
  const auto t0 = Clock::now();
  Status s = Pipeline::Start(po, &p);
  *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (s.ok() && p->reconciled().redriven != 0) {
    s = Status::Error("E_BENCH",
                      "the reconciler re-drove requests: the unfinished work changed between starts");
  }
  std::vector<PendingApproval> listed;
  if (s.ok()) s = ListPendingApprovals(p->log().store(), {}, &listed);
  if (s.ok() && listed.size() != pending) {
    s = Status::Error("E_BENCH", "the start restored " + std::to_string(listed.size()) +
                                     " pending approvals, not " + std::to_string(pending));
  }
  if (p && phases != nullptr) *phases = p->startup_phases();
  if (p) p->Stop();
  return s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

Json RunStartupBench(const StartupBenchOptions& o_in) {
  StartupBenchOptions o = o_in;
  if (o.quick) {
    o.requests = 2000;
    o.pending = 50;
    o.rounds = 3;
  }
  ScratchDir dir(o.dir);
  const std::string policy = dir.sub("policy.yaml");
  {
    std::ofstream f(policy);
    f << kPolicy;
  }
  struct History {
    const char* name;
    size_t requests;
    std::string data;
    size_t events = 0;
    std::vector<double> starts;
    std::vector<Json> phases;
  } hist[2] = {{"short", o.requests, dir.sub("short")}, {"long", o.requests * o.growth, dir.sub("long")}};
  for (History& h : hist) {
    const auto t0 = Clock::now();
    Status s = BuildHistory(h.data + "/log", h.requests, o.pending, &h.events);
    if (!s.ok()) return Fail(s);
    Say(std::string(h.name) + ": " + std::to_string(h.events) + " events written in " +
        std::to_string(std::chrono::duration<double>(Clock::now() - t0).count()) + " s");
    // The first start folds the whole log (no snapshot yet) and logs the
    // policy; a deployment pays it once. Not measured.
    double first = 0;
    if (!(s = TimedStart(h.data, policy, o.pending, &first)).ok()) return Fail(s);
    Say(std::string(h.name) + ": first start (whole log, no snapshot) " + std::to_string(first) + " s");
  }
  // What a start would cost without the snapshot: decide's full fold of the
  // long log alone (information: it grows with the log).
  double full_fold_s = 0;
  {
    std::unique_ptr<LogStore> store;
    Status s = LogStore::Open(hist[1].data + "/log", OpenMode::kReadOnly, &store);
    if (!s.ok()) return Fail(s);
    uint64_t head = 0;
    Digest hash;
    if (!(s = store->ReadHead(&head, &hash)).ok()) return Fail(s);
    DecideState state;
    const auto t0 = Clock::now();
    s = RebuildDecideState(
        head, [&store](uint64_t seq, Event* e) { return store->ReadEvent(seq, e); }, "", &state);
    full_fold_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!s.ok()) return Fail(s);
  }
  for (size_t r = 0; r < o.rounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      History& h = hist[(r + k) % 2];  // alternate which goes first
      double t = 0;
      Json phases;
      Status s = TimedStart(h.data, policy, o.pending, &t, &phases);
      if (!s.ok()) return Fail(s);
      h.starts.push_back(t);
      h.phases.push_back(phases);
      Say("round " + std::to_string(r + 1) + " " + h.name + " " + std::to_string(t) + " s " + phases.dump());
    }
  }
  const double short_s = Median(hist[0].starts), long_s = Median(hist[1].starts);
  const double growth = short_s > 0 ? long_s / short_s : 0;
  Json out{{"startup_growth_10x", growth},
           {"short_startup_s", short_s},
           {"long_startup_s", long_s},
           {"short_events", hist[0].events},
           {"long_events", hist[1].events},
           {"growth", o.growth},
           {"pending_approvals", o.pending},
           {"full_fold_long_s", full_fold_s},
           {"short_starts_s", hist[0].starts},
           {"long_starts_s", hist[1].starts},
           {"goals", {{"startup_growth_10x", "<= 1.5"}}},
           {"met", {{"startup_growth_10x", growth > 0 && growth <= 1.5}}}};
  return out;
}

}  // namespace tollgate::bench
