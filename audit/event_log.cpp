#include "audit/event_log.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <climits>
#include <filesystem>
#include <unordered_map>

#include "audit/open_requests.h"

namespace tollgate {

using namespace logfmt;

bool ParseDurability(std::string_view text, Durability* out) {
  if (text == "sync")
    *out = Durability::kSync;
  else if (text == "buffered")
    *out = Durability::kBuffered;
  else
    return false;
  return true;
}

// What the writer needs of an event, all made on the caller's thread: the
// writer neither encodes nor frees an Event (its JSON tree is costly to
// destroy), it only joins bytes, hashes and writes.
struct EventLog::Pending {
  std::string id;
  EventBodyParts body;                         // canonical bytes around the seq and the links
  std::string org_id, request_id, session_id;  // the links' keys
  // Index keys minus their trailing be64(seq), which the writer appends.
  std::vector<std::pair<logfmt::Cf, std::string>> index_prefixes;
  // The open-request index's change (audit/open_requests.h).
  logfmt::OpenOp open_op = logfmt::OpenOp::kNone;
  std::string open_key;
  // For AppendRecord: where the record says it belongs.
  uint64_t record_seq = 0;
  std::string record_prev_hash, record_hash;
  bool expect_position = false;
  bool group_continues = false;  // the next queued item belongs to the same group
  AppendResult result;           // the writer's outcome
  // Async (AppendAsync, AppendGroupAsync): the item is the log's, shared
  // with the caller's AppendFuture through `slot`, and deleted by Finish().
  // Otherwise it lives on the stack of a caller blocked in Append(), which
  // sleeps on the log's acks_ word with `wake_bit` until `done`.
  detail::SlotRef slot;
  uint32_t wake_bit = 1;
  std::atomic<uint32_t> done{0};

  // Everything but the body (made by SplitEventBody) from `e`.
  void Take(const Event& e) {
    id = e.id;
    org_id = e.org_id;
    request_id = e.request_id;
    session_id = e.session_id;
    record_seq = e.seq;
    record_prev_hash = e.prev_hash;
    record_hash = e.hash;
    index_prefixes = IndexEntries(e, 0);
    for (auto& [cf, key] : index_prefixes) key.resize(key.size() - 8);  // every index key ends in be64(seq)
    open_op = logfmt::OpenIndexOp(e);
    if (open_op != logfmt::OpenOp::kNone) open_key = logfmt::OpenKey(e.org_id, e.request_id);
  }
};

namespace {

uint32_t* FutexWord(std::atomic<uint32_t>* a) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word is 32 bits");
  return reinterpret_cast<uint32_t*>(a);
}

}  // namespace

Status EventLog::Open(const std::string& path, const LogOptions& options, std::unique_ptr<EventLog>* out) {
  std::unique_ptr<EventLog> log(new EventLog());
  log->options_ = options;
  if (log->options_.max_batch_events == 0) log->options_.max_batch_events = 1;
  // Mode 0700, also when it exists wider: the WAL holds every org's events
  // (RocksDB writes its files 0644).
  std::error_code mode_ec;
  std::filesystem::create_directories(path, mode_ec);
  std::filesystem::permissions(path, std::filesystem::perms::owner_all, mode_ec);
  Status s = LogStore::Open(path, OpenMode::kPrimary, &log->store_, "", NewListener(log.get()));
  if (!s.ok()) return s;
  s = BuildOpenIndex(*log->store_);  // once, for a log written before the index
  if (!s.ok()) return s;
  s = log->store_->ReadHead(&log->head_seq_, &log->head_hash_);
  if (!s.ok()) return s;
  // Meta and events are written in one batch, so they agree unless something
  // outside tollgate changed the database. Refuse to extend such a chain.
  std::unique_ptr<rocksdb::Iterator> it(log->store_->db()->NewIterator({}, log->store_->cf(kEvents)));
  it->SeekToLast();
  uint64_t last = 0;
  if (it->Valid() && !DecodeSeq(it->key().ToStringView(), &last)) last = UINT64_MAX;
  if (!it->status().ok()) return FromRocks(it->status(), "cannot read the last event");
  if (last != log->head_seq_) {
    return Status::Error(errc::kLogCorrupt, "head seq in meta is " + std::to_string(log->head_seq_) +
                                                " but the last event is " + std::to_string(last) +
                                                "; run `tollgate audit verify` before writing to this log");
  }
  log->links_ = std::make_unique<LinkTracker>(*log->store_);
  log->written_seq_ = log->head_seq_;
  log->written_hash_ = log->head_hash_;
  log->PinMemtable();  // opening flushed what the WAL held
  log->writer_ = std::thread([l = log.get()] { l->WriterLoop(); });
  if (log->options_.durability == Durability::kSync)
    log->syncer_ = std::thread([l = log.get()] { l->SyncLoop(); });
  *out = std::move(log);
  return Status::Ok();
}

