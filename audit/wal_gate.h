// WalGate: keeps the log's WAL syncs away from a WAL whose append failed.
//
// RocksDB (the packaged library keeps its assertions) aborts the process
// when DB::SyncWAL() starts on a WAL file whose last append failed, e.g. on
// a full disk, and nothing in its API says so beforehand. EventLog syncs
// from one thread while it writes from another, so a failed append could
// land just before a sync starts. The gate orders them: a sync starts only
// while no append is in flight and none has failed; appends to the newest
// WAL wait until that sync has passed RocksDB's check (its first call to
// the file's Sync) or returned. The wait is an append or the start of a
// sync, never a whole fsync.
//
// The gate sees the files through a FileSystem wrapper around the default
// one (Env()), which LogStore gives a primary database. Thread-safe.
#pragma once

#include <rocksdb/env.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace tollgate {

class WalGate {
 public:
  WalGate();
  ~WalGate();
  // For DBOptions::env: the default filesystem, with WAL files watched.
  rocksdb::Env* Env() const { return env_.get(); }

  // The syncer, before DB::SyncWAL(): false (sync nothing) once an append
  // failed, until Recovered(). After true, call SyncDone() once SyncWAL
  // returns.
  bool BeginSync();
  void SyncDone();
  // After DB::Resume(): true, and syncing allowed again, unless an append
  // failed and RocksDB still writes to that WAL (it switches to a fresh one
  // only when some memtable had data): then the next write would abort, and
  // only reopening the database helps.
  bool Recovered();

  // From the wrapped files.
  void WalCreated(uint64_t number);
  void BeforeAppend(uint64_t number);
  void AfterAppend(uint64_t number, bool ok);
  void Syncing(uint64_t number);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t newest_ = 0;         // the WAL appends go to
  bool appending_ = false;      // an append is in flight
  bool sync_starting_ = false;  // a sync has not yet passed RocksDB's check
  bool failed_ = false;         // an append failed since the last Recovered()
  uint64_t failed_wal_ = 0;     // the newest WAL an append failed on
  std::unique_ptr<rocksdb::Env> env_;
};

}  // namespace tollgate
