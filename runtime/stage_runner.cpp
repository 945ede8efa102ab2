#include "runtime/stage_runner.h"

#include <iostream>
#include <map>
#include <thread>
#include <unordered_map>

#include "core/log.h"
#include "core/messages.h"  // error codes
#include "core/trace.h"
#include "runtime/event_follower.h"
#include "runtime/result_publisher.h"

namespace tollgate {
namespace {

using OffsetMap = std::map<std::pair<std::string, int32_t>, int64_t>;
using SteadyClock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kTxnTimeout{30000};

uint64_t MicrosBetween(SteadyClock::time_point a, SteadyClock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
}

// The log as the stage sees it mid-batch: the durable log plus the events
// this batch has produced so far (by index into the batch's own vector, not
// copied: every event of every batch passes through here).
class OverlayView : public LogView {
 public:
  OverlayView(const LogView& base, const std::vector<Event>& batch_events)
      : base_(base), events_(batch_events) {}
  // events_[from, events_.size()) were just added.
  void Added(size_t from) {
    for (size_t i = from; i < events_.size(); ++i) {
      pending_[RequestKey(events_[i].org_id, events_[i].request_id)].push_back(i);
    }
  }
  Status EventsOfRequest(const std::string& org_id, const std::string& request_id,
                         std::vector<Event>* out) const override {
    Status s = base_.EventsOfRequest(org_id, request_id, out);
    if (!s.ok()) return s;
    auto it = pending_.find(RequestKey(org_id, request_id));
    if (it != pending_.end()) {
      for (size_t i : it->second) {
        const Event& e = events_[i];
        bool seen = false;
        for (const auto& have : *out) seen = seen || have.id == e.id;
        if (!seen) out->push_back(e);
      }
    }
    return Status::Ok();
  }

 private:
  const LogView& base_;
  const std::vector<Event>& events_;
  std::unordered_map<std::string, std::vector<size_t>> pending_;
};

// An output the producer would refuse (over `limit`, its
// max_message_bytes()) would fail its batch on every retry and wedge the
// stage: the stage ends its request instead (Stage::RefuseOversize).
void BoundOutputs(const Stage& stage, const Message& in, const StageContext& ctx, size_t limit,
                  StageResult* r) {
  for (const auto& o : r->outputs) {
    if (o.message.bytes() <= limit) continue;
    log::Warn({stage.name()}) << "an output to " << o.message.topic << " is " << o.message.bytes()
                              << " bytes (limit " << limit << "); its request ends with "
                              << errc::kOutputTooLarge << "\n";
    const Message too_large = o.message;
    *r = stage.RefuseOversize(in, ctx, std::move(*r), too_large, limit);
    return;
  }
}

// A stage that throws on hostile input (a library exception its code did
// not expect) refuses that message instead of ending the process.
template <class Fn>
StageResult Guarded(const Stage& stage, const Message& in, const StageContext& ctx, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    log::Warn({stage.name()}) << "threw on " << ctx.source << ": " << e.what() << "\n";
    return stage.Refuse(in, ctx, "internal error: " + ToValidUtf8(e.what()), errc::kInternal);
  }
}

// An event the log would refuse (a stage bug: bad UTF-8, too large) would
// fail the batch on every retry. The stage records the failure instead, so
// the message still gets a result and the stage keeps moving.
void CheckEvents(const Stage& stage, const Message& in, const StageContext& ctx, size_t max_event_bytes,
                 StageResult* r) {
  std::string body;
  for (const Event& e : r->events) {
    Status valid = EncodeEventBody(e, max_event_bytes, &body);
    if (valid.ok()) continue;
    log::Warn({stage.name()}) << "refused its own event: " << valid.ToString() << "\n";
    *r = stage.Refuse(in, ctx, "internal error (" + valid.code() + "): " + valid.message(), errc::kInternal);
    return;
  }
}

// What a stage made of `in`, made safe to send: everything goes on in its
// input's trace (core/trace.h; stamped before the checks, which count its
// bytes, and after them, for a refusal they put in its place), then the
// two checks above.
void Finish(const Stage& stage, const Message& in, const StageContext& ctx, size_t max_event_bytes,
            size_t limit, StageResult* r) {
  const std::string tp = TraceparentOf(in);
  StampTraceparent(tp, r);
  CheckEvents(stage, in, ctx, max_event_bytes, r);
  BoundOutputs(stage, in, ctx, limit, r);
  StampTraceparent(tp, r);
}

}  // namespace

