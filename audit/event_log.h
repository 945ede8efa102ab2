// EventLog: the single writer of a tollgate event log.
//
// Appends from any number of threads are queued to one writer thread, which
// takes everything queued (up to max_batch_events), assigns dense seqs,
// extends the hash chain, and writes the events, all their index entries,
// their dedupe entries and the new head as ONE RocksDB WriteBatch. A caller's
// future completes only after that batch is durable: fdatasync'd under
// Durability::kSync, handed to the OS under kBuffered.
//
// Under kSync the fsync is pipelined: a second thread syncs the WAL (one
// fdatasync covers every batch written before it) while the writer goes on
// to the next batch. The writer never waits for an fsync, and the next one
// starts as soon as the last ends, covering everything written meanwhile;
// so with many appenders about half of them are being synced while the
// other half are encoded and written, and the disk and the CPUs work at the
// same time. A batch can be visible to readers shortly before it is
// durable; it is acknowledged only once it is.
//
// Idempotent: an event whose id is already in the log is not written again;
// the caller gets the existing seq with duplicate=true (the first write wins;
// the id is the event's identity, see MakeEventId).
//
// Fail closed, then recover by itself: validation errors come back before
// anything is queued. When the log's filesystem is short of room (less than
// min_free_bytes beyond the batch) or a RocksDB write, sync or background
// job fails, the batch fails and the log refuses every append at once, with
// E_LOG_FULL (no room) or E_LOG_IO, without queueing it; refusing() says so.
// The writer thread then looks again every 50 ms to 2 s: once the
// filesystem has room it resumes RocksDB (DB::Resume: a flush of every
// memtable and a fresh WAL, so nothing rests on a WAL that failed) and takes
// appends again; a batch that failed is not in the chain, which goes on
// from the last written event. Corruption, or a RocksDB error it cannot
// resume from, leaves the log refusing until it is reopened. RocksDB aborts
// the process when a WAL whose append failed is synced or written again;
// the WAL gate (audit/wal_gate.h) and PinMemtable() keep the log off both.
//
// Only one EventLog may have a path open (RocksDB's lock enforces it). Other
// processes read through LogStore in kSecondary mode. Thread-safe.
#pragma once

#include <rocksdb/write_batch.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "audit/append_future.h"
#include "audit/links.h"
#include "audit/log_store.h"
#include "core/event.h"
#include "core/latency_histogram.h"
#include "core/status.h"

namespace tollgate {

enum class Durability { kSync, kBuffered };
// "sync" / "buffered"; false for anything else.
bool ParseDurability(std::string_view text, Durability* out);

struct LogOptions {
  Durability durability = Durability::kSync;
  size_t max_event_bytes = kDefaultMaxEventBytes;
  size_t max_batch_events = 1024;
  // Called on the writer thread with every batch once it is written (under
  // kSync its fsync may still be pending). For benchmarks (replaying
  // identical batches) and tests; keep it cheap.
  std::function<void(const rocksdb::WriteBatch&)> batch_observer;
  // Room the log leaves free on its filesystem: a batch that would leave
  // less is refused (E_LOG_FULL), so that a disk filling up meets the log's
  // own check rather than a failed RocksDB write, and RocksDB keeps room to
  // flush. 0: only RocksDB's own errors refuse (tests of that path).
  uint64_t min_free_bytes = uint64_t{16} << 20;
};

class EventLog {
 public:
  static Status Open(const std::string& path, const LogOptions& options, std::unique_ptr<EventLog>* out);
  // Drains the queue, then closes the database.
  ~EventLog();

  // Queues `e` (its seq/prev_hash/hash are ignored). The future is ready
  // when the event is durable or the append failed.
  AppendFuture AppendAsync(Event e);
  // AppendAsync and wait, without the future's allocations: the queued
  // item lives on the caller's stack.
  AppendResult Append(Event e);
  // Appends `events` atomically: all of them go into the same RocksDB write
  // batch (never split across two, whatever max_batch_events says), so a
  // crash leaves all or none of them. If any event is invalid, none is
  // queued and every future carries an error. One future per event, in order.
  // The events are encoded before this returns; the caller keeps them.
  std::vector<AppendFuture> AppendGroupAsync(const std::vector<Event>& events);

  // For import: appends a record carrying seq, prev_hash and hash, and fails
  // (E_CHAIN_BROKEN) unless it lands at exactly that seq with exactly that
  // hash, i.e. the log is the record's chain prefix.
  AppendResult AppendRecord(Event record);

  // Head after the last durable (acknowledged) batch.
  uint64_t head_seq() const;
  // For /metrics: each batch's RocksDB write, and each WAL fsync (kSync).
  const LatencyHistogram& write_latency() const { return write_hist_; }
  const LatencyHistogram& sync_latency() const { return sync_hist_; }
  std::string head_hash() const;

  // Why appends are refused now, ok when they are not: a write failed and
  // the log has not recovered yet (it does by itself, see above), or the
  // filesystem has less than min_free_bytes free (the next batch would be
  // refused). What /healthz shows.
  Status refusal() const;
  bool refusing() const { return !refusal().ok(); }
  // refusal() while refusing; after that the last failure the log
  // recovered from; ok when nothing failed since Open.
  Status last_error() const;
  // Appends refused or failed by a write since Open (each event counts).
  uint64_t refused_appends() const { return refused_.load(std::memory_order_relaxed); }

  // Read access (thread-safe).
  const LogStore& store() const { return *store_; }

