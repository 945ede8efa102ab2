#include "bench/distributed_bench.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "bench/bench_driver.h"
#include "bench/child_process.h"
#include "core/credentials.h"
#include "core/jwt.h"

namespace tollgate::bench {
namespace {

using std::chrono::seconds;
constexpr int kSleepMs = 20;                      // what cli:sleep waits
constexpr size_t kMaxRequestsBeforeAJoin = 1200;  // see RunDistributedBench
// Idle after a process joins the execute group: its members learn of the
// rebalance by heartbeat (every second) and rejoin.
constexpr std::chrono::seconds kRebalanceQuiet{3};

// Echo and cli:sleep run without asking, under no budget. The CLI tools'
// process limit is raised from 64: it is counted per agent (docs/sandbox.md),
// and on some hosts (gVisor) two sandboxes of one agent starting at once
// under 64 fail with EAGAIN, which 8 workers per process make common.
constexpr const char* kPolicy = R"(version: 1
mode: ask
approval_threshold: HIGH
allow: [builtin:echo, "cli:sleep"]
tools:
  echo: {danger: SAFE, read_only: true}
  "cli:sleep": {danger: LOW, read_only: true}
execute:
  cli_limits: {processes: 1024}
)";

// A tool that waits on I/O: an empty result, then a timer the shell execs
// (no fork: a call is the sandbox, the shell and the wait).
constexpr const char* kSleepTool = "#!/bin/sh\necho '{}'\nexec sleep 0.02\n";

Status WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out || chmod(path.c_str(), mode) != 0) return Status::Error("E_BENCH", "cannot write " + path);
  return Status::Ok();
}

// `per_partition` agents for each of `partitions` partitions, in the order
// "bench-agent-0", "bench-agent-1", ... skipping the names whose partition is
// full: a request stream that cycles through them loads every partition alike.
std::vector<std::string> BalancedAgents(int partitions, size_t per_partition) {
  std::vector<size_t> count(static_cast<size_t>(partitions), 0);
  std::vector<std::string> out;
  for (size_t i = 0; out.size() < per_partition * count.size(); ++i) {
    std::string name = "bench-agent-" + std::to_string(i);
    size_t& n = count[static_cast<size_t>(PartitionOfKey(name, partitions))];
    if (n < per_partition) {
      ++n;
      out.push_back(std::move(name));
    }
  }
  return out;
}

// The machine's CPU time so far, in ticks (/proc/stat's first line).
struct CpuTicks {
  uint64_t busy = 0, total = 0;
};
CpuTicks ReadCpuTicks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t v[8] = {};  // user nice system idle iowait irq softirq steal
  in >> cpu;
  for (uint64_t& x : v) in >> x;
  CpuTicks t;
  for (uint64_t x : v) t.total += x;
  t.busy = t.total - v[3] - v[4];
  return t;
}

// The throughput rounds, with the share of every core of the machine that
// was busy meanwhile (this run's processes and anything else running).
Status TimedRounds(Target& t, const Sizes& z) {
  const CpuTicks a = ReadCpuTicks();
  Status s = ThroughputRounds(t, z);
  const CpuTicks b = ReadCpuTicks();
  if (b.total > a.total)
    t.f.cpu_busy = static_cast<double>(b.busy - a.busy) / static_cast<double>(b.total - a.total);
  return s;
}

// The processes of one distributed deployment, each with its own data
// directory under the scratch dir and its output in DIR/logs. Destroying it
// kills them all (the stages first, then the broker).
class Deployment {
 public:
  Deployment(const DistributedBenchOptions& o, const ScratchDir& dir, std::string binary)
      : o_(o), dir_(dir), bin_(std::move(binary)) {}