StageRunner::StageRunner(Stage& stage, EventSink& sink, const LogView& log, RunnerOptions options)
    : stage_(stage),
      sink_(sink),
      log_(log),
      options_(std::move(options)),
      committed_(options_.incarnation, stage_.input_topics()) {
  if (options_.group.empty()) options_.group = "tollgate-" + stage_.name();
  if (options_.transactional_id.empty()) options_.transactional_id = "tollgate-" + stage_.name();
  for (const auto& t : stage_.output_topics()) declared_outputs_.insert(t);
  // Its events are outputs too: read back like the others after a crash.
  if (topic_mode() && !declared_outputs_.empty()) declared_outputs_.insert(options_.events_topic);
}

StageRunner::~StageRunner() {
  publisher_.reset();
  StopWorkers();
  if (consumer_) consumer_->Close();
}

void StageRunner::RecordBatch(uint64_t process_us, uint64_t append_us, std::optional<uint64_t> publish_us) {
  stats_.process_us += process_us;
  stats_.append_us += append_us;
  stats_.process_hist.Record(process_us);
  stats_.append_hist.Record(append_us);
  if (publish_us) {
    stats_.publish_us += *publish_us;
    stats_.publish_hist.Record(*publish_us);
  }
}

Status StageRunner::CollectPublished(bool wait) {
  if (!publisher_ || !publisher_->outstanding()) return Status::Ok();
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<Status> s = publisher_->Collect(wait);
  if (wait) {
    stats_.publish_wait_us += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!s.has_value()) return Status::Ok();  // still publishing
  std::unique_ptr<Handoff> h = std::move(handoff_);
  if (!s->ok()) return *s;
  for (const auto& [tp, upto] : h->read_upto) read_upto_[tp] = upto;
  // Only offsets the group stored: refused (a rebalance), the batch is read
  // again and its outputs must still be found.
  if (h->offsets_stored) committed_.ForgetBelow(h->next);
  stats_.messages += h->messages;
  stats_.events += h->events;
  stats_.outputs += h->outputs.size();
  ++stats_.batches;
  ++stats_.pipelined;
  return Status::Ok();
}

Status StageRunner::Recover(const Status& s, std::chrono::milliseconds* backoff) {
  ++stats_.retries;
  log::Warn({stage_.name()}) << "batch failed, retrying in " << backoff->count() << " ms: " << s.ToString()
                             << "\n";
  Status r = consumer_->RewindToCommitted();
  if (!r.ok()) log::Warn({stage_.name()}) << r.ToString() << "\n";
  if (s.code() == errc::kTxnAbortable || s.code() == errc::kKafka) {
    // An aborted transaction's outputs may have reached the broker, and
    // the embedded one shows them to read_committed readers anyway: what
    // readers were shown is not shown twice. Apache Kafka hides them, so
    // nothing is found and the batch is sent again. The batch just
    // written is near the end of each partition.
    r = ReadBackCommitted(RecentLookback());
    if (!r.ok()) log::Warn({stage_.name()}) << r.ToString() << "\n";
  }
  std::this_thread::sleep_for(*backoff);
  *backoff = std::min(*backoff * 2, std::chrono::milliseconds(5000));
  if (s.code() == errc::kKafka) {
    // A fatal producer error (e.g. fenced): start a fresh producer. The
    // publisher is idle: its failure is how we got here, or it had nothing.
    producer_.reset();
    BusConfig bus = options_.bus;
    bus.client_id = "tollgate-" + stage_.name();
    Status p = Producer::Open(bus, options_.transactional_id, &producer_);
    if (!p.ok()) return p;
  }
  return Status::Ok();
}

void StageRunner::PollBatch(bool waiting, std::vector<Message>* batch) {
  // While work is in flight, poll briefly so its results go out promptly.
  Status polled = consumer_->Poll(
      options_.max_batch,
      waiting ? std::min(options_.poll_timeout, std::chrono::milliseconds(5)) : options_.poll_timeout, batch);
  if (!polled.ok()) {
    log::Warn({stage_.name()}) << polled.ToString() << "\n";
    if (polled.code() == errc::kOffsetLost && options_.on_offset_lost) options_.on_offset_lost(polled);
  }
}

void StageRunner::TickOrWarn() {
  Status t = RunTick();
  if (!t.ok()) {
    ++stats_.retries;
    log::Warn({stage_.name()}) << "tick failed (retried at the next tick): " << t.ToString() << "\n";
  }
}

