// Crash safety of the event log: a writer process (log_crash_child) is
// kill -9'd at random moments, over and over, on one log directory. After
// every kill the log must verify (chain, meta, every index), and every append
// the child saw acknowledged must be in the log at the seq it was given.
// Re-appends of stored ids (the child's start-up and its own re-appends) must
// return the seq that id was first given.
//
// 50 cycles by default; TOLLGATE_LONG_TESTS=1 runs 500. TOLLGATE_TEST_SEED=N
// replays one schedule of delays (the seed is printed at the start).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "audit/event_log.h"
#include "audit/log_store.h"
#include "audit/verify.h"
#include "test_util.h"

extern char** environ;

namespace tollgate {
namespace {

using testing::TempDir;
using Clock = std::chrono::steady_clock;

bool LongTests() {
  const char* v = std::getenv("TOLLGATE_LONG_TESTS");
  return v != nullptr && std::string(v) == "1";
}

uint64_t TestSeed() {
  if (const char* v = std::getenv("TOLLGATE_TEST_SEED"); v != nullptr && *v != '\0') {
    return std::strtoull(v, nullptr, 10);
  }
  return std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One run of the child: spawned with stdout on a pipe, killed by the test.
class Child {
 public:
  Child(const std::string& log_dir, const std::string& run, const std::string& stderr_path) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    std::string exe = LOG_CRASH_CHILD;
    char* argv[] = {exe.data(), const_cast<char*>(log_dir.c_str()), const_cast<char*>(run.c_str()), nullptr};
    int rc = posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
      pid_ = -1;
      close(fds[0]);
      return;
    }
    fd_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  bool started() const { return pid_ > 0 && fd_ >= 0; }

  // Reads whatever arrives until `deadline`, or until `stop()` holds, or EOF.
  // Returns false on EOF (the child is gone).
  template <typename Stop>
  bool ReadUntil(Clock::time_point deadline, Stop stop) {
    for (;;) {
      if (stop()) return true;
      auto now = Clock::now();
      if (now >= deadline) return true;
      int ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count());
      pollfd p{fd_, POLLIN, 0};
      int n = poll(&p, 1, ms);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) continue;
      if (!ReadSome()) return false;
    }
  }
  // Kills the child, reaps it and drains the pipe to EOF. Returns the wait status.
  int KillAndDrain() {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    while (ReadSome()) {
    }
    return status;
  }
  const std::string& output() const { return out_; }

 private:
  bool ReadSome() {
    char buf[8192];
    for (;;) {
      ssize_t n = read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      out_.append(buf, static_cast<size_t>(n));
      return true;
    }
  }
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string out_;
};

struct Line {
  std::string kind, id;
  uint64_t seq = 0;
};

// Splits the child's output into lines; a partial last line is an error (a
// line is one atomic pipe write).
bool ParseOutput(const std::string& out, std::vector<Line>* lines, uint64_t* ready_head, bool* ready,
                 std::string* error) {
  *ready = false;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    if (nl == std::string::npos) {
      *error = "partial line at the end of the child's output: '" + out.substr(pos) + "'";
      return false;
    }
    std::string text = out.substr(pos, nl - pos);
    pos = nl + 1;
    std::istringstream in(text);
    Line l;
    in >> l.kind;
    if (l.kind == "ready") {
      std::string run;
      if (!(in >> *ready_head >> run) || *ready) {
        *error = "bad ready line: " + text;
        return false;
      }
      *ready = true;
      continue;
    }
    if (l.kind == "error") {
      *error = "the child reported: " + text;
      return false;
    }
    if ((l.kind != "ack" && l.kind != "dup") || !(in >> l.id >> l.seq) || l.id.size() != 32 || l.seq == 0 ||
        !*ready) {
      *error = "unexpected line from the child: '" + text + "'";
      return false;
    }
    lines->push_back(l);
  }
  return true;
}

struct Totals {
  uint64_t acks = 0, dups = 0, cross_run_dups = 0, durable_unacked = 0, final_head = 0;
  int early_kills = 0, cycles_with_acks = 0;
  double verify_ms = 0;
};

