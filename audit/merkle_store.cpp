#include "audit/merkle_store.h"

#include <rocksdb/iterator.h>
#include <rocksdb/write_batch.h>

#include <algorithm>

namespace tollgate {

using logfmt::kMerkle;

namespace {

rocksdb::Slice Bytes(const Digest& d) { return {reinterpret_cast<const char*>(d.data()), d.size()}; }

// Written without the WAL (see the header); what a crash loses, CatchUp
// rewrites from the log.
rocksdb::WriteOptions TreeWriteOptions() {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  return wo;
}

Status ReadSize(const LogStore& store, uint64_t* size) {
  *size = 0;
  if (store.cf(kMerkle) == nullptr) return Status::Ok();
  std::string v;
  rocksdb::Status s = store.db()->Get({}, store.cf(kMerkle), kMerkleSizeKey, &v);
  if (s.IsNotFound()) return Status::Ok();
  if (!s.ok()) return FromRocks(s, "cannot read the Merkle tree size");
  if (!logfmt::DecodeSeq(v, size))
    return Status::Error(errc::kLogCorrupt, "the Merkle tree size is malformed");
  return Status::Ok();
}

}  // namespace

std::string MerkleNodeKey(int level, uint64_t index) {
  return std::string(1, static_cast<char>(level)) + logfmt::EncodeSeq(index);
}

Status MerkleStore::Open(const LogStore& store, std::unique_ptr<MerkleStore>* out) {
  std::unique_ptr<MerkleStore> tree(new MerkleStore(store));
  uint64_t size = 0;
  Status s = ReadSize(store, &size);
  if (s.ok()) s = tree->edge_.Load(*tree, size);
  if (!s.ok()) return s;
  tree->size_.store(size, std::memory_order_release);
  *out = std::move(tree);
  return Status::Ok();
}

MerkleStore::~MerkleStore() {
  // The database closes with avoid_flush_during_shutdown: unflushed tree
  // nodes would be lost (and rebuilt by the next CatchUp).
  if (present() && store_.mode() == OpenMode::kPrimary) {
    (void)store_.db()->Flush(rocksdb::FlushOptions(), store_.cf(kMerkle));
  }
}

Status MerkleStore::Get(int level, uint64_t index, merkle::Hash* out) const {
  const std::string where = "Merkle subtree (" + std::to_string(level) + ", " + std::to_string(index) + ")";
  if (!present()) return Status::Error(errc::kNotFound, "the log has no Merkle tree");
  std::string v;
  rocksdb::Status s = store_.db()->Get({}, store_.cf(kMerkle), MerkleNodeKey(level, index), &v);
  if (s.IsNotFound()) return Status::Error(errc::kNotFound, "no " + where);
  if (!s.ok()) return FromRocks(s, "cannot read " + where);
  if (v.size() != out->size()) return Status::Error(errc::kLogCorrupt, where + " is malformed");
  std::copy(v.begin(), v.end(), out->begin());
  return Status::Ok();
}

Status MerkleStore::Root(uint64_t* size, merkle::Hash* root) const {
  *size = this->size();
  return merkle::RootAt(*this, *size, root);
}

Status MerkleStore::Append(const std::vector<Digest>& record_hashes) {
  std::lock_guard<std::mutex> lock(mu_);
  return AppendLocked(record_hashes);
}

Status MerkleStore::AppendLocked(const std::vector<Digest>& record_hashes) {
  if (!present()) return Status::Error(errc::kLogIO, "the log has no Merkle tree family (opened read-only)");
  if (record_hashes.empty()) return Status::Ok();
  merkle::Frontier next = edge_;  // kept only once the batch is written
  rocksdb::WriteBatch wb;
  for (const Digest& h : record_hashes) {
    next.Append(merkle::LeafHash(h), [&](int level, uint64_t index, const merkle::Hash& node) {
      wb.Put(store_.cf(kMerkle), MerkleNodeKey(level, index), Bytes(node));
    });
  }
  wb.Put(store_.cf(kMerkle), kMerkleSizeKey, logfmt::EncodeSeq(next.size()));
  rocksdb::WriteOptions wo = TreeWriteOptions();
  Status s = FromRocks(store_.db()->Write(wo, &wb), "cannot write the Merkle tree");
  if (!s.ok()) return s;
  edge_ = std::move(next);
  size_.store(edge_.size(), std::memory_order_release);
  return Status::Ok();
}

Status MerkleStore::CatchUp(uint64_t to_seq) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<rocksdb::Iterator> it(store_.db()->NewIterator({}, store_.cf(logfmt::kEvents)));
  std::vector<Digest> batch;
  batch.reserve(kCatchUpBatch);
  uint64_t next = edge_.size() + 1;
  for (it->Seek(logfmt::EncodeSeq(next)); next <= to_seq; it->Next(), ++next) {
    uint64_t seq = 0;
    if (!it->Valid() || !logfmt::DecodeSeq(it->key().ToStringView(), &seq) || seq != next) {
      if (!it->status().ok()) return FromRocks(it->status(), "cannot read the log for the Merkle tree");
      return Status::Error(errc::kLogCorrupt, "the Merkle tree cannot find seq " + std::to_string(next));
    }
    logfmt::RecordView rec;
    Status s = logfmt::DecodeRecord(it->value().ToStringView(), &rec);
    if (!s.ok()) return s;
    batch.push_back(rec.hash);
    if (batch.size() == kCatchUpBatch) {
      s = AppendLocked(batch);
      if (!s.ok()) return s;
      batch.clear();
    }
  }
  return AppendLocked(batch);
}