void StageRunner::PublishFinishedOrWarn() {
  Status f = PublishFinished();
  if (!f.ok()) {
    ++stats_.retries;
    log::Warn({stage_.name()}) << "publishing finished work failed (retried): " << f.ToString() << "\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void StageRunner::FinishAtStop() {
  // The batch handed off last is committed before going; if that fails it
  // was not committed, and the next run reads it again.
  Status last = CollectPublished(/*wait=*/true);
  if (!last.ok()) log::Warn({stage_.name()}) << "at stop: " << last.ToString() << "\n";
  // Finish the deferred work in flight: its side effects happened (or are
  // happening); record them before going.
  for (int failures = 0; !in_flight_.empty() && failures < 50;) {
    Status f = PublishFinished();
    if (!f.ok()) {
      ++failures;
      log::Warn({stage_.name()}) << "at stop: " << f.ToString() << "\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(f.ok() ? 2 : 100));
  }
  StopWorkers();
  consumer_->Close();
}

Status StageRunner::Run() {
  std::vector<Message> batch;
  auto backoff = std::chrono::milliseconds(100);
  while (!stop_.load()) {
    batch.clear();
    const bool waiting = !in_flight_.empty();
    PollBatch(waiting, &batch);
    // The batch handed off last: if its transaction failed, it and
    // everything read since are read again (this poll's batch included).
    const bool tick_due = std::chrono::steady_clock::now() - last_tick_ >= options_.tick_interval;
    Status published = CollectPublished(/*wait=*/tick_due || waiting);
    if (!published.ok()) {
      // Fail closed: nothing of the failed batch was committed; read it again.
      Status r = Recover(published, &backoff);
      if (!r.ok()) return r;
      continue;
    }
    if (tick_due) TickOrWarn();
    if (waiting) PublishFinishedOrWarn();
    if (batch.empty()) continue;
    const uint64_t committed_before = stats_.batches.load();
    Status s = ProcessBatch(batch);
    if (s.ok()) {
      // Back off afresh once a batch has committed, not merely been handed
      // over: a transaction that keeps failing keeps doubling the wait.
      if (stats_.batches.load() != committed_before) backoff = std::chrono::milliseconds(100);
      continue;
    }
    Status r = Recover(s, &backoff);
    if (!r.ok()) return r;
  }
  FinishAtStop();
  return Status::Ok();
}

void StageRunner::Submit(std::unique_ptr<Job> job) {
  std::lock_guard<std::mutex> lock(jobs_mu_);
  if (workers_.empty()) {
    for (size_t i = 0; i < std::max<size_t>(1, options_.workers); ++i)
      workers_.emplace_back([this] { WorkerLoop(); });
  }
  queued_.push_back(std::move(job));
  ++stats_.deferred_queued;
  jobs_cv_.notify_one();
}

void StageRunner::WorkerLoop() {
  for (;;) {
    std::unique_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(jobs_mu_);
      jobs_cv_.wait(lock, [this] { return workers_stop_ || !queued_.empty(); });
      if (queued_.empty()) return;  // stopping
      job = std::move(queued_.front());
      queued_.pop_front();
      --stats_.deferred_queued;
      ++stats_.deferred_running;
    }
    job->result = Guarded(stage_, job->in, job->ctx, [&] { return job->work(); });
    --stats_.deferred_running;
    std::lock_guard<std::mutex> lock(jobs_mu_);
    finished_.push_back(std::move(job));
  }
}

void StageRunner::StopWorkers() {
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    workers_stop_ = true;
  }
  jobs_cv_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
  std::lock_guard<std::mutex> lock(jobs_mu_);
  workers_stop_ = false;
}

Status StageRunner::PublishFinished() {
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    for (auto& j : finished_) unpublished_.push_back(std::move(j));
    finished_.clear();
  }
  if (unpublished_.empty()) return Status::Ok();
  std::vector<Event> events;
  std::vector<StageOutput> outputs;
  std::vector<std::pair<size_t, size_t>> seq_refs;
  for (auto& job : unpublished_) {
    StageResult& r = job->result;
    Finish(stage_, job->in, job->ctx, options_.max_event_bytes, producer_->max_message_bytes(), &r);
    TakeResult(std::move(r), job->ctx.source, &events, &outputs, &seq_refs);
  }
  Status s = AppendAndPublish(events, outputs, seq_refs, OffsetsAfterUnpublished(), nullptr);
  if (!s.ok()) return s;
  stats_.events += events.size();
  stats_.outputs += outputs.size();
  stats_.deferred += unpublished_.size();
  stats_.in_flight -= unpublished_.size();
  for (auto& job : unpublished_) {
    auto it = in_flight_.find(job->tp);
    if (it != in_flight_.end()) {
      it->second.erase(job->offset);
      if (it->second.empty()) in_flight_.erase(it);
    }
  }
  // Destroyed only now, after their results are durable and published.
  unpublished_.clear();
  return Status::Ok();
}

