// What the pipeline benchmarks share (bench/pipeline_bench.h, embedded;
// bench/distributed_bench.h, one process per stage): the agent-side driver
// that publishes requests and reads their results, the bare relay they are
// measured against, and the measurement of one system under test (warm-up,
// throughput rounds, latency). Progress goes to stderr.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/canonical_json.h"
#include "core/credentials.h"
#include "core/jwt.h"
#include "core/status.h"
#include "runtime/kafka_bus.h"

namespace tollgate::bench {

using Clock = std::chrono::steady_clock;

// Agent id -> its signer. The pipeline only takes signed requests
// (docs/trust.md); the relay, which checks nothing, gets them unsigned.
using Signers = std::map<std::string, JwtSigner>;

inline constexpr const char* kBenchOrg = "bench-org";

// "bench-agent-0" .. "bench-agent-(n-1)".
std::vector<std::string> BenchAgents(size_t n);

// What the driver sends. Request i is agents[i % agents.size()]'s (its
// message key, so the agents decide which partitions carry traffic), in
// session "bench-session-(i % agents.size())", calling `tool` with `args`
// plus "i" and "sent_us" (its send time, steady clock).
struct Workload {
  std::string org = kBenchOrg;
  std::vector<std::string> agents = BenchAgents(8);
  std::string tool = "echo";
  Json args = {{"text", "benchmark payload"}};
};

// Request `i` with id `rid` on `topic` as its agent publishes it; signed by
// its agent's key when `signers` is given.
Message MakeRequest(const Workload& w, const std::string& topic, const std::string& rid, size_t i,
                    const Signers* signers);

int64_t MonoMicros();
void Progress(const std::string& line);  // "[bench pipeline] line" on stderr
double Percentile(std::vector<double> v, double p);

// A scratch directory: a fresh mkdtemp child of `parent` (or of the system
// temp dir), removed with everything in it on destruction unless kept. Only
// what this run created is ever removed.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& parent);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }
  // Leaves it in place (for a failed run's logs).
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

// ------------------------------------------------------------------ the agent side

struct PhaseResult {
  Status status;
  double seconds = 0;               // first publish -> last result read
  size_t received = 0;              // distinct results of this phase
  size_t not_completed = 0;         // results whose status is not "completed" (pipeline only)
  std::string first_not_completed;  // the first of them (its start), for the error
  std::vector<double> latencies_ms;
  // This process's CPU time (user + system, every thread) over `seconds`:
  // with the system under test in this process, the system, the embedded
  // broker and the driver (the making and signing of back-to-back requests
  // happens before, and is not in it).
  double cpu_seconds = 0;
};

// Publishes requests on `requests` and reads them back (as results, or as
// relayed requests) from `results`, the way an agent does: one idempotent
// producer, one read_committed consumer.
class Driver {
 public:
  // `signers`: sign every request as its agent (the pipeline); null: send
  // them unsigned (the relay).
  Status Open(const BusConfig& bus, const std::string& group, const Signers* signers = nullptr,
              Workload workload = {});
  ~Driver();

  // Publishes `n` requests with ids `prefix`0.. — back to back when
  // rate == 0 (made and signed before the clock starts), else `rate` per
  // second on a fixed schedule (made and signed at send time) — and reads
  // until all `n` came back or `timeout` passed. `expect_status`: every
  // result must be "completed".
  PhaseResult Run(const std::string& prefix, size_t n, double rate, std::chrono::seconds timeout,
                  bool expect_status);

 private:
  BusConfig bus_;
  const Signers* signers_ = nullptr;
  Workload workload_;
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
  // `minimal`: the latency floor instead (no transactions, offsets
  // committed asynchronously, BusConfig::latency_first): a message is
  // forwarded the moment it is read. `verify` (not with `minimal`): the
  // verifying relay, whose first hop checks each request's signature
  // against this registry as ingest does (AuthenticateRequest) before
  // forwarding it; it must outlive the relay.
  Status Start(const BusConfig& bus, size_t max_batch, bool minimal = false,
               const CredentialRegistry* verify = nullptr);
  void Stop();
  uint64_t retries() const { return retries_.load(); }
  // Requests whose signature did not verify (forwarded all the same, as a
  // gate forwards its refusal; a bench run with any is void).
  uint64_t unverified() const { return unverified_.load(); }

 private:
  struct Hop {
    std::string from, to;
    std::unique_ptr<Consumer> consumer;
    std::unique_ptr<Producer> producer;
    std::thread thread;
    bool verify = false;  // the first hop of the verifying relay
  };
  void Loop(Hop& h, size_t max_batch);
  void MinimalLoop(Hop& h, size_t max_batch);

  std::vector<std::unique_ptr<Hop>> hops_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> unverified_{0};
  const CredentialRegistry* registry_ = nullptr;
};

// The relay's own embedded broker, topics (`partitions` each) and hops.
struct RelaySystem {
  std::unique_ptr<EmbeddedBroker> broker;
  Relay relay;
  Status Start(int partitions, size_t max_batch, BusConfig* bus, bool minimal = false,
               const CredentialRegistry* verify = nullptr);
};

// ------------------------------------------------------------------ one target

struct Figures {
  Status status;
  double req_per_s = 0;
  double throughput_seconds = 0;  // median over the rounds
  std::vector<double> rounds_req_per_s;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  size_t latency_samples = 0;
  Json stages;           // the pipeline's runner counters (where batch time goes)
  double cpu_busy = -1;  // share of the machine's cores busy in the rounds (-1: not measured)
  // This process's CPU per request over the throughput rounds (MeasureOne;
  // -1: not measured): the system under test, the broker and the driver.
  double cpu_us_per_request = -1;
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
// `label` prefixes the request ids: unique per measurement on one bus.
struct Target {
  std::string label;
  bool expect_status = false;        // results carry a status (the pipeline)
  const Signers* signers = nullptr;  // the pipeline's agents' keys
  Workload workload;
  BusConfig bus;
  Driver driver;
  Figures f;
  std::vector<double> seconds;      // of each throughput round
  std::vector<double> cpu_seconds;  // this process's CPU in each throughput round
};

// Opens the driver, then one warm-up round of z.warmup requests (every
// consumer group joined, every producer connected).
Status Warm(Target& t, const Sizes& z);
// z.rounds rounds of z.requests back to back; the median round is t.f's.
Status ThroughputRounds(Target& t, const Sizes& z);
// z.rate requests per second for z.seconds: t.f's p50, p99 and max.
Status Latency(Target& t, const Sizes& z);
// Warm-up, the throughput rounds (t.f.cpu_us_per_request: this process's
// CPU over them per request), then the latency test. One system at a time,
// each on its own broker, started before and stopped after: an idle
// system's consumers still poll, and would take CPU from the one measured.
Status MeasureOne(Target& t, const Sizes& z);

// req/s, seconds and each round's req/s; p50/p99/max when latency was
// measured, cpu_busy and cpu_us_per_request when they were.
Json FiguresJson(const Figures& f);

}  // namespace tollgate::bench
