#include "bench/pipeline_bench.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "deploy/pipeline.h"
#include "core/auth.h"
#include "core/credentials.h"
#include "core/jwt.h"
#include "runtime/kafka_bus.h"
#include "core/messages.h"
#include "runtime/serial_worker.h"

namespace tollgate::bench {
namespace {

using Clock = std::chrono::steady_clock;
using OffsetMap = std::map<std::pair<std::string, int32_t>, int64_t>;
constexpr std::chrono::milliseconds kTxnTimeout{30000};
constexpr int kAgents = 8;  // request keys, so every partition carries traffic
constexpr const char* kOrg = "bench-org";
constexpr size_t kVerifySamples = 2000;  // messages timed through AuthenticateRequest

std::string AgentName(size_t i) { return "bench-agent-" + std::to_string(i % kAgents); }

// Agent id -> its signer. The pipeline only takes signed requests
// (docs/trust.md); the relay, which checks nothing, gets them unsigned.
using Signers = std::map<std::string, JwtSigner>;

int64_t MonoMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

void Progress(const std::string& line) { std::cerr << "[bench pipeline] " << line << std::endl; }

// A scratch directory: a fresh mkdtemp child of `parent` (or of the system
// temp dir), removed with everything in it on destruction. Only what this
// run created is ever removed.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& parent) {
    std::error_code ec;
    std::filesystem::path base = parent.empty() ? std::filesystem::temp_directory_path(ec) : std::filesystem::path(parent);
    std::filesystem::create_directories(base, ec);
    std::string tmpl = (base / "tollgate-pbench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The integer after `"name":` in compact JSON, or -1. A string search, not a
// parse: the reader's cost per message must stay small and identical for the
// pipeline and the relay.
int64_t FindInt(const std::string& text, const std::string& name) {
  const std::string needle = "\"" + name + "\":";
  size_t at = text.find(needle);
  if (at == std::string::npos) return -1;
  return std::strtoll(text.c_str() + at + needle.size(), nullptr, 10);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// ------------------------------------------------------------------ the agent side

struct PhaseResult {
  Status status;
  double seconds = 0;       // first publish -> last result read
  size_t received = 0;      // distinct results of this phase
  size_t not_completed = 0; // results whose status is not "completed" (pipeline only)
  std::vector<double> latencies_ms;
};

// Publishes requests on `requests` and reads them back (as results, or as
// relayed requests) from `results`, the way an agent does: one idempotent
// producer, one read_committed consumer.
class Driver {
 public:
  // `signers`: sign every request as its agent (the pipeline); null: send
  // them unsigned (the relay).
  Status Open(const BusConfig& bus, const std::string& group, const Signers* signers = nullptr) {
    bus_ = bus;
    signers_ = signers;
    Status s = Producer::Open(bus_, "", &producer_);
    if (!s.ok()) return s;
    return Consumer::Open(bus_, group, {bus_.topics.results()}, &consumer_);
  }
  ~Driver() {
    if (consumer_) consumer_->Close();
  }

  // Publishes `n` echo requests with ids `prefix`0.. — back to back when
  // rate == 0, else `rate` per second on a fixed schedule — each stamped
  // with its send time (args.sent_us, steady clock), and reads until all
  // `n` came back or `timeout` passed.
  PhaseResult Run(const std::string& prefix, size_t n, double rate, std::chrono::seconds timeout,
                  bool expect_status) {
    PhaseResult r;
    r.latencies_ms.reserve(n);
    std::atomic<bool> sending_failed{false};
    std::atomic<int64_t> last_us{0};
    const auto deadline = Clock::now() + timeout;

    std::thread reader([&] {
      std::unordered_set<std::string> seen;
      std::vector<Message> batch;
      while (seen.size() < n && Clock::now() < deadline && !sending_failed.load()) {
        batch.clear();
        consumer_->Poll(1000, std::chrono::milliseconds(50), &batch);
        const int64_t now = MonoMicros();
        for (const Message& m : batch) {
          auto h = m.headers.find(kHeaderRequestId);
          if (h == m.headers.end() || h->second.rfind(prefix, 0) != 0) continue;
          if (!seen.insert(h->second).second) continue;  // a duplicate: counted once
          const int64_t sent = FindInt(m.value, "sent_us");
          if (sent > 0) r.latencies_ms.push_back(static_cast<double>(now - sent) / 1000.0);
          if (expect_status && m.value.find("\"status\":\"completed\"") == std::string::npos) ++r.not_completed;
          last_us.store(now);
        }
      }
      r.received = seen.size();
    });

    // One request as its agent sends it: stamped with its send time
    // (args.sent_us) and signed by its agent (the pipeline's), as an agent
    // does before publishing.
    auto make = [&](size_t i) {
      const std::string rid = prefix + std::to_string(i);
      const std::string agent = AgentName(i);
      Json req{{"request_id", rid},
               {"org_id", kOrg},
               {"agent_id", agent},
               {"session_id", "bench-session-" + std::to_string(i % kAgents)},
               {"tool", "echo"},
               {"args", {{"i", i}, {"text", "benchmark payload"}, {"sent_us", MonoMicros()}}}};
      Message m;
      m.topic = bus_.topics.requests();
      m.key = agent;
      m.value = req.dump();
      m.headers[kHeaderRequestId] = rid;
      m.headers[kHeaderSessionId] = req["session_id"].get<std::string>();
      if (signers_ != nullptr) {
        m.headers[kHeaderAuth] = SignRequest(signers_->at(agent), kOrg, agent, rid, m.value, NowMicros() / 1'000'000);
      }
      return m;
    };
    // Back to back (throughput): the agents' requests are made and signed
    // before the clock starts, for the pipeline and the relay alike, so the
    // figure is the system's, not the load generator's signing on the same
    // two cores. On a schedule (latency): made and signed at send time.
    std::vector<Message> ready;
    if (rate == 0) {
      ready.reserve(n);
      for (size_t i = 0; i < n; ++i) ready.push_back(make(i));
    }
    const int64_t t0 = MonoMicros();
    const auto start = Clock::now();
    for (size_t i = 0; i < n; ++i) {
      if (rate > 0) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(static_cast<double>(i) / rate)));
      }
      Message m = rate == 0 ? std::move(ready[i]) : make(i);
      Status s = producer_->Send(m);
      if (!s.ok()) {
        r.status = s;
        sending_failed.store(true);
        break;
      }
    }
    if (r.status.ok()) r.status = producer_->Flush(std::chrono::seconds(30));
    if (!r.status.ok()) sending_failed.store(true);
    reader.join();
    r.seconds = static_cast<double>(last_us.load() - t0) / 1e6;
    if (r.status.ok() && r.received < n) {
      r.status = Status::Error("E_BENCH", prefix + ": only " + std::to_string(r.received) + " of " +
                                              std::to_string(n) + " came back within " +
                                              std::to_string(timeout.count()) + " s");
    }
    if (r.status.ok() && r.not_completed > 0) {
      r.status = Status::Error("E_BENCH", prefix + ": " + std::to_string(r.not_completed) + " of " +
                                              std::to_string(n) + " results are not `completed`");
    }
    return r;
  }

