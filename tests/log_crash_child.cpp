// log_crash_child DIR [RUN]: a writer process for the crash tests.
//
// Opens EventLog(DIR) with Durability::kSync and appends events from
// kThreads threads until it is killed (crash_test kill -9's it after a random
// delay; audit_log_test follows it with a secondary reader). Every line it
// prints is one write(2) of less than PIPE_BUF bytes, so a line is either in
// the pipe whole or not at all when the kill lands:
//
//   ready <head_seq> <run>   the log is open; <head_seq> is its head at open
//   ack <event_id> <seq>     Append() returned OK, duplicate=false
//   dup <event_id> <seq>     Append() returned OK, duplicate=true
//   error <message>          an invariant broke; the process exits 3
//
// Events are deterministic functions of (run, thread, n) or (run, k) for
// events that all threads append (each records its generator in
// data.gen), so a later run can rebuild any stored event from the log alone.
// At start-up thread 0 first re-appends rebuilt copies of the newest events
// and of some random older ones: each must come back duplicate=true with the
// seq and hash already stored (idempotent append across a crash). Threads
// also re-append their own recent events, and every thread appends the same
// "shared" events, which exercises deduplication inside one group-commit
// batch.
//
// RUN tells this run's events apart from earlier runs'; crash_test passes its
// cycle number. Without it the run is named after the head at open, which
// also differs between runs that appended anything.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "audit/event_log.h"
#include "core/event.h"
#include "core/sha256.h"