StageRunner::OffsetMap StageRunner::OffsetsAfterUnpublished() const {
  OffsetMap next;
  std::map<TopicPartition, std::set<int64_t>> after = in_flight_;
  for (auto& job : unpublished_) after[job->tp].erase(job->offset);
  for (auto& job : unpublished_) {
    auto& f = after[job->tp];
    auto r = read_upto_.find(job->tp);
    // Not past the job itself when its batch's publish has not succeeded yet.
    next[job->tp] = !f.empty() ? *f.begin() : (r == read_upto_.end() ? job->offset : r->second);
  }
  return next;
}

StageRunner::OffsetMap StageRunner::OffsetsToCommit(const BatchWork& w) const {
  OffsetMap next;
  for (const auto& [tp, upto] : w.read_upto) {
    int64_t commit = upto;
    auto a = in_flight_.find(tp);
    if (a != in_flight_.end() && !a->second.empty()) commit = std::min(commit, *a->second.begin());
    auto b = w.new_in_flight.find(tp);
    if (b != w.new_in_flight.end() && !b->second.empty()) commit = std::min(commit, *b->second.begin());
    next[tp] = commit;
  }
  return next;
}

Status StageRunner::CatchUpBeforeBatch() {
  if (!topic_mode()) return Status::Ok();  // the local log holds every event already
  // The view must hold every event committed before these messages were
  // (their own flow's among them), and this stage's last batch.
  Status s = CollectPublished(/*wait=*/true);
  if (s.ok()) s = options_.catch_up();
  return s;
}

Status StageRunner::ProcessMessages(const std::vector<Message>& batch, BatchWork* w) {
  OverlayView view(log_, w->events);
  const int64_t now = Now();
  for (const Message& m : batch) {
    const TopicPartition tp{m.topic, m.partition};
    w->read_upto[tp] = m.offset + 1;
    auto fl = in_flight_.find(tp);
    if (fl != in_flight_.end() && fl->second.count(m.offset)) continue;  // its work is running
    StageContext ctx{now, options_.incarnation + "/" + m.topic + "/" + std::to_string(m.partition) + "/" +
                              std::to_string(m.offset)};
    StageResult r = Guarded(stage_, m, ctx, [&] { return stage_.Process(m, ctx, view); });
    if (!r.error.ok()) return r.error;
    Finish(stage_, m, ctx, options_.max_event_bytes, producer_->max_message_bytes(), &r);
    DeferredWork deferred = std::move(r.deferred);
    const size_t first_new = w->events.size();
    TakeResult(std::move(r), ctx.source, &w->events, &w->outputs, &w->seq_refs);
    view.Added(first_new);
    if (deferred) {
      auto job = std::make_unique<Job>();
      job->tp = tp;
      job->offset = m.offset;
      job->in = m;
      job->ctx = ctx;
      job->work = std::move(deferred);
      w->new_in_flight[tp].insert(m.offset);
      w->jobs.push_back(std::move(job));
    }
  }
  return Status::Ok();
}

Status StageRunner::ProcessBatch(std::vector<Message>& batch) {
  Status s = CatchUpBeforeBatch();
  if (!s.ok()) return s;
  BatchWork w;
  w.messages = batch.size();
  w.started = SteadyClock::now();
  s = ProcessMessages(batch, &w);
  if (!s.ok()) return s;
  w.next = OffsetsToCommit(w);
  w.processed = SteadyClock::now();
  // Events to the local log and no work deferred: the batch can be handed
  // over. Otherwise (the events topic, or work to start) it is published here.
  if (w.jobs.empty() && in_flight_.empty() && !topic_mode()) return HandOverBatch(w);
  return PublishBatch(w);
}