EventLog::~EventLog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    writer_done_ = true;
  }
  sync_cv_.notify_all();
  if (syncer_.joinable()) syncer_.join();
  links_.reset();  // its iterators, before the database
  store_.reset();  // before the members the listener uses
}

uint32_t EventLog::Finish(Pending* p, const Status& failed) {
  if (!failed.ok()) p->result = AppendResult::Error(failed);
  if (p->slot) {
    p->slot->Complete(std::move(p->result));  // wakes a caller blocked on the future
    delete p;
    return 0;
  }
  const uint32_t bit = p->wake_bit;
  p->done.store(1, std::memory_order_release);  // the caller may return and free p from here on
  return bit;
}

uint32_t EventLog::Finish(std::vector<Pending*>& batch, const Status& failed) {
  uint32_t mask = 0;
  for (Pending* p : batch) mask |= Finish(p, failed);
  batch.clear();
  return mask;
}

void EventLog::WakeWaiters(uint32_t mask) {
  if (mask == 0) return;
  // A caller that has read the old value and not yet slept returns from
  // FUTEX_WAIT at once; one asleep is woken if its bit is in `mask`.
  acks_.fetch_add(1, std::memory_order_acq_rel);
  syscall(SYS_futex, FutexWord(&acks_), FUTEX_WAKE_BITSET_PRIVATE, INT_MAX, nullptr, nullptr, mask);
}

void EventLog::WaitFor(const Pending& p) {
  for (;;) {
    const uint32_t epoch = acks_.load(std::memory_order_acquire);
    if (p.done.load(std::memory_order_acquire) != 0) return;
    // Returns at once if acks_ moved since it was read.
    syscall(SYS_futex, FutexWord(&acks_), FUTEX_WAIT_BITSET_PRIVATE, epoch, nullptr, nullptr, p.wake_bit);
  }
}

