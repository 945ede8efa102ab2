// StageRunner: the plumbing every stage shares, written once.
//
// Loop: poll a batch from the stage's input topics -> Process() each message
// (pure) -> append every event of the batch to the sink in one group commit
// -> in one Kafka transaction, produce the outputs and commit the input
// offsets. Nothing is produced unless every event is durable (fail closed):
// on an append failure the batch is rewound and retried after a backoff, so a
// log that cannot be written stops the flow instead of losing the record.
// A crash between append and commit replays the batch; deterministic event
// ids make the appends no-ops and the stage re-emits the same outputs, which
// read_committed consumers see once.
//
// Two-phase stages: a StageResult may carry DeferredWork (core/stage.h). The
// runner appends the batch's events, hands the work to a pool of
// `workers` threads (started on first use), and goes on reading. When a work
// finishes, the runner thread appends its events and, in one transaction,
// produces its outputs and commits offsets up to the lowest offset still in
// flight per partition, so a slow tool does not hold up fast ones and a
// crash re-reads every message whose work had not finished. A message read
// again while its own work is in flight (after a rewind) is not processed
// twice: the runner skips it.
//
// Pipelined publish: a batch without deferred work is handed to a publisher
// thread once its events are durable, and the runner goes on to read,
// process and append the next batch while that transaction commits. At most
// one batch is in the publisher's hands, and the next transaction begins only
// after it committed, so offsets are committed in read order. If it fails,
// the runner rewinds to the committed offsets (before that batch) and reads
// both batches again; their events are already in the log, so the appends
// are no-ops, exactly as after a crash between append and commit. A batch
// with deferred work, a tick, finished work and Stop() first wait until the
// publisher is idle: the producer is used by one thread at a time, and a
// work never starts while an earlier batch may still have to be re-read.
//
// No output twice: every output carries its input's source (header
// kHeaderSource). Start() reads back the committed tail of the stage's
// output topics (Stage::output_topics, the last `republish_lookback`
// offsets of each partition); an output re-made for a message read again is
// dropped when exactly those bytes from that source are already committed
// (runtime/committed_outputs.h). That closes the window the embedded broker
// leaves open (it does not store offsets committed in a transaction) and the
// one deferred work opens on any broker (offsets stop at the lowest
// unfinished message). If the read-back is cut short, outputs not found are
// sent again: a duplicate, never a loss.
//
// One message never wedges a stage: an output over kMaxMessageBytes (which
// the producer would refuse on every retry) ends its request with
// E_OUTPUT_TOO_LARGE (a request.rejected and an error result in place of
// the outputs; core/messages.h EndRequestForOversizeOutput), and a stage
// that throws on a message (a library exception on hostile input) refuses
// that message (E_INTERNAL, filed under org "unknown") instead of ending
// the process.
//
// One trace per request: an input's valid `traceparent` header goes on
// every output made from it and on every event about a request it made
// (data.traceparent), unless the stage set its own (core/trace.h).
//
// Run() blocks until Stop() (thread-safe, e.g. from a signal handler thread);
// the batch in flight and the deferred work in flight are finished first.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/latency_histogram.h"
#include "core/stage.h"
#include "runtime/committed_outputs.h"
#include "runtime/kafka_bus.h"
#include "runtime/serial_worker.h"

