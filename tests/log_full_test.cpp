// A full disk under the event log (issue 31, docs/operations.md "A full
// disk"): appends are refused with E_LOG_FULL and nothing crashes, /healthz
// and /metrics say the log refuses, a call made meanwhile does not run, and
// everything resumes by itself once the disk has room.
//
// Each test mounts a small tmpfs of its own and fills it. The mounts live in
// a private mount namespace made before main (a user namespace too when not
// root), so they vanish with the process, even one that aborts; where no
// namespace can be made the tests are skipped, saying why.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "api/api_client.h"
#include "audit/event_log.h"
#include "audit/verify.h"
#include "tests/child_process.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

using namespace std::chrono_literals;
using testing::MakeEvent;
using testing::TempDir;

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

// Before main, while the process has one thread (unshare needs that).
std::string MakePrivateMounts() {
  if (geteuid() != 0) {
    const uid_t uid = geteuid();
    const gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      return std::string("not root, and no user namespace: ") + std::strerror(errno);
    }
    if (!WriteFile("/proc/self/setgroups", "deny") ||
        !WriteFile("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !WriteFile("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")) {
      return "cannot map this user into its user namespace";
    }
  } else if (unshare(CLONE_NEWNS) != 0) {
    return std::string("no private mount namespace: ") + std::strerror(errno);
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return std::string("cannot make the mounts private: ") + std::strerror(errno);
  }
  return "";
}
const std::string kNoMounts = MakePrivateMounts();

