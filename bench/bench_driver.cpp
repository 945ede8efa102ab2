#include "bench/bench_driver.h"

#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <unordered_set>

#include "core/auth.h"
#include "core/messages.h"
#include "runtime/serial_worker.h"

namespace tollgate::bench {
namespace {

using OffsetMap = std::map<std::pair<std::string, int32_t>, int64_t>;
constexpr std::chrono::milliseconds kTxnTimeout{30000};

// The integer after `"name":` in compact JSON, or -1. A string search, not a
// parse: the reader's cost per message must stay small and identical for the
// pipeline and the relay.
int64_t FindInt(const std::string& text, const std::string& name) {
  const std::string needle = "\"" + name + "\":";
  size_t at = text.find(needle);
  if (at == std::string::npos) return -1;
  return std::strtoll(text.c_str() + at + needle.size(), nullptr, 10);
}

// User + system CPU of every thread of this process so far, in seconds.
double ProcessCpuSeconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

}  // namespace

std::vector<std::string> BenchAgents(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back("bench-agent-" + std::to_string(i));
  return out;
}

Message MakeRequest(const Workload& w, const std::string& topic, const std::string& rid, size_t i,
                    const Signers* signers) {
  const size_t k = i % w.agents.size();
  const std::string& agent = w.agents[k];
  Json args = w.args;
  args["i"] = i;
  args["sent_us"] = MonoMicros();
  Json req{{"request_id", rid}, {"org_id", w.org},
           {"agent_id", agent}, {"session_id", "bench-session-" + std::to_string(k)},
           {"tool", w.tool},    {"args", std::move(args)}};
  Message m;
  m.topic = topic;
  m.key = agent;
  m.value = req.dump();
  m.headers[kHeaderRequestId] = rid;
  m.headers[kHeaderSessionId] = req["session_id"].get<std::string>();
  if (signers != nullptr) {
    m.headers[kHeaderAuth] =
        SignRequest(signers->at(agent), w.org, agent, rid, m.value, NowMicros() / 1'000'000);
  }
  return m;
}

int64_t MonoMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

void Progress(const std::string& line) { std::cerr << "[bench pipeline] " << line << std::endl; }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

ScratchDir::ScratchDir(const std::string& parent) {
  std::error_code ec;
  std::filesystem::path base =
      parent.empty() ? std::filesystem::temp_directory_path(ec) : std::filesystem::path(parent);
  std::filesystem::create_directories(base, ec);
  std::string tmpl = (base / "tollgate-pbench-XXXXXX").string();
  if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  if (path_.empty() || keep_) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

// ------------------------------------------------------------------ the agent side

Status Driver::Open(const BusConfig& bus, const std::string& group, const Signers* signers,
                    Workload workload) {
  bus_ = bus;
  signers_ = signers;
  workload_ = std::move(workload);
  if (workload_.agents.empty()) return Status::Error("E_BENCH", "a workload needs at least one agent");
  Status s = Producer::Open(bus_, "", &producer_);
  if (!s.ok()) return s;
  // The workload's org's results topic (made here if no result made it yet).
  const std::string topic = bus_.topics.results_for(workload_.org);
  s = EnsureTopic(bus_, topic, std::chrono::seconds(10));
  if (!s.ok()) return s;
  return Consumer::Open(bus_, group, {topic}, &consumer_);
}

Driver::~Driver() {
  if (consumer_) consumer_->Close();
}

PhaseResult Driver::Run(const std::string& prefix, size_t n, double rate, std::chrono::seconds timeout,
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
        if (expect_status && m.value.find("\"status\":\"completed\"") == std::string::npos &&
            r.not_completed++ == 0) {
          Json v;
          r.first_not_completed =
              ParseJson(m.value, &v).ok() && v.is_object()
                  ? Json{{"status", v.value("status", Json())}, {"result", v.value("result", Json())}}.dump()
                  : m.value.substr(0, 600);
        }
        last_us.store(now);
      }
    }
    r.received = seen.size();
  });

  // Back to back (throughput): the agents' requests are made and signed
  // before the clock starts, for the pipeline and the relay alike, so the
  // figure is the system's, not the load generator's signing on the same
  // two cores. On a schedule (latency): made and signed at send time.
  auto make = [&](size_t i) {
    return MakeRequest(workload_, bus_.topics.requests(), prefix + std::to_string(i), i, signers_);
  };
  std::vector<Message> ready;
  if (rate == 0) {
    ready.reserve(n);
    for (size_t i = 0; i < n; ++i) ready.push_back(make(i));
  }
  const int64_t t0 = MonoMicros();
  const double cpu0 = ProcessCpuSeconds();
  const auto start = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    if (rate > 0) {
      std::this_thread::sleep_until(start +
                                    std::chrono::duration_cast<Clock::duration>(
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
  r.cpu_seconds = ProcessCpuSeconds() - cpu0;
  r.seconds = static_cast<double>(last_us.load() - t0) / 1e6;
  if (r.status.ok() && r.received < n) {
    r.status = Status::Error("E_BENCH", prefix + ": only " + std::to_string(r.received) + " of " +
                                            std::to_string(n) + " came back within " +
                                            std::to_string(timeout.count()) + " s");
  }
  if (r.status.ok() && r.not_completed > 0) {
    r.status = Status::Error("E_BENCH", prefix + ": " + std::to_string(r.not_completed) + " of " +
                                            std::to_string(n) + " results are not `completed`, e.g. " +
                                            r.first_not_completed);
  }
  return r;
}

// ------------------------------------------------------------------ the baseline

Status Relay::Start(const BusConfig& bus_in, size_t max_batch, bool minimal,
                    const CredentialRegistry* verify) {
  if (minimal && verify != nullptr) return Status::Error("E_BENCH", "the minimal relay verifies nothing");
  registry_ = verify;
  BusConfig bus = bus_in;
  bus.latency_first = bus.latency_first || minimal;
  const Topics& t = bus.topics;
  const std::vector<std::pair<std::string, std::string>> hops = {
      {t.requests(), t.decide()}, {t.decide(), t.execute()}, {t.execute(), t.results()}};
  for (size_t i = 0; i < hops.size(); ++i) {
    auto hop = std::make_unique<Hop>();
    hop->from = hops[i].first;
    hop->to = hops[i].second;
    hop->verify = verify != nullptr && i == 0;
    BusConfig b = bus;
    b.client_id = "tollgate-relay-" + std::to_string(i);
    Status s = Producer::Open(b, minimal ? "" : "tollgate-relay-" + std::to_string(i), &hop->producer);
    if (!s.ok()) return s;
    s = Consumer::Open(b, "tollgate-relay-" + std::to_string(i), {hop->from}, &hop->consumer);
    if (!s.ok()) return s;
    hops_.push_back(std::move(hop));
  }
  for (auto& hop : hops_) {
    hop->thread = std::thread([this, h = hop.get(), max_batch, minimal] {
      if (minimal) {
        MinimalLoop(*h, max_batch);
      } else {
        Loop(*h, max_batch);
      }
    });
  }
  return Status::Ok();
}

void Relay::Stop() {
  stop_.store(true);
  for (auto& hop : hops_) {
    if (hop->thread.joinable()) hop->thread.join();
    if (hop->consumer) hop->consumer->Close();
  }
}

void Relay::Loop(Hop& h, size_t max_batch) {
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
      std::cerr << "[bench pipeline] relay " << h.from << ": batch failed, retrying: " << prev->ToString()
                << "\n";
      h.consumer->RewindToCommitted();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (batch.empty()) continue;
    std::vector<Message> outs;
    outs.reserve(batch.size());
    OffsetMap next;
    SignedBy who;
    for (const Message& in : batch) {
      // Ingest's check, on the polling thread as in the stage runner.
      if (h.verify && !AuthenticateRequest(in, *registry_, NowMicros(), kDefaultMaxSkewUs, &who)) {
        ++unverified_;
      }
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

void Relay::MinimalLoop(Hop& h, size_t max_batch) {
  std::vector<Message> batch;
  while (!stop_.load()) {
    batch.clear();
    h.consumer->Poll(max_batch, std::chrono::milliseconds(50), &batch);
    if (batch.empty()) continue;
    OffsetMap next;
    for (Message& m : batch) {
      next[{m.topic, m.partition}] = m.offset + 1;
      m.topic = h.to;
      m.partition = -1;
      if (!h.producer->Send(m).ok()) ++retries_;
    }
    h.consumer->Commit(next, /*async=*/true);
  }
  h.producer->Flush(std::chrono::seconds(5));
}

Status RelaySystem::Start(int partitions, size_t max_batch, BusConfig* bus, bool minimal,
                          const CredentialRegistry* verify) {
  Status s = EmbeddedBroker::Start(1, &broker);
  if (!s.ok()) return s;
  bus->brokers = broker->bootstrap();
  bus->partitions = partitions;
  // The relay forwards to the one results topic; its readers read that.
  bus->topics.shared_results = true;
  for (const auto& t :
       {bus->topics.requests(), bus->topics.decide(), bus->topics.execute(), bus->topics.results()}) {
    s = broker->CreateTopic(t, partitions);
    if (!s.ok()) return s;
  }
  return relay.Start(*bus, max_batch, minimal, verify);
}

// ------------------------------------------------------------------ one target

Status Warm(Target& t, const Sizes& z) {
  Status s = t.driver.Open(t.bus, "bench-agent-" + t.label, t.signers, t.workload);
  if (!s.ok()) return s;
  Progress(t.label + ": warm-up (" + std::to_string(z.warmup) + " requests)");
  return t.driver.Run(t.label + "-warm-", z.warmup, 0, std::chrono::seconds(90), t.expect_status).status;
}

Status ThroughputRounds(Target& t, const Sizes& z) {
  const auto timeout = std::chrono::seconds(120 + static_cast<int64_t>(z.requests / 50));
  for (size_t round = 0; round < z.rounds; ++round) {
    Progress(t.label + ": throughput round " + std::to_string(round + 1) + "/" + std::to_string(z.rounds) +
             ", " + std::to_string(z.requests) + " requests back to back");
    PhaseResult r =
        t.driver.Run(t.label + "-thr" + std::to_string(round) + "-", z.requests, 0, timeout, t.expect_status);
    if (!r.status.ok()) return r.status;
    t.seconds.push_back(r.seconds);
    t.cpu_seconds.push_back(r.cpu_seconds);
    t.f.rounds_req_per_s.push_back(r.seconds > 0 ? static_cast<double>(z.requests) / r.seconds : 0);
    Progress(t.label + ": " + std::to_string(static_cast<int64_t>(t.f.rounds_req_per_s.back())) + " req/s");
  }
  t.f.throughput_seconds = Percentile(t.seconds, 0.5);
  t.f.req_per_s = t.f.throughput_seconds > 0 ? static_cast<double>(z.requests) / t.f.throughput_seconds : 0;
  return Status::Ok();
}

Status Latency(Target& t, const Sizes& z) {
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

Status MeasureOne(Target& t, const Sizes& z) {
  Status s = Warm(t, z);
  if (s.ok()) s = ThroughputRounds(t, z);
  if (s.ok()) {
    double cpu = 0;
    for (double c : t.cpu_seconds) cpu += c;
    t.f.cpu_us_per_request = cpu * 1e6 / static_cast<double>(z.requests * z.rounds);
  }
  if (s.ok()) s = Latency(t, z);
  if (!s.ok()) return Status::Error(s.code(), t.label + ": " + s.message());
  return Status::Ok();
}

Json FiguresJson(const Figures& f) {
  Json j = {{"req_per_s", f.req_per_s},
            {"throughput_seconds", f.throughput_seconds},
            {"rounds_req_per_s", f.rounds_req_per_s}};
  if (f.latency_samples > 0) {
    j["p50_ms"] = f.p50_ms;
    j["p99_ms"] = f.p99_ms;
    j["max_ms"] = f.max_ms;
    j["latency_samples"] = f.latency_samples;
  }
  if (f.cpu_busy >= 0) j["cpu_busy"] = f.cpu_busy;
  if (f.cpu_us_per_request >= 0) j["cpu_us_per_request"] = f.cpu_us_per_request;
  if (!f.stages.is_null()) j["stages"] = f.stages;
  return j;
}

}  // namespace tollgate::bench