std::string MerkleCheckpointKey(uint64_t size) {
  return std::string(kMerkleCheckpointPrefix) + logfmt::EncodeSeq(size);
}

Status MerkleStore::PutCheckpoint(uint64_t size, const std::string& note) {
  if (!present()) return Status::Error(errc::kLogIO, "the log has no Merkle tree family (opened read-only)");
  // The tree under it first (it is written without the WAL): a stored
  // checkpoint never names a size the tree on disk does not reach.
  Status f = FromRocks(store_.db()->Flush(rocksdb::FlushOptions(), store_.cf(kMerkle)),
                       "cannot flush the Merkle tree");
  if (!f.ok()) return f;
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(store_.db()->Put(wo, store_.cf(kMerkle), MerkleCheckpointKey(size), note),
                   "cannot store the checkpoint of size " + std::to_string(size));
}

Status MerkleStore::GetCheckpoint(uint64_t size, std::string* note) const {
  if (!present()) return Status::Error(errc::kNotFound, "the log has no Merkle tree");
  rocksdb::Status s = store_.db()->Get({}, store_.cf(kMerkle), MerkleCheckpointKey(size), note);
  if (s.IsNotFound()) return Status::Error(errc::kNotFound, "no checkpoint of size " + std::to_string(size));
  return FromRocks(s, "cannot read the checkpoint of size " + std::to_string(size));
}

Status MerkleStore::LatestCheckpoint(std::string* note) const {
  if (!present()) return Status::Error(errc::kNotFound, "the log has no Merkle tree");
  std::unique_ptr<rocksdb::Iterator> it(store_.db()->NewIterator({}, store_.cf(kMerkle)));
  // The largest "cp/" key: seek past the prefix, step back.
  std::string end(kMerkleCheckpointPrefix);
  end.back() = static_cast<char>(end.back() + 1);
  it->SeekForPrev(end);
  if (it->Valid() &&
      it->key().starts_with(rocksdb::Slice(kMerkleCheckpointPrefix.data(), kMerkleCheckpointPrefix.size()))) {
    *note = it->value().ToString();
    return Status::Ok();
  }
  if (!it->status().ok()) return FromRocks(it->status(), "cannot read the checkpoints");
  return Status::Error(errc::kNotFound, "no checkpoint has been signed yet");
}

}  // namespace tollgate