// A tmpfs of `bytes` at `dir`, and a file that fills it.
class SmallDisk {
 public:
  SmallDisk(const std::string& dir, size_t bytes) : dir_(dir) {
    std::filesystem::create_directories(dir);
    if (!kNoMounts.empty()) {
      problem_ = kNoMounts;
    } else if (mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + std::to_string(bytes)).c_str()) != 0) {
      problem_ = std::string("cannot mount a tmpfs: ") + std::strerror(errno);
    }
  }
  ~SmallDisk() {
    if (problem_.empty()) umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& problem() const { return problem_; }
  uint64_t FreeBytes() const {
    struct statvfs st {};
    return statvfs(dir_.c_str(), &st) == 0 ? uint64_t{st.f_bavail} * st.f_frsize : 0;
  }
  // Writes `filler` until the disk is full to the last page.
  void Fill() {
    const int fd = open((dir_ + "/filler").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const std::string chunk(1 << 20, 'x');
    for (size_t size = chunk.size(); size >= 512; size /= 2) {
      while (write(fd, chunk.data(), size) == static_cast<ssize_t>(size)) {
      }
    }
    close(fd);
    ASSERT_LT(FreeBytes(), 4096u);
  }
  void Free() { std::filesystem::remove(dir_ + "/filler"); }

 private:
  std::string dir_;
  std::string problem_;
};

Status OpenLog(const std::string& path, uint64_t min_free, std::unique_ptr<EventLog>* log) {
  LogOptions o;
  o.durability = Durability::kSync;
  o.min_free_bytes = min_free;
  return EventLog::Open(path, o, log);
}

// Appends request.received of `rid`; its status.
Status Append(EventLog& log, const std::string& rid) {
  return log.Append(MakeEvent("request.received", rid)).status;
}

// The log holds exactly `rids`, in order, in an intact chain.
void ExpectLogHolds(const std::string& path, const std::vector<std::string>& rids) {
  std::unique_ptr<LogStore> store;
  Status s = LogStore::Open(path, OpenMode::kReadOnly, &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  VerifyReport report = VerifyLog(*store);
  EXPECT_TRUE(report.ok()) << report.problems.front().status.ToString();
  uint64_t head = 0;
  Digest hash;
  ASSERT_TRUE(store->ReadHead(&head, &hash).ok());
  ASSERT_EQ(head, rids.size());
  for (uint64_t seq = 1; seq <= head; ++seq) {
    Event e;
    ASSERT_TRUE(store->ReadEvent(seq, &e).ok());
    EXPECT_EQ(e.request_id, rids[seq - 1]) << "seq " << seq;
  }
}

TEST(LogFull, AFullDiskRefusesAppendsWithoutCrashingAndResumesWhenSpaceIsFreed) {
  TempDir dir;
  SmallDisk disk(dir.sub("disk"), 24 << 20);
  if (!disk.problem().empty()) GTEST_SKIP() << disk.problem();
  const std::string path = dir.sub("disk/log");
  std::unique_ptr<EventLog> log;
  Status s = OpenLog(path, 4 << 20, &log);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(Append(*log, "before").ok());
  EXPECT_FALSE(log->refusing());

  disk.Fill();
  EXPECT_TRUE(log->refusing()) << "the disk is full before anything is appended";
  s = Append(*log, "refused");
  EXPECT_EQ(s.code(), errc::kLogFull) << s.ToString();
  EXPECT_NE(s.message().find("resume by themselves"), std::string::npos) << s.message();
  AppendResult async = log->AppendAsync(MakeEvent("request.received", "refused-async")).get();
  EXPECT_EQ(async.status.code(), errc::kLogFull) << "refused at once, not queued";
  EXPECT_EQ(log->last_error().code(), errc::kLogFull);
  EXPECT_EQ(log->refused_appends(), 2u);

  disk.Free();
  ASSERT_TRUE(testing::WaitUntil([&] { return !log->refusing(); }, 10s)) << log->last_error().ToString();
  AppendResult after = log->Append(MakeEvent("request.received", "after"));
  ASSERT_TRUE(after.status.ok()) << after.status.ToString();
  EXPECT_EQ(after.seq, 2u) << "the chain goes on from the last written event";
  log.reset();
  ExpectLogHolds(path, {"before", "after"});
}

TEST(LogFull, OpeningALogOnAFullDiskFailsWithAClearErrorOrRefusesAppends) {
  TempDir dir;
  SmallDisk disk(dir.sub("disk"), 16 << 20);
  if (!disk.problem().empty()) GTEST_SKIP() << disk.problem();
  const std::string path = dir.sub("disk/log");
  std::unique_ptr<EventLog> log;
  ASSERT_TRUE(OpenLog(path, 0, &log).ok());
  ASSERT_TRUE(Append(*log, "before").ok());
  log.reset();
  disk.Fill();
  Status s = OpenLog(path, 0, &log);
  if (s.ok()) {
    s = Append(*log, "refused");
    log.reset();
  }
  EXPECT_TRUE(s.code() == errc::kLogFull || s.code() == errc::kLogIO) << s.ToString();
  disk.Free();
  ASSERT_TRUE(OpenLog(path, 0, &log).ok());
  ASSERT_TRUE(Append(*log, "after").ok());
  log.reset();
  ExpectLogHolds(path, {"before", "after"});
}

// With no room kept, RocksDB's own WAL write meets the full disk. Twice:
// the second time it is the first write after the recovery flushed every
// memtable, the case where RocksDB keeps the failed WAL unless the log
// keeps a memtable written (EventLog::PinMemtable).
TEST(LogFull, AFailedRocksDbWriteIsRecoveredTwiceAndTheChainStaysWhole) {
  TempDir dir;
  SmallDisk disk(dir.sub("disk"), 16 << 20);
  if (!disk.problem().empty()) GTEST_SKIP() << disk.problem();
  const std::string path = dir.sub("disk/log");
  std::unique_ptr<EventLog> log;
  Status s = OpenLog(path, 0, &log);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(Append(*log, "first").ok());
  std::vector<std::string> held = {"first"};
  disk.Fill();
  // A small write may still fit in a page the WAL holds: go on until one
  // does not.
  Status failed;
  for (int i = 0; i < 1000 && failed.ok(); ++i) {
    const std::string rid = "fill-" + std::to_string(i);
    failed = log->Append(MakeEvent("request.received", rid, "s1", "a1", "o1", "echo", 1'790'000'000'000'000,
                                   Json{{"pad", std::string(8192, 'p')}}))
                 .status;
    if (failed.ok()) held.push_back(rid);
  }
  ASSERT_EQ(failed.code(), errc::kLogFull) << failed.ToString();
  EXPECT_TRUE(log->refusing());
  EXPECT_EQ(Append(*log, "refused").code(), errc::kLogFull);
  disk.Free();
  ASSERT_TRUE(testing::WaitUntil([&] { return !log->refusing(); }, 10s)) << log->last_error().ToString();

  disk.Fill();
  EXPECT_EQ(Append(*log, "first-after-recovery").code(), errc::kLogFull);
  disk.Free();
  ASSERT_TRUE(testing::WaitUntil([&] { return !log->refusing(); }, 10s)) << log->last_error().ToString();
  s = Append(*log, "resumed");
  ASSERT_TRUE(s.ok()) << s.ToString();
  held.push_back("resumed");
  log.reset();
  ExpectLogHolds(path, held);
}

// Four writers keep appending while the disk fills and frees: the writer
// and the fsync thread both meet the full disk, in any order. Nothing
// crashes, and every acknowledged event is in the log, in an intact chain.
TEST(LogFull, ManyWritersMeetingAFullDiskNeverCrashAndKeepWhatWasAcknowledged) {
  TempDir dir;
  SmallDisk disk(dir.sub("disk"), 16 << 20);
  if (!disk.problem().empty()) GTEST_SKIP() << disk.problem();
  const std::string path = dir.sub("disk/log");
  std::unique_ptr<EventLog> log;
  ASSERT_TRUE(OpenLog(path, 0, &log).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};
  std::mutex mu;
  std::set<std::string> acknowledged;
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        const std::string rid = "w" + std::to_string(t) + "-" + std::to_string(i);
        AppendResult r = log->Append(MakeEvent("request.received", rid, "s1", "a1", "o1", "echo",
                                               1'790'000'000'000'000, Json{{"pad", std::string(2048, 'p')}}));
        if (r.status.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          acknowledged.insert(rid);
        } else {
          EXPECT_TRUE(r.status.code() == errc::kLogFull || r.status.code() == errc::kLogIO)
              << r.status.ToString();
          refused.fetch_add(1);
          std::this_thread::yield();
        }
      }
    });
  }
  for (int round = 0; round < 3; ++round) {
    const int before = refused.load();
    disk.Fill();
    EXPECT_TRUE(testing::WaitUntil([&] { return refused.load() > before + 8; }, 10s));
    disk.Free();
    ASSERT_TRUE(testing::WaitUntil([&] { return !log->refusing(); }, 10s)) << log->last_error().ToString();
    const size_t acked = [&] {
      std::lock_guard<std::mutex> lock(mu);
      return acknowledged.size();
    }();
    EXPECT_TRUE(testing::WaitUntil(
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          return acknowledged.size() > acked + 8;
        },
        10s))
        << "appends go through again";
  }
  stop.store(true);
  for (auto& w : writers) w.join();
  log.reset();
  std::unique_ptr<LogStore> store;
  ASSERT_TRUE(LogStore::Open(path, OpenMode::kReadOnly, &store).ok());
  VerifyReport report = VerifyLog(*store);
  EXPECT_TRUE(report.ok()) << report.problems.front().status.ToString();
  for (const std::string& rid : acknowledged) {
    uint64_t seq = 0;
    EXPECT_TRUE(store->SeqOfEvent(MakeEvent("request.received", rid).id, &seq).ok())
        << rid << " was acknowledged";
  }
}