namespace tollgate {

struct RunnerOptions {
  BusConfig bus;
  std::string group;  // consumer group; default "tollgate-<stage>"
  // This runner should be its group's only member (the embedded
  // deployment): an assignment of fewer than all its input partitions
  // means another member joined, which it reports (foreign_members, an
  // error in its log) until it has them all again.
  bool sole_member = false;
  std::string transactional_id;  // default "tollgate-<stage>"
  std::string incarnation;       // identifies the broker's data; see StageContext::source
  size_t max_batch = 500;
  size_t max_event_bytes = kDefaultMaxEventBytes;  // as the sink's log
  std::chrono::milliseconds poll_timeout{50};
  // How often Stage::Tick runs (it also runs after a batch if this much
  // time has passed).
  std::chrono::milliseconds tick_interval{200};
  // Threads that run DeferredWork (started on first use).
  size_t workers = 8;
  // Called (on the runner thread) when the consumer finds its offset gone:
  // data the broker dropped before this stage read it. The embedded
  // deployment re-drives unfinished requests from the log.
  std::function<void(const Status&)> on_offset_lost;
  // How far back (offsets per output partition) Start() reads what is
  // already committed, and for how long at most. 0 turns the read-back off.
  int64_t republish_lookback = 50000;
  std::chrono::milliseconds republish_read_timeout{5000};
  // The distributed deployment (docs/deployments.md). When set, the sink is
  // not used: a batch's events go to this topic in the same transaction as
  // its outputs and input offsets (deferred work starts once that
  // transaction commits), and the LogView is a replica of the topic that
  // `catch_up` brings up to its committed end before each batch and tick
  // (so batches are not pipelined). Outputs' log_seq stays 0 ("not known":
  // the log keeper assigns seqs).
  std::string events_topic;
  std::function<Status()> catch_up;
  std::shared_ptr<const class EventsKey> events_key;  // seals them (runtime/event_follower.h)
  // Signs every result and sends it to its org's topic
  // (runtime/result_publisher.h); outputs on Topics::results() are routed
  // once their log_seq is set, before the read-back check. Null: results
  // go out as the stage made them (tests of the runner alone).
  std::shared_ptr<class ResultPublisher> results;
  // The time stages see (StageContext::now, µs since the epoch). Null: the
  // wall clock. Tests drive it to make deadlines pass without waiting.
  std::function<int64_t()> clock;
};

struct RunnerStats {
  std::atomic<uint64_t> messages{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> events{0};
  std::atomic<uint64_t> outputs{0};
  std::atomic<uint64_t> retries{0};
  // Where a batch's time goes (µs, summed over successful batches): the
  // stage's pure function, the log append, the Kafka transaction (on the
  // publisher thread when pipelined), and how long the runner waited for the
  // publisher to finish the previous batch.
  std::atomic<uint64_t> process_us{0};
  std::atomic<uint64_t> append_us{0};
  std::atomic<uint64_t> publish_us{0};
  std::atomic<uint64_t> publish_wait_us{0};
  // The same per batch, as histograms for /metrics.
  LatencyHistogram process_hist, append_hist, publish_hist;
  // Batches whose transaction ran on the publisher thread.
  std::atomic<uint64_t> pipelined{0};
  // Deferred works finished and published, and those running now.
  std::atomic<uint64_t> deferred{0};
  std::atomic<uint64_t> in_flight{0};
  // The worker pool (an executor's tool runs): works running now, and works
  // waiting for a worker.
  std::atomic<uint64_t> deferred_running{0};
  std::atomic<uint64_t> deferred_queued{0};
  // Start()'s read-back: committed outputs read, those of inputs this stage
  // may read again, and whether it reached every partition's end in time.
  // Outputs not sent because they were already committed.
  std::atomic<uint64_t> readback_messages{0};
  std::atomic<uint64_t> readback_kept{0};
  std::atomic<bool> readback_complete{false};
  std::atomic<uint64_t> already_committed{0};
  // Times the group took this stage's partitions away (rebalances).
  std::atomic<uint64_t> revoked{0};
  // Times the group handed this stage partitions (each read back first).
  std::atomic<uint64_t> assigned{0};
  // 1 while a sole_member runner's group holds another member.
  std::atomic<uint64_t> foreign_members{0};
};

class StageRunner {
 public:
  // The input partitions' lag (Consumer::Lag), for /metrics.
  std::vector<Consumer::PartitionLag> consumer_lag() const {
    return consumer_ ? consumer_->Lag() : std::vector<Consumer::PartitionLag>{};
  }
  StageRunner(Stage& stage, EventSink& sink, const LogView& log, RunnerOptions options);
  ~StageRunner();

