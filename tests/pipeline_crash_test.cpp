// Crash tests of the whole pipeline as real processes: `tollgate broker` and
// `tollgate up` are spawned (posix_spawn, no shell) and killed with SIGKILL
// mid-stream; the test process plays the agents (tollgate::Producer) and
// reads results (tollgate::Consumer), then checks the RocksDB log offline.
//
//   SurvivingBrokerKillUp      `up` against a standalone `tollgate broker`:
//                              kill -9 `up`, restart it; every request gets
//                              exactly one result and one complete set of
//                              events (docs/architecture.md, "Delivery semantics").
//   EmbeddedBrokerKillUp       `up` with its in-process broker: kill -9 takes
//                              the broker's data with it; what reached the log
//                              is finished by the reconciler after a restart.
//   UpServesSubmitAndStopsOnSigint
//                              `up` prints where it listens; `submit --wait`
//                              prints results with the documented exit codes;
//                              `audit verify` reads the live log; SIGINT
//                              drains and exits 0.
//
// Every request is signed (docs/trust.md): the agents' keys are made and
// registered with `tollgate agents add --data DATA` before `up` starts, and
// the test signs with the key files it wrote (as `tollgate submit` does).
//
// Seed: TOLLGATE_CRASH_SEED (default: random; printed). Only loopback
// addresses are used (the mock cluster listens on 127.0.0.1).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <rocksdb/write_batch.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_query.h"
#include "audit/event_log.h"
#include "audit/log_format.h"
#include "audit/log_sink.h"
#include "audit/log_store.h"
#include "audit/verify.h"
#include "core/auth.h"
#include "core/credentials.h"
#include "core/jwt.h"
#include "core/messages.h"
#include "deploy/pipeline.h"
#include "runtime/kafka_bus.h"
#include "test_util.h"
#include "tests/child_process.h"

extern char** environ;

namespace tollgate {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::WaitUntil;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ------------------------------------------------------------------ helpers

// A fresh directory under /tmp, removed (with everything in it) on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    std::string tmpl = "/tmp/tollgate-crash-" + tag + "-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    if (path_.empty() || std::getenv("TOLLGATE_KEEP_CRASH_DIRS")) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Tail(const std::string& text, size_t n = 3000) {
  return text.size() <= n ? text : "…" + text.substr(text.size() - n);
}

