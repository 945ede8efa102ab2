// LogStore: one RocksDB database holding a tollgate event log, opened with
// every column family of audit/log_format.h, plus typed reads.
//
// Modes: kPrimary (the single writer process; EventLog owns it), kSecondary
// (a live, read-only follower in another process: call CatchUp() to see new
// appends) and kReadOnly (a closed log). All reads are thread-safe; CatchUp()
// must not run concurrently with reads on the same store.
//
// RocksDB's own info log goes to stderr (core/log.h, stage "rocksdb", its
// warnings and errors only), never to a LOG file beside the data: on a full
// disk RocksDB's file logger fails an assertion at its next line and aborts
// the process (the distribution's library keeps its assertions).
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/listener.h>

#include <memory>
#include <string>
#include <vector>

#include "audit/log_format.h"
#include "audit/wal_gate.h"
#include "core/event.h"
#include "core/status.h"

namespace tollgate {

enum class OpenMode { kPrimary, kSecondary, kReadOnly };

class LogStore {
 public:
  // Opens the log at `path`. kPrimary creates it when missing. kSecondary
  // keeps its own RocksDB info files under `secondary_path` (a fresh
  // temporary directory is made when empty and removed on close).
  // kPrimary: `listener` (optional) hears RocksDB's background errors;
  // RocksDB's own recovery from them is left to the listener (EventLog).
  static Status Open(const std::string& path, OpenMode mode, std::unique_ptr<LogStore>* out,
                     const std::string& secondary_path = "",
                     std::shared_ptr<rocksdb::EventListener> listener = nullptr);
  ~LogStore();

  rocksdb::DB* db() const { return db_.get(); }
  // Null only for logfmt::kMerkle in a reader of a log that has no tree yet.
  rocksdb::ColumnFamilyHandle* cf(int which) const { return handles_[which]; }
  OpenMode mode() const { return mode_; }
  // kPrimary: what orders the database's WAL appends and syncs
  // (audit/wal_gate.h); null in the other modes.
  WalGate* wal_gate() const { return wal_gate_.get(); }
  const std::string& path() const { return path_; }

  // Secondary only: applies what the primary appended since the last call.
  Status CatchUp();

  // Bytes the log takes: SST files and memtables of every family (RocksDB's
  // own estimate; the WAL is not counted).
  uint64_t ApproximateBytes() const;
  // Bytes an unprivileged writer may still use on the log's filesystem;
  // UINT64_MAX when that cannot be read (then nothing is refused for room).
  uint64_t FreeBytes() const;
  // The head from meta: 0 and the genesis hash for an empty log.
  Status ReadHead(uint64_t* seq, Digest* hash) const;
  // E_NOT_FOUND when absent; E_LOG_CORRUPT when the value does not decode.
  Status ReadRaw(uint64_t seq, std::string* value) const;
  // The event at `seq` with seq, prev_hash and hash filled in.
  Status ReadEvent(uint64_t seq, Event* out) const;
  // The seq of the event with id `id`; E_NOT_FOUND when the log has none.
  Status SeqOfEvent(const std::string& id, uint64_t* seq) const;
  // Decodes a stored record value into an Event (seq supplied by the caller).
  static Status DecodeEvent(uint64_t seq, std::string_view value, Event* out);

 private:
  LogStore() = default;
  std::string path_;
  std::string secondary_path_;
  bool owns_secondary_path_ = false;
  int dir_fd_ = -1;  // kPrimary: the log's directory, for FreeBytes()
  OpenMode mode_ = OpenMode::kReadOnly;
  std::unique_ptr<WalGate> wal_gate_;  // outlives db_
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

namespace errc {
// The disk under the log is full: appends are refused until it has room
// again, then resume by themselves (docs/errors.md).
inline constexpr const char* kLogFull = "E_LOG_FULL";
}  // namespace errc

// RocksDB status -> tollgate Status with E_LOG_FULL (no space), E_LOG_CORRUPT
// or E_LOG_IO.
Status FromRocks(const rocksdb::Status& s, const std::string& what);

}  // namespace tollgate
