// MerkleStore: the log's Merkle tree (audit/merkle.h) in the log's own
// RocksDB database, column family `merkle` (docs/log_format.md, "The Merkle
// tree"): every complete subtree hash under 1 byte level + be64(index), and
// the tree size under "size", always written together in one WriteBatch, so
// the family agrees with itself.
//
// Kept off the append path: the checkpointer (audit/checkpointer.h) appends
// the hashes of what the log made durable, after the fact, on its thread. The tree is written without the WAL
// (a second WAL writer beside EventLog would meet audit/wal_gate.h's
// hazards) and only up to a durable seq, so after a crash it is behind the
// log or equal to it, never ahead; CatchUp() at start brings it level.
//
// A reader of a log written before the tree has no family: the tree is
// empty there and cannot grow (present() is false). Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "audit/log_store.h"
#include "audit/merkle.h"

namespace tollgate {

class EventLog;

class MerkleStore : public merkle::SubtreeSource {
 public:
  // Reads the stored size and the tree's right edge. `store` outlives this.
  static Status Open(const LogStore& store, std::unique_ptr<MerkleStore>* out);
  // Flushes the family (the tree is written without the WAL).
  ~MerkleStore() override;

  bool present() const { return store_.cf(logfmt::kMerkle) != nullptr; }
  // Leaves in the tree: the tree covers seqs 1..size().
  uint64_t size() const { return size_.load(std::memory_order_acquire); }
  // Appends leaves for seqs size()+1, size()+2, ...: each one the record's
  // 32-byte hash. One WriteBatch; on failure nothing changes.
  Status Append(const std::vector<Digest>& record_hashes);
  // Appends the records size()+1..to_seq read from the log, in batches of
  // kCatchUpBatch. `to_seq` must be durable (EventLog::head_seq()).
  Status CatchUp(uint64_t to_seq);
  // The root of the tree as it stands (its size in *size).
  Status Root(uint64_t* size, merkle::Hash* root) const;
  Status Get(int level, uint64_t index, merkle::Hash* out) const override;

  // Signed checkpoints (audit/checkpointer.h), by tree size: the note as
  // signed. Written with the WAL after the tree is flushed: a checkpoint
  // once served survives, and never names a size the tree on disk lacks.
  Status PutCheckpoint(uint64_t size, const std::string& note);
  Status GetCheckpoint(uint64_t size, std::string* note) const;  // E_NOT_FOUND
  // The checkpoint of the largest size (E_NOT_FOUND when there is none).
  Status LatestCheckpoint(std::string* note) const;

  static constexpr size_t kCatchUpBatch = 4096;

 private:
  explicit MerkleStore(const LogStore& store) : store_(store) {}
  Status AppendLocked(const std::vector<Digest>& record_hashes);

  const LogStore& store_;
  std::mutex mu_;  // serialises appends; guards edge_
  merkle::Frontier edge_;
  std::atomic<uint64_t> size_{0};
};

// Key of subtree (level, index) in the merkle family: 1 byte + be64.
std::string MerkleNodeKey(int level, uint64_t index);
inline constexpr std::string_view kMerkleSizeKey = "size";
// Key of the checkpoint of a tree of `size` leaves: "cp/" be64(size). Its
// first byte is above every level, so nodes and checkpoints never mix.
inline constexpr std::string_view kMerkleCheckpointPrefix = "cp/";
std::string MerkleCheckpointKey(uint64_t size);

}  // namespace tollgate