  // The policy and the tools dir, the broker, the keeper, the agents'
  // keys (`agents add`, loaded into *signers), ingest and decide.
  Status Start(const Workload& w, Signers* signers) {
    std::error_code ec;
    std::filesystem::create_directories(dir_.sub("logs"), ec);
    std::filesystem::create_directories(dir_.sub("tools/sleep"), ec);
    Status s = WriteFile(dir_.sub("policy.yaml"), kPolicy, 0600);
    if (s.ok()) s = WriteFile(dir_.sub("tools/sleep/run"), kSleepTool, 0755);
    if (!s.ok()) return s;
    Progress("distributed: starting the broker (" + std::to_string(o_.partitions) + " partitions)");
    s = broker_.Start(
        {bin_, "broker", "--partitions", std::to_string(o_.partitions), "--data", dir_.sub("broker")},
        dir_.sub("logs/broker"));
    if (s.ok()) s = broker_.WaitForOutput("\n", seconds(60));
    if (!s.ok()) return Status::Error(s.code(), "broker: " + s.message());
    bus_.brokers = broker_.Out().substr(0, broker_.Out().find('\n'));
    bus_.partitions = o_.partitions;
    s = StartStage("audit", "keeper", {});
    if (s.ok()) s = RegisterAgents(w, signers);
    if (s.ok()) s = StartStage("ingest", "ingest", {});
    if (s.ok()) s = StartStage("decide", "decide", {});
    return s;
  }

  // `stage execute` as `instance`, running `workers` tools at once, with a
  // workspaces root of its own for this start (HasRun). An instance started
  // again restores its copy of the log from its data dir plus the topic's
  // tail since it stopped.
  Status StartExecute(const std::string& instance, size_t workers) {
    const std::string ws = dir_.sub("ws-" + instance + "-" + std::to_string(++starts_));
    workspaces_[instance] = ws;
    return StartStage(
        "execute", instance,
        {"--tools-dir", dir_.sub("tools"), "--workspaces", ws, "--workers", std::to_string(workers)});
  }
  // SIGTERM (it drains and leaves the group at once), SIGKILL if it hangs.
  void StopExecute(const std::string& instance) {
    if (auto it = procs_.find(instance); it != procs_.end()) it->second->Stop(seconds(30));
    procs_.erase(instance);
  }
  // Whether execute `instance` has run a tool since it started: an agent's
  // workspace exists under its workspaces root.
  bool HasRun(const std::string& instance) const {
    auto ws = workspaces_.find(instance);
    if (ws == workspaces_.end()) return false;
    std::error_code ec;
    std::filesystem::directory_iterator it(ws->second + "/" + kBenchOrg, ec);
    return !ec && it != std::filesystem::directory_iterator();
  }
  const BusConfig& bus() const { return bus_; }

 private:
  Status StartStage(const std::string& stage, const std::string& instance,
                    const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {bin_,
                                     "stage",
                                     stage,
                                     "--brokers",
                                     bus_.brokers,
                                     "--data",
                                     dir_.sub(instance),
                                     "--policy",
                                     dir_.sub("policy.yaml"),
                                     "--durability",
                                     o_.durability};
    // The keeper makes the deployment's events key; every other process reads it.
    if (stage != "audit") argv.insert(argv.end(), {"--deployment-key", dir_.sub("keeper/keys/events.key")});
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = std::make_unique<ChildProcess>();
    Status s = p->Start(argv, dir_.sub("logs/" + instance));
    if (s.ok()) s = p->WaitForOutput("is up", seconds(90));
    procs_[instance] = std::move(p);
    if (!s.ok()) return Status::Error(s.code(), instance + ": " + s.message());
    Progress("distributed: " + instance + " is up");
    return Status::Ok();
  }

  // Each agent's key made and registered through the keeper (`tollgate
  // agents add --data KEEPER`), then loaded from the file it wrote, as
  // `tollgate submit` does.
  Status RegisterAgents(const Workload& w, Signers* signers) {
    const std::string keeper = dir_.sub("keeper");
    for (const std::string& agent : w.agents) {
      ChildProcess add;
      Status s = add.Start({bin_, "agents", "add", "--data", keeper, "--token-file", keeper + "/admin.token",
                            "--org", w.org, "--agent", agent},
                           dir_.sub("logs/agents-add-" + agent));
      if (s.ok()) s = add.WaitForExit(seconds(60));
      std::string pem;
      if (s.ok()) s = ReadPrivateKeyFile(keeper + "/keys/" + w.org + "/" + agent + ".pem", &pem);
      if (s.ok()) s = SignerForKey(pem, &(*signers)[agent]);
      if (!s.ok()) return Status::Error(s.code(), "agents add " + agent + ": " + s.message());
    }
    return Status::Ok();
  }