Status StageRunner::HandOverBatch(BatchWork& w) {
  // Pipelined: append, wait for the previous batch's transaction, hand
  // this one over and go on reading.
  Status s = AppendEvents(w.events, w.outputs, w.seq_refs);
  if (!s.ok()) return s;
  const SteadyClock::time_point appended = SteadyClock::now();
  s = CollectPublished(/*wait=*/true);
  if (!s.ok()) return s;
  auto h = std::make_unique<Handoff>();
  h->outputs = std::move(w.outputs);
  h->next = std::move(w.next);
  h->read_upto = std::move(w.read_upto);
  h->messages = w.messages;
  h->events = w.events.size();
  handoff_ = std::move(h);
  Handoff* job = handoff_.get();
  publisher_->Hand([this, job] {
    const auto p0 = SteadyClock::now();
    Status published = Publish(job->outputs, job->next, &job->offsets_stored);
    if (published.ok()) {
      const uint64_t took = MicrosBetween(p0, SteadyClock::now());
      stats_.publish_us += took;
      stats_.publish_hist.Record(took);
    }
    return published;
  });
  RecordBatch(MicrosBetween(w.started, w.processed), MicrosBetween(w.processed, appended), std::nullopt);
  return Status::Ok();
}

void StageRunner::StartJobs(std::vector<std::unique_ptr<Job>>& jobs) {
  for (auto& job : jobs) {
    in_flight_[job->tp].insert(job->offset);
    ++stats_.in_flight;
    Submit(std::move(job));
  }
  jobs.clear();
}

Status StageRunner::PublishBatch(BatchWork& w) {
  // Work is started only after every earlier batch has committed: were one
  // to fail, this batch would be read again, and its work must not have
  // begun on a message whose execution.started a re-read then finds.
  Status s = CollectPublished(/*wait=*/true);
  if (!s.ok()) return s;
  // The work starts only once the events before it (execution.started) are
  // durable, and before the publish, so a failed publish does not lose it.
  SteadyClock::time_point appended;
  s = AppendAndPublish(w.events, w.outputs, w.seq_refs, w.next, &appended, [&] { StartJobs(w.jobs); });
  if (!s.ok()) return s;
  for (const auto& [tp, upto] : w.read_upto) read_upto_[tp] = upto;
  const auto published = SteadyClock::now();
  RecordBatch(MicrosBetween(w.started, w.processed), MicrosBetween(w.processed, appended),
              MicrosBetween(appended, published));
  stats_.messages += w.messages;
  stats_.events += w.events.size();
  stats_.outputs += w.outputs.size();
  ++stats_.batches;
  return Status::Ok();
}

void StageRunner::TakeResult(StageResult r, const std::string& source, std::vector<Event>* events,
                             std::vector<StageOutput>* outputs,
                             std::vector<std::pair<size_t, size_t>>* seq_refs) {
  if (topic_mode()) {
    // The events travel in the outputs' transaction, ahead of them.
    for (const Event& e : r.events) {
      StageOutput o;
      (void)EventMessage(e, options_.events_topic, options_.max_event_bytes, *options_.events_key,
                         &o.message);  // CheckEvents passed
      StampSource(o.message, source);
      outputs->push_back(std::move(o));
    }
  }
  for (auto& o : r.outputs) {
    if (o.log_seq_of_event >= 0 && !topic_mode()) {
      seq_refs->emplace_back(outputs->size(), events->size() + o.log_seq_of_event);
    }
    // On the events topic no seq is known when an output goes out, so
    // log_seq is 0 there: for one re-made from the log too, or its bytes
    // would differ from the first copy's and a re-read input would send
    // its result twice (CommittedOutputs matches exact bytes).
    if (topic_mode() && o.value_json.is_object()) {
      auto seq = o.value_json.find("log_seq");
      if (seq != o.value_json.end() && *seq != 0) {
        *seq = 0;
        o.message.value = o.value_json.dump(-1, ' ', false, Json::error_handler_t::replace);
      }
    }
    StampSource(o.message, source);
    outputs->push_back(std::move(o));
  }
  for (auto& e : r.events) events->push_back(std::move(e));
}