 private:
  struct Pending;
  EventLog() = default;
  // Encodes `e` into `p` (everything the writer needs); false if invalid,
  // with p->result holding the error.
  bool Prepare(const Event& e, bool expect_position, Pending* p);
  // Queues `group` contiguously under one lock; if the log refuses, each
  // item is finished with the refusal instead.
  void EnqueueGroup(Pending* const* group, size_t n);
  // Append()/AppendRecord(): `p` lives on the caller's stack; waits until
  // the log is done with it.
  AppendResult AppendAndWait(const Event& e, bool expect_position);
  void WaitFor(const Pending& p);
  // Why the log refuses appends now (ok if it does not). Requires mu_.
  Status Refusal() const;
  // The refusal when the filesystem has less than min_free_bytes free now.
  Status Room() const;
  // From now on appends get `why`; `resumable`: TryRecover may end it,
  // `resume_rocks`: RocksDB itself failed and needs DB::Resume(). Requires mu_.
  void RefuseLocked(const Status& why, bool resumable, bool resume_rocks);
  // RocksDB's background errors (class Listener), on RocksDB's threads.
  class Listener;
  static std::shared_ptr<rocksdb::EventListener> NewListener(EventLog* log);
  void HeardRocksError(const rocksdb::Status& s);
  // Writer thread, while refusing: ends the refusal once the filesystem has
  // room and RocksDB resumed, else schedules the next try.
  void TryRecover();
  // E_LOG_FULL unless `bytes` more leave min_free_bytes free (one fstatfs,
  // per batch).
  Status RoomFor(uint64_t bytes) const;
  // Keeps a memtable non-empty (a write to the unused default family that
  // skips the WAL): DB::Resume() switches to a fresh WAL only when some
  // memtable has data, and RocksDB's next write to a WAL that failed aborts.
  void PinMemtable();
  // Written but not yet synced (kSync): acknowledged by SyncLoop.
  struct Unsynced {
    std::vector<Pending*> batch;  // results filled in
    uint64_t seq;                 // the chain's tip after this batch
    Digest hash;
  };
  void WriterLoop();
  void SyncLoop();
  void WriteBatchOf(std::vector<Pending*>& batch);
  // WriteBatchOf's steps, in the order they run (the .cpp).
  bool FinishIfRefusing(std::vector<Pending*>& batch);
  void RefuseBatch(std::vector<Pending*>& batch, const Status& why, bool resumable, bool resume_rocks);
  void CheckDuplicate(std::vector<Pending*>& batch, size_t i, const rocksdb::PinnableSlice& found,
                      const rocksdb::Status& g);
  bool ChainOn(Pending& p, uint64_t& seq, Digest& hash);
  bool WriteOut(std::vector<Pending*>& batch, uint64_t seq, const Digest& hash);
  void HandOn(std::vector<Pending*>& batch);
  // Hands each item its result (or `failed` when that is not ok); the items
  // are not to be touched afterwards. Returns the wake bits of the callers
  // waiting in Append(), for WakeWaiters().
  static uint32_t Finish(std::vector<Pending*>& batch, const Status& failed);
  static uint32_t Finish(Pending* p, const Status& failed);
  // Wakes the Append() callers whose wake bits are in `mask` (after Finish),
  // all in one syscall; callers of other batches sleep on.
  void WakeWaiters(uint32_t mask);

  LogOptions options_;
  std::unique_ptr<LogStore> store_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending*> queue_;                             // guarded by mu_
  bool writer_waiting_ = false;                            // guarded by mu_; WriterLoop sleeps on cv_
  bool stopping_ = false;                                  // guarded by mu_
  Status failed_;                                          // guarded by mu_; see RefuseLocked
  bool resumable_ = false;                                 // guarded by mu_
  bool resume_rocks_ = false;                              // guarded by mu_
  bool recover_pending_ = false;                           // guarded by mu_; TryRecover is due
  uint64_t rocks_errors_ = 0;                              // guarded by mu_; background errors heard
  Status last_error_;                                      // guarded by mu_
  std::chrono::steady_clock::time_point next_recovery_{};  // guarded by mu_
  std::chrono::milliseconds recovery_backoff_{50};         // guarded by mu_
  std::atomic<uint64_t> refused_{0};
  uint64_t head_seq_ = 0;                                  // guarded by mu_; durable
  Digest head_hash_{};                                     // guarded by mu_; durable
  uint64_t written_seq_ = 0;                               // writer thread only: the chain's tip
  Digest written_hash_{};                                  // writer thread only
  rocksdb::WriteBatch wb_;                                 // writer thread only; reused
  std::unordered_map<std::string_view, size_t> in_batch_;  // writer thread only; reused
  std::unique_ptr<LinkTracker> links_;                     // writer thread only
  std::condition_variable sync_cv_;
  std::deque<Unsynced> unsynced_;  // guarded by mu_
  bool syncer_waiting_ = false;    // guarded by mu_; SyncLoop sleeps on sync_cv_
  uint64_t enqueued_ = 0;          // guarded by mu_; items ever queued
  uint64_t resolved_ = 0;          // guarded by mu_; items the writer handed to the syncer
  bool writer_done_ = false;       // guarded by mu_
  // Append()/AppendRecord() callers sleep on acks_ (a futex word, bumped
  // whenever items are finished) with one of 32 bits as their futex bitset
  // (handed out in turn), so a wake-up for one batch leaves the callers of
  // another asleep: with 32 callers, one fsync acknowledges about half of
  // them while the other half waits for the next.
  std::atomic<uint32_t> acks_{0};
  std::atomic<uint32_t> next_wake_bit_{0};
  std::thread writer_;
  std::thread syncer_;
  LatencyHistogram write_hist_, sync_hist_;
};

}  // namespace tollgate