  const DistributedBenchOptions& o_;
  const ScratchDir& dir_;
  const std::string bin_;
  BusConfig bus_;
  ChildProcess broker_;  // declared first: destroyed after the stages
  std::map<std::string, std::unique_ptr<ChildProcess>> procs_;
  std::map<std::string, std::string> workspaces_;  // execute instance -> its workspaces root
  int starts_ = 0;
};

// Requests/s of t's workload (its driver open) with execute-1 running
// `workers` tools at once (*one), then with execute-2 as well (*two); both
// are stopped after. They start afresh each time: an instance started again
// restores its copy of the log from disk plus the events since it stopped,
// so the broker need not hold the events topic from its start.
//
// Membership changes only while the pipeline is idle: a member that has a
// transaction open when its group rebalances aborts it, and on the embedded
// broker read_committed readers stop at aborted data (README, "Delivery
// semantics"). execute-2 joins with nothing in flight, and kRebalanceQuiet
// passes before requests flow again.
Status MeasureScale(Deployment& d, Target& t, const Sizes& z, size_t workers, const std::string& tag,
                    Figures* one, Figures* two) {
  auto warm = [&](const std::string& what) {
    Progress(t.label + ": " + what + " (" + std::to_string(z.warmup) + " requests)");
    return t.driver.Run(t.label + "-" + what + "-", z.warmup, 0, seconds(90), t.expect_status).status;
  };
  auto measure = [&](const std::string& label, Figures* f) {
    t.label = label;
    t.f = Figures{};
    t.seconds.clear();
    Status s = warm("warm");
    if (s.ok()) s = TimedRounds(t, z);
    *f = t.f;
    return s.ok() ? s : Status::Error(s.code(), label + ": " + s.message());
  };
  Status s = d.StartExecute("execute-1", workers);
  if (s.ok()) s = measure("sleep-" + tag + "-1x", one);
  if (s.ok()) s = d.StartExecute("execute-2", workers);
  if (s.ok()) std::this_thread::sleep_for(kRebalanceQuiet);
  // Then warm-up rounds until execute-2 has run calls (it holds its
  // partitions), and (in measure) one more with both at work.
  const auto deadline = Clock::now() + seconds(120);
  t.label = "sleep-" + tag + "-join";
  for (int round = 0; s.ok() && !d.HasRun("execute-2"); ++round) {
    if (Clock::now() > deadline)
      return Status::Error("E_BENCH", "execute-2 ran no call within 120 s of warm-up");
    s = warm("until-execute-2-takes-work-" + std::to_string(round));
  }
  if (s.ok()) s = measure("sleep-" + tag + "-2x", two);
  d.StopExecute("execute-2");
  d.StopExecute("execute-1");
  return s;
}

// What one run measured.
struct Results {
  Figures relay, dist;               // echo: the bare relay, the distributed pipeline
  Figures one, two;                  // cli:sleep, `workers` per execute process: one process, two
  Figures one_default, two_default;  // the same at `default_workers`
};

