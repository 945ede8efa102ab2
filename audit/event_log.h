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
// to the next batch. So a batch can be visible to readers shortly before it
// is durable; it is acknowledged only once it is.
//
// Idempotent: an event whose id is already in the log is not written again;
// the caller gets the existing seq with duplicate=true (the first write wins;
// the id is the event's identity, see MakeEventId).
//
// Fail closed: validation errors come back before anything is queued; a
// failed write fails every append of its batch and leaves the log refusing
// all further appends (E_LOG_IO) until it is reopened, because RocksDB's
// state after a failed write is not something to build a chain on.
//
// Only one EventLog may have a path open (RocksDB's lock enforces it). Other
// processes read through LogStore in kSecondary mode. Thread-safe.
#pragma once

#include <rocksdb/write_batch.h>

#include <atomic>
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
#include "audit/log_store.h"
#include "core/event.h"
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
};

class EventLog {
 public:
  static Status Open(const std::string& path, const LogOptions& options,
                     std::unique_ptr<EventLog>* out);
  // Drains the queue, then closes the database.
  ~EventLog();

  // Queues `e` (its seq/prev_hash/hash are ignored). The future is ready
  // when the event is durable or the append failed.
  AppendFuture AppendAsync(Event e);
  // AppendAsync and wait. Callers blocked here are woken together, one
  // syscall per completed batch rather than one per caller.
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
  std::string head_hash() const;

  // Read access (thread-safe).
  const LogStore& store() const { return *store_; }

 private:
  struct Pending;
  EventLog() = default;
  AppendFuture Enqueue(Event e, bool expect_position);
  // Queues `group` contiguously under one lock; false if the log refuses.
  void EnqueueGroup(std::vector<std::unique_ptr<Pending>> group);
  // Written but not yet synced (kSync): acknowledged by SyncLoop.
  struct Unsynced {
    std::vector<std::unique_ptr<Pending>> batch;  // results filled in
    uint64_t seq;  // the chain's tip after this batch
    Digest hash;
  };
  void WriterLoop();
  void SyncLoop();
  void WriteBatchOf(std::vector<std::unique_ptr<Pending>>& batch);
  // Completes a batch's futures with the results the writer filled in, or
  // all with `failed` when that is not ok.
  static void Complete(std::vector<std::unique_ptr<Pending>>& batch, const Status& failed);

  LogOptions options_;
  std::unique_ptr<LogStore> store_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Pending>> queue_;  // guarded by mu_
  bool stopping_ = false;                       // guarded by mu_
  Status failed_;                               // guarded by mu_; sticky
  uint64_t head_seq_ = 0;                       // guarded by mu_; durable
  Digest head_hash_{};                          // guarded by mu_; durable
  uint64_t written_seq_ = 0;                    // writer thread only: the chain's tip
  Digest written_hash_{};                       // writer thread only
  rocksdb::WriteBatch wb_;                      // writer thread only; reused
  std::unordered_map<std::string_view, size_t> in_batch_;  // writer thread only; reused
  std::condition_variable sync_cv_;
  std::deque<Unsynced> unsynced_;               // guarded by mu_
  bool writer_done_ = false;                    // guarded by mu_
  uint64_t enqueued_ = 0;                       // guarded by mu_; items ever queued
  uint64_t resolved_ = 0;                       // guarded by mu_; items the writer is done with (kSync)
  bool sync_in_flight_ = false;                 // guarded by mu_; SyncLoop is in SyncWAL
  // Bumped after each completed batch; Append()/AppendRecord() callers
  // sleep on it (AppendSlot::WaitVia), so one syscall wakes a whole batch.
  std::atomic<uint32_t> acks_{0};
  std::thread writer_;
  std::thread syncer_;
};

}  // namespace tollgate
