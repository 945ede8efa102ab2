#include "bench/pipeline_bench.h"

#include <algorithm>
#include <chrono>
#include <functional>
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

// What one run measured. The pipeline runs twice with durability=buffered:
// `throughput_first` (latency_first off) and `latency_first`; `sync` uses
// the default settings (PipelineOptions::latency_first).
struct Measured {
  Figures relay, min_relay, verifying_relay, throughput_first, latency_first, sync;
  uint64_t relay_retries = 0, verifying_retries = 0, throughput_first_retries = 0, latency_first_retries = 0,
           sync_retries = 0;
  double verify_us = 0, sign_us = 0;
};

bool DefaultIsLatencyFirst() { return PipelineOptions{}.latency_first; }

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

// A key for every bench agent, each registered through `record` (the
// pipeline's log, as `tollgate agents add` would, or the verifying relay's
// registry).
Status RegisterAgents(const Workload& w, const std::function<Status(const Event&)>& record, Signers* out) {
  for (const std::string& agent : w.agents) {
    Credential c;
    Status s = NewSigningKey("agent_key", w.org, agent, {"agent"}, "bench", &c, &(*out)[agent]);
    if (s.ok()) s = record(CredentialAddedEvent(c, NowMicros()));
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

// The bare relay (as the runner: transactions, batching), the latency floor
// (a minimal relay: no transactions, latency-first settings) and the
// verifying relay (the bare relay whose first hop checks each request's
// signature against a registry of the agents' keys, as ingest does: the
// floor of any authenticated gate; its requests are signed like the
// pipeline's).
Status MeasureRelays(const PipelineBenchOptions& o, const Sizes& z, Measured* run) {
  enum Kind { kBare, kMinimal, kVerifying };
  for (const Kind kind : {kBare, kMinimal, kVerifying}) {
    CredentialRegistry registry;  // outlives `system`: its relay reads it
    Signers signers;
    RelaySystem system;  // declared before the target: the driver closes while its broker runs
    Target t;
    t.label = kind == kBare ? "relay" : kind == kMinimal ? "min-relay" : "verifying-relay";
    Status s = Status::Ok();
    if (kind == kVerifying) {
      t.signers = &signers;
      s = RegisterAgents(
          t.workload,
          [&registry](const Event& e) {
            registry.Apply(e);
            return Status::Ok();
          },
          &signers);
    }
    if (s.ok()) {
      s = system.Start(o.partitions, o.max_batch, &t.bus, kind == kMinimal,
                       kind == kVerifying ? &registry : nullptr);
    }
    if (!s.ok()) return Status::Error(s.code(), t.label + ": " + s.message());
    s = MeasureOne(t, z);  // its errors name the label
    system.relay.Stop();
    if (!s.ok()) return s;
    if (system.relay.unverified() > 0) {
      return Status::Error("E_BENCH", t.label + ": " + std::to_string(system.relay.unverified()) +
                                          " of the bench's own signed requests did not verify");
    }
    if (kind == kBare) run->relay_retries = system.relay.retries();
    if (kind == kVerifying) run->verifying_retries = system.relay.retries();
    (kind == kBare ? run->relay : kind == kMinimal ? run->min_relay : run->verifying_relay) = t.f;
  }
  return Status::Ok();
}

// One pipeline in this process on its own embedded broker, its agents'
// keys in its log; ingest's verification cost measured after the first.
Status MeasurePipeline(const PipelineBenchOptions& o, const Sizes& z, const std::string& dir,
                       Durability durability, const std::string& label, bool latency_first, Figures* f,
                       uint64_t* retries, Measured* run) {
  std::unique_ptr<Pipeline> p;
  Signers signers;
  Target t;
  t.label = label;
  t.expect_status = true;
  t.signers = &signers;
  Status s = StartPipeline(o, dir, durability, label, latency_first, &p, &t.bus);
  if (s.ok()) {
    s = RegisterAgents(
        t.workload, [&p](const Event& e) { return p->AppendCredentialEvent(e); }, &signers);
  }
  if (s.ok()) s = MeasureOne(t, z);
  if (!s.ok()) return s;
  *retries = p->retries();
  t.f.stages = p->stats();
  *f = t.f;
  if (run->verify_us <= 0) {
    // Measured after the timed phases, with the stages idle.
    run->verify_us = VerifyMicros(*p, signers, &run->sign_us);
    if (run->verify_us <= 0) return Status::Error("E_BENCH", "the bench's own signed requests do not verify");
  }
  return Status::Ok();
}

// Throughput first and latency first back to back (the comparison that
// picks the default), then durability=sync with the default settings.
Status MeasurePipelines(const PipelineBenchOptions& o, const Sizes& z, const std::string& dir,
                        Measured* run) {
  Status s = MeasurePipeline(o, z, dir, Durability::kBuffered, "pipeline-buffered", false,
                             &run->throughput_first, &run->throughput_first_retries, run);
  if (!s.ok()) return Status::Error(s.code(), "pipeline (throughput first): " + s.message());
  s = MeasurePipeline(o, z, dir, Durability::kBuffered, "pipeline-latency-first", true, &run->latency_first,
                      &run->latency_first_retries, run);
  if (!s.ok()) return Status::Error(s.code(), "pipeline (latency first): " + s.message());
  if (o.sync) {
    s = MeasurePipeline(o, z, dir, Durability::kSync, "pipeline-sync", DefaultIsLatencyFirst(), &run->sync,
                        &run->sync_retries, run);
    if (!s.ok()) return Status::Error(s.code(), "pipeline (sync): " + s.message());
  }
  return Status::Ok();
}

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// The figures of every system, flat: req/s, p50/p99 and CPU per request.
void AddFigures(Json& out, const std::string& prefix, const Figures& f) {
  out[prefix + "_req_per_s"] = f.req_per_s;
  out[prefix + "_p50_ms"] = f.p50_ms;
  out[prefix + "_p99_ms"] = f.p99_ms;
  out[prefix + "_cpu_us_per_request"] = f.cpu_us_per_request;
}

// The ratios and their goals; the default settings' pipeline is "the
// pipeline" of the headline ratios.
void AddRatios(Json& out, const Measured& r, const PipelineBenchOptions& o) {
  const Figures& def = DefaultIsLatencyFirst() ? r.latency_first : r.throughput_first;
  const double vs_relay = Ratio(def.req_per_s, r.relay.req_per_s);
  const double vs_verifying = Ratio(def.req_per_s, r.verifying_relay.req_per_s);
  const double p99_vs_relay = Ratio(def.p99_ms, r.relay.p99_ms);
  const double p50_vs_min = Ratio(r.latency_first.p50_ms, r.min_relay.p50_ms);
  const double fast_vs_relay = Ratio(r.latency_first.req_per_s, r.relay.req_per_s);
  out["default_settings"] = DefaultIsLatencyFirst() ? "latency_first" : "throughput_first";
  out["throughput_vs_relay"] = vs_relay;
  out["throughput_vs_verifying_relay"] = vs_verifying;
  out["verifying_relay_vs_relay"] = Ratio(r.verifying_relay.req_per_s, r.relay.req_per_s);
  out["p99_vs_relay"] = p99_vs_relay;
  out["p50_vs_min_relay_default"] = Ratio(def.p50_ms, r.min_relay.p50_ms);
  out["p99_vs_min_relay_default"] = Ratio(def.p99_ms, r.min_relay.p99_ms);
  out["p50_vs_min_relay"] = p50_vs_min;
  out["p99_vs_min_relay"] = Ratio(r.latency_first.p99_ms, r.min_relay.p99_ms);
  out["latency_first_throughput_vs_relay"] = fast_vs_relay;
  // What latency first costs in throughput (the default is latency first
  // when this is <= 0.1 in the same run; negative: it was faster).
  out["latency_first_throughput_cost"] = 1.0 - Ratio(r.latency_first.req_per_s, r.throughput_first.req_per_s);
  if (o.sync) {
    out["sync_throughput_vs_relay"] = Ratio(r.sync.req_per_s, r.relay.req_per_s);
    out["sync_p99_vs_relay"] = Ratio(r.sync.p99_ms, r.relay.p99_ms);
  }
  out["goals"] = {{"throughput_vs_relay", ">= 0.3"},
                  {"throughput_vs_verifying_relay", ">= 0.5"},
                  {"p99_vs_relay", "<= 3"},
                  {"p50_vs_min_relay", "<= 3"},
                  {"latency_first_throughput_vs_relay", ">= 0.3"}};
  out["met"] = {{"throughput_vs_relay", vs_relay >= 0.3},
                {"throughput_vs_verifying_relay", vs_verifying >= 0.5},
                {"p99_vs_relay", p99_vs_relay > 0 && p99_vs_relay <= 3},
                {"p50_vs_min_relay", p50_vs_min > 0 && p50_vs_min <= 3},
                {"latency_first_throughput_vs_relay", fast_vs_relay >= 0.3}};
}

Json Report(const Measured& r, const PipelineBenchOptions& o, const Sizes& z) {
  Json out;
  out["bench"] = "pipeline";
  AddRatios(out, r, o);
  AddFigures(out, "pipeline", DefaultIsLatencyFirst() ? r.latency_first : r.throughput_first);
  AddFigures(out, "pipeline_throughput_first", r.throughput_first);
  AddFigures(out, "pipeline_latency_first", r.latency_first);
  if (o.sync) AddFigures(out, "pipeline_sync", r.sync);
  AddFigures(out, "relay", r.relay);
  AddFigures(out, "min_relay", r.min_relay);
  AddFigures(out, "verifying_relay", r.verifying_relay);
  // The signature check ingest (and the verifying relay) makes on every
  // request (AuthenticateRequest, mean over kVerifySamples), and the
  // agent's signing (made before the throughput rounds' clock starts).
  out["verify_us_per_request"] = r.verify_us;
  out["sign_us_per_request"] = r.sign_us;
  out["requests"] = z.requests;
  out["rounds"] = z.rounds;
  out["rate_per_s"] = z.rate;
  out["latency_seconds"] = z.seconds;
  out["latency_requests"] = std::max<size_t>(1, static_cast<size_t>(z.rate * z.seconds));
  out["partitions"] = o.partitions;
  out["max_batch"] = o.max_batch;
  out["hops"] = 3;
  out["signed_requests"] =
      "the pipeline's and the verifying relay's requests are signed by their agent's key (ingest, or the "
      "verifying relay's first hop, verifies each); throughput rounds make and sign them before the clock "
      "starts, latency rounds at send time; the bare and minimal relays' are not signed";
  out["relay_batching"] =
      "per hop: poll up to max_batch (50 ms poll timeout), then begin txn, produce, send offsets, commit on "
      "a publisher thread while the next batch is polled — as StageRunner";
  out["cpu_us_per_request"] =
      "this process's CPU (user + system, getrusage) over the throughput rounds ÷ their requests: the "
      "system under test, its embedded broker and the agent-side driver alike";
  out["detail"] = {{"relay", FiguresJson(r.relay)},
                   {"min_relay", FiguresJson(r.min_relay)},
                   {"verifying_relay", FiguresJson(r.verifying_relay)},
                   {"pipeline_buffered", FiguresJson(r.throughput_first)},
                   {"pipeline_latency_first", FiguresJson(r.latency_first)}};
  if (o.sync) out["detail"]["pipeline_sync"] = FiguresJson(r.sync);
  out["retries"] = {{"relay", r.relay_retries},
                    {"verifying_relay", r.verifying_retries},
                    {"pipeline_buffered", r.throughput_first_retries},
                    {"pipeline_sync", r.sync_retries},
                    {"pipeline_latency_first", r.latency_first_retries}};
  out["quick"] = o.quick;
  return out;
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
  Measured run;
  Status s = MeasureRelays(options, z, &run);
  if (s.ok()) s = MeasurePipelines(options, z, dir.path(), &run);
  if (!s.ok()) return Json{{"error", s.ToString()}};
  return Report(run, options, z);
}

}  // namespace tollgate::bench