// The next multiple of `m` from `n` (every agent sends as many requests).
size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// The output: the ratios, the raw figures, the sizes, goals and notes.
Json Report(const DistributedBenchOptions& o, const Sizes& ze, const Sizes& zs,
            const std::vector<std::string>& agents, const Results& r) {
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  const double vs_relay = ratio(r.dist.req_per_s, r.relay.req_per_s);
  const double scale = ratio(r.two.req_per_s, r.one.req_per_s);
  const double scale_default = ratio(r.two_default.req_per_s, r.one_default.req_per_s);
  Json out;
  out["bench"] = "pipeline-distributed";
  out["distributed_throughput_vs_relay"] = vs_relay;
  out["execute_scale_2x"] = scale;
  out["execute_scale_2x_default_workers"] = scale_default;
  out["distributed_req_per_s"] = r.dist.req_per_s;
  out["relay_req_per_s"] = r.relay.req_per_s;
  out["sleep_req_per_s_1_execute"] = r.one.req_per_s;
  out["sleep_req_per_s_2_executes"] = r.two.req_per_s;
  out["sleep_default_workers_req_per_s_1_execute"] = r.one_default.req_per_s;
  out["sleep_default_workers_req_per_s_2_executes"] = r.two_default.req_per_s;
  // One process, one tool at a time: what a call costs end to end.
  out["sleep_ms_per_call_1_worker"] = o.workers == 1 && r.one.req_per_s > 0 ? 1000.0 / r.one.req_per_s : 0.0;
  out["tool_sleep_ms"] = kSleepMs;
  out["requests"] = ze.requests;
  out["sleep_requests"] = zs.requests;
  out["rounds"] = ze.rounds;
  out["partitions"] = o.partitions;
  out["agents"] = agents;
  out["workers"] = o.workers;
  out["default_workers"] = o.default_workers;
  out["durability"] = o.durability;
  out["cpus"] = std::thread::hardware_concurrency();
  out["hops"] = 3;
  const std::string cpus = std::to_string(std::thread::hardware_concurrency());
  out["notes"] = {
      {"distributed_throughput_vs_relay",
       "echo through `broker` + keeper + `stage ingest|decide|execute` (one process each; signed "
       "requests; every event on the events topic and in every process's copy of the log) vs the bare "
       "relay over the same three hops in this process on its own embedded broker, with the same "
       "partitions and agents"},
      {"execute_scale_2x",
       "cli:sleep (prints {}, then waits " + std::to_string(kSleepMs) +
           " ms) with two execute processes / one, " + std::to_string(o.workers) +
           " tool(s) at once per process, so a process's concurrency bounds it, not the CPU: a call is the "
           "sandbox's start-up (CPU) plus the wait. The partitions are even and the agents chosen by "
           "murmur2, so each process gets the same load; timed after the second process ran calls (the "
           "rebalance is over). What is left of the ideal 2 is contention for the same cores (each call's "
           "sandbox start-up and the pipeline's share of every request, in both processes); "
           "detail.*.cpu_busy is the whole machine's"},
      {"execute_scale_2x_default_workers",
       "information: the same at " + std::to_string(o.default_workers) +
           " workers per process. That many sandboxes starting at once already keep the machine's " + cpus +
           " cores busy with one process (detail.sleep_default_workers_1_execute.cpu_busy), so a second "
           "process on the same cores cannot add throughput"},
      {"sandbox",
       "the bench's policy sets execute.cli_limits.processes: 1024 (default 64, counted per agent): on "
       "some hosts (gVisor) two sandboxes of one agent starting at once under 64 fail with EAGAIN"},
      {"order",
       "the scale measurements come first and echo last: the embedded broker keeps ~5 MiB of the events "
       "topic, and an execute process that starts must find the events since its last stop. Processes "
       "join and leave the execute group only while no request is in flight (a rebalance aborts open "
       "transactions, and on the embedded broker read_committed readers stop at aborted data)"}};
  out["detail"] = {{"relay", FiguresJson(r.relay)},
                   {"distributed_echo", FiguresJson(r.dist)},
                   {"sleep_1_execute", FiguresJson(r.one)},
                   {"sleep_2_executes", FiguresJson(r.two)},
                   {"sleep_default_workers_1_execute", FiguresJson(r.one_default)},
                   {"sleep_default_workers_2_executes", FiguresJson(r.two_default)}};
  out["goals"] = {{"distributed_throughput_vs_relay", ">= 0.3"}, {"execute_scale_2x", ">= 1.8"}};
  out["met"] = {{"distributed_throughput_vs_relay", vs_relay >= 0.3}, {"execute_scale_2x", scale >= 1.8}};
  out["quick"] = o.quick;
  return out;
}

}  // namespace