Status StageRunner::AppendEvents(const std::vector<Event>& events, std::vector<StageOutput>& outputs,
                                 const std::vector<std::pair<size_t, size_t>>& seq_refs) {
  std::vector<EventSink::Appended> appended;
  if (!events.empty() && !topic_mode()) {
    sink_.AppendAll(events, &appended);
    for (size_t i = 0; i < appended.size(); ++i) {
      if (!appended[i].status.ok()) {
        return Status::Error(appended[i].status.code(), "append of " + events[i].type + " for " +
                                                            events[i].request_id +
                                                            " failed: " + appended[i].status.message());
      }
    }
  }
  for (auto [out, ev] : seq_refs) {
    StageOutput& o = outputs[out];
    if (!o.value_json.is_object()) continue;
    o.value_json["log_seq"] = appended[ev].seq;
    o.message.value = o.value_json.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  // The exact bytes are final now: sign each result and send it to its org.
  if (options_.results) {
    for (StageOutput& o : outputs) {
      Status r = options_.results->Route(&o.message, &o.value_json);
      if (!r.ok()) return r;
    }
  }
  DropCommitted(outputs);
  return Status::Ok();
}

Status StageRunner::AppendAndPublish(const std::vector<Event>& events, std::vector<StageOutput>& outputs,
                                     const std::vector<std::pair<size_t, size_t>>& seq_refs,
                                     const OffsetMap& next,
                                     std::chrono::steady_clock::time_point* appended_at,
                                     const std::function<void()>& after_append) {
  // 1. The log first: nothing leaves this stage that the log does not hold.
  // (On the events topic, the events are outputs: step 2 makes them durable.)
  Status s = AppendEvents(events, outputs, seq_refs);
  if (!s.ok()) return s;
  if (appended_at != nullptr) *appended_at = std::chrono::steady_clock::now();
  if (after_append && !topic_mode()) after_append();
  // 2. Outputs and offsets, atomically.
  if (!outputs.empty() || !next.empty()) {
    bool offsets_stored = false;
    s = Publish(outputs, next, &offsets_stored);
    if (offsets_stored) committed_.ForgetBelow(next);
    if (!s.ok()) return s;
  }
  if (after_append && topic_mode()) after_append();
  return Status::Ok();
}

Status StageRunner::RunTick() {
  last_tick_ = std::chrono::steady_clock::now();
  if (topic_mode()) {
    Status c = options_.catch_up();
    if (!c.ok()) return c;
  }
  StageContext ctx{Now(), options_.incarnation + "/tick/" + stage_.name()};
  StageResult r = stage_.Tick(ctx, log_);
  if (!r.error.ok()) return r.error;
  if (r.events.empty() && r.outputs.empty()) return Status::Ok();
  std::vector<Event> events;
  std::vector<StageOutput> outputs;
  std::vector<std::pair<size_t, size_t>> seq_refs;
  TakeResult(std::move(r), ctx.source, &events, &outputs, &seq_refs);
  Status s = AppendAndPublish(events, outputs, seq_refs, {}, nullptr);
  if (s.ok()) {
    stats_.events += events.size();
    stats_.outputs += outputs.size();
  }
  return s;
}

Status StageRunner::Publish(std::vector<StageOutput>& outputs, const OffsetMap& next, bool* offsets_stored) {
  *offsets_stored = false;
  Status s = producer_->BeginTransaction();
  for (size_t i = 0; s.ok() && i < outputs.size(); ++i) s = producer_->Send(outputs[i].message);
  if (s.ok() && !next.empty()) s = producer_->SendOffsets(*consumer_, next, kTxnTimeout);
  if (s.ok()) s = producer_->CommitTransaction(kTxnTimeout);
  if (!s.ok()) {
    Status a = producer_->AbortTransaction(kTxnTimeout);
    if (!a.ok()) return Status::Error(errc::kKafka, s.message() + "; abort failed too: " + a.message());
    // Abortable: the batch is retried with this producer.
    return Status::Error(errc::kTxnAbortable, s.message());
  }
  // The same offsets once more, outside the transaction: the embedded broker
  // (librdkafka's mock cluster) acknowledges TxnOffsetCommit but never
  // stores it, so without this a restarted stage re-reads its whole topic.
  // On Apache Kafka it rewrites what the transaction stored. Synchronous:
  // until it is stored, a kill -9 makes the restarted stage read these
  // messages again and re-send outputs that were committed (a second result
  // to the agent); waiting for the ack keeps that window to one round trip
  // instead of however long an async commit sits in librdkafka's queue. On
  // the pipelined path this runs on the publisher thread. A failure here
  // costs only that re-read.
  if (next.empty()) return Status::Ok();
  Status c = consumer_->Commit(next, /*async=*/false);
  *offsets_stored = c.ok();
  if (!c.ok()) log::Warn({stage_.name()}) << c.ToString() << "\n";
  return Status::Ok();
}

}  // namespace tollgate