// One child process (no shell). stdout and stderr go to files, so a child
// never blocks on a full pipe. The destructor kills (SIGKILL) and reaps it if
// it is still running, so no child outlives a failed assertion.
class Child {
 public:
  Child() = default;
  ~Child() { KillAndReap(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Starts argv[0] (a path) with argv; false (and a message in *error) on failure.
  bool Start(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path,
             std::string* error) {
    KillAndReap();
    out_path_ = out_path;
    err_path_ = err_path;
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    // The child starts with default signal dispositions and an empty mask,
    // whatever the test runner set.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, args[0], &fa, &attr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      *error = std::string("posix_spawn ") + argv[0] + ": " + strerror(rc);
      return false;
    }
    pid_ = pid;
    return true;
  }

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  std::string out() const { return ReadFile(out_path_); }
  std::string err() const { return ReadFile(err_path_); }
  std::string Describe() const { return "--- stdout:\n" + Tail(out()) + "\n--- stderr:\n" + Tail(err()); }

  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  // Reaps the child if it has exited; its wait status, or nullopt while it runs.
  std::optional<int> Poll() {
    if (pid_ <= 0) return exit_status_;
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      exit_status_ = status;
    }
    return exit_status_;
  }
  // Waits up to `timeout` for the child to exit; its wait status or nullopt.
  std::optional<int> Wait(milliseconds timeout) {
    WaitUntil([&] { return Poll().has_value(); }, timeout);
    return exit_status_;
  }
  // kill -9 and reap; returns the wait status.
  int Kill9() {
    if (pid_ <= 0) return exit_status_.value_or(-1);
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_status_ = status;
    return status;
  }
  void KillAndReap() {
    if (pid_ > 0) Kill9();
    exit_status_.reset();
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
  std::string out_path_, err_path_;
};

std::string DescribeStatus(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("signal ") + strsignal(WTERMSIG(st));
  return "status " + std::to_string(st);
}

// The bootstrap address in DATA/endpoints.json, once it is there.
std::string WaitForEndpoints(const std::string& data_dir, Child& child, milliseconds timeout) {
  std::string bootstrap;
  WaitUntil(
      [&] {
        if (child.Poll()) return true;  // died: give up early
        Json ep;
        if (!ReadEndpoints(data_dir, &ep).ok() || !ep.is_object()) return false;
        bootstrap = ep.value("bootstrap", "");
        return !bootstrap.empty();
      },
      timeout);
  return bootstrap;
}

bool IsLoopback(const std::string& bootstrap) {
  // "127.0.0.1:port[,127.0.0.1:port...]"
  std::stringstream ss(bootstrap);
  std::string part;
  bool any = false;
  while (std::getline(ss, part, ',')) {
    any = true;
    if (part.rfind("127.0.0.1:", 0) != 0 && part.rfind("localhost:", 0) != 0) return false;
  }
  return any;
}

uint64_t Seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("TOLLGATE_CRASH_SEED");
    if (env && *env) return static_cast<uint64_t>(std::strtoull(env, nullptr, 10));
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

// The requests the test publishes: echo, unique ids, several agents/sessions.
struct Workload {
  static constexpr const char* kOrg = "org-crash";
  std::string tag;
  int n = 0;
  int agents = 5;
  // agent id -> its signer (RegisterAgents).
  std::shared_ptr<std::map<std::string, JwtSigner>> signers =
      std::make_shared<std::map<std::string, JwtSigner>>();
  std::string rid(int i) const { return "crash-" + tag + "-" + std::to_string(i); }
  std::string agent(int i) const { return "agent-" + std::to_string(i % agents); }
  Json request(int i) const {
    return {{"request_id", rid(i)}, {"org_id", kOrg},
            {"agent_id", agent(i)}, {"session_id", "sess-" + tag + "-" + std::to_string(i % agents)},
            {"tool", "echo"},       {"args", {{"i", i}, {"text", "hello " + std::to_string(i)}}}};
  }
  // Request `i` on `topics`' requests topic, signed by its agent's key.
  Message message(const Topics& topics, int i) const {
    Json req = request(i);
    Message m = MessageFor(topics.requests(), req, req);
    m.headers[kHeaderAuth] =
        SignRequest(signers->at(agent(i)), kOrg, agent(i), rid(i), m.value, NowMicros() / 1'000'000);
    return m;
  }
};

// Makes and registers every agent's key of `w` with `tollgate agents add
// --data DATA` (no `up` runs yet: the CLI writes the log itself), then loads
// the key files it wrote, as `tollgate submit` would.
Status RegisterAgents(const std::string& data, const std::string& scratch, Workload& w) {
  for (int a = 0; a < w.agents; ++a) {
    const std::string agent = "agent-" + std::to_string(a);
    Child c;
    std::string err;
    if (!c.Start({TOLLGATE_BIN, "agents", "add", "--data", data, "--org", Workload::kOrg, "--agent", agent},
                 scratch + "/agents-add-" + agent + ".out", scratch + "/agents-add-" + agent + ".err",
                 &err)) {
      return Status::Error("E_TEST", err);
    }
    auto st = c.Wait(seconds(60));
    if (!st || !WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
      return Status::Error("E_TEST", "`tollgate agents add` for " + agent + " failed\n" + c.Describe());
    }
    const std::string path = data + "/keys/" + Workload::kOrg + "/" + agent + ".pem";
    std::string pem;
    JwtSigner signer;
    Status s = ReadPrivateKeyFile(path, &pem);
    if (s.ok()) s = SignerForKey(pem, &signer);
    if (!s.ok()) return s;
    (*w.signers)[agent] = std::move(signer);
  }
  return Status::Ok();
}

// Publishes the workload from its own thread, one request every `gap`,
// flushing as it goes; stop() ends it early (e.g. when the broker died).
class Publisher {
 public:
  Publisher(BusConfig bus, Workload w, int first, milliseconds gap)
      : bus_(std::move(bus)), w_(std::move(w)), first_(first), gap_(gap) {}
  ~Publisher() { Join(); }
  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() { stop_.store(true); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  int sent() const { return sent_.load(); }
  std::string error() {
    std::lock_guard<std::mutex> l(mu_);
    return error_;
  }

 private:
  void Fail(const std::string& e) {
    std::lock_guard<std::mutex> l(mu_);
    if (error_.empty()) error_ = e;
  }
  void Run() {
    std::unique_ptr<Producer> producer;
    Status s = Producer::Open(bus_, "", &producer);
    if (!s.ok()) return Fail(s.ToString());
    for (int i = first_; i < w_.n && !stop_.load(); ++i) {
      s = producer->Send(w_.message(bus_.topics, i));
      if (!s.ok()) return Fail("send " + w_.rid(i) + ": " + s.ToString());
      sent_.store(i + 1);
      if (i % 10 == 9) {
        s = producer->Flush(seconds(20));
        if (!s.ok() && !stop_.load()) return Fail("flush: " + s.ToString());
      }
      // time must pass: the stream is paced so that the kill lands in it.
      std::this_thread::sleep_for(gap_);
    }
    if (!stop_.load()) {
      s = producer->Flush(seconds(30));
      if (!s.ok()) Fail("final flush: " + s.ToString());
    }
  }

  BusConfig bus_;
  Workload w_;
  int first_;
  milliseconds gap_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> sent_{0};
  std::mutex mu_;
  std::string error_;
};

// Counts result messages per request id (the request_id header).
struct ResultTally {
  std::map<std::string, int> count;
  std::map<std::string, std::vector<Json>> results;
  size_t total = 0;
  void Add(const Message& m) {
    auto it = m.headers.find(kHeaderRequestId);
    std::string rid = it != m.headers.end() ? it->second : "<no request_id header: key " + m.key + ">";
    ++count[rid];
    ++total;
    Json v;
    if (ParseJson(m.value, &v).ok()) results[rid].push_back(std::move(v));
  }
  // Polls once (up to 100 messages, waiting at most `wait`); messages read.
  size_t PollOnce(Consumer& c, milliseconds wait) {
    std::vector<Message> batch;
    c.Poll(100, wait, &batch);
    for (const auto& m : batch) Add(m);
    return batch.size();
  }
};

// Every result on the results topic, read from the beginning by a fresh
// consumer group: polls until `idle` passes with nothing new (after at least
// `want` messages, or `max_wait`).
ResultTally ReadAllResults(const BusConfig& bus, size_t want, milliseconds idle, milliseconds max_wait) {
  ResultTally t;
  std::unique_ptr<Consumer> c;
  std::string group = "crash-test-final-" + std::to_string(Seed()) + "-" + std::to_string(getpid());
  Status s = EnsureTopic(bus, bus.topics.results_for("org-crash"), seconds(10));
  if (s.ok()) s = Consumer::Open(bus, group, {bus.topics.results_for("org-crash")}, &c);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return t;
  auto deadline = Clock::now() + max_wait;
  auto last_new = Clock::now();
  while (Clock::now() < deadline) {
    if (t.PollOnce(*c, milliseconds(200)) > 0) last_new = Clock::now();
    if (t.total >= want && Clock::now() - last_new >= idle) break;
  }
  c->Close();
  return t;
}

// Publishes request `i` alone and waits until `live` reads its result, so
// that the pipeline and the test's consumer are both running before the
// stream (and the kill) starts.
Status WarmUp(const BusConfig& bus, const Workload& w, int i, Consumer& live, ResultTally& seen, Child& up,
              milliseconds timeout) {
  std::unique_ptr<Producer> producer;
  Status s = Producer::Open(bus, "", &producer);
  if (s.ok()) s = producer->Send(w.message(bus.topics, i));
  if (s.ok()) s = producer->Flush(seconds(20));
  if (!s.ok()) return s;
  bool ok = WaitUntil(
      [&] {
        seen.PollOnce(live, milliseconds(20));
        return seen.count.count(w.rid(i)) > 0 || up.Poll();
      },
      timeout);
  if (!ok || up.Poll()) return Status::Error("E_TEST", "no result for the warm-up request " + w.rid(i));
  return Status::Ok();
}

// Every event of the log, grouped by request id, in seq order.
// Events of requests by request id. Events of no request (policy.updated:
// decide loading the policy file) are counted in *policy_updates instead,
// when given, and are not in *total; so are credential changes (the agents'
// keys, the tokens and the service key: credential.*) in *credentials, and
// execute saying which CLI tools it has (tools.available) in *tools.
std::map<std::string, std::vector<Event>> EventsByRequest(const LogStore& store, uint64_t* total,
                                                          uint64_t* policy_updates = nullptr,
                                                          uint64_t* credentials = nullptr,
                                                          uint64_t* tools = nullptr,
                                                          uint64_t* checkpoints = nullptr) {
  std::map<std::string, std::vector<Event>> by;
  if (checkpoints != nullptr) *checkpoints = 0;
  if (policy_updates != nullptr) *policy_updates = 0;
  if (credentials != nullptr) *credentials = 0;
  if (tools != nullptr) *tools = 0;
  AuditQuery q;
  q.limit = kMaxQueryLimit;
  *total = 0;
  for (;;) {
    AuditPage page;
    Status s = GetAuditLog(store, QueryScope::Operator(), q, &page);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    for (auto& e : page.events) {
      if (e.type == ev::kCheckpointSigned) {  // about the whole log, signed as it grows
        if (checkpoints != nullptr) ++*checkpoints;
        continue;
      }
      if (tools != nullptr && e.request_id.empty() && e.type == "tools.available") {
        ++*tools;
        continue;
      }
      if (policy_updates != nullptr && e.request_id.empty() && e.type == "policy.updated") {
        ++*policy_updates;
        continue;
      }
      if (e.session_id == kCredentialsSession) {
        if (credentials != nullptr) ++*credentials;
        continue;
      }
      ++*total;
      by[e.request_id].push_back(std::move(e));
    }
    if (page.next_cursor.empty()) break;
    q.cursor = page.next_cursor;
  }
  return by;
}

const std::vector<std::string> kComplete = {"request.received", "decision.made", "execution.started",
                                            "execution.completed"};

std::string TypesOf(const std::vector<Event>& events) {
  std::string s;
  for (const auto& e : events) {
    if (!s.empty()) s += ", ";
    s += e.type;
    if (e.type == "execution.started") s += "(attempt " + e.data.value("attempt", Json()).dump() + ")";
  }
  return "[" + s + "]";
}

bool IsComplete(const std::vector<Event>& events) {
  if (events.size() != kComplete.size()) return false;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].type != kComplete[i]) return false;
  }
  return true;
}

