#include "audit/merkle.h"

#include <bit>

namespace tollgate::merkle {

namespace {

std::string_view Bytes(const Hash& h) { return {reinterpret_cast<const char*>(h.data()), h.size()}; }

// The largest power of two smaller than n (n >= 2): RFC 9162's split point k.
uint64_t Split(uint64_t n) { return std::bit_floor(n - 1); }

// MTH of leaves [lo, hi), hi > lo: one read for a complete aligned subtree,
// else the RFC's split, recursively (O(log n) reads: every range the proofs
// below ask for is aligned to its split).
Status SubtreeHash(const SubtreeSource& src, uint64_t lo, uint64_t hi, Hash* out) {
  const uint64_t n = hi - lo;
  if (std::has_single_bit(n) && lo % n == 0) return src.Get(std::countr_zero(n), lo / n, out);
  const uint64_t k = Split(n);
  Hash left, right;
  Status s = SubtreeHash(src, lo, lo + k, &left);
  if (s.ok()) s = SubtreeHash(src, lo + k, hi, &right);
  if (s.ok()) *out = NodeHash(left, right);
  return s;
}

// PATH(m, D[lo:hi]), appended to `out` deepest first.
Status Path(const SubtreeSource& src, uint64_t m, uint64_t lo, uint64_t hi, std::vector<Hash>* out) {
  if (hi - lo <= 1) return Status::Ok();
  const uint64_t k = Split(hi - lo);
  const bool left = m < lo + k;
  Status s = left ? Path(src, m, lo, lo + k, out) : Path(src, m, lo + k, hi, out);
  Hash sibling;
  if (s.ok()) s = left ? SubtreeHash(src, lo + k, hi, &sibling) : SubtreeHash(src, lo, lo + k, &sibling);
  if (s.ok()) out->push_back(sibling);
  return s;
}

// SUBPROOF(m, D[lo:hi], b), m counted from lo.
Status Subproof(const SubtreeSource& src, uint64_t m, uint64_t lo, uint64_t hi, bool b,
                std::vector<Hash>* out) {
  const uint64_t n = hi - lo;
  if (m == n) {
    if (b) return Status::Ok();
    Hash h;
    Status s = SubtreeHash(src, lo, hi, &h);
    if (s.ok()) out->push_back(h);
    return s;
  }
  const uint64_t k = Split(n);
  const bool left = m <= k;
  Status s = left ? Subproof(src, m, lo, lo + k, b, out) : Subproof(src, m - k, lo + k, hi, false, out);
  Hash h;
  if (s.ok()) s = left ? SubtreeHash(src, lo + k, hi, &h) : SubtreeHash(src, lo, lo + k, &h);
  if (s.ok()) out->push_back(h);
  return s;
}

Status Invalid(std::string msg) { return Status::Error(errc::kInvalidQuery, std::move(msg)); }

}  // namespace

Hash LeafHash(std::string_view data) { return Sha256(std::string_view("\x00", 1), data); }

Hash NodeHash(const Hash& left, const Hash& right) { return Sha256({"\x01", Bytes(left), Bytes(right)}); }

Hash EmptyRoot() { return Sha256(std::string_view()); }

Status RootAt(const SubtreeSource& src, uint64_t size, Hash* out) {
  if (size == 0) {
    *out = EmptyRoot();
    return Status::Ok();
  }
  return SubtreeHash(src, 0, size, out);
}

Status InclusionProof(const SubtreeSource& src, uint64_t index, uint64_t size, std::vector<Hash>* out) {
  out->clear();
  if (index >= size) {
    return Invalid("leaf " + std::to_string(index) + " is not in a tree of size " + std::to_string(size));
  }
  return Path(src, index, 0, size, out);
}

Status ConsistencyProof(const SubtreeSource& src, uint64_t m, uint64_t n, std::vector<Hash>* out) {
  out->clear();
  if (m > n) {
    return Invalid("no consistency proof from size " + std::to_string(m) + " to the smaller " +
                   std::to_string(n));
  }
  if (m == 0 || m == n) return Status::Ok();
  return Subproof(src, m, 0, n, true, out);
}

bool VerifyInclusion(uint64_t index, uint64_t size, const Hash& leaf_hash, const std::vector<Hash>& proof,
                     const Hash& root) {
  if (index >= size) return false;
  uint64_t fn = index, sn = size - 1;
  Hash r = leaf_hash;
  for (const Hash& p : proof) {
    if (sn == 0) return false;
    if ((fn & 1) || fn == sn) {
      r = NodeHash(p, r);
      while (!(fn & 1) && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      r = NodeHash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn == 0 && r == root;
}

bool VerifyConsistency(uint64_t m, uint64_t n, const Hash& root_m, const Hash& root_n,
                       const std::vector<Hash>& proof) {
  if (m > n) return false;
  if (m == n) return proof.empty() && root_m == root_n;
  if (m == 0) return proof.empty();
  if (proof.empty()) return false;
  // A power-of-two first tree is itself a node of the second: its root
  // starts the path.
  std::vector<Hash> path;
  if (std::has_single_bit(m)) path.push_back(root_m);
  path.insert(path.end(), proof.begin(), proof.end());
  uint64_t fn = m - 1, sn = n - 1;
  while (fn & 1) {
    fn >>= 1;
    sn >>= 1;
  }
  Hash fr = path[0], sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    const Hash& c = path[i];
    if (sn == 0) return false;
    if ((fn & 1) || fn == sn) {
      fr = NodeHash(c, fr);
      sr = NodeHash(c, sr);
      while (!(fn & 1) && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      sr = NodeHash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return fr == root_m && sr == root_n && sn == 0;
}

Status Frontier::Load(const SubtreeSource& src, uint64_t size) {
  edge_.clear();
  size_ = 0;
  // [0, size) splits into one complete subtree per set bit, largest first.
  uint64_t lo = 0;
  for (int level = 63; level >= 0; --level) {
    const uint64_t width = uint64_t{1} << level;
    if (!(size & width)) continue;
    Hash h;
    Status s = src.Get(level, lo >> level, &h);
    if (!s.ok()) return s;
    edge_.push_back(h);
    lo += width;
  }
  size_ = size;
  return Status::Ok();
}

Hash Frontier::Root() const {
  if (edge_.empty()) return EmptyRoot();
  Hash r = edge_.back();
  for (size_t i = edge_.size() - 1; i-- > 0;) r = NodeHash(edge_[i], r);
  return r;
}

void MemoryTree::AppendLeafHash(const Hash& leaf_hash) {
  if (levels_.empty()) levels_.emplace_back();
  levels_[0].push_back(leaf_hash);
  for (size_t l = 0; levels_[l].size() % 2 == 0; ++l) {
    if (levels_.size() == l + 1) levels_.emplace_back();
    const auto& row = levels_[l];
    levels_[l + 1].push_back(NodeHash(row[row.size() - 2], row.back()));
  }
}

Hash MemoryTree::Root() const {
  Hash h;
  return RootAt(*this, size(), &h).ok() ? h : EmptyRoot();
}

Status MemoryTree::Get(int level, uint64_t index, Hash* out) const {
  if (level < 0 || static_cast<size_t>(level) >= levels_.size() || index >= levels_[level].size()) {
    return Status::Error(errc::kNotFound, "no subtree (" + std::to_string(level) + ", " +
                                              std::to_string(index) + ") in the tree");
  }
  *out = levels_[level][index];
  return Status::Ok();
}

}  // namespace tollgate::merkle