 private:
  BusConfig bus_;
  const Signers* signers_ = nullptr;
  std::unique_ptr<Producer> producer_;
  std::unique_ptr<Consumer> consumer_;
};

// ------------------------------------------------------------------ the baseline

// The bare relay: requests -> decide -> execute -> results, three hops, each
// a consumer + transactional producer loop that does no processing. It
// batches exactly like StageRunner::Run/Publish: poll up to max_batch with
// the runner's poll timeout, then begin transaction, produce every message
// (same key, value and headers) to the next topic, send the consumed offsets
// to the transaction, commit.
class Relay {
 public:
  ~Relay() { Stop(); }

  Status Start(const BusConfig& bus, size_t max_batch) {
    const Topics& t = bus.topics;
    const std::vector<std::pair<std::string, std::string>> hops = {
        {t.requests(), t.decide()}, {t.decide(), t.execute()}, {t.execute(), t.results()}};
    for (size_t i = 0; i < hops.size(); ++i) {
      auto hop = std::make_unique<Hop>();
      hop->from = hops[i].first;
      hop->to = hops[i].second;
      BusConfig b = bus;
      b.client_id = "tollgate-relay-" + std::to_string(i);
      Status s = Producer::Open(b, "tollgate-relay-" + std::to_string(i), &hop->producer);
      if (!s.ok()) return s;
      s = Consumer::Open(b, "tollgate-relay-" + std::to_string(i), {hop->from}, &hop->consumer);
      if (!s.ok()) return s;
      hops_.push_back(std::move(hop));
    }
    for (auto& hop : hops_) {
      hop->thread = std::thread([this, h = hop.get(), max_batch] { Loop(*h, max_batch); });
    }
    return Status::Ok();
  }