// How many requests of the log have a request.received, and how many of
// those an execution.completed.
void CountReceivedCompleted(const LogStore& store, size_t* received, size_t* completed) {
  uint64_t total;
  auto by = EventsByRequest(store, &total);
  *received = *completed = 0;
  for (const auto& [rid, events] : by) {
    bool rec = false, done = false;
    for (const auto& e : events) {
      rec = rec || e.type == "request.received";
      done = done || e.type == "execution.completed";
    }
    *received += rec;
    *completed += rec && done;
  }
}

// The same for a closed log (kReadOnly); false if it cannot be opened.
bool CountClosedLog(const std::string& path, size_t* received, size_t* completed) {
  std::unique_ptr<LogStore> store;
  Status s = LogStore::Open(path, OpenMode::kReadOnly, &store);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return false;
  CountReceivedCompleted(*store, received, completed);
  return true;
}

// True when every request of the log that has a request.received also has
// an execution.completed (read through a secondary that catches up).
bool EveryReceivedIsCompleted(LogStore& secondary, size_t* received, size_t* completed) {
  if (!secondary.CatchUp().ok()) return false;
  CountReceivedCompleted(secondary, received, completed);
  return *received == *completed;
}

std::vector<std::string> UpArgs(const std::string& data, const std::string& brokers) {
  std::vector<std::string> a = {TOLLGATE_BIN, "up", "--data", data, "--durability", "sync"};
  if (!brokers.empty()) {
    a.push_back("--brokers");
    a.push_back(brokers);
  }
  return a;
}

// True when `up`'s /metrics (read with the admin token `up` wrote at its
// first start) shows every stage's input partitions read to their end and no tool run
// busy or queued: nothing is left that could make a stage act again.
bool StagesIdle(const std::string& data_dir) {
  Json ep;
  if (!ReadEndpoints(data_dir, &ep).ok() || !ep.is_object()) return false;
  const std::string url = ep.value("http", "");
  if (url.empty()) return false;
  std::ifstream token_file(data_dir + "/admin.token");
  std::string token;
  token_file >> token;
  httplib::Client c(url);
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  c.set_bearer_token_auth(token.c_str());
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return false;
  bool saw_lag = false;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    const bool lag = line.rfind("tollgate_consumer_lag_messages{", 0) == 0;
    const bool work = line.rfind("tollgate_stage_workers_busy{", 0) == 0 ||
                      line.rfind("tollgate_stage_workers_queued{", 0) == 0;
    if (!lag && !work) continue;
    saw_lag = saw_lag || lag;
    if (std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr) != 0) return false;
  }
  return saw_lag;
}

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// ------------------------------------------------------------------ tests

class PipelineCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::cout << "[ seed ] TOLLGATE_CRASH_SEED=" << Seed() << "\n";
    RecordProperty("seed", std::to_string(Seed()));
  }
};

