// The log's Merkle tree: RFC 6962 / RFC 9162 §2.1 hashing, tree heads,
// inclusion and consistency proofs and their verification. Pure: no RocksDB
// (audit/merkle_store.h keeps the tree in the log's database).
//
// Leaf i (0-based) of the log's tree is the event at seq i+1; its leaf data
// is that record's 32-byte `hash` (docs/log_format.md, "The Merkle tree").
//
// A tree is read through a SubtreeSource: the hash of every *complete*
// subtree, addressed (level, index): level 0 holds the leaf hashes and node
// (l, i) covers leaves [i*2^l, (i+1)*2^l). Any other range's hash is
// computed from those, so a tree of size n answers for every size <= n.
// Thread-safe as far as the source is; the functions keep no state.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/sha256.h"
#include "core/status.h"

namespace tollgate::merkle {

using Hash = Digest;

// SHA-256(0x00 || data).
Hash LeafHash(std::string_view data);
inline Hash LeafHash(const Hash& data) {
  return LeafHash(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
}
// SHA-256(0x01 || left || right).
Hash NodeHash(const Hash& left, const Hash& right);
// The root of the empty tree: SHA-256 of nothing.
Hash EmptyRoot();

// The complete subtrees of a tree. Get fails (E_NOT_FOUND) for a subtree
// the source does not hold; E_LOG_CORRUPT/E_LOG_IO for a bad read.
class SubtreeSource {
 public:
  virtual ~SubtreeSource() = default;
  virtual Status Get(int level, uint64_t index, Hash* out) const = 0;
};

// The root of the first `size` leaves (MTH, RFC 9162 §2.1.1).
Status RootAt(const SubtreeSource& src, uint64_t size, Hash* out);
// The audit path of leaf `index` in the tree of `size` leaves (PATH,
// §2.1.3.1), the leaf's sibling first. E_INVALID_QUERY unless index < size.
Status InclusionProof(const SubtreeSource& src, uint64_t index, uint64_t size, std::vector<Hash>* out);
// The proof that the tree of size m is a prefix of the tree of size n
// (PROOF, §2.1.4.1); empty when m == 0 or m == n. E_INVALID_QUERY if m > n.
Status ConsistencyProof(const SubtreeSource& src, uint64_t m, uint64_t n, std::vector<Hash>* out);

// §2.1.3.2: whether `proof` proves leaf `index` (its leaf hash) in the tree
// of `size` leaves with root `root`.
bool VerifyInclusion(uint64_t index, uint64_t size, const Hash& leaf_hash, const std::vector<Hash>& proof,
                     const Hash& root);
// §2.1.4.2: whether `proof` proves the tree of size m (root_m) a prefix of
// the tree of size n (root_n). m == n needs an empty proof and equal roots;
// m == 0 an empty proof (the empty tree is a prefix of every tree).
bool VerifyConsistency(uint64_t m, uint64_t n, const Hash& root_m, const Hash& root_n,
                       const std::vector<Hash>& proof);

// The right edge of a tree: the roots of the complete subtrees that make up
// [0, size), largest first. Enough to append leaves and to compute the root,
// with O(log n) memory. Not thread-safe.
class Frontier {
 public:
  // The frontier of the tree of `size` leaves in `src`.
  Status Load(const SubtreeSource& src, uint64_t size);
  uint64_t size() const { return size_; }
  // Appends a leaf hash; `emit(level, index, hash)` is called for the leaf
  // (level 0) and for every subtree it completes, lowest first.
  template <typename Emit>
  void Append(const Hash& leaf_hash, Emit&& emit) {
    Hash h = leaf_hash;
    uint64_t index = size_;
    int level = 0;
    emit(level, index, h);
    for (; index & 1; index >>= 1) {  // a right child completes its parent
      h = NodeHash(edge_.back(), h);
      edge_.pop_back();
      emit(++level, index >> 1, h);
    }
    edge_.push_back(h);
    ++size_;
  }
  Hash Root() const;

 private:
  uint64_t size_ = 0;
  std::vector<Hash> edge_;
};

// A whole tree in memory, every complete subtree kept: for tests and for
// checking an export or a stored tree. Not thread-safe.
class MemoryTree : public SubtreeSource {
 public:
  void AppendData(std::string_view leaf_data) { AppendLeafHash(LeafHash(leaf_data)); }
  void AppendLeafHash(const Hash& leaf_hash);
  uint64_t size() const { return levels_.empty() ? 0 : levels_[0].size(); }
  Hash Root() const;
  Status Get(int level, uint64_t index, Hash* out) const override;

 private:
  std::vector<std::vector<Hash>> levels_;
};

}  // namespace tollgate::merkle
