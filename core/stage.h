// The stage contract: a stage is a pure function of its input message and of
// state derived from the log (docs/architecture.md, "The stage contract").
//
// Process() sees no Kafka and no RocksDB: it gets the message, a
// StageContext (wall clock, where the message came from) and a read-only
// view of the log (LogView), and returns the events to append and the
// messages to produce. The stage runner (runtime/stage_runner.h) does the
// plumbing: consume, append the events (before anything is produced), produce
// the outputs and commit the input offsets in one Kafka transaction.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/message.h"
#include "core/status.h"

namespace tollgate {

// Read-only access to what the log knows about a request. Implementations:
// the RocksDB log (audit/log_view.h) and, in tests, a vector of events.
// The runner overlays the events of the batch in progress, so a stage sees
// its own earlier decisions in the same batch.
class LogView {
 public:
  virtual ~LogView() = default;
  // Every event of the request `request_id` of org `org_id`, in log order.
  // request_ids are scoped by org: another org's events with the same id
  // are not part of it.
  virtual Status EventsOfRequest(const std::string& org_id, const std::string& request_id,
                                 std::vector<Event>* out) const = 0;
};

// What a stage reads of the log to restore its state at start
// (Stage::Restore), before its runner consumes anything. The host
// (runtime/stage_host.h) gives every stage the same one, over the local log
// (audit/log_history.h) or a test's vector of events.
class LogHistory {
 public:
  virtual ~LogHistory() = default;
  // The last seq appended when Restore runs: a stage folds 1..head_seq().
  virtual uint64_t head_seq() const = 0;
  virtual Status ReadEvent(uint64_t seq, Event* out) const = 0;
  // Visits, in log order, every event of each unfinished request that has
  // an approval.requested (the log's open-request index: no full scan).
  virtual Status ForEachOpenApprovalEvent(const std::function<void(const Event&)>& visit) const = 0;
  // A request's events read from the log itself: unlike the runner's
  // LogView it never lags OnAppended, so a stage may keep it and read
  // through it from OnAppended.
  virtual const LogView& store() const = 0;
  // Where a stage may keep files of its own (decide's ledger snapshot);
  // empty: keep none.
  virtual std::string state_dir() const { return ""; }
};

// Something that folds appended events: a stage (its state) or an observer
// of the log (webhooks, metrics, the OTLP exporter). OnAppended sees every
// group appended after the subscriber was registered, durable, with each
// event's seq set, on the appending thread; a group re-appended after a
// crash is seen again (same ids, same seqs), so a subscriber is idempotent
// (keyed by event or request id) and guards its own state.
class LogSubscriber {
 public:
  virtual ~LogSubscriber() = default;
  virtual void OnAppended(const std::vector<Event>& events) = 0;
};

// Where subscribers are registered (the local log's sink, audit/log_sink.h).
class AppendFeed {
 public:
  virtual ~AppendFeed() = default;
  // `s` must outlive the feed's appends; register before anything appends
  // through the feed that `s` must see.
  virtual void Subscribe(LogSubscriber* s) = 0;
};

struct StageContext {
  int64_t now_us = 0;
  // Where the input came from: "<broker incarnation>/<topic>/<partition>/<offset>".
  // A message read again after a crash has the same source; a re-sent copy
  // (an agent's retry, the reconciler) has another one.
  std::string source;
};

struct StageOutput {
  Message message;  // topic, key, value, headers; partition/offset unused
  // When >= 0, the value carries the seq of events[log_seq_of_event] as
  // "log_seq": the runner sets value_json["log_seq"] once the event is
  // appended and serializes value_json into message.value (which holds it
  // serialized with log_seq 0 until then). Where the sink assigns no seq
  // (the distributed deployment's events topic) log_seq stays 0, "not
  // known" (schemas/result.schema.json); the runner sets it to 0 there in
  // an output re-made from the log too, so both copies are the same bytes.
  int log_seq_of_event = -1;
  Json value_json;
};

struct StageResult;

// Work a stage defers until the events of the StageResult that carries it are
// durable (execute: run the tool only after execution.started is in the log).
// The runner calls it once, on a worker thread, never on the runner thread,
// after those events are appended; the StageResult it returns is handled like
// a batch's (events appended, then outputs produced), and only then is the
// input offset committed (offsets are committed up to the lowest unfinished
// one per partition, so results may complete out of order). If the runner
// drops the work without calling it (the append failed), it is destroyed
// uncalled: a stage that tracks work in flight should release it in a
// destructor of something the closure owns. Must not throw.
using DeferredWork = std::function<StageResult()>;

struct StageResult {
  std::vector<Event> events;
  std::vector<StageOutput> outputs;
  // Non-ok when the message could not be processed for a reason outside it
  // (the log cannot be read): the runner produces nothing and retries.
  Status error;
  // Optional second phase (see DeferredWork). Ignored in a deferred work's
  // own result and in Tick's.
  DeferredWork deferred;
};

// A stage: state folded from the log (Restore, then OnAppended) and a pure
// function of each input and that state (Process, Tick). The host restores
// every stage, subscribes it to the log's appends, and only then starts its
// runner (runtime/stage_host.h, docs/architecture.md "The stage contract").
class Stage : public LogSubscriber {
 public:
  virtual ~Stage() = default;
  virtual std::string name() const = 0;
  // Folds the log as it stands (events 1..history.head_seq()) into the
  // stage's state. Stateless stages keep the default.
  virtual Status Restore(const LogHistory& history) { return Status::Ok(); }
  // Folds a group appended after Restore (see LogSubscriber). Must not throw.
  void OnAppended(const std::vector<Event>& events) override {}
  virtual std::vector<std::string> input_topics() const = 0;
  // Every topic Process (and its deferred work) may produce to. At start the
  // runner reads back what is committed on them, so that a message read
  // again after a crash does not send twice an output that already went out
  // (see StageRunner). Empty: no read-back, re-sent outputs rely on their
  // readers de-duplicating.
  virtual std::vector<std::string> output_topics() const { return {}; }
  // Must not throw for any input: bad input yields events and outputs that
  // say so. Must be deterministic given (in, ctx, log).
  virtual StageResult Process(const Message& in, const StageContext& ctx, const LogView& log) = 0;
  // Called by the runner between batches, at most every tick_interval (see
  // RunnerOptions), so a stage can act on time alone (an approval's deadline)
  // when no message arrives. Same rules as Process: deterministic given
  // (ctx, log, the stage's derived state), never throws. Its events are
  // appended and its outputs produced like a batch's, with no offsets.
  virtual StageResult Tick(const StageContext& ctx, const LogView& log) { return {}; }