// `up` against a standalone broker that survives the crash: the broker keeps
// the topics, the consumer groups and their offsets, so the restarted `up`
// picks up where the dead one left off. Contract: every request ends with
// exactly one result and exactly one complete set of events.
TEST_F(PipelineCrashTest, SurvivingBrokerKillUp) {
  const auto t0 = Clock::now();
  std::mt19937_64 rng(Seed());
  const int kRequests = 200;
  const int kill_after = 25 + static_cast<int>(rng() % 40);  // results seen before kill -9
  const auto restart_delay = milliseconds(rng() % 500);
  std::cout << "[ plan ] " << kRequests << " requests, kill -9 after " << kill_after
            << " results, restart after " << restart_delay.count() << " ms\n";

  ScratchDir dir("surviving");
  ASSERT_FALSE(dir.path().empty());
  const std::string d0 = dir.sub("broker"), d1 = dir.sub("up");
  std::filesystem::create_directories(d0);
  std::string err;

  Child broker;
  ASSERT_TRUE(broker.Start({TOLLGATE_BIN, "broker", "--data", d0, "--partitions", "3"}, dir.sub("broker.out"),
                           dir.sub("broker.err"), &err))
      << err;
  std::string bootstrap = WaitForEndpoints(d0, broker, seconds(20));
  ASSERT_FALSE(bootstrap.empty()) << "the broker wrote no endpoints.json\n" << broker.Describe();
  ASSERT_TRUE(WaitUntil([&] { return Contains(broker.out(), bootstrap); }, seconds(5)))
      << "the broker prints its bootstrap on stdout\n"
      << broker.Describe();
  ASSERT_TRUE(IsLoopback(bootstrap)) << bootstrap;
  std::cout << "[ time ] broker up at " << bootstrap << " after " << Since(t0) << " s\n";

  Workload w{"s" + std::to_string(Seed() % 100000), kRequests};
  Status s = RegisterAgents(d1, dir.path(), w);
  ASSERT_TRUE(s.ok()) << s.ToString();

  Child up;
  ASSERT_TRUE(up.Start(UpArgs(d1, bootstrap), dir.sub("up1.out"), dir.sub("up1.err"), &err)) << err;
  ASSERT_TRUE(WaitUntil([&] { return up.Poll() || Contains(up.out(), "tollgate is up"); }, seconds(60)) &&
              !up.Poll())
      << "`up` did not start\n"
      << up.Describe();
  std::cout << "[ time ] up #1 (pid " << up.pid() << ") ready after " << Since(t0) << " s\n";

  BusConfig bus;
  bus.brokers = bootstrap;
  bus.client_id = "crash-test";

  std::unique_ptr<Consumer> live;
  s = EnsureTopic(bus, bus.topics.results_for("org-crash"), seconds(10));
  if (s.ok())
    s = Consumer::Open(bus, "crash-test-live-" + std::to_string(Seed()),
                       {bus.topics.results_for("org-crash")}, &live);
  ASSERT_TRUE(s.ok()) << s.ToString();

  ResultTally seen;
  s = WarmUp(bus, w, 0, *live, seen, up, seconds(60));
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << up.Describe();
  std::cout << "[ time ] warm-up request answered after " << Since(t0) << " s\n";
  Publisher pub(bus, w, 1, milliseconds(15));
  pub.Start();
  ASSERT_TRUE(WaitUntil(
      [&] {
        seen.PollOnce(*live, milliseconds(20));
        return seen.count.size() >= static_cast<size_t>(kill_after) || up.Poll();
      },
      seconds(60)))
      << "no results from up #1: " << seen.count.size() << " results\n"
      << up.Describe();
  ASSERT_FALSE(up.Poll()) << "up #1 died by itself\n" << up.Describe();

  const int sent_at_kill = pub.sent();
  const size_t results_at_kill = seen.count.size();
  std::set<std::string> before_kill;
  for (const auto& [rid, n] : seen.count) before_kill.insert(rid);
  const int st = up.Kill9();
  std::cout << "[ kill ] up #1 " << DescribeStatus(st) << " at " << Since(t0) << " s: " << sent_at_kill
            << " sent, " << results_at_kill << " results seen\n";
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << DescribeStatus(st);
  EXPECT_LT(sent_at_kill, kRequests) << "the kill came after the stream, not in it";
  size_t received_at_kill = 0, completed_at_kill = 0;
  ASSERT_TRUE(CountClosedLog(d1 + "/log", &received_at_kill, &completed_at_kill));
  std::cout << "[ log ] after the kill: " << received_at_kill << " requests received, " << completed_at_kill
            << " completed\n";

  // time must pass: the seeded gap between the crash and the restart is part of the plan.
  std::this_thread::sleep_for(restart_delay);
  ASSERT_TRUE(up.Start(UpArgs(d1, bootstrap), dir.sub("up2.out"), dir.sub("up2.err"), &err)) << err;
  ASSERT_TRUE(WaitUntil([&] { return up.Poll() || Contains(up.out(), "tollgate is up"); }, seconds(60)) &&
              !up.Poll())
      << "`up` did not restart\n"
      << up.Describe();
  std::string up2_out = up.out();
  std::cout << "[ time ] up #2 (pid " << up.pid() << ") ready after " << Since(t0) << " s; its report:\n"
            << up2_out.substr(0, up2_out.find("\n\n")) << "\n";

  // Every request gets a result.
  const auto restart_at = Clock::now();
  bool all = WaitUntil(
      [&] {
        seen.PollOnce(*live, milliseconds(50));
        return seen.count.size() >= static_cast<size_t>(kRequests) || up.Poll();
      },
      seconds(90));
  pub.Join();
  EXPECT_EQ(pub.error(), "");
  EXPECT_EQ(pub.sent(), kRequests);
  ASSERT_FALSE(up.Poll()) << "up #2 died by itself\n" << up.Describe();
  ASSERT_TRUE(all) << "after 90 s only " << seen.count.size() << " of " << kRequests
                   << " requests have a result\n"
                   << up.Describe();
  std::cout << "[ time ] all " << kRequests << " results " << Since(restart_at) << " s after the restart ("
            << Since(t0) << " s in)\n";
  live->Close();

  // SIGTERM: `up` drains and exits 0.
  up.Signal(SIGTERM);
  auto stopped = up.Wait(seconds(30));
  ASSERT_TRUE(stopped.has_value()) << "`up` did not stop within 30 s of SIGTERM\n" << up.Describe();
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0)
      << "`up` after SIGTERM: " << DescribeStatus(*stopped) << "\n"
      << up.Describe();
  EXPECT_TRUE(Contains(up.out(), "tollgate: stopped")) << up.Describe();
  std::cout << "[ time ] up #2 stopped (" << DescribeStatus(*stopped) << ") at " << Since(t0) << " s\n";

  // Exactly one result per request on the topic, counted from its beginning.
  ResultTally all_results = ReadAllResults(bus, kRequests, seconds(3), seconds(30));
  std::vector<std::string> missing, duplicated, redelivered, not_completed, foreign;
  std::set<std::string> ours;
  for (int i = 0; i < kRequests; ++i) ours.insert(w.rid(i));
  for (int i = 0; i < kRequests; ++i) {
    const std::string rid = w.rid(i);
    auto it = all_results.count.find(rid);
    if (it == all_results.count.end()) {
      missing.push_back(rid);
      continue;
    }
    if (it->second != 1) {
      // A copy identical to the first is a re-delivery, not a second
      // outcome: see the comment at the check below.
      const auto& rs = all_results.results[rid];
      bool identical = rs.size() == static_cast<size_t>(it->second);
      for (const auto& r : rs) identical = identical && r == rs.front();
      (identical ? redelivered : duplicated).push_back(rid + " x" + std::to_string(it->second));
    }
    for (const auto& r : all_results.results[rid]) {
      if (r.value("status", "") != "completed") not_completed.push_back(rid + ": " + r.dump().substr(0, 300));
    }
  }
  for (const auto& [rid, n] : all_results.count) {
    if (!ours.count(rid)) foreign.push_back(rid + " x" + std::to_string(n));
  }
  auto head = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 10; ++i) s += "\n  " + v[i];
    if (v.size() > 10) s += "\n  … " + std::to_string(v.size() - 10) + " more";
    return s;
  };
  // Duplicates of results the test saw before the kill were re-emitted by
  // the restarted `up`; the others come from the crash window itself.
  size_t dup_seen_before_kill = 0;
  for (const auto& [rid, n] : all_results.count) dup_seen_before_kill += n > 1 && before_kill.count(rid);
  std::cout << "[ results ] " << all_results.total << " result messages for " << all_results.count.size()
            << " request ids; " << duplicated.size() << " duplicated (" << dup_seen_before_kill
            << " of them answered before the kill), " << missing.size() << " missing\n";
  EXPECT_TRUE(missing.empty()) << missing.size() << " requests have no result on the topic:" << head(missing);
  // The window a kill -9 leaves between a transaction's commit and the
  // offset commit the mock broker needs after it (it does not store offsets
  // committed in a transaction): the restarted stages read those messages
  // again, and find their outputs already committed (the runner's read-back
  // at start), so nothing is sent twice, not even identical bytes.
  {
    // What the restarted stages found already committed (for the record).
    std::istringstream err(up.err());
    for (std::string line; std::getline(err, line);) {
      if (Contains(line, "sent twice")) std::cout << "[ up #2 ] " << line << "\n";
    }
    std::istringstream out(up.out());
    for (std::string line; std::getline(out, line);) {
      if (Contains(line, "already committed")) std::cout << "[ up #2 ]" << line << "\n";
    }
  }
  std::cout << "[ results ] identical re-deliveries: " << redelivered.size() << head(redelivered) << "\n";
  EXPECT_TRUE(redelivered.empty()) << redelivered.size()
                                   << " results were delivered twice:" << head(redelivered);
  EXPECT_TRUE(duplicated.empty()) << duplicated.size() << " requests have more than one different result on "
                                  << bus.topics.results_for("org-crash") << " (" << all_results.total
                                  << " messages for " << kRequests << " requests):" << head(duplicated);
  EXPECT_TRUE(not_completed.empty()) << head(not_completed);
  EXPECT_TRUE(foreign.empty()) << "results for requests nobody sent:" << head(foreign);

  // The log: one complete set of events per request, and a sound chain.
  std::unique_ptr<LogStore> store;
  s = LogStore::Open(d1 + "/log", OpenMode::kReadOnly, &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  uint64_t total_events = 0;
  uint64_t policy_updates = 0, credentials = 0, tools = 0, checkpoints = 0;
  auto by = EventsByRequest(*store, &total_events, &policy_updates, &credentials, &tools, &checkpoints);
  EXPECT_GE(credentials, static_cast<uint64_t>(w.agents)) << "the agents' keys are in the log";
  // The policy file was loaded once, and execute said once which CLI tools
  // it has; the restart found both unchanged in the log and appended nothing.
  EXPECT_EQ(policy_updates, 1u);
  EXPECT_EQ(tools, 1u);
  std::vector<std::string> incomplete, strays;
  for (int i = 0; i < kRequests; ++i) {
    const std::string rid = w.rid(i);
    const auto& events = by[rid];
    if (!IsComplete(events)) incomplete.push_back(rid + " " + TypesOf(events));
  }
  for (const auto& [rid, events] : by) {
    if (!ours.count(rid)) strays.push_back(rid + " " + TypesOf(events));
  }
  std::cout << "[ log ] " << total_events << " events for " << by.size() << " request ids\n";
  EXPECT_TRUE(incomplete.empty()) << incomplete.size()
                                  << " requests lack exactly one request.received, decision.made, "
                                     "execution.started, execution.completed:"
                                  << head(incomplete);
  EXPECT_TRUE(strays.empty()) << "events of requests nobody sent:" << head(strays);
  EXPECT_EQ(total_events, static_cast<uint64_t>(kRequests) * kComplete.size());
  VerifyReport report = VerifyLog(*store);
  EXPECT_TRUE(report.ok()) << report.Summary();
  EXPECT_EQ(report.events, total_events + policy_updates + credentials + tools + checkpoints);

  broker.Signal(SIGTERM);
  auto bst = broker.Wait(seconds(10));
  EXPECT_TRUE(bst && WIFEXITED(*bst) && WEXITSTATUS(*bst) == 0)
      << "`tollgate broker` after SIGTERM: " << (bst ? DescribeStatus(*bst) : "still running") << "\n"
      << broker.Describe();
  std::cout << "[ time ] SurvivingBrokerKillUp took " << Since(t0) << " s\n";
}