namespace {

using tollgate::AppendResult;
using tollgate::Event;
using tollgate::EventLog;
using tollgate::Json;

constexpr int kThreads = 4;
// A safety net, never reached by the tests: a child whose parent vanished
// without killing it stops on its own.
constexpr auto kMaxRuntime = std::chrono::minutes(10);
constexpr int64_t kBaseTimeUs = 1'790'000'000'000'000;  // 2026-09-21

void WriteLine(const std::string& line) {
  // One write(2) per line; a pipe write under PIPE_BUF is atomic. Short
  // writes cannot happen on a blocking pipe for such sizes, but loop anyway.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = write(STDOUT_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(5);  // the reader is gone
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

[[noreturn]] void Fail(const std::string& what) {
  WriteLine("error " + what + "\n");
  std::fprintf(stderr, "log_crash_child: %s\n", what.c_str());
  _exit(3);
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

const char* const kTools[] = {"echo", "http_request", "cli:code-search", "read_file", "write_file", ""};
const char* const kOrgs[] = {"org-acme", "org-globex"};
const char* const kVerdicts[] = {"allow", "allow", "ask", "deny"};

// The n-th event of thread t of run `run`. Four steps per request, one
// request in nine goes through approval, every 23rd event is a policy
// update (no session, request, agent or tool: the optional indexes).
Event GenEvent(const std::string& run, int t, uint64_t n) {
  const uint64_t req = n / 4;
  const int step = static_cast<int>(n % 4);
  const bool needs_approval = req % 9 == 4;
  const std::string ts = std::to_string(t), ns = std::to_string(n), rs = std::to_string(req);
  Event e;
  e.org_id = kOrgs[(t + req) % 2];
  e.time_us = kBaseTimeUs + static_cast<int64_t>(Fnv1a(run) % 1'000'000'000'000) +
              static_cast<int64_t>(t) * 1'000'000'000 + static_cast<int64_t>(n) * 1'000;
  Json gen = {{"run", run}, {"t", t}, {"n", n}};
  if (n % 23 == 22) {
    e.type = "policy.updated";
    e.id = tollgate::MakeEventId(e.type, "", run + "/" + ts + "/" + ns);
    e.data = {{"gen", gen},
              {"policy_version", "v" + ns},
              {"content_hash", tollgate::Sha256Hex("policy " + run + ns)},
              {"source", "/etc/tollgate/policy.yaml"}};
    return e;
  }
  e.request_id = "req-" + run + "-t" + ts + "-" + rs;
  e.session_id = "sess-" + run + "-" + std::to_string(t % 2) + "-" + std::to_string(req / 6);
  e.agent_id = "agent-" + std::to_string((t + req) % 5);
  e.tool = kTools[(req + t) % 6];
  const std::string args_hash = tollgate::Sha256Hex(e.request_id + "/args");
  std::string discriminator;
  switch (step) {
    case 0:
      e.type = "request.received";
      e.data = {
          {"args", {{"path", "/srv/data/report-" + rs + ".txt"}, {"pattern", "TODO|FIXME"}, {"limit", 50}}},
          {"args_hash", args_hash},
          {"estimated_cost_usd", 0.0025 * static_cast<double>(req % 7)},
          {"metadata",
           {{"trace_id", tollgate::Sha256Hex(e.request_id).substr(0, 16)},
            {"note", "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \"quoted\"\ttab"}}}};
      break;
    case 1:
      e.type = "decision.made";
      e.data = {{"verdict", needs_approval ? "ask" : kVerdicts[req % 4]},
                {"reason", "rule matched: tool " + e.tool},
                {"rule", "rule-" + std::to_string(req % 11)},
                {"danger", static_cast<int>(req % 4)},
                {"policy_version", "v3"},
                {"budget",
                 {{"reserved_usd", 0.01}, {"remaining_usd", 12.5 - 0.01 * static_cast<double>(req % 100)}}}};
      break;
    case 2:
      if (needs_approval) {
        e.type = "approval.requested";
        e.data = {{"approvers_needed", 2},
                  {"deadline", tollgate::FormatTime(e.time_us + 3'600'000'000)},
                  {"args_hash", args_hash}};
      } else {
        e.type = "execution.started";
        discriminator = "attempt-1";
        e.data = {{"executor", "local"}, {"attempt", 1}};
      }
      break;
    default:
      if (needs_approval) {
        e.type = "approval.granted";
        discriminator = "approver:bob@example.com";
        e.data = {{"approver", "bob@example.com"}, {"scope", "once"}, {"comment", nullptr}};
      } else {
        e.type = "execution.completed";
        e.data = {{"result",
                   {{"success", req % 5 != 3},
                    {"data", {{"stdout", "line 1\nline 2\n"}, {"lines", Json::array({1, 2, 3})}}},
                    {"error",
                     req % 5 == 3
                         ? Json{{"code", "E_TOOL_EXEC"}, {"message", "exit status 2"}, {"recoverable", false}}
                         : Json(nullptr)},
                    {"meta", {{"duration_ms", 12 + req % 40}}}}},
                  {"actual_cost_usd", 0.001 * static_cast<double>(req % 13)}};
      }
      break;
  }
  e.id = tollgate::MakeEventId(e.type, e.request_id, discriminator);
  e.data["gen"] = gen;
  return e;
}

// The k-th event every thread of run `run` appends: identical content, so
// the first append wins and the others are duplicates.
Event GenShared(const std::string& run, uint64_t k) {
  Event e;
  e.type = "approval.granted";
  e.request_id = "req-" + run + "-shared-" + std::to_string(k);
  e.id = tollgate::MakeEventId(e.type, e.request_id, "approver:alice@example.com");
  e.org_id = "org-acme";
  e.agent_id = "agent-shared";
  e.session_id = "sess-" + run + "-shared";
  e.tool = "write_file";
  e.time_us =
      kBaseTimeUs + static_cast<int64_t>(Fnv1a(run) % 1'000'000'000'000) + static_cast<int64_t>(k) * 1'000;
  e.data = {{"gen", {{"run", run}, {"shared", k}}},
            {"approver", "alice@example.com"},
            {"scope", "always"},
            {"comment", "approved for the rest of the session"}};
  return e;
}

// Rebuilds a stored event from its data.gen; false if it is not ours.
bool Regenerate(const Event& stored, Event* out) {
  auto g = stored.data.find("gen");
  if (g == stored.data.end() || !g->is_object() || !g->contains("run") || !(*g)["run"].is_string()) {
    return false;
  }
  const std::string run = (*g)["run"].get<std::string>();
  if (g->contains("shared") && (*g)["shared"].is_number_unsigned()) {
    *out = GenShared(run, (*g)["shared"].get<uint64_t>());
    return true;
  }
  if (g->contains("t") && (*g)["t"].is_number_integer() && g->contains("n") &&
      (*g)["n"].is_number_unsigned()) {
    *out = GenEvent(run, (*g)["t"].get<int>(), (*g)["n"].get<uint64_t>());
    return true;
  }
  return false;
}

void Report(const char* what, const Event& e, const AppendResult& r) {
  if (!r.status.ok()) Fail(std::string(what) + " of " + e.id + " failed: " + r.status.ToString());
  WriteLine(std::string(r.duplicate ? "dup " : "ack ") + e.id + " " + std::to_string(r.seq) + "\n");
}

// Re-appends rebuilt copies of stored events: the newest ones (what the
// previous run may have been writing when it died) and random older ones.
void ReappendPrevious(EventLog& log, uint64_t head) {
  if (head == 0) return;
  std::vector<uint64_t> seqs;
  for (uint64_t s = head > 12 ? head - 11 : 1; s <= head; ++s) seqs.push_back(s);
  std::mt19937_64 rng(head);
  for (int i = 0; i < 12; ++i) seqs.push_back(1 + rng() % head);
  for (uint64_t seq : seqs) {
    Event stored, again;
    tollgate::Status s = log.store().ReadEvent(seq, &stored);
    if (!s.ok()) Fail("cannot read seq " + std::to_string(seq) + " below the head: " + s.ToString());
    if (!Regenerate(stored, &again)) continue;
    if (again.id != stored.id) Fail("rebuilt event of seq " + std::to_string(seq) + " has another id");
    AppendResult r = log.Append(again);
    if (r.status.ok() && (!r.duplicate || r.seq != seq || r.hash != stored.hash)) {
      Fail("re-append of " + again.id + " (stored at seq " + std::to_string(seq) + ") returned seq " +
           std::to_string(r.seq) + (r.duplicate ? " duplicate" : " NOT duplicate") + " hash " + r.hash);
    }
    Report("re-append", again, r);
  }
}

void Writer(EventLog& log, const std::string& run, int t, uint64_t head) {
  if (t == 0) ReappendPrevious(log, head);
  std::map<uint64_t, uint64_t> mine;  // n -> seq, for re-appends of our own events
  const auto deadline = std::chrono::steady_clock::now() + kMaxRuntime;
  for (uint64_t n = 0;; ++n) {
    if ((n & 63) == 0 && std::chrono::steady_clock::now() > deadline) _exit(0);
    Event e = GenEvent(run, t, n);
    AppendResult r = log.Append(e);
    Report("append", e, r);
    if (r.duplicate)
      Fail("fresh event " + e.id + " (" + run + "/" + std::to_string(t) + "/" + std::to_string(n) +
           ") was a duplicate");
    mine[n] = r.seq;
    if (n % 8 == 3) {
      Event sh = GenShared(run, n / 8);
      Report("shared append", sh, log.Append(sh));
    }
    if (n % 16 == 7 && n >= 16) {
      Event old = GenEvent(run, t, n - 9);
      AppendResult again = log.Append(old);
      if (again.status.ok() && (!again.duplicate || again.seq != mine[n - 9])) {
        Fail("re-append of own event " + old.id + " returned seq " + std::to_string(again.seq) +
             ", first appended at " + std::to_string(mine[n - 9]));
      }
      Report("own re-append", old, again);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: log_crash_child DIR [RUN]\n");
    return 2;
  }
#ifdef __linux__
  // Die with the test that spawned us, whatever happens to it.
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;
#endif
  std::unique_ptr<EventLog> log;
  tollgate::LogOptions options;
  options.durability = tollgate::Durability::kSync;
  tollgate::Status s = EventLog::Open(argv[1], options, &log);
  if (!s.ok()) Fail("open: " + s.ToString());
  const uint64_t head = log->head_seq();
  const std::string run = argc == 3 ? std::string(argv[2]) : "h" + std::to_string(head);
  WriteLine("ready " + std::to_string(head) + " " + run + "\n");

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { Writer(*log, run, t, head); });
  for (auto& th : threads) th.join();  // never: writers stop only by _exit
  return 0;
}
