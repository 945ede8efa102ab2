#include "bench/pipeline_bench.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "bench/bench_driver.h"
#include "core/auth.h"
#include "core/credentials.h"
#include "core/jwt.h"
#include "deploy/pipeline.h"

namespace tollgate::bench {
namespace {

constexpr size_t kVerifySamples = 2000;  // messages timed through AuthenticateRequest

Status StartPipeline(const PipelineBenchOptions& o, const std::string& dir, Durability durability,
                     const std::string& label, bool latency_first, std::unique_ptr<Pipeline>* p,
                     BusConfig* bus) {
  PipelineOptions po;
  po.latency_first = latency_first;
  bus->latency_first = latency_first;
  po.data_dir = dir + "/" + label;
  po.durability = durability;
  po.partitions = o.partitions;
  po.max_batch = o.max_batch;
  po.write_endpoints = false;
  Status s = Pipeline::Start(po, p);
  if (!s.ok()) return s;
  bus->brokers = (*p)->bootstrap();
  bus->topics = (*p)->topics();
  bus->partitions = o.partitions;
  return Status::Ok();
}

// A key for every bench agent, registered in the pipeline's log as `tollgate
// agents add` would.
Status RegisterAgents(Pipeline& p, const Workload& w, Signers* out) {
  for (const std::string& agent : w.agents) {
    Credential c;
    Status s = NewSigningKey("agent_key", w.org, agent, {"agent"}, "bench", &c, &(*out)[agent]);
    if (s.ok()) s = p.AppendCredentialEvent(CredentialAddedEvent(c, NowMicros()));
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

// What ingest's signature check costs a request: AuthenticateRequest (JWT
// parse, Ed25519 verify, SHA-256 of the value, the claims) over
// kVerifySamples requests like the bench's, signed beforehand, against the
// pipeline's own registry; mean microseconds per request. Also the agent's
// cost to sign one (*sign_us). 0 on failure (a request that does not verify).
double VerifyMicros(const Pipeline& p, const Signers& signers, double* sign_us) {
  std::vector<Message> msgs(kVerifySamples);
  const Workload w;  // the bench's requests
  const auto t0 = Clock::now();
  for (size_t i = 0; i < msgs.size(); ++i) {
    msgs[i] = MakeRequest(w, "verify", "verify-" + std::to_string(i), i, &signers);
  }
  const auto t1 = Clock::now();
  size_t ok = 0;
  SignedBy who;
  for (const Message& m : msgs)
    ok += AuthenticateRequest(m, p.credentials(), NowMicros(), kDefaultMaxSkewUs, &who);
  const auto t2 = Clock::now();
  const double n = static_cast<double>(msgs.size());
  *sign_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  return ok == msgs.size() ? std::chrono::duration<double, std::micro>(t2 - t1).count() / n : 0.0;
}

}  // namespace

Json RunPipelineBench(const PipelineBenchOptions& options) {
  Sizes z{20, options.requests, options.rounds, options.rate, options.seconds};
  if (options.quick) {
    z = Sizes{10, std::min<size_t>(options.requests, 500), 1, std::min(options.rate, 100.0),
              std::min(options.seconds, 2.0)};
  }
  if (z.requests == 0 || z.rounds == 0 || z.rate <= 0 || z.seconds <= 0 || options.partitions <= 0 ||
      options.max_batch == 0) {
    return Json{
        {"error", "--requests, --rounds, --rate, --seconds, partitions and max_batch must be positive"}};
  }
  ScratchDir dir(options.dir);
  if (dir.path().empty()) return Json{{"error", "cannot create a scratch directory under " + options.dir}};
  Progress("scratch directory " + dir.path());

  Figures relay, min_relay, buffered, sync, fast;
  uint64_t relay_retries = 0, buffered_retries = 0, sync_retries = 0, fast_retries = 0;
  // The bare relay (as the runner: transactions, batching) and the latency
  // floor (a minimal relay: no transactions, latency-first settings).
  for (const bool minimal : {false, true}) {
    RelaySystem system;  // declared first: the driver closes while its broker runs
    Target t;
    t.label = minimal ? "min-relay" : "relay";
    Status s = system.Start(options.partitions, options.max_batch, &t.bus, minimal);
    if (s.ok()) s = MeasureOne(t, z);
    if (!s.ok()) return Json{{"error", t.label + ": " + s.ToString()}};
    system.relay.Stop();
    if (!minimal) relay_retries = system.relay.retries();
    (minimal ? min_relay : relay) = t.f;
  }
  double verify_us = 0, sign_us = 0;
  auto measure_pipeline = [&](Durability durability, const std::string& label, Figures* f, uint64_t* retries,
                              bool latency_first = false) {
    std::unique_ptr<Pipeline> p;
    Signers signers;
    Target t;
    t.label = label;
    t.expect_status = true;
    t.signers = &signers;
    Status s = StartPipeline(options, dir.path(), durability, label, latency_first, &p, &t.bus);
    if (s.ok()) s = RegisterAgents(*p, t.workload, &signers);
    if (s.ok()) s = MeasureOne(t, z);
    if (!s.ok()) return s;
    *retries = p->retries();
    t.f.stages = p->stats();
    *f = t.f;
    if (durability == Durability::kBuffered && !latency_first) {
      // Measured after the timed phases, with the stages idle.
      verify_us = VerifyMicros(*p, signers, &sign_us);
      if (verify_us <= 0) return Status::Error("E_BENCH", "the bench's own signed requests do not verify");
    }
    return Status::Ok();
  };
  Status s = measure_pipeline(Durability::kBuffered, "pipeline-buffered", &buffered, &buffered_retries);
  if (!s.ok()) return Json{{"error", "pipeline (buffered): " + s.ToString()}};
  if (options.sync) {
    s = measure_pipeline(Durability::kSync, "pipeline-sync", &sync, &sync_retries);
    if (!s.ok()) return Json{{"error", "pipeline (sync): " + s.ToString()}};
  }
  // `up --latency-first`: the same guarantees, shorter waits.
  s = measure_pipeline(Durability::kBuffered, "pipeline-latency-first", &fast, &fast_retries, true);
  if (!s.ok()) return Json{{"error", "pipeline (latency first): " + s.ToString()}};

  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  const double throughput_vs_relay = ratio(buffered.req_per_s, relay.req_per_s);
  const double p99_vs_relay = ratio(buffered.p99_ms, relay.p99_ms);
  Json out;
  out["bench"] = "pipeline";
  out["throughput_vs_relay"] = throughput_vs_relay;
  out["p99_vs_relay"] = p99_vs_relay;
  out["pipeline_req_per_s"] = buffered.req_per_s;
  out["pipeline_p50_ms"] = buffered.p50_ms;
  out["pipeline_p99_ms"] = buffered.p99_ms;
  out["relay_req_per_s"] = relay.req_per_s;
  out["relay_p50_ms"] = relay.p50_ms;
  out["relay_p99_ms"] = relay.p99_ms;
  // Against the latency floor, at rate_per_s: the default settings, and
  // latency first (whose throughput must stay >= 0.3x the bare relay).
  out["min_relay_p50_ms"] = min_relay.p50_ms;
  out["min_relay_p99_ms"] = min_relay.p99_ms;
  out["p50_vs_min_relay_default"] = ratio(buffered.p50_ms, min_relay.p50_ms);
  out["p99_vs_min_relay_default"] = ratio(buffered.p99_ms, min_relay.p99_ms);
  out["pipeline_latency_first_p50_ms"] = fast.p50_ms;
  out["pipeline_latency_first_p99_ms"] = fast.p99_ms;
  out["pipeline_latency_first_req_per_s"] = fast.req_per_s;
  const double p50_vs_min = ratio(fast.p50_ms, min_relay.p50_ms);
  const double p99_vs_min = ratio(fast.p99_ms, min_relay.p99_ms);
  const double fast_throughput_vs_relay = ratio(fast.req_per_s, relay.req_per_s);
  out["p50_vs_min_relay"] = p50_vs_min;
  out["p99_vs_min_relay"] = p99_vs_min;
  out["latency_first_throughput_vs_relay"] = fast_throughput_vs_relay;
  if (options.sync) {
    out["sync_throughput_vs_relay"] = ratio(sync.req_per_s, relay.req_per_s);
    out["sync_p99_vs_relay"] = ratio(sync.p99_ms, relay.p99_ms);
    out["pipeline_sync_req_per_s"] = sync.req_per_s;
    out["pipeline_sync_p50_ms"] = sync.p50_ms;
    out["pipeline_sync_p99_ms"] = sync.p99_ms;
  }
  // The signature check ingest makes on every request (AuthenticateRequest,
  // mean over kVerifySamples), and the agent's signing (included in the
  // pipeline's figures above: it signs as it publishes).
  out["verify_us_per_request"] = verify_us;
  out["sign_us_per_request"] = sign_us;
  out["requests"] = z.requests;
  out["rounds"] = z.rounds;
  out["rate_per_s"] = z.rate;
  out["latency_seconds"] = z.seconds;
  out["latency_requests"] = std::max<size_t>(1, static_cast<size_t>(z.rate * z.seconds));
  out["partitions"] = options.partitions;
  out["max_batch"] = options.max_batch;
  out["hops"] = 3;
  out["signed_requests"] =
      "the pipeline's requests are signed by their agent's key (ingest verifies each); throughput rounds "
      "make and "
      "sign them before the clock starts, latency rounds at send time; the relay's are not signed";
  out["relay_batching"] =
      "per hop: poll up to max_batch (50 ms poll timeout), then begin txn, produce, send offsets, commit on "
      "a "
      "publisher thread while the next batch is polled — as StageRunner";
  out["detail"] = {{"relay", FiguresJson(relay)},
                   {"min_relay", FiguresJson(min_relay)},
                   {"pipeline_buffered", FiguresJson(buffered)},
                   {"pipeline_latency_first", FiguresJson(fast)}};
  if (options.sync) out["detail"]["pipeline_sync"] = FiguresJson(sync);
  out["retries"] = {{"relay", relay_retries},
                    {"pipeline_buffered", buffered_retries},
                    {"pipeline_sync", sync_retries},
                    {"pipeline_latency_first", fast_retries}};
  out["goals"] = {{"throughput_vs_relay", ">= 0.3"},
                  {"p99_vs_relay", "<= 3"},
                  {"p50_vs_min_relay", "<= 3"},
                  {"latency_first_throughput_vs_relay", ">= 0.3"}};
  out["met"] = {{"throughput_vs_relay", throughput_vs_relay >= 0.3},
                {"p99_vs_relay", p99_vs_relay > 0 && p99_vs_relay <= 3},
                {"p50_vs_min_relay", p50_vs_min > 0 && p50_vs_min <= 3},
                {"latency_first_throughput_vs_relay", fast_throughput_vs_relay >= 0.3}};
  out["quick"] = options.quick;
  return out;
}

}  // namespace tollgate::bench