void EventLog::SyncLoop() {
  pthread_setname_np(pthread_self(), "log-sync");
  using Clock = std::chrono::steady_clock;
  // Fsyncs slower than this (smoothed) are worth a short wait for the
  // callers the last one released (below); the fast ones seen here take
  // 0.2-0.6 ms, a busy or slow disk's 2-4 ms.
  constexpr auto kSlowSync = std::chrono::milliseconds(1);
  Clock::duration sync_time{};  // recent fsyncs, smoothed (1/8 of each new one)
  Clock::time_point acked_at;
  uint64_t expect_enqueued = 0;  // enqueued_ once the callers acknowledged last have appended again
  std::deque<Unsynced> taken;
  for (;;) {
    Status failed;
    bool sync_failed = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (unsynced_.empty() && !writer_done_) {
        syncer_waiting_ = true;
        sync_cv_.wait(lock, [this] { return writer_done_ || !unsynced_.empty(); });
        syncer_waiting_ = false;
      }
      if (unsynced_.empty()) return;  // the writer has stopped and all is acknowledged
      // With a fast disk the next fsync starts at once, covering what was
      // written during the last one: the fsync overlaps the encoding and
      // writing of the next appends. When an fsync takes longer than it
      // takes the callers just acknowledged to append again (a slow or busy
      // disk), wait for them (everything they queue written), at most half
      // an fsync: one fsync then covers both groups.
      if (sync_time >= kSlowSync) {
        syncer_waiting_ = true;
        sync_cv_.wait_until(lock, acked_at + sync_time / 2, [&] {
          return writer_done_ || (enqueued_ >= expect_enqueued && resolved_ >= enqueued_);
        });
        syncer_waiting_ = false;
      }
      taken.swap(unsynced_);
      failed = failed_;
    }
    // Everything taken was written before this call, so one sync covers it.
    // Whatever the writer writes meanwhile waits for the next one.
    const Clock::time_point sync_start = Clock::now();
    // Never on a WAL whose append failed: RocksDB would abort (the gate,
    // audit/wal_gate.h). Those batches wait for the recovery's flush.
    rocksdb::Status w;
    if (failed.ok() && !store_->wal_gate()->BeginSync()) {
      failed = Status::Error(errc::kLogIO, "the event log refuses appends: a write to its WAL failed");
    } else if (failed.ok()) {
      w = store_->db()->SyncWAL();
      store_->wal_gate()->SyncDone();
      if (!w.ok()) {
        failed = FromRocks(w, "the event log's sync failed");
        sync_failed = true;
      }
    }
    acked_at = Clock::now();
    sync_time += ((acked_at - sync_start) - sync_time) / 8;
    sync_hist_.Record(std::chrono::duration_cast<std::chrono::microseconds>(acked_at - sync_start).count());
    size_t acked = 0;
    for (const auto& u : taken) acked += u.batch.size();
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Only forward: a recovery may have made later batches durable.
      if (failed.ok() && taken.back().seq > head_seq_) {
        head_seq_ = taken.back().seq;
        head_hash_ = taken.back().hash;
      } else if (sync_failed) {
        RefuseLocked(failed, w.IsIOError(), true);
      }
      expect_enqueued = enqueued_ + acked;
    }
    if (!failed.ok()) refused_.fetch_add(acked, std::memory_order_relaxed);
    uint32_t mask = 0;
    for (auto& u : taken) mask |= Finish(u.batch, failed);
    WakeWaiters(mask);
    taken.clear();
  }
}

uint64_t EventLog::head_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return head_seq_;
}

std::string EventLog::head_hash() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ToHex(head_hash_);
}

bool EventLog::Prepare(const Event& e, bool expect_position, Pending* p) {
  Status s = SplitEventBody(e, options_.max_event_bytes, &p->body);
  if (!s.ok()) {
    p->result = AppendResult::Error(std::move(s));
    return false;
  }
  p->Take(e);
  p->expect_position = expect_position;
  return true;
}

AppendFuture EventLog::AppendAsync(Event e) {
  Pending* p = new Pending();
  p->slot = detail::SlotRef(detail::AppendSlot::New());
  AppendFuture future(detail::SlotRef(p->slot.get()));
  if (!Prepare(e, false, p)) {
    Finish(p, Status::Ok());  // completes with the validation error
    return future;
  }
  EnqueueGroup(&p, 1);
  return future;
}

AppendResult EventLog::AppendAndWait(const Event& e, bool expect_position) {
  Pending p;
  if (!Prepare(e, expect_position, &p)) return std::move(p.result);
  p.wake_bit = uint32_t{1} << (next_wake_bit_.fetch_add(1, std::memory_order_relaxed) & 31);
  bool wake_writer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Status refused = Refusal();
    if (!refused.ok()) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return AppendResult::Error(std::move(refused));
    }
    queue_.push_back(&p);
    ++enqueued_;
    wake_writer = writer_waiting_;
  }
  if (wake_writer) cv_.notify_one();
  WaitFor(p);
  return std::move(p.result);
}

AppendResult EventLog::Append(Event e) { return AppendAndWait(e, false); }

AppendResult EventLog::AppendRecord(Event record) { return AppendAndWait(record, true); }