  // Connects (consumer, transactional producer). Call before Run().
  Status Start();
  // Processes until Stop(); returns the error that ended it, if any.
  Status Run();
  void Stop() { stop_.store(true); }
  const RunnerStats& stats() const { return stats_; }

 private:
  Status ProcessBatch(std::vector<Message>& batch);
  // Where events go: with an events topic (topic mode) they travel in the
  // outputs' transaction; without, they go to the local log (the sink).
  bool topic_mode() const { return !options_.events_topic.empty(); }
  // Moves `r`'s events and outputs (stamped with `source`) onto a batch's;
  // in topic mode the events become outputs too. seq_refs: (output index,
  // event index) of outputs that carry an event's log_seq.
  void TakeResult(StageResult r, const std::string& source, std::vector<Event>* events,
                  std::vector<StageOutput>* outputs, std::vector<std::pair<size_t, size_t>>* seq_refs);
  // Appends `events` in one group commit, fills log_seq of the outputs that
  // ask for it (seq_refs: output index, event index), then drops the
  // outputs already committed (DropCommitted): what is left is what to send.
  Status AppendEvents(const std::vector<Event>& events, std::vector<StageOutput>& outputs,
                      const std::vector<std::pair<size_t, size_t>>& seq_refs);
  // AppendEvents, then produces the outputs and commits `next` in one
  // transaction. The publisher must be idle. `after_append` runs once the
  // events are durable, before the publish.
  Status AppendAndPublish(const std::vector<Event>& events, std::vector<StageOutput>& outputs,
                          const std::vector<std::pair<size_t, size_t>>& seq_refs,
                          const std::map<std::pair<std::string, int32_t>, int64_t>& next,
                          std::chrono::steady_clock::time_point* appended_at,
                          const std::function<void()>& after_append = nullptr);
  Status RunTick();
  int64_t Now() const { return options_.clock ? options_.clock() : NowMicros(); }
  // Adds to committed_ what the last `lookback` offsets of each output
  // partition hold (at Start(), and after a failed transaction).
  Status ReadBackCommitted(int64_t lookback);
  // Sets stats_.foreign_members from the assignment just made (and logs a change).
  void CheckSoleMember();
  // A committed batch's times (µs): the totals and the histograms.
  void RecordBatch(uint64_t process_us, uint64_t append_us, std::optional<uint64_t> publish_us);
  // The lookback for a batch just published: it is near the end of each
  // output partition.
  int64_t RecentLookback() const {
    return std::min(options_.republish_lookback,
                    std::max<int64_t>(8 * static_cast<int64_t>(options_.max_batch), 4096));
  }
  // Removes from `outputs` (their log_seq set: as they would be sent) those
  // already committed, and the seq refs with them.
  void DropCommitted(std::vector<StageOutput>& outputs);
  // Sets kHeaderSource on an output made from the input at `source`.
  void StampSource(Message& out, const std::string& source);

  // Deferred work (runner thread unless said otherwise).
  using TopicPartition = std::pair<std::string, int32_t>;
  struct Job {
    TopicPartition tp;
    int64_t offset = 0;
    Message in;
    StageContext ctx;
    DeferredWork work;
    StageResult result;  // set by the worker
  };
  void Submit(std::unique_ptr<Job> job);
  void WorkerLoop();  // worker threads
  // Appends and publishes finished jobs; a failure keeps them for a retry.
  Status PublishFinished();
  void StopWorkers();

  // Run()'s pieces. Recover: after a failed batch, fail closed: nothing of
  // it was committed; rewind, back off (doubling *backoff) and read it
  // again; a fatal producer error gets a fresh producer (its failure to
  // open ends Run). The others log what fails and go on.
  Status Recover(const Status& s, std::chrono::milliseconds* backoff);
  void PollBatch(bool waiting, std::vector<Message>* batch);
  void TickOrWarn();
  void PublishFinishedOrWarn();
  // At Stop(): the batch handed off last committed, the deferred work in
  // flight recorded, then the workers and the consumer closed.
  void FinishAtStop();