// `cycles` spawn-and-kill cycles on one fresh log directory.
void CrashCycles(int first_cycle, int cycles, std::mt19937_64& rng, Totals& totals) {
  TempDir dir;
  const std::string log_dir = dir.sub("log");
  const std::string stderr_path = dir.sub("child-stderr.txt");

  std::map<std::string, uint64_t> acked;     // id -> seq of its one ack
  std::map<std::string, uint64_t> dup_only;  // ids seen only as dup (durable, ack lost to the kill)
  std::map<uint64_t, std::string> owner;     // seq -> id, from every ack/dup line
  uint64_t prev_head = 0;

  for (int cycle = first_cycle; cycle < first_cycle + cycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    // One kill in five lands at any moment after spawn (possibly while the
    // child opens and recovers the log); the others while it appends.
    const bool early = rng() % 5 == 0;
    const int delay_ms = early ? static_cast<int>(rng() % 41) : 5 + static_cast<int>(rng() % 56);

    std::string run = "c";  // (not "c" + ...: GCC 12 warns falsely about that)
    run += std::to_string(cycle);
    Child child(log_dir, run, stderr_path);
    ASSERT_TRUE(child.started()) << "cannot spawn " << LOG_CRASH_CHILD;
    bool alive = true;
    if (early) {
      alive = child.ReadUntil(Clock::now() + std::chrono::milliseconds(delay_ms), [] { return false; });
    } else {
      alive = child.ReadUntil(Clock::now() + std::chrono::seconds(30),
                              [&] { return child.output().find('\n') != std::string::npos; });
      if (alive) {
        ASSERT_NE(child.output().find('\n'), std::string::npos) << "the child printed nothing in 30 s";
        alive = child.ReadUntil(Clock::now() + std::chrono::milliseconds(delay_ms), [] { return false; });
      }
    }
    const int status = child.KillAndDrain();
    ASSERT_TRUE(alive && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the child died on its own (status " << status << "); its stderr:\n"
        << ReadFile(stderr_path) << "\nits stdout:\n"
        << child.output().substr(0, 4000);

    std::vector<Line> lines;
    uint64_t ready_head = 0;
    bool ready = false;
    std::string error;
    ASSERT_TRUE(ParseOutput(child.output(), &lines, &ready_head, &ready, &error)) << error;
    if (!ready) {
      ++totals.early_kills;
    } else {
      // The head at open is at least what earlier runs had made durable.
      EXPECT_GE(ready_head, prev_head) << "the log lost records across a crash";
    }

    // Bookkeeping of what the child claims. Acks first: when threads append
    // the same id in one batch, the duplicate's line may precede the ack's.
    std::stable_partition(lines.begin(), lines.end(), [](const Line& l) { return l.kind == "ack"; });
    int cycle_acks = 0;
    for (const Line& l : lines) {
      if (l.kind == "ack") {
        ++totals.acks;
        ++cycle_acks;
        EXPECT_GT(l.seq, ready_head) << "fresh append of " << l.id
                                     << " got a seq at or below the head at open";
        auto [it, inserted] = acked.emplace(l.id, l.seq);
        EXPECT_TRUE(inserted) << l.id << " was acknowledged twice as new: seq " << it->second << " and "
                              << l.seq << " (idempotent append broken)";
        if (auto d = dup_only.find(l.id); d != dup_only.end()) {
          ADD_FAILURE() << l.id << " was acknowledged as new at seq " << l.seq
                        << " after being a duplicate at " << d->second;
        }
      } else {
        ++totals.dups;
        if (l.seq <= ready_head) ++totals.cross_run_dups;
        if (auto a = acked.find(l.id); a != acked.end()) {
          EXPECT_EQ(l.seq, a->second) << "re-append of " << l.id << " returned another seq than its ack";
        } else {
          auto [d, inserted] = dup_only.emplace(l.id, l.seq);
          EXPECT_EQ(d->second, l.seq) << "two re-appends of " << l.id << " returned different seqs";
        }
      }
      auto [o, inserted] = owner.emplace(l.seq, l.id);
      EXPECT_EQ(o->second, l.id) << "seq " << l.seq << " was reported for two ids";
    }
    if (cycle_acks > 0) ++totals.cycles_with_acks;
    if (::testing::Test::HasFailure()) return;

    // The log as a reader sees it after the crash.
    std::unique_ptr<LogStore> store;
    Status s = LogStore::Open(log_dir, OpenMode::kReadOnly, &store);
    if (!s.ok()) {
      // Only a kill before the very first open completed (RocksDB creates the
      // column families one by one) may leave no openable log, and then
      // nothing was ever acknowledged.
      ASSERT_TRUE(acked.empty() && dup_only.empty() && prev_head == 0)
          << "cannot open the log after cycle " << cycle << ": " << s.ToString();
      continue;
    }
    const auto v0 = Clock::now();
    VerifyReport report = VerifyLog(*store);
    totals.verify_ms += std::chrono::duration<double, std::milli>(Clock::now() - v0).count();
    ASSERT_TRUE(report.ok()) << report.Summary() << ": " << report.problems.front().status.ToString();
    uint64_t head;
    Digest head_hash;
    ASSERT_TRUE(store->ReadHead(&head, &head_hash).ok());
    EXPECT_EQ(head, report.head_seq);
    EXPECT_GE(head, prev_head) << "the head went back across a crash";
    prev_head = head;

    // Every id ever acknowledged or re-appended on this log is at its seq.
    auto check = [&](const std::string& id, uint64_t seq) {
      Event e;
      Status r = store->ReadEvent(seq, &e);
      ASSERT_TRUE(r.ok()) << "acknowledged seq " << seq << " (" << id << ") is not in the log (head " << head
                          << "): " << r.ToString();
      EXPECT_EQ(e.id, id) << "seq " << seq << " holds another event than the one acknowledged";
    };
    for (const auto& [id, seq] : acked) check(id, seq);
    for (const auto& [id, seq] : dup_only) check(id, seq);
    if (::testing::Test::HasFailure()) return;
  }

  // After all that, the log still takes appends in this process and verifies.
  {
    std::unique_ptr<EventLog> log;
    ASSERT_TRUE(EventLog::Open(log_dir, LogOptions{}, &log).ok());
    EXPECT_EQ(log->head_seq(), prev_head);
    for (int i = 0; i < 10; ++i) {
      AppendResult r =
          log->Append(testing::MakeEvent("request.received", "after-crashes-" + std::to_string(i)));
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_EQ(r.seq, prev_head + 1 + i);
    }
    if (!acked.empty()) {
      // An acknowledged event appended again is a duplicate at its seq.
      const auto& [id, seq] = *acked.begin();
      Event e;
      ASSERT_TRUE(log->store().ReadEvent(seq, &e).ok());
      AppendResult r = log->Append(e);
      ASSERT_TRUE(r.status.ok());
      EXPECT_TRUE(r.duplicate);
      EXPECT_EQ(r.seq, seq);
    }
    VerifyReport report = VerifyLog(log->store());
    EXPECT_TRUE(report.ok()) << report.Summary();
  }

  totals.durable_unacked += dup_only.size();
  totals.final_head = prev_head;
}

TEST(CrashTest, KillNineNeverLosesAnAcknowledgedAppend) {
  // VerifyLog reads the whole log after every kill, so the long run starts
  // a fresh log every kCyclesPerLog cycles to stay linear.
  constexpr int kCyclesPerLog = 100;
  const int cycles = LongTests() ? 500 : 50;
  const uint64_t seed = TestSeed();
  std::cout << "crash_test: " << cycles << " cycles, seed " << seed
            << " (replay with TOLLGATE_TEST_SEED=" << seed << ")" << std::endl;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Totals totals;
  const auto started = Clock::now();
  for (int first = 0; first < cycles; first += kCyclesPerLog) {
    CrashCycles(first, std::min(kCyclesPerLog, cycles - first), rng, totals);
    if (HasFailure()) return;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - started).count();
  std::cout << "crash_test: " << cycles << " kills in " << secs << " s (verify " << totals.verify_ms / 1000
            << " s); last log's head " << totals.final_head << "; " << totals.acks << " acks, " << totals.dups
            << " dups (" << totals.cross_run_dups << " of earlier runs' events), " << totals.durable_unacked
            << " ids durable without an ack; " << totals.early_kills << " kills before the log was open"
            << std::endl;
  // The test must have tested something: most cycles appended, and re-appends
  // of earlier runs' events were checked.
  EXPECT_GE(totals.cycles_with_acks, cycles / 4) << "too few cycles got to append before the kill";
  EXPECT_GT(totals.cross_run_dups, 0u) << "no re-append of an earlier run's event was checked";
}

}  // namespace
}  // namespace tollgate