// ------------------------------------------------------- the real `up`

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Health {
  int status = 0;
  Json body;
};

Health GetHealth(const std::string& url) {
  httplib::Client c(url);
  c.set_connection_timeout(2);
  auto res = c.Get("/healthz");
  if (!res) return {};
  return {res->status, Json::parse(res->body, nullptr, false)};
}

std::string GetMetrics(const std::string& url) {
  httplib::Client c(url);
  auto res = c.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

bool Has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// How often `up` logged a refused append of request.received for `rid`.
size_t RefusedReceived(const std::string& up_err, const std::string& rid) {
  const std::string line =
      std::string(errc::kLogFull) + ": append of request.received for " + rid + " failed";
  size_t n = 0;
  for (size_t at = up_err.find(line); at != std::string::npos; at = up_err.find(line, at + 1)) ++n;
  return n;
}

// A call made while the disk is full is refused at its first append and
// does not run; /healthz and /metrics say why; once space is freed the
// call completes by itself, with no restart.
TEST(LogFull, HealthzAndMetricsSayTheLogIsRefusingAndACallWaitsUnrunUntilSpaceIsFreed) {
  TempDir dir;
  SmallDisk disk(dir.sub("disk"), 48 << 20);
  if (!disk.problem().empty()) GTEST_SKIP() << disk.problem();
  const std::string data = dir.sub("disk/data"), policy = dir.sub("policy.yaml");
  const std::string workspaces = dir.sub("workspaces");  // off the full disk: where the call writes
  std::ofstream(policy) << "version: 1\nmode: ask\nallow:\n  - builtin:echo\n  - builtin:write_file\n";
  testing::ChildProcess add;
  ASSERT_TRUE(add.Start({TOLLGATE_BIN, "agents", "add", "--data", data, "--org", "o1", "--agent", "a1"},
                        dir.sub("add.out"), dir.sub("add.err")));
  ASSERT_EQ(add.Wait(60s).value_or(-2), 0) << add.err();

  testing::ChildProcess up;
  ASSERT_TRUE(up.Start({TOLLGATE_BIN, "up", "--data", data, "--policy", policy, "--workspaces", workspaces,
                        "--http", "127.0.0.1:0", "--metrics-public", "--durability", "sync"},
                       dir.sub("up.out"), dir.sub("up.err")));
  std::string url;
  ASSERT_TRUE(testing::WaitUntil(
                  [&] {
                    Json ep = Json::parse(ReadAll(data + "/endpoints.json"), nullptr, false);
                    if (ep.is_object()) url = ep.value("http", "");
                    return !url.empty() || up.Poll();
                  },
                  60s) &&
              !up.Poll())
      << up.err();
  auto submit = [&](testing::ChildProcess& c, const std::string& rid, const std::string& tool,
                    const Json& args) {
    return c.Start({TOLLGATE_BIN, "submit", "--data", data, "--org", "o1", "--agent", "a1", "--session", "s1",
                    "--tool", tool, "--args", args.dump(), "--request-id", rid, "--wait", "--timeout", "60"},
                   dir.sub(rid + ".out"), dir.sub(rid + ".err"));
  };
  testing::ChildProcess warm;
  ASSERT_TRUE(submit(warm, "warm-up", "echo", {{"text", "hi"}}));
  ASSERT_EQ(warm.Wait(60s).value_or(-2), 0) << warm.out() << warm.err() << up.err();
  EXPECT_EQ(GetHealth(url).status, 200);

  disk.Fill();
  Health full = GetHealth(url);
  EXPECT_EQ(full.status, 503) << full.body.dump();
  EXPECT_EQ(full.body.value("ok", true), false);
  EXPECT_EQ(full.body["log_refusing"].value("code", ""), errc::kLogFull) << full.body.dump();
  EXPECT_TRUE(Has(GetMetrics(url), "tollgate_log_refusing_appends 1"));
  EXPECT_TRUE(ApiAnswers(url)) << "the CLI still finds up (and its errors), not a log to open itself";

  testing::ChildProcess call;
  ASSERT_TRUE(submit(call, "on-a-full-disk", "write_file", {{"path", "ran.txt"}, {"content", "x"}}));
  // The proof that it was tried: ingest's append of its request.received
  // refused, twice (the stage retries the batch).
  ASSERT_TRUE(testing::WaitUntil([&] { return RefusedReceived(up.err(), "on-a-full-disk") >= 2; }, 30s))
      << up.err();
  const std::string ran = workspaces + "/o1/a1/ran.txt";
  EXPECT_FALSE(std::filesystem::exists(ran)) << "the call ran while the log refused";
  EXPECT_FALSE(call.Poll()) << "the call was answered before it was logged: " << call.out();
  EXPECT_FALSE(up.Poll()) << "up ended: " << up.err();

  disk.Free();
  ASSERT_TRUE(testing::WaitUntil([&] { return GetHealth(url).status == 200; }, 10s))
      << GetHealth(url).body.dump();
  ASSERT_EQ(call.Wait(30s).value_or(-2), 0) << call.out() << call.err() << up.err();
  Json result = Json::parse(call.out(), nullptr, false);
  EXPECT_EQ(result.value("status", ""), "completed") << call.out();
  EXPECT_TRUE(std::filesystem::exists(ran)) << "the call ran once the log took appends again";
  const std::string metrics = GetMetrics(url);
  EXPECT_TRUE(Has(metrics, "tollgate_log_refusing_appends 0")) << metrics;
  EXPECT_FALSE(Has(metrics, "tollgate_log_refused_appends_total 0\n")) << metrics;
}

}  // namespace
}  // namespace tollgate