std::vector<AppendFuture> EventLog::AppendGroupAsync(const std::vector<Event>& events) {
  std::vector<Pending*> group;
  std::vector<AppendFuture> futures;
  group.reserve(events.size());
  futures.reserve(events.size());
  Status invalid;
  size_t invalid_at = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    Pending* p = new Pending();
    p->slot = detail::SlotRef(detail::AppendSlot::New());
    futures.emplace_back(detail::SlotRef(p->slot.get()));
    group.push_back(p);
    if (!Prepare(events[i], false, p) && invalid.ok()) {
      invalid = p->result.status;
      invalid_at = i;
    }
  }
  if (!invalid.ok()) {
    for (size_t i = 0; i < group.size(); ++i) {
      Finish(group[i],
             i == invalid_at
                 ? invalid
                 : Status::Error(invalid.code(), "not appended: event " + std::to_string(invalid_at) +
                                                     " of the same group is invalid: " + invalid.message()));
    }
    return futures;
  }
  for (size_t i = 0; i + 1 < group.size(); ++i) group[i]->group_continues = true;
  EnqueueGroup(group.data(), group.size());
  return futures;
}

void EventLog::EnqueueGroup(Pending* const* group, size_t n) {
  if (n == 0) return;
  bool wake_writer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Status refused = Refusal();
    if (!refused.ok()) {
      refused_.fetch_add(n, std::memory_order_relaxed);
      for (size_t i = 0; i < n; ++i) Finish(group[i], refused);  // a caller's own item: no wake needed
      return;
    }
    queue_.insert(queue_.end(), group, group + n);
    enqueued_ += n;
    wake_writer = writer_waiting_;
  }
  if (wake_writer) cv_.notify_one();
}

Status EventLog::Refusal() const {
  if (stopping_) return Status::Error(errc::kLogClosed, "the event log is closing");
  return failed_;
}

void EventLog::WriterLoop() {
  pthread_setname_np(pthread_self(), "log-writer");
  std::vector<Pending*> batch;
  for (;;) {
    bool recover = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Under kSync the writer does not wait for an fsync in flight: what it
      // writes now is ready for the next one, which then starts at once.
      if (queue_.empty() && !stopping_) {
        writer_waiting_ = true;
        if (recover_pending_) {
          cv_.wait_until(lock, next_recovery_, [this] { return stopping_ || !queue_.empty(); });
        } else {
          cv_.wait(lock, [this] { return stopping_ || !queue_.empty() || recover_pending_; });
        }
        writer_waiting_ = false;
      }
      if (queue_.empty()) {
        if (stopping_) return;  // stopping and drained
        recover = recover_pending_ && std::chrono::steady_clock::now() >= next_recovery_;
      }
      // A group is never split: past the limit, only its rest is taken.
      while (!queue_.empty() && (batch.size() < options_.max_batch_events || batch.back()->group_continues)) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    if (recover) TryRecover();
    if (batch.empty()) continue;
    WriteBatchOf(batch);
    batch.clear();
  }
}