// `up` with its embedded broker: kill -9 takes the broker, and every message
// it held, with it. The restarted `up` has a new, empty broker; its
// reconciler re-drives what the log shows unfinished. Requests that only the
// dead broker held are gone (documented); whatever reached the log must end
// complete, exactly once.
TEST_F(PipelineCrashTest, EmbeddedBrokerKillUp) {
  const auto t0 = Clock::now();
  std::mt19937_64 rng(Seed() ^ 0x9e3779b97f4a7c15ull);
  const int kRequests = 200;
  const int kill_after = 10 + static_cast<int>(rng() % 30);
  std::cout << "[ plan ] " << kRequests << " requests, kill -9 after " << kill_after << " results\n";

  ScratchDir dir("embedded");
  ASSERT_FALSE(dir.path().empty());
  const std::string data = dir.sub("data");
  std::string err;
  Workload w{"e" + std::to_string(Seed() % 100000), kRequests};
  Status s = RegisterAgents(data, dir.path(), w);
  ASSERT_TRUE(s.ok()) << s.ToString();

  Child up;
  ASSERT_TRUE(up.Start(UpArgs(data, ""), dir.sub("up1.out"), dir.sub("up1.err"), &err)) << err;
  std::string bootstrap = WaitForEndpoints(data, up, seconds(60));
  ASSERT_FALSE(bootstrap.empty()) << "`up` wrote no endpoints.json\n" << up.Describe();
  ASSERT_TRUE(IsLoopback(bootstrap)) << bootstrap;
  std::cout << "[ time ] up #1 (pid " << up.pid() << ") at " << bootstrap << " after " << Since(t0) << " s\n";

  BusConfig bus;
  bus.brokers = bootstrap;
  bus.client_id = "crash-test";
  // The broker dies with `up`: the publisher gives up on undelivered
  // requests quickly.
  BusConfig pub_bus = bus;
  pub_bus.extra["message.timeout.ms"] = "3000";

  std::unique_ptr<Consumer> live;
  s = EnsureTopic(bus, bus.topics.results_for("org-crash"), seconds(10));
  if (s.ok())
    s = Consumer::Open(bus, "crash-test-live-" + std::to_string(Seed()),
                       {bus.topics.results_for("org-crash")}, &live);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ResultTally seen;
  s = WarmUp(bus, w, 0, *live, seen, up, seconds(60));
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << up.Describe();
  std::cout << "[ time ] warm-up request answered after " << Since(t0) << " s\n";
  // The publisher and the live consumer outlive the broker they talk to;
  // closing them then takes a few seconds, so it happens on the side.
  std::jthread closer;
  {
    auto pub = std::make_unique<Publisher>(pub_bus, w, 1, milliseconds(10));
    pub->Start();
    auto close_clients = [&] {
      pub->Stop();
      closer = std::jthread([p = std::move(pub), c = std::move(live)]() mutable {
        c.reset();
        p.reset();
      });
    };
    bool ready = WaitUntil(
        [&] {
          seen.PollOnce(*live, milliseconds(20));
          return seen.count.size() >= static_cast<size_t>(kill_after) || up.Poll();
        },
        seconds(60));
    if (!ready || up.Poll()) close_clients();
    ASSERT_TRUE(ready) << "no results from up #1\n" << up.Describe();
    ASSERT_FALSE(up.Poll()) << "up #1 died by itself\n" << up.Describe();
    const int sent_at_kill = pub->sent();
    const int st = up.Kill9();
    close_clients();
    std::cout << "[ kill ] up #1 " << DescribeStatus(st) << " at " << Since(t0) << " s: " << sent_at_kill
              << " sent, " << seen.count.size() << " results seen\n";
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << DescribeStatus(st);
  }
  const std::set<std::string> results_before_kill = [&] {
    std::set<std::string> r;
    for (const auto& [rid, n] : seen.count) r.insert(rid);
    return r;
  }();

  // What the log holds right after the crash.
  size_t received_at_kill = 0, completed_at_kill = 0;
  ASSERT_TRUE(CountClosedLog(data + "/log", &received_at_kill, &completed_at_kill));
  std::cout << "[ log ] after the kill: " << received_at_kill << " requests received, " << completed_at_kill
            << " completed\n";
  ASSERT_GT(received_at_kill, 0u) << "nothing reached the log before the kill: the test proves nothing";
  EXPECT_GE(received_at_kill, results_before_kill.size());

  // Restart: a new embedded broker, empty, at a new address.
  std::filesystem::remove(data + "/endpoints.json");
  ASSERT_TRUE(up.Start(UpArgs(data, ""), dir.sub("up2.out"), dir.sub("up2.err"), &err)) << err;
  std::string bootstrap2 = WaitForEndpoints(data, up, seconds(60));
  ASSERT_FALSE(bootstrap2.empty()) << "`up` did not restart\n" << up.Describe();
  ASSERT_TRUE(IsLoopback(bootstrap2)) << bootstrap2;
  ASSERT_TRUE(WaitUntil([&] { return up.Poll() || Contains(up.out(), "tollgate is up"); }, seconds(10)));
  std::string up2_out = up.out();
  std::cout << "[ time ] up #2 (pid " << up.pid() << ") at " << bootstrap2 << " after " << Since(t0)
            << " s; its report:\n"
            << up2_out.substr(0, up2_out.find("\n\n")) << "\n";
  // The reconciler reads only the unfinished ones (the open-request index).
  EXPECT_TRUE(Contains(up2_out, "reconciled " + std::to_string(received_at_kill - completed_at_kill) +
                                    " unfinished requests in the log"))
      << up2_out;

  // Wait (through a live secondary) until the reconciler and the stages have
  // finished every request the log knows.
  {
    std::unique_ptr<LogStore> secondary;
    s = LogStore::Open(data + "/log", OpenMode::kSecondary, &secondary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    size_t received = 0, completed = 0;
    bool done =
        WaitUntil([&] { return EveryReceivedIsCompleted(*secondary, &received, &completed) || up.Poll(); },
                  seconds(30));
    std::cout << "[ time ] " << completed << "/" << received << " requests complete in the log " << Since(t0)
              << " s in\n";
    ASSERT_FALSE(up.Poll()) << "up #2 died by itself\n" << up.Describe();
    EXPECT_TRUE(done) << "after 30 s, " << completed << " of " << received << " received requests completed\n"
                      << up.Describe();
  }
  // Until every stage has read its inputs to their end and no tool run is
  // busy or queued: a stage that would re-do a step twice has had its chance.
  ASSERT_TRUE(WaitUntil([&] { return up.Poll() || StagesIdle(data); }, seconds(30)))
      << "the stages still had input to read 30 s after every request completed\n"
      << up.Describe();

  up.Signal(SIGTERM);
  auto stopped = up.Wait(seconds(30));
  ASSERT_TRUE(stopped.has_value()) << "`up` did not stop within 30 s of SIGTERM\n" << up.Describe();
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0)
      << "`up` after SIGTERM: " << DescribeStatus(*stopped) << "\n"
      << up.Describe();

  std::unique_ptr<LogStore> store;
  s = LogStore::Open(data + "/log", OpenMode::kReadOnly, &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  uint64_t total_events = 0, policy_updates = 0, credentials = 0, tools = 0, checkpoints = 0;
  auto by = EventsByRequest(*store, &total_events, &policy_updates, &credentials, &tools, &checkpoints);
  EXPECT_GE(credentials, static_cast<uint64_t>(w.agents)) << "the agents' keys are in the log";
  EXPECT_EQ(policy_updates, 1u) << "the restart found the unchanged policy in the log";
  EXPECT_EQ(tools, 1u) << "the restart found the same CLI tools in the log";
  std::set<std::string> ours;
  for (int i = 0; i < kRequests; ++i) ours.insert(w.rid(i));
  std::vector<std::string> bad;
  size_t in_log = 0;
  for (const auto& [rid, events] : by) {
    if (!ours.count(rid)) {
      bad.push_back("unknown request " + rid + " " + TypesOf(events));
      continue;
    }
    ++in_log;
    if (!IsComplete(events)) bad.push_back(rid + " " + TypesOf(events));
  }
  std::vector<std::string> lost_after_result;
  for (const auto& rid : results_before_kill) {
    if (!by.count(rid)) lost_after_result.push_back(rid);
  }
  std::cout << "[ log ] " << total_events << " events; " << in_log << " of " << kRequests
            << " requests reached the log (the rest died with the embedded broker)\n";
  std::string head;
  for (size_t i = 0; i < bad.size() && i < 10; ++i) head += "\n  " + bad[i];
  EXPECT_TRUE(bad.empty()) << bad.size()
                           << " requests in the log without exactly one complete set of events:" << head;
  EXPECT_EQ(in_log, received_at_kill) << "the restart added or lost requests";
  EXPECT_TRUE(lost_after_result.empty()) << "a request whose result an agent saw is not in the log";
  VerifyReport report = VerifyLog(*store);
  EXPECT_TRUE(report.ok()) << report.Summary();
  EXPECT_EQ(report.events, total_events + policy_updates + credentials + tools + checkpoints);
  std::cout << "[ time ] EmbeddedBrokerKillUp took " << Since(t0) << " s\n";
}

// What a newcomer does first: `up`, then `submit --wait` from another
// process (it finds the broker through endpoints.json), then `audit verify`
// on the live log, then Ctrl-C.
TEST_F(PipelineCrashTest, UpServesSubmitAndStopsOnSigint) {
  const auto t0 = Clock::now();
  ScratchDir dir("sigint");
  ASSERT_FALSE(dir.path().empty());
  const std::string data = dir.sub("data");
  std::string err;
  Child up;
  ASSERT_TRUE(up.Start(UpArgs(data, ""), dir.sub("up.out"), dir.sub("up.err"), &err)) << err;
  ASSERT_TRUE(WaitUntil([&] { return up.Poll() || Contains(up.out(), "Ctrl-C stops"); }, seconds(60)) &&
              !up.Poll())
      << up.Describe();
  std::string bootstrap = WaitForEndpoints(data, up, seconds(10));
  ASSERT_FALSE(bootstrap.empty()) << up.Describe();
  EXPECT_TRUE(IsLoopback(bootstrap)) << bootstrap;
  const std::string out = up.out();
  EXPECT_TRUE(Contains(out, "tollgate is up")) << out;
  EXPECT_TRUE(Contains(out, "broker     " + bootstrap)) << "prints the broker it serves\n" << out;
  EXPECT_TRUE(Contains(out, data + "/log")) << out;
  EXPECT_TRUE(Contains(out, data + "/endpoints.json")) << out;
  Json ep;
  ASSERT_TRUE(ReadEndpoints(data, &ep).ok());
  EXPECT_EQ(ep.value("pid", 0), up.pid());
  EXPECT_EQ(ep.value("embedded_broker", false), true);

  // submit --wait: the result JSON on stdout; exit 0 completed, 1 any other
  // status, 2 a usage or connection error.
  auto run = [&](const std::string& name, std::vector<std::string> argv, std::string* out) {
    Child c;
    std::string e;
    EXPECT_TRUE(c.Start(argv, dir.sub(name + ".out"), dir.sub(name + ".err"), &e)) << e;
    auto st = c.Wait(seconds(60));
    *out = c.out();
    if (!st) return -1;
    return WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
  };
  std::string sout;
  EXPECT_EQ(run("submit-echo",
                {TOLLGATE_BIN, "submit", "--data", data, "--agent", "a1", "--session", "s1", "--tool", "echo",
                 "--args", R"({"text":"hi"})", "--wait"},
                &sout),
            0)
      << sout;
  Json r = Json::parse(sout, nullptr, false);
  EXPECT_EQ(r.value("status", ""), "completed") << sout;
  EXPECT_EQ(r["result"]["data"].value("text", ""), "hi") << sout;
  EXPECT_EQ(run("submit-denied",
                {TOLLGATE_BIN, "submit", "--data", data, "--agent", "a1", "--session", "s1", "--tool",
                 "delete_file", "--args", R"({"path":"/etc/shadow"})", "--wait"},
                &sout),
            1)
      << sout;
  r = Json::parse(sout, nullptr, false);
  EXPECT_EQ(r.value("status", ""), "denied") << sout;
  EXPECT_EQ(r["result"]["error"].value("code", ""), "E_POLICY_DENIED") << sout;
  EXPECT_EQ(run("submit-bad",
                {TOLLGATE_BIN, "submit", "--data", data, "--agent", "a1", "--session", "s1", "--tool", "echo",
                 "--args", "not json", "--wait"},
                &sout),
            2);
  // The running log, read by another process (a RocksDB secondary).
  EXPECT_EQ(run("verify", {TOLLGATE_BIN, "audit", "verify", "--data", data + "/log"}, &sout), 0) << sout;
  EXPECT_EQ(run("query", {TOLLGATE_BIN, "audit", "query", "--data", data + "/log", "--session", "s1"}, &sout),
            0);
  size_t lines = 0;
  for (char ch : sout) lines += ch == '\n';
  EXPECT_GE(lines, 6u) << "two requests: received, decided, result at least\n" << sout;
  // The data directory works as well as its log, as for every other command;
  // a directory holding no log says where it looked.
  std::string by_data;
  EXPECT_EQ(run("query-data", {TOLLGATE_BIN, "audit", "query", "--data", data, "--session", "s1"}, &by_data),
            0);
  EXPECT_EQ(by_data, sout);
  std::string missing;
  EXPECT_EQ(
      run("query-missing",
          {TOLLGATE_BIN, "audit", "query", "--data", data + "/nothing-here", "--session", "s1"}, &missing),
      2);

  up.Signal(SIGINT);
  auto st = up.Wait(seconds(20));
  ASSERT_TRUE(st.has_value()) << "`up` ignored SIGINT for 20 s\n" << up.Describe();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << DescribeStatus(*st) << "\n" << up.Describe();
  EXPECT_TRUE(Contains(up.out(), "SIGINT, draining")) << up.Describe();
  EXPECT_TRUE(Contains(up.out(), "tollgate: stopped")) << up.Describe();
  // What each stage did: two requests reached ingest, one was executed.
  EXPECT_TRUE(Contains(up.out(), "ingest: 2 messages")) << up.Describe();
  EXPECT_TRUE(Contains(up.out(), "execute: 1 messages")) << up.Describe();

  // The log it leaves is sound.
  std::unique_ptr<LogStore> store;
  Status s = LogStore::Open(data + "/log", OpenMode::kReadOnly, &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  VerifyReport report = VerifyLog(*store);
  EXPECT_TRUE(report.ok()) << report.Summary();
  EXPECT_GE(report.events, 6u);
  std::cout << "[ time ] UpServesSubmitAndStopsOnSigint took " << Since(t0) << " s\n";
}

// ------------------------------------------------ regressions

// EnsureTopics creates only missing topics: the mock cluster does not
// implement CreateTopics, and `tollgate up --brokers <tollgate broker>` must
// start against topics that exist (SurvivingBrokerKillUp's first step).
TEST(EmbeddedBrokerContract, EnsureTopicsAcceptsTopicsThatExist) {
  std::unique_ptr<EmbeddedBroker> broker;
  ASSERT_TRUE(EmbeddedBroker::Start(1, &broker).ok());
  BusConfig bus;
  bus.brokers = broker->bootstrap();
  for (const auto& t : bus.topics.All()) ASSERT_TRUE(broker->CreateTopic(t, PartitionsOf(bus, t)).ok());
  const auto t0 = Clock::now();
  Status s = EnsureTopics(bus, seconds(3));
  EXPECT_TRUE(s.ok()) << s.ToString() << " (after " << Since(t0) << " s)";
}

// A stage's batch of events is ONE RocksDB write batch (LogSink uses
// EventLog::AppendGroupAsync), so a kill -9 never leaves half of it — e.g.
// execution.started without its execution.completed, which would make the
// restarted execute stage record a second attempt. Before the fix the events
// were queued one by one and the writer often split them.
TEST(LogSinkContract, AStageBatchIsOneGroupCommit) {
  ScratchDir dir("sink");
  ASSERT_FALSE(dir.path().empty());
  std::mutex mu;
  std::vector<std::vector<uint64_t>> batches;  // seqs of the events in each write batch
  std::atomic<uint32_t> events_cf{UINT32_MAX};
  LogOptions lo;
  lo.durability = Durability::kSync;
  lo.batch_observer = [&](const rocksdb::WriteBatch& wb) {
    struct Seqs : rocksdb::WriteBatch::Handler {
      uint32_t cf = 0;
      std::vector<uint64_t> seqs;
      rocksdb::Status PutCF(uint32_t id, const rocksdb::Slice& key, const rocksdb::Slice&) override {
        if (id == cf && key.size() == 8) {
          uint64_t v = 0;
          for (size_t i = 0; i < 8; ++i) v = v << 8 | static_cast<uint8_t>(key[i]);
          seqs.push_back(v);
        }
        return rocksdb::Status::OK();
      }
    } h;
    h.cf = events_cf.load();
    wb.Iterate(&h);
    std::lock_guard<std::mutex> l(mu);
    batches.push_back(std::move(h.seqs));
  };
  std::unique_ptr<EventLog> log;
  Status s = EventLog::Open(dir.sub("log"), lo, &log);
  ASSERT_TRUE(s.ok()) << s.ToString();
  events_cf = log->store().cf(logfmt::kEvents)->GetID();
  LogSink sink(*log);
  // As the execute stage does for one message: started and completed, one AppendAll.
  const int kCalls = 100;
  std::vector<std::pair<uint64_t, uint64_t>> pairs;
  for (int i = 0; i < kCalls; ++i) {
    const std::string rid = "sink-" + std::to_string(i);
    std::vector<Event> events = {testing::MakeEvent("execution.started", rid),
                                 testing::MakeEvent("execution.completed", rid)};
    std::vector<EventSink::Appended> out;
    sink.AppendAll(events, &out);
    ASSERT_EQ(out.size(), 2u);
    ASSERT_TRUE(out[0].status.ok() && out[1].status.ok())
        << out[0].status.ToString() << out[1].status.ToString();
    pairs.emplace_back(out[0].seq, out[1].seq);
  }
  log.reset();
  std::map<uint64_t, size_t> batch_of;
  for (size_t b = 0; b < batches.size(); ++b) {
    for (uint64_t seq : batches[b]) batch_of[seq] = b;
  }
  int split = 0;
  for (auto [a, b] : pairs) split += batch_of.at(a) != batch_of.at(b);
  EXPECT_EQ(split, 0) << split << " of " << kCalls
                      << " two-event AppendAll calls were written in two RocksDB write batches ("
                      << batches.size() << " batches for " << 2 * kCalls << " events)";
}

}  // namespace
}  // namespace tollgate