  // The runner's two refusals, made by the stage so that the runner knows
  // no message format. Both must not throw. The defaults treat `in` as a
  // Flow (core/flow_stage.h) on a topic of the standard topic set.
  // `in` could not be processed (Process or its deferred work threw, or
  // made an event the log refuses): record why (`code`) so nothing
  // vanishes.
  virtual StageResult Refuse(const Message& in, const StageContext& ctx, const std::string& why,
                             const char* code) const;
  // An output of `in` is over `limit` bytes (the producer would refuse it on
  // every retry): end the request it belongs to instead (E_OUTPUT_TOO_LARGE).
  // `made` is what Process made; the default keeps its events.
  virtual StageResult RefuseOversize(const Message& in, const StageContext& ctx, StageResult made,
                                     const Message& output, size_t limit) const;
};

// Where a runner puts events. Embedded: the local RocksDB log.
class EventSink {
 public:
  struct Appended {
    Status status;
    uint64_t seq = 0;
    bool duplicate = false;
  };
  virtual ~EventSink() = default;
  // Appends all events atomically (one group commit: a crash leaves all of
  // them or none) and fills one result per event, in order, when they are
  // durable or have failed.
  virtual void AppendAll(std::vector<Event> events, std::vector<Appended>* results) = 0;
};

// Appends the one event `e` through `sink`, durable when this returns ok;
// *seq (optional) gets its seq. For writers of single events: the
// reconciler, credential changes.
inline Status AppendOne(EventSink& sink, Event e, uint64_t* seq = nullptr) {
  std::vector<EventSink::Appended> appended;
  sink.AppendAll({std::move(e)}, &appended);
  if (appended.size() != 1) return Status::Error(errc::kLogIO, "the event sink returned no result");
  if (appended[0].status.ok() && seq != nullptr) *seq = appended[0].seq;
  return appended[0].status;
}

}  // namespace tollgate
