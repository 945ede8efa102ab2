// Refusals of messages nobody proved (docs/trust.md, "Refusals never speak
// for an unproven identity").
//
// A message whose sender no signature proves (ingest: no, a bad or an
// unknown key's signature; a flow the log does not bear out; an unsealed
// message on the events topic) may name any org and request_id. Its
// refusal is filed under org, agent and session "unknown" and a request_id
// derived from its own bytes, never under the ids it claims: a forger must
// not be able to end, or write into, another request's history or make a
// result its victim's client would take for its own. What it claimed is
// kept in data.claimed, for the auditor only.
//
// Unproven junk is counted, not logged one by one, past a few per window
// (RefusalLimiter, RefusalCount): every refusal is still accounted for, in
// a request.rejected whose data.summary says how many and from where.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/event.h"
#include "core/message.h"
#include "core/stage.h"

namespace tollgate {

// The org (and agent, session) an unproven message is filed under.
inline constexpr const char* kUnprovenId = "unknown";

// "u-" and 24 hex digits of SHA-256 over the message's tollgate-auth header
// (length-prefixed; empty when absent) and its value: the sender can tell
// its own refusal from what it sent, and nobody gets a refusal under that
// id without sending those exact bytes (a valid signature among them would
// be authenticated, not refused).
std::string UnprovenRequestId(const Message& in);

// The id of a message that names no usable request id of its own: "k-" and
// 24 hex digits of SHA-256 over its source (StageContext::source), so a
// message read again gets the same id and two copies do not. The one
// derivation every stage uses.
std::string RequestIdOfSource(const std::string& source);

struct UnprovenRefusal {
  std::string stage;           // who refused: ingest, decide, approve, execute, follower
  std::string code;            // E_UNAUTHENTICATED, E_NOT_IN_LOG, E_EVENT_REFUSED, ...
  std::string message;         // why; the caller redacts what it quotes
  Json data = Json::object();  // more event data: check, claimed
};

// The request.rejected refusing `in`: org, agent and session "unknown",
// request_id UnprovenRequestId(in), no tool, its id discriminated by
// `source` (two copies of the same bytes are two refusals), data {error,
// source, stage, size_bytes} plus why.data, in a trace of its own (never
// the one the message names).
Event UnprovenRefusalEvent(const Message& in, const std::string& source, int64_t time_us,
                           const UnprovenRefusal& why);

// The `rejected` result of that refusal for topics.results(): the event's
// ids (org, agent, session "unknown", no tool), keyed "unknown", with those
// ids in its headers; log_seq from event `event_index` of its StageResult.
StageOutput UnprovenRefusalResult(const Topics& topics, const Event& refusal, int event_index = 0);

// Both, as the StageResult of a stage refusing `in`.
StageResult RefuseUnproven(const Topics& topics, const Message& in, const StageContext& ctx,
                           const UnprovenRefusal& why);

// Refusals counted instead of logged one by one, for one summary: how many,
// how many bytes, from where (first and last source), when, and how many
// per check.
struct RefusalCount {
  std::string stage, code;
  uint64_t count = 0, bytes = 0;
  std::string first_source, last_source;
  int64_t first_time_us = 0, last_time_us = 0;
  std::map<std::string, uint64_t> checks;
  void Add(const std::string& source, int64_t time_us, uint64_t size, const std::string& check);
};

// The request.rejected that accounts for `c` (count > 0): filed under
// "unknown", request_id "s-" and 24 hex digits of SHA-256 of (stage, code,
// first_source), so the same count made again is the same event; error
// {c.code, "N more ... counted, not logged one by one"}, stage, and
// summary {count, bytes, first_source, last_source, first_time, last_time,
// checks}.
Event RefusalSummaryEvent(const RefusalCount& c, int64_t time_us);

// For a stage: which refusals of unproven messages it logs one by one and
// which it counts. Per refusal code, the first `individual` in a window of
// `window_us` (starting with the first refusal) are logged as today; the
// rest are counted, and Tick makes their summary once the window has ended
// or no refusal came for `quiet_us`, so a window holds at most
// individual + window_us / quiet_us events of that code, however much junk.
//
// Deterministic enough for the runner: a message read again (the runner
// rewinds a failed batch) gets its first verdict again, by its partition
// and offset, and is never counted twice; a summary is made again by every
// Tick until the log holds it (a failed append loses nothing). A crash
// forgets the counts of the window in progress (docs/trust.md).
// Thread-safe.
class RefusalLimiter {
 public:
  struct Options {
    int64_t window_us = 10'000'000;
    size_t individual = 10;
    int64_t quiet_us = 1'000'000;
  };
  enum class Verdict { kLog, kCounted, kAlreadyCounted };

  RefusalLimiter() = default;
  explicit RefusalLimiter(Options o) : options_(o) {}
  // The verdict on a refusal of the message at `source` (the runner's
  // "<incarnation>/<topic>/<partition>/<offset>").
  Verdict Admit(const std::string& stage, const std::string& code, const std::string& check,
                const std::string& source, uint64_t size, int64_t now_us);
  // The summaries due at `now_us`, and those made before that `log` does
  // not hold yet.
  StageResult Tick(int64_t now_us, const LogView& log);

 private:
  struct Window {
    int64_t start_us = 0, last_us = 0;
    size_t logged = 0;
    RefusalCount pending;
  };
  struct Partition {
    int64_t highest = -1;            // the highest offset given a verdict
    std::map<int64_t, bool> recent;  // offset -> logged, the last few verdicts
  };
  Options options_;
  std::mutex mu_;
  std::map<std::string, Window> windows_;        // by code
  std::map<std::string, Partition> partitions_;  // by "<incarnation>/<topic>/<partition>"
  std::vector<Event> due_;                       // made, not yet seen in the log
};

}  // namespace tollgate