namespace {

rocksdb::Slice Bytes(const Digest& d) {
  return rocksdb::Slice(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace

// The log refuses appends: the whole batch finished with the refusal.
// True when it did.
bool EventLog::FinishIfRefusing(std::vector<Pending*>& batch) {
  Status failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed = failed_;
    if (!failed.ok()) resolved_ += batch.size();  // finished here, not by the syncer
  }
  if (failed.ok()) return false;
  refused_.fetch_add(batch.size(), std::memory_order_relaxed);
  WakeWaiters(Finish(batch, failed));
  return true;
}

// From now on the log refuses appends (RefuseLocked), this batch first.
void EventLog::RefuseBatch(std::vector<Pending*>& batch, const Status& why, bool resumable,
                           bool resume_rocks) {
  Status err;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RefuseLocked(why, resumable, resume_rocks);
    err = failed_;
    resolved_ += batch.size();
  }
  refused_.fetch_add(batch.size(), std::memory_order_relaxed);
  WakeWaiters(Finish(batch, err));
}

// Idempotency of item i: an earlier item of this batch or a stored event
// (`found` and `g`: its dedupe lookup). Sets its result when it is one, or
// when it cannot be appended.
void EventLog::CheckDuplicate(std::vector<Pending*>& batch, size_t i, const rocksdb::PinnableSlice& found,
                              const rocksdb::Status& g) {
  Pending& p = *batch[i];
  AppendResult& r = p.result;
  if (auto it = in_batch_.find(p.id); it != in_batch_.end()) {
    r = batch[it->second]->result;
    r.duplicate = true;
  } else {
    const std::string_view existing = found.ToStringView();
    if (g.ok()) {
      r.duplicate = DecodeSeq(existing, &r.seq);
      std::string value;
      logfmt::RecordView rec;
      r.status = store_->ReadRaw(r.seq, &value);
      if (r.status.ok()) r.status = DecodeRecord(value, &rec);
      if (r.status.ok()) r.hash = ToHex(rec.hash);
      if (!r.duplicate && r.status.ok()) {
        r.status = Status::Error(errc::kLogCorrupt, "dedupe entry of " + p.id + " is malformed");
      }
    } else if (!g.IsNotFound()) {
      r.status = FromRocks(g, "dedupe lookup failed");
    }
  }
  if (p.expect_position && (r.duplicate || !r.status.ok())) {
    r = AppendResult::Error(
        Status::Error(errc::kChainBroken,
                      "record " + std::to_string(p.record_seq) + " (id " + p.id + ") is already in the log"));
  }
}

// Item `p` chained on after seq/hash and put in wb_ (its record, index
// entries, dedupe and open-request keys); seq/hash move on. False, with
// p's result the error, when a record does not continue the log there.
bool EventLog::ChainOn(Pending& p, uint64_t& seq, Digest& hash) {
  AppendResult& r = p.result;
  rocksdb::WriteBatch& wb = wb_;
  // The body is head + seq digits + tail; hashed and stored from those
  // parts without joining them (one copy of the body less per event).
  const uint64_t next = seq + 1;
  char digits[20];
  const std::string_view seq_digits(digits, std::to_chars(digits, digits + sizeof digits, next).ptr - digits);
  if (!p.expect_position) {  // the log's links; a record brings its own
    std::optional<uint64_t> prev_in_request, prev_in_session;
    r.status = links_->Step(p.org_id, p.request_id, p.session_id, next, &prev_in_request, &prev_in_session);
    if (!r.status.ok()) return false;
    p.body.links = LinksText(prev_in_request, prev_in_session);
  }
  const Digest next_hash = ChainHash(hash, p.body.head, seq_digits, p.body.links, p.body.tail);
  if (p.expect_position) {
    std::string want_prev = ToHex(hash), got_hash = ToHex(next_hash);
    if (p.record_seq != next || p.record_prev_hash != want_prev || p.record_hash != got_hash) {
      r.status = Status::Error(errc::kChainBroken, "record seq " + std::to_string(p.record_seq) +
                                                       " does not continue the log at seq " +
                                                       std::to_string(next) + " (prev_hash or hash differ)");
      return false;
    }
    links_->NoteBoth(p.org_id, p.request_id, p.session_id, next);
  }
  const std::string seq_key = EncodeSeq(next);
  const rocksdb::Slice seq_slice(seq_key);
  // The record value as EncodeRecord lays it out.
  const rocksdb::Slice record[] = {rocksdb::Slice(&kRecordVersion, 1),
                                   Bytes(hash),
                                   Bytes(next_hash),
                                   p.body.head,
                                   seq_digits,
                                   p.body.links,
                                   p.body.tail};
  wb.Put(store_->cf(kEvents), rocksdb::SliceParts(&seq_slice, 1), rocksdb::SliceParts(record, 7));
  for (const auto& [cf, prefix] : p.index_prefixes) {
    const rocksdb::Slice key[] = {prefix, seq_slice};
    wb.Put(store_->cf(cf), rocksdb::SliceParts(key, 2), rocksdb::SliceParts(nullptr, 0));
  }
  wb.Put(store_->cf(kDedupe), p.id, seq_key);
  if (p.open_op == logfmt::OpenOp::kOpen) wb.Put(store_->cf(kMeta), p.open_key, seq_key);
  if (p.open_op == logfmt::OpenOp::kClose) wb.Delete(store_->cf(kMeta), p.open_key);
  seq = next;
  hash = next_hash;
  r.seq = seq;
  r.hash = ToHex(hash);
  return true;
}

// The batch and the new head (seq/hash) written, not synced. False when
// the log refused or the write failed: the batch is finished with that.
bool EventLog::WriteOut(std::vector<Pending*>& batch, uint64_t seq, const Digest& hash) {
  rocksdb::WriteBatch& wb = wb_;
  wb.Put(store_->cf(kMeta), kMetaHeadSeq, EncodeSeq(seq));
  wb.Put(store_->cf(kMeta), kMetaHeadHash, Bytes(hash));
  // The WAL takes about the batch's bytes.
  if (Status room = RoomFor(wb.GetDataSize()); !room.ok()) {
    links_->Forget();  // what it noted of this batch is not in the log
    RefuseBatch(batch, room, true, false);
    return false;
  }
  rocksdb::WriteOptions wo;  // not synced here: SyncLoop syncs (kSync)
  const auto write_start = std::chrono::steady_clock::now();
  rocksdb::Status w = store_->db()->Write(wo, &wb);
  write_hist_.Record(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - write_start)
          .count());
  if (!w.ok()) {
    // Not in the chain (written_seq_ stays): the next batch goes on from
    // the last written event once the log recovers.
    links_->Forget();
    RefuseBatch(batch, FromRocks(w, "a write failed"), w.IsIOError(), true);
    return false;
  }
  written_seq_ = seq;
  written_hash_ = hash;
  if (options_.batch_observer) options_.batch_observer(wb);
  return true;
}