  void Stop() {
    stop_.store(true);
    for (auto& hop : hops_) {
      if (hop->thread.joinable()) hop->thread.join();
      if (hop->consumer) hop->consumer->Close();
    }
  }
  uint64_t retries() const { return retries_.load(); }

 private:
  struct Hop {
    std::string from, to;
    std::unique_ptr<Consumer> consumer;
    std::unique_ptr<Producer> producer;
    std::thread thread;
  };

  void Loop(Hop& h, size_t max_batch) {
    // As the stage runner: a batch's transaction commits on `publisher`
    // while the next batch is read; it is handed over once the previous
    // one committed.
    SerialWorker publisher;
    std::vector<Message> batch;
    while (!stop_.load()) {
      batch.clear();
      h.consumer->Poll(max_batch, std::chrono::milliseconds(50), &batch);  // RunnerOptions::poll_timeout
      std::optional<Status> prev = publisher.Collect(/*wait=*/!batch.empty());
      if (prev.has_value() && !prev->ok()) {
        ++retries_;
        std::cerr << "[bench pipeline] relay " << h.from << ": batch failed, retrying: " << prev->ToString() << "\n";
        h.consumer->RewindToCommitted();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      if (batch.empty()) continue;
      std::vector<Message> outs;
      outs.reserve(batch.size());
      OffsetMap next;
      for (const Message& in : batch) {
        Message out = in;
        out.topic = h.to;
        out.partition = -1;
        next[{in.topic, in.partition}] = in.offset + 1;
        outs.push_back(std::move(out));
      }
      publisher.Hand([&h, outs = std::move(outs), next = std::move(next)] {
        Status s = h.producer->BeginTransaction();
        for (size_t i = 0; s.ok() && i < outs.size(); ++i) s = h.producer->Send(outs[i]);
        if (s.ok()) s = h.producer->SendOffsets(*h.consumer, next, kTxnTimeout);
        if (s.ok()) s = h.producer->CommitTransaction(kTxnTimeout);
        if (!s.ok()) h.producer->AbortTransaction(kTxnTimeout);
        return s;
      });
    }
    publisher.Collect(/*wait=*/true);
  }

  std::vector<std::unique_ptr<Hop>> hops_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> retries_{0};
};

// ------------------------------------------------------------------ one target

struct Figures {
  Status status;
  double req_per_s = 0;
  double throughput_seconds = 0;       // median over the rounds
  std::vector<double> rounds_req_per_s;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  size_t latency_samples = 0;
  Json stages;  // the pipeline's runner counters (where batch time goes)
};

struct Sizes {
  size_t warmup;
  size_t requests;
  size_t rounds;
  double rate;
  double seconds;
};

// One system under test: whatever moves bus.topics.requests() to
// bus.topics.results() (the relay or a pipeline), with the agent-side driver.
struct Target {
  std::string label;
  bool expect_status = false;  // results carry a status (the pipeline)
  const Signers* signers = nullptr;  // the pipeline's agents' keys
  BusConfig bus;
  Driver driver;
  Figures f;
  std::vector<double> seconds;  // of each throughput round
};

Status Warm(Target& t, const Sizes& z) {
  Status s = t.driver.Open(t.bus, "bench-agent-" + t.label, t.signers);
  if (!s.ok()) return s;
  Progress(t.label + ": warm-up (" + std::to_string(z.warmup) + " requests)");
  return t.driver.Run(t.label + "-warm-", z.warmup, 0, std::chrono::seconds(90), t.expect_status).status;
}

Status ThroughputRound(Target& t, const Sizes& z, size_t round) {
  const auto timeout = std::chrono::seconds(120 + static_cast<int64_t>(z.requests / 50));
  Progress(t.label + ": throughput round " + std::to_string(round + 1) + "/" + std::to_string(z.rounds) + ", " +
           std::to_string(z.requests) + " requests back to back");
  PhaseResult r = t.driver.Run(t.label + "-thr" + std::to_string(round) + "-", z.requests, 0, timeout, t.expect_status);
  if (!r.status.ok()) return r.status;
  t.seconds.push_back(r.seconds);
  t.f.rounds_req_per_s.push_back(r.seconds > 0 ? static_cast<double>(z.requests) / r.seconds : 0);
  Progress(t.label + ": " + std::to_string(static_cast<int64_t>(t.f.rounds_req_per_s.back())) + " req/s");
  return Status::Ok();
}

Status Latency(Target& t, const Sizes& z) {
  t.f.throughput_seconds = Percentile(t.seconds, 0.5);
  t.f.req_per_s = t.f.throughput_seconds > 0 ? static_cast<double>(z.requests) / t.f.throughput_seconds : 0;
  const size_t n = std::max<size_t>(1, static_cast<size_t>(z.rate * z.seconds));
  Progress(t.label + ": latency, " + std::to_string(n) + " requests at " +
           std::to_string(static_cast<int64_t>(z.rate)) + " req/s");
  const auto timeout = std::chrono::seconds(60 + static_cast<int64_t>(z.seconds));
  PhaseResult l = t.driver.Run(t.label + "-lat-", n, z.rate, timeout, t.expect_status);
  if (!l.status.ok()) return l.status;
  t.f.latency_samples = l.latencies_ms.size();
  t.f.p50_ms = Percentile(l.latencies_ms, 0.50);
  t.f.p99_ms = Percentile(l.latencies_ms, 0.99);
  t.f.max_ms = Percentile(l.latencies_ms, 1.0);
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s: p50 %.2f ms, p99 %.2f ms", t.label.c_str(), t.f.p50_ms, t.f.p99_ms);
  Progress(buf);
  return Status::Ok();
}

// Warm-up (every consumer group joined, every producer connected), the
// throughput rounds, then the latency test. One system at a time, each on
// its own broker, started before and stopped after: an idle system's
// consumers still poll, and would take CPU from the one measured.
Status MeasureOne(Target& t, const Sizes& z) {
  Status s = Warm(t, z);
  for (size_t round = 0; s.ok() && round < z.rounds; ++round) s = ThroughputRound(t, z, round);
  if (s.ok()) s = Latency(t, z);
  if (!s.ok()) return Status::Error(s.code(), t.label + ": " + s.message());
  return Status::Ok();
}

// The relay's own embedded broker, topics and hops.
struct RelaySystem {
  std::unique_ptr<EmbeddedBroker> broker;
  Relay relay;
  Status Start(const PipelineBenchOptions& o, BusConfig* bus) {
    Status s = EmbeddedBroker::Start(1, &broker);
    if (!s.ok()) return s;
    bus->brokers = broker->bootstrap();
    bus->partitions = o.partitions;
    for (const auto& t : {bus->topics.requests(), bus->topics.decide(), bus->topics.execute(), bus->topics.results()}) {
      s = broker->CreateTopic(t, o.partitions);
      if (!s.ok()) return s;
    }
    return relay.Start(*bus, o.max_batch);
  }
};

Status StartPipeline(const PipelineBenchOptions& o, const std::string& dir, Durability durability,
                     const std::string& label, std::unique_ptr<Pipeline>* p, BusConfig* bus) {
  PipelineOptions po;
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
Status RegisterAgents(Pipeline& p, Signers* out) {
  for (int a = 0; a < kAgents; ++a) {
    Credential c;
    Status s = NewSigningKey("agent_key", kOrg, AgentName(a), {"agent"}, "bench", &c, &(*out)[AgentName(a)]);
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
  const int64_t now_s = NowMicros() / 1'000'000;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string rid = "verify-" + std::to_string(i), agent = AgentName(i);
    Json req{{"request_id", rid}, {"org_id", kOrg}, {"agent_id", agent},
             {"session_id", "bench-session-" + std::to_string(i % kAgents)}, {"tool", "echo"},
             {"args", {{"i", i}, {"text", "benchmark payload"}, {"sent_us", MonoMicros()}}}};
    msgs[i].topic = "verify";
    msgs[i].value = req.dump();
    msgs[i].headers[kHeaderAuth] = SignRequest(signers.at(agent), kOrg, agent, rid, msgs[i].value, now_s);
  }
  const auto t1 = Clock::now();
  size_t ok = 0;
  SignedBy who;
  for (const Message& m : msgs) ok += AuthenticateRequest(m, p.credentials(), NowMicros(), kDefaultMaxSkewUs, &who);
  const auto t2 = Clock::now();
  const double n = static_cast<double>(msgs.size());
  *sign_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  return ok == msgs.size() ? std::chrono::duration<double, std::micro>(t2 - t1).count() / n : 0.0;
}

Json FiguresJson(const Figures& f) {
  Json j = {{"req_per_s", f.req_per_s},          {"throughput_seconds", f.throughput_seconds},
            {"rounds_req_per_s", f.rounds_req_per_s},
            {"p50_ms", f.p50_ms},                {"p99_ms", f.p99_ms},
            {"max_ms", f.max_ms},                {"latency_samples", f.latency_samples}};
  if (!f.stages.is_null()) j["stages"] = f.stages;
  return j;
}

}  // namespace

Json RunPipelineBench(const PipelineBenchOptions& options) {
  Sizes z{20, options.requests, options.rounds, options.rate, options.seconds};
  if (options.quick) {
    z = Sizes{10, std::min<size_t>(options.requests, 500), 1, std::min(options.rate, 100.0),
              std::min(options.seconds, 2.0)};
  }
  if (z.requests == 0 || z.rounds == 0 || z.rate <= 0 || z.seconds <= 0 || options.partitions <= 0 || options.max_batch == 0) {
    return Json{{"error", "--requests, --rounds, --rate, --seconds, partitions and max_batch must be positive"}};
  }
  ScratchDir dir(options.dir);
  if (dir.path().empty()) return Json{{"error", "cannot create a scratch directory under " + options.dir}};
  Progress("scratch directory " + dir.path());

  Figures relay, buffered, sync;
  uint64_t relay_retries = 0, buffered_retries = 0, sync_retries = 0;
  {
    RelaySystem system;  // declared first: the driver closes while its broker runs
    Target t;
    t.label = "relay";
    Status s = system.Start(options, &t.bus);
    if (s.ok()) s = MeasureOne(t, z);
    if (!s.ok()) return Json{{"error", "relay: " + s.ToString()}};
    system.relay.Stop();
    relay_retries = system.relay.retries();
    relay = t.f;
  }
  double verify_us = 0, sign_us = 0;
  auto measure_pipeline = [&](Durability durability, const std::string& label, Figures* f, uint64_t* retries) {
    std::unique_ptr<Pipeline> p;
    Signers signers;
    Target t;
    t.label = label;
    t.expect_status = true;
    t.signers = &signers;
    Status s = StartPipeline(options, dir.path(), durability, label, &p, &t.bus);
    if (s.ok()) s = RegisterAgents(*p, &signers);
    if (s.ok()) s = MeasureOne(t, z);
    if (!s.ok()) return s;
    *retries = p->retries();
    t.f.stages = p->stats();
    *f = t.f;
    if (durability == Durability::kBuffered) {
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
      "the pipeline's requests are signed by their agent's key (ingest verifies each); throughput rounds make and "
      "sign them before the clock starts, latency rounds at send time; the relay's are not signed";
  out["relay_batching"] =
      "per hop: poll up to max_batch (50 ms poll timeout), then begin txn, produce, send offsets, commit on a "
      "publisher thread while the next batch is polled — as StageRunner";
  out["detail"] = {{"relay", FiguresJson(relay)}, {"pipeline_buffered", FiguresJson(buffered)}};
  if (options.sync) out["detail"]["pipeline_sync"] = FiguresJson(sync);
  out["retries"] = {{"relay", relay_retries}, {"pipeline_buffered", buffered_retries}, {"pipeline_sync", sync_retries}};
  out["goals"] = {{"throughput_vs_relay", ">= 0.3"}, {"p99_vs_relay", "<= 3"}};
  out["met"] = {{"throughput_vs_relay", throughput_vs_relay >= 0.3}, {"p99_vs_relay", p99_vs_relay > 0 && p99_vs_relay <= 3}};
  out["quick"] = options.quick;
  return out;
}

}  // namespace tollgate::bench