  // ProcessBatch()'s pieces: one batch read, processed and sent.
  using OffsetMap = std::map<TopicPartition, int64_t>;
  struct BatchWork {
    size_t messages = 0;
    std::vector<Event> events;
    std::vector<StageOutput> outputs;
    std::vector<std::pair<size_t, size_t>> seq_refs;            // (output index, event index)
    std::map<TopicPartition, int64_t> read_upto;                // last read offset + 1
    std::map<TopicPartition, std::set<int64_t>> new_in_flight;  // its jobs' offsets
    std::vector<std::unique_ptr<Job>> jobs;                     // deferred work to start
    OffsetMap next;                                             // offsets committed with it
    std::chrono::steady_clock::time_point started, processed;   // for RecordBatch
  };
  // In topic mode, the log view caught up (the last batch published first).
  Status CatchUpBeforeBatch();
  // Process() each message not in flight; its events, outputs and jobs into *w.
  Status ProcessMessages(const std::vector<Message>& batch, BatchWork* w);
  // Offset bookkeeping: the offsets to commit are each partition's read
  // offset, held back to the lowest offset whose work is in flight
  // (OffsetsToCommit: a batch; OffsetsAfterUnpublished: finished jobs).
  OffsetMap OffsetsToCommit(const BatchWork& w) const;
  OffsetMap OffsetsAfterUnpublished() const;
  // A batch whose events went to the local log and that defers no work:
  // appended, then handed to the publisher (pipelined).
  Status HandOverBatch(BatchWork& w);
  // Any other batch: published here, its jobs started once its events are durable.
  Status PublishBatch(BatchWork& w);
  void StartJobs(std::vector<std::unique_ptr<Job>>& jobs);

  // The pipelined publish (see the file comment). Runner thread.
  struct Handoff {
    std::vector<StageOutput> outputs;
    std::map<TopicPartition, int64_t> next;       // offsets committed with it
    std::map<TopicPartition, int64_t> read_upto;  // applied once committed
    uint64_t messages = 0, events = 0;
    bool offsets_stored = false;  // set by the publisher
  };
  // The outcome of the batch handed over last (Ok when none is
  // outstanding), once: `wait` blocks until the publisher is idle; without
  // it a batch still publishing reports Ok. A success applies its counters
  // and read_upto_.
  Status CollectPublished(bool wait);

  // One transaction: `outputs` and `next`. *offsets_stored: the group's
  // offsets are now `next` (the commit after the transaction was accepted).
  Status Publish(std::vector<StageOutput>& outputs,
                 const std::map<std::pair<std::string, int32_t>, int64_t>& next, bool* offsets_stored);

  Stage& stage_;
  EventSink& sink_;
  const LogView& log_;
  RunnerOptions options_;
  std::unique_ptr<Consumer> consumer_;
  std::unique_ptr<Producer> producer_;
  std::atomic<bool> stop_{false};
  std::chrono::steady_clock::time_point last_tick_{};
  RunnerStats stats_;

  CommittedOutputs committed_;                             // runner thread, after Start()
  std::set<std::string> declared_outputs_;                 // Stage::output_topics()
  std::set<std::string> undeclared_;                       // runner thread: topics warned about
  std::map<TopicPartition, std::set<int64_t>> in_flight_;  // runner thread
  std::map<TopicPartition, int64_t> read_upto_;            // runner thread: last read offset + 1
  std::vector<std::unique_ptr<Job>> unpublished_;          // runner thread: finished, publish failed
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<std::unique_ptr<Job>> queued_;     // guarded by jobs_mu_
  std::vector<std::unique_ptr<Job>> finished_;  // guarded by jobs_mu_
  bool workers_stop_ = false;                   // guarded by jobs_mu_
  std::vector<std::thread> workers_;

  std::unique_ptr<Handoff> handoff_;  // handed to publisher_, not yet collected
  // Last member: destroyed first, so a publish in flight ends before the
  // producer and consumer it uses.
  std::unique_ptr<SerialWorker> publisher_;
};

}  // namespace tollgate