// The written batch acknowledged: now (buffered), or by SyncLoop (kSync).
void EventLog::HandOn(std::vector<Pending*>& batch) {
  if (options_.durability == Durability::kSync) {
    // Even a batch of duplicates waits: the events it points at may be
    // written but not yet synced.
    bool wake_syncer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      resolved_ += batch.size();
      unsynced_.push_back(Unsynced{std::move(batch), written_seq_, written_hash_});
      wake_syncer = syncer_waiting_;
    }
    batch = std::vector<Pending*>();
    batch.reserve(options_.max_batch_events < 64 ? options_.max_batch_events : 64);
    if (wake_syncer) sync_cv_.notify_one();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    head_seq_ = written_seq_;
    head_hash_ = written_hash_;
  }
  WakeWaiters(Finish(batch, Status::Ok()));
}

void EventLog::WriteBatchOf(std::vector<Pending*>& batch) {
  uint64_t seq = written_seq_;
  Digest hash = written_hash_;
  if (FinishIfRefusing(batch)) return;
  rocksdb::DB* db = store_->db();
  wb_.Clear();        // keeps its buffer: no regrowth and no fresh pages per batch
  in_batch_.clear();  // id -> index in batch
  links_->Trim();
  const uint64_t first_seq = seq + 1;
  // Idempotency lookups for the whole batch in one MultiGet.
  std::vector<rocksdb::Slice> ids;
  ids.reserve(batch.size());
  for (const Pending* p : batch) ids.emplace_back(p->id);
  std::vector<rocksdb::PinnableSlice> found(batch.size());
  std::vector<rocksdb::Status> lookups(batch.size());
  db->MultiGet({}, store_->cf(kDedupe), ids.size(), ids.data(), found.data(), lookups.data());
  for (size_t i = 0; i < batch.size(); ++i) {
    CheckDuplicate(batch, i, found[i], lookups[i]);
    Pending& p = *batch[i];
    if (p.result.duplicate || !p.result.status.ok()) continue;
    if (!ChainOn(p, seq, hash)) continue;
    in_batch_.emplace(p.id, i);
  }
  if (seq >= first_seq && !WriteOut(batch, seq, hash)) return;
  HandOn(batch);
}

}  // namespace tollgate