Json RunDistributedBench(const DistributedBenchOptions& o) {
  if (o.requests == 0 || o.sleep_requests == 0 || o.rounds == 0 || o.workers == 0 || o.default_workers == 0) {
    return Json{{"error", "--requests, --sleep-requests, --rounds and the workers must be positive"}};
  }
  if (o.partitions < 2 || o.partitions % 2 != 0 || o.agents == 0 || o.agents % o.partitions != 0) {
    return Json{{"error",
                 "partitions must be even (two execute processes split them) and agents a multiple of them"}};
  }
  if (o.durability != "buffered" && o.durability != "sync")
    return Json{{"error", "durability: buffered or sync"}};
  std::error_code ec;
  const std::string bin =
      o.binary.empty() ? std::filesystem::read_symlink("/proc/self/exe", ec).string() : o.binary;
  if (bin.empty()) return Json{{"error", "cannot find this process's executable: " + ec.message()}};

  Workload echo;
  echo.agents = BalancedAgents(o.partitions, o.agents / static_cast<size_t>(o.partitions));
  Workload sleep = echo;
  sleep.tool = "cli:sleep";
  const size_t n = echo.agents.size();
  const Sizes ze{o.quick ? size_t{10} : size_t{20},
                 RoundUp(o.quick ? std::min<size_t>(o.requests, 400) : o.requests, n), o.quick ? 1 : o.rounds,
                 0, 0};
  const Sizes zs{n, RoundUp(o.quick ? std::min<size_t>(o.sleep_requests, 3 * n) : o.sleep_requests, n),
                 o.quick ? 1 : o.rounds, 0, 0};

  // An execute process starting late restores the events since its last
  // stop from the topic, of which the embedded broker keeps ~5 MiB (about
  // 1,700 requests' events; docs/deployments.md): execute-2 starts after
  // the one-process rounds.
  if (zs.warmup + zs.rounds * zs.requests > kMaxRequestsBeforeAJoin) {
    return Json{{"error", "--sleep-requests x --rounds must stay under " +
                              std::to_string(kMaxRequestsBeforeAJoin) +
                              ": the second execute process must find the events since its last stop on the "
                              "embedded broker, which keeps ~5 MiB of them"}};
  }
  ScratchDir dir(o.dir);
  if (dir.path().empty()) return Json{{"error", "cannot create a scratch directory under " + o.dir}};
  Progress("distributed: scratch directory " + dir.path() + "; running " + bin);
  // A failed run keeps its scratch directory: the processes' output is in DIR/logs.
  auto failed = [&dir](const std::string& what, const Status& s) {
    dir.Keep();
    return Json{{"error", what + ": " + s.ToString()}, {"logs", dir.sub("logs")}};
  };

  Results r;
  {
    RelaySystem system;  // declared first: the driver closes while its broker runs
    Target t;
    t.label = "relay";
    t.workload = echo;
    Status s = system.Start(o.partitions, 500, &t.bus);  // the stages' max_batch (PipelineOptions)
    if (s.ok()) s = Warm(t, ze);
    if (s.ok()) s = TimedRounds(t, ze);
    if (!s.ok()) return Json{{"error", "relay: " + s.ToString()}};
    r.relay = t.f;
  }

  Signers signers;
  Deployment d(o, dir, bin);  // declared before the targets: their drivers close while the broker runs
  Status s = d.Start(echo, &signers);
  if (!s.ok()) return failed("distributed", s);
  {
    Target t;
    t.expect_status = true;
    t.signers = &signers;
    t.workload = sleep;
    t.bus = d.bus();
    s = t.driver.Open(t.bus, "bench-agent-sleep", t.signers, t.workload);
    if (s.ok()) s = MeasureScale(d, t, zs, o.workers, "w" + std::to_string(o.workers), &r.one, &r.two);
    if (s.ok()) s = MeasureScale(d, t, zs, o.default_workers, "default", &r.one_default, &r.two_default);
    if (!s.ok()) return failed("distributed cli:sleep", s);
  }
  {
    // Last, with execute-1 alone (echo runs inline: its workers do not
    // matter): the most events, and no process starts after them.
    Target t;
    t.label = "distributed-echo";
    t.expect_status = true;
    t.signers = &signers;
    t.workload = echo;
    t.bus = d.bus();
    s = d.StartExecute("execute-1", o.default_workers);
    if (s.ok()) s = Warm(t, ze);
    if (s.ok()) s = TimedRounds(t, ze);
    if (!s.ok()) return failed("distributed echo", s);
    r.dist = t.f;
  }

  return Report(o, ze, zs, echo.agents, r);
}

}  // namespace tollgate::bench
