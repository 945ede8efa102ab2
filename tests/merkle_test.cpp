// audit/merkle.h and audit/merkle_store.h: RFC 6962 hashing and proofs
// against the certificate-transparency reference vectors, every proof of
// small trees, and the tree kept in the log's `merkle` family.
#include "audit/merkle.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <memory>
#include <string>
#include <vector>

#include "audit/checkpointer.h"
#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "audit/merkle_store.h"
#include "audit/verify.h"
#include "core/checkpoint.h"
#include "test_util.h"
#include "tests/child_process.h"

namespace tollgate {
namespace {

using merkle::Hash;
using merkle::MemoryTree;
using testing::MakeEvent;
using testing::TempDir;
using testing::WaitUntil;

Hash H(const std::string& hex) {
  Hash h{};
  EXPECT_TRUE(DigestFromHex(hex, &h)) << hex;
  return h;
}

std::vector<Hash> Hs(const std::vector<std::string>& hexes) {
  std::vector<Hash> out;
  for (const auto& x : hexes) out.push_back(H(x));
  return out;
}

// The eight leaves of the certificate-transparency tests (RFC 6962 trees).
const std::vector<std::string>& VectorLeaves() {
  static const std::vector<std::string> kLeaves = {
      std::string(),
      std::string("\x00", 1),
      "\x10",
      "\x20\x21",
      "\x30\x31",
      "\x40\x41\x42\x43",
      "\x50\x51\x52\x53\x54\x55\x56\x57",
      "\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
  };
  return kLeaves;
}

// Roots of the trees of the first 1..8 leaves.
const std::vector<Hash>& VectorRoots() {
  static const std::vector<Hash> kRoots = Hs({
      "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
      "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
      "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
      "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
      "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
      "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
      "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
  });
  return kRoots;
}

MemoryTree VectorTree() {
  MemoryTree t;
  for (const auto& leaf : VectorLeaves()) t.AppendData(leaf);
  return t;
}

TEST(Merkle, EmptyTreeIsTheHashOfNothing) {
  EXPECT_EQ(ToHex(merkle::EmptyRoot()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Hash root;
  ASSERT_TRUE(merkle::RootAt(MemoryTree(), 0, &root).ok());
  EXPECT_EQ(root, merkle::EmptyRoot());
}

TEST(Merkle, RootsMatchTheReferenceVectors) {
  MemoryTree grown;
  const MemoryTree full = VectorTree();
  for (size_t n = 1; n <= 8; ++n) {
    grown.AppendData(VectorLeaves()[n - 1]);
    EXPECT_EQ(ToHex(grown.Root()), ToHex(VectorRoots()[n - 1])) << "size " << n;
    Hash root;
    ASSERT_TRUE(merkle::RootAt(full, n, &root).ok());  // a prefix of a bigger tree
    EXPECT_EQ(ToHex(root), ToHex(VectorRoots()[n - 1])) << "size " << n;
    merkle::Frontier edge;
    ASSERT_TRUE(edge.Load(full, n).ok());
    EXPECT_EQ(edge.Root(), VectorRoots()[n - 1]) << "size " << n;
  }
}

TEST(Merkle, InclusionProofsMatchTheReferenceVectors) {
  struct Vector {
    uint64_t index, size;
    std::vector<std::string> proof;
  };
  const std::vector<Vector> vectors = {
      {0, 1, {}},
      {0,
       8,
       {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {5,
       8,
       {"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
      {2, 3, {"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
      {1,
       5,
       {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
  };
  const MemoryTree tree = VectorTree();
  for (const auto& v : vectors) {
    std::vector<Hash> proof;
    ASSERT_TRUE(merkle::InclusionProof(tree, v.index, v.size, &proof).ok());
    EXPECT_EQ(proof, Hs(v.proof)) << "leaf " << v.index << " of " << v.size;
    const Hash leaf = merkle::LeafHash(VectorLeaves()[v.index]);
    EXPECT_TRUE(merkle::VerifyInclusion(v.index, v.size, leaf, Hs(v.proof), VectorRoots()[v.size - 1]));
  }
}

TEST(Merkle, ConsistencyProofsMatchTheReferenceVectors) {
  struct Vector {
    uint64_t m, n;
    std::vector<std::string> proof;
  };
  const std::vector<Vector> vectors = {
      {1, 1, {}},
      {1,
       8,
       {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {6,
       8,
       {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
      {2,
       5,
       {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
      {6,
       7,
       {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
  };
  const MemoryTree tree = VectorTree();
  for (const auto& v : vectors) {
    std::vector<Hash> proof;
    ASSERT_TRUE(merkle::ConsistencyProof(tree, v.m, v.n, &proof).ok());
    EXPECT_EQ(proof, Hs(v.proof)) << v.m << " -> " << v.n;
    EXPECT_TRUE(merkle::VerifyConsistency(v.m, v.n, VectorRoots()[v.m - 1], VectorRoots()[v.n - 1], proof))
        << v.m << " -> " << v.n;
  }
}

TEST(Merkle, EdgeCasesOfTheVerifiers) {
  const Hash a = merkle::LeafHash("a"), b = merkle::LeafHash("b");
  EXPECT_TRUE(merkle::VerifyInclusion(0, 1, a, {}, a));
  EXPECT_FALSE(merkle::VerifyInclusion(0, 1, a, {}, b));
  EXPECT_FALSE(merkle::VerifyInclusion(1, 1, a, {}, a));  // index out of range
  EXPECT_FALSE(merkle::VerifyInclusion(0, 0, a, {}, a));
  EXPECT_TRUE(merkle::VerifyConsistency(0, 5, a, b, {}));  // the empty tree is a prefix of any
  EXPECT_FALSE(merkle::VerifyConsistency(0, 5, a, b, {a}));
  EXPECT_TRUE(merkle::VerifyConsistency(3, 3, a, a, {}));
  EXPECT_FALSE(merkle::VerifyConsistency(3, 3, a, b, {}));
  EXPECT_FALSE(merkle::VerifyConsistency(3, 3, a, a, {a}));
  EXPECT_FALSE(merkle::VerifyConsistency(4, 3, a, b, {a}));
  EXPECT_FALSE(merkle::VerifyConsistency(1, 2, a, b, {}));
  std::vector<Hash> proof;
  const MemoryTree tree = VectorTree();
  EXPECT_EQ(merkle::InclusionProof(tree, 8, 8, &proof).code(), errc::kInvalidQuery);
  EXPECT_EQ(merkle::ConsistencyProof(tree, 5, 4, &proof).code(), errc::kInvalidQuery);
  EXPECT_EQ(merkle::InclusionProof(tree, 3, 9, &proof).code(), errc::kNotFound);  // beyond the tree held
}

// MTH straight from RFC 9162 §2.1.1, over leaf hashes: the reference the
// store-backed computation is compared with.
Hash ReferenceRoot(const std::vector<Hash>& leaves, size_t lo, size_t hi) {
  if (hi == lo) return merkle::EmptyRoot();
  if (hi - lo == 1) return leaves[lo];
  size_t k = 1;
  while (k * 2 < hi - lo) k *= 2;
  return merkle::NodeHash(ReferenceRoot(leaves, lo, lo + k), ReferenceRoot(leaves, lo + k, hi));
}

Hash Flipped(Hash h) {
  h[7] ^= 0x20;
  return h;
}

// Every leaf of every tree of 1..64 leaves: the proof verifies; a flipped
// byte anywhere in it, another index or another size does not.
TEST(Merkle, EveryInclusionProofOfSmallTrees) {
  constexpr uint64_t kMax = 64;
  MemoryTree tree;
  std::vector<Hash> leaves;
  for (uint64_t i = 0; i < kMax; ++i) {
    leaves.push_back(merkle::LeafHash("leaf " + std::to_string(i)));
    tree.AppendLeafHash(leaves.back());
  }
  for (uint64_t n = 1; n <= kMax; ++n) {
    Hash root;
    ASSERT_TRUE(merkle::RootAt(tree, n, &root).ok());
    ASSERT_EQ(root, ReferenceRoot(leaves, 0, n)) << "size " << n;
    for (uint64_t i = 0; i < n; ++i) {
      std::vector<Hash> proof;
      ASSERT_TRUE(merkle::InclusionProof(tree, i, n, &proof).ok());
      ASSERT_TRUE(merkle::VerifyInclusion(i, n, leaves[i], proof, root)) << i << " of " << n;
      EXPECT_FALSE(merkle::VerifyInclusion(i, n, Flipped(leaves[i]), proof, root));
      EXPECT_FALSE(merkle::VerifyInclusion(i, n, leaves[i], proof, Flipped(root)));
      for (size_t p = 0; p < proof.size(); ++p) {
        auto bad = proof;
        bad[p] = Flipped(bad[p]);
        EXPECT_FALSE(merkle::VerifyInclusion(i, n, leaves[i], bad, root)) << i << " of " << n << " at " << p;
      }
      if (i + 1 < n) {
        EXPECT_FALSE(merkle::VerifyInclusion(i + 1, n, leaves[i], proof, root));
      }
      if (i > 0) {
        EXPECT_FALSE(merkle::VerifyInclusion(i - 1, n, leaves[i], proof, root));
      }
      // Another height (a size whose path has the leaf's shape, e.g. n+1,
      // can accept it: the root binds the size, as a checkpoint names it).
      EXPECT_FALSE(merkle::VerifyInclusion(i, n * 2, leaves[i], proof, root));
      if (i < n / 2) {
        EXPECT_FALSE(merkle::VerifyInclusion(i, n / 2, leaves[i], proof, root));
      }
      if (!proof.empty()) {
        auto shorter = proof;
        shorter.pop_back();
        EXPECT_FALSE(merkle::VerifyInclusion(i, n, leaves[i], shorter, root));
      }
    }
  }
}

TEST(Merkle, EveryConsistencyProofOfSmallTrees) {
  constexpr uint64_t kMax = 64;
  MemoryTree tree;
  std::vector<Hash> leaves;
  for (uint64_t i = 0; i < kMax; ++i) {
    leaves.push_back(merkle::LeafHash("leaf " + std::to_string(i)));
    tree.AppendLeafHash(leaves.back());
  }
  for (uint64_t n = 1; n <= kMax; ++n) {
    const Hash root_n = ReferenceRoot(leaves, 0, n);
    for (uint64_t m = 1; m <= n; ++m) {
      const Hash root_m = ReferenceRoot(leaves, 0, m);
      std::vector<Hash> proof;
      ASSERT_TRUE(merkle::ConsistencyProof(tree, m, n, &proof).ok());
      ASSERT_TRUE(merkle::VerifyConsistency(m, n, root_m, root_n, proof)) << m << " -> " << n;
      if (m == n) continue;
      EXPECT_FALSE(merkle::VerifyConsistency(m, n, Flipped(root_m), root_n, proof));
      EXPECT_FALSE(merkle::VerifyConsistency(m, n, root_m, Flipped(root_n), proof));
      EXPECT_FALSE(merkle::VerifyConsistency(m, n, root_n, root_m, proof));
      for (size_t p = 0; p < proof.size(); ++p) {
        auto bad = proof;
        bad[p] = Flipped(bad[p]);
        EXPECT_FALSE(merkle::VerifyConsistency(m, n, root_m, root_n, bad)) << m << " -> " << n << " at " << p;
      }
      if (m + 1 < n) {
        EXPECT_FALSE(merkle::VerifyConsistency(m + 1, n, root_m, root_n, proof));
      }
      if (m > 1) {
        EXPECT_FALSE(merkle::VerifyConsistency(m - 1, n, root_m, root_n, proof));
      }
      EXPECT_FALSE(merkle::VerifyConsistency(m, n * 2, root_m, root_n, proof));
      EXPECT_FALSE(merkle::VerifyConsistency(m, n / 2, root_m, root_n, proof));
    }
  }
}

// --- The tree in the log's database ---

std::unique_ptr<EventLog> OpenLog(const std::string& path) {
  LogOptions o;
  o.durability = Durability::kBuffered;
  std::unique_ptr<EventLog> log;
  Status s = EventLog::Open(path, o, &log);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return log;
}

// Appends events for requests first..first+count-1, 100 to a group.
void AppendEvents(EventLog& log, int first, int count) {
  for (int i = first; i < first + count; i += 100) {
    std::vector<Event> group;
    for (int j = i; j < std::min(first + count, i + 100); ++j)
      group.push_back(MakeEvent("request.received", "r" + std::to_string(j)));
    for (auto& f : log.AppendGroupAsync(group)) ASSERT_TRUE(f.get().status.ok());
  }
}

// The tree over the log's records 1..head, built in memory from the records.
MemoryTree TreeOfRecords(const LogStore& store) {
  uint64_t head = 0;
  Digest head_hash;
  EXPECT_TRUE(store.ReadHead(&head, &head_hash).ok());
  MemoryTree t;
  for (uint64_t seq = 1; seq <= head; ++seq) {
    Event e;
    EXPECT_TRUE(store.ReadEvent(seq, &e).ok());
    Digest h;
    EXPECT_TRUE(DigestFromHex(e.hash, &h));
    t.AppendLeafHash(merkle::LeafHash(h));  // the leaf data is the record's 32-byte hash
  }
  return t;
}

std::unique_ptr<MerkleStore> OpenTree(const LogStore& store) {
  std::unique_ptr<MerkleStore> tree;
  Status s = MerkleStore::Open(store, &tree);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return tree;
}

void ExpectRootOfRecords(const MerkleStore& tree, const LogStore& store) {
  const MemoryTree want = TreeOfRecords(store);
  uint64_t size = 0;
  Hash root;
  ASSERT_TRUE(tree.Root(&size, &root).ok());
  EXPECT_EQ(size, want.size());
  EXPECT_EQ(ToHex(root), ToHex(want.Root()));
}

TEST(MerkleStore, CatchesUpSurvivesReopeningAndFollowsTheLog) {
  TempDir dir;
  {
    auto log = OpenLog(dir.path());
    AppendEvents(*log, 0, 1000);
    auto tree = OpenTree(log->store());
    EXPECT_EQ(tree->size(), 0u);
    ASSERT_TRUE(tree->CatchUp(log->head_seq()).ok());
    EXPECT_EQ(tree->size(), 1000u);
    ExpectRootOfRecords(*tree, log->store());
    // Proofs from the stored tree verify against its root.
    uint64_t size = 0;
    Hash root;
    ASSERT_TRUE(tree->Root(&size, &root).ok());
    std::vector<Hash> proof;
    ASSERT_TRUE(merkle::InclusionProof(*tree, 617, size, &proof).ok());
    Event e;
    ASSERT_TRUE(log->store().ReadEvent(618, &e).ok());
    Digest leaf_data;
    ASSERT_TRUE(DigestFromHex(e.hash, &leaf_data));
    EXPECT_TRUE(merkle::VerifyInclusion(617, size, merkle::LeafHash(leaf_data), proof, root));
    EXPECT_TRUE(VerifyLog(log->store()).ok());
  }
  {
    auto log = OpenLog(dir.path());
    auto tree = OpenTree(log->store());
    EXPECT_EQ(tree->size(), 1000u);  // flushed when the store closed
    ExpectRootOfRecords(*tree, log->store());
    Hash root_1000;
    uint64_t size = 0;
    ASSERT_TRUE(tree->Root(&size, &root_1000).ok());
    AppendEvents(*log, 1000, 537);  // the tree falls behind the log
    EXPECT_EQ(tree->size(), 1000u);
    EXPECT_TRUE(VerifyLog(log->store()).ok());  // behind is fine
    ASSERT_TRUE(tree->CatchUp(log->head_seq()).ok());
    EXPECT_EQ(tree->size(), 1537u);
    ExpectRootOfRecords(*tree, log->store());
    Hash root_1537;
    ASSERT_TRUE(tree->Root(&size, &root_1537).ok());
    std::vector<Hash> proof;
    ASSERT_TRUE(merkle::ConsistencyProof(*tree, 1000, 1537, &proof).ok());
    EXPECT_TRUE(merkle::VerifyConsistency(1000, 1537, root_1000, root_1537, proof));
    EXPECT_TRUE(VerifyLog(log->store()).ok());
  }
  // A read-only reader sees the same tree.
  std::unique_ptr<LogStore> ro;
  ASSERT_TRUE(LogStore::Open(dir.path(), OpenMode::kReadOnly, &ro).ok());
  auto tree = OpenTree(*ro);
  EXPECT_EQ(tree->size(), 1537u);
  ExpectRootOfRecords(*tree, *ro);
  EXPECT_EQ(VerifyLog(*ro).merkle_leaves, 1537u);
}

// Events of `type` in the log.
size_t CountOfType(const LogStore& store, const std::string& type) {
  uint64_t head = 0;
  Digest hash;
  EXPECT_TRUE(store.ReadHead(&head, &hash).ok());
  size_t n = 0;
  for (uint64_t seq = 1; seq <= head; ++seq) {
    Event e;
    EXPECT_TRUE(store.ReadEvent(seq, &e).ok());
    n += e.type == type;
  }
  return n;
}

// The size named on a signed checkpoint, after checking its signature.
uint64_t OpenedSize(const std::string& note, const NoteSigner& signer, Hash* root) {
  Checkpoint cp;
  Status s = OpenCheckpoint(note, signer.Verifier(), &cp);
  EXPECT_TRUE(s.ok()) << s.ToString() << "\n" << note;
  *root = cp.root;
  return cp.size;
}

TEST(Checkpointer, SignsTheTreeAtMultiplesAndOnDemandAndLogsEachCheckpoint) {
  TempDir dir;
  auto log = OpenLog(dir.path());
  AppendEvents(*log, 0, 10);  // before it starts: caught up at the start
  auto tree = OpenTree(log->store());
  NoteSigner signer;
  ASSERT_TRUE(CheckpointSigner(std::string(32, 'k'), "", &signer).ok());
  EXPECT_EQ(signer.name().rfind("tollgate/", 0), 0u) << signer.name();
  LogSink sink(*log);
  CheckpointOptions o;
  o.every_events = 50;
  o.every = std::chrono::milliseconds(0);  // by count only
  std::unique_ptr<Checkpointer> c;
  ASSERT_TRUE(Checkpointer::Start(*tree, log->head_seq(), signer, o, &sink, &c).ok());
  EXPECT_EQ(tree->size(), 10u);
  sink.Subscribe(c.get());
  for (int g = 0; g < 20; ++g) {
    std::vector<Event> group;
    for (int j = 0; j < 7; ++j) group.push_back(MakeEvent("decision.made", "g" + std::to_string(g * 7 + j)));
    std::vector<EventSink::Appended> results;
    sink.AppendAll(group, &results);
  }
  // 150 events: checkpoints at multiples of 50 (at 150 at least; one
  // signed late jumps to the latest multiple).
  std::string note;
  Hash root;
  ASSERT_TRUE(WaitUntil([&] { return c->Latest(&note).ok() && OpenedSize(note, signer, &root) >= 150; }))
      << note;
  EXPECT_EQ(OpenedSize(note, signer, &root) % 50, 0u) << "at a multiple, so every keeper signs the same";
  ASSERT_TRUE(c->SignNow(&note).ok());
  const uint64_t size = OpenedSize(note, signer, &root);
  // The whole log but checkpoint.signed events after it (the thread may
  // sign late, under load: its events land after ours).
  EXPECT_GE(size, 150u);
  for (uint64_t seq = size + 1; seq <= log->head_seq(); ++seq) {
    Event e;
    ASSERT_TRUE(log->store().ReadEvent(seq, &e).ok());
    EXPECT_EQ(e.type, ev::kCheckpointSigned) << "seq " << seq << " is past the checkpoint";
  }
  Hash want;
  ASSERT_TRUE(merkle::RootAt(TreeOfRecords(log->store()), size, &want).ok());
  EXPECT_EQ(ToHex(root), ToHex(want));
  std::string again;
  ASSERT_TRUE(c->SignNow(&again).ok());
  EXPECT_EQ(again, note) << "nothing new: the same checkpoint";
  // Each is logged and stored, and verify checks the stored ones.
  EXPECT_GE(CountOfType(log->store(), ev::kCheckpointSigned), 1u);
  std::string stored;
  EXPECT_TRUE(tree->GetCheckpoint(size, &stored).ok());
  EXPECT_EQ(stored, note);
  c.reset();
  VerifyReport r = VerifyLog(log->store());
  EXPECT_TRUE(r.ok()) << r.problems.size();
}

TEST(MerkleStore, VerifyFlagsATamperedTree) {
  TempDir dir;
  auto log = OpenLog(dir.path());
  AppendEvents(*log, 0, 100);
  auto tree = OpenTree(log->store());
  ASSERT_TRUE(tree->CatchUp(log->head_seq()).ok());
  ASSERT_TRUE(VerifyLog(log->store()).ok());
  rocksdb::DB* db = log->store().db();
  rocksdb::ColumnFamilyHandle* cf = log->store().cf(logfmt::kMerkle);
  const std::string key = MerkleNodeKey(2, 5);  // leaves 20..23, seqs 21..24
  std::string good;
  ASSERT_TRUE(db->Get({}, cf, key, &good).ok());
  std::string bad = good;
  bad[0] ^= 1;
  ASSERT_TRUE(db->Put({}, cf, key, bad).ok());
  VerifyReport r = VerifyLog(log->store());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.problems[0].status.code(), errc::kChainBroken);
  EXPECT_EQ(r.first_bad_seq(), 24u) << r.problems[0].status.ToString();
  ASSERT_TRUE(db->Put({}, cf, key, good).ok());
  ASSERT_TRUE(VerifyLog(log->store()).ok());
  // A stray node, and a tree claiming more leaves than the log has.
  ASSERT_TRUE(db->Put({}, cf, MerkleNodeKey(0, 100), good).ok());
  EXPECT_FALSE(VerifyLog(log->store()).ok());
  ASSERT_TRUE(db->Delete({}, cf, MerkleNodeKey(0, 100)).ok());
  ASSERT_TRUE(db->Put({}, cf, kMerkleSizeKey, logfmt::EncodeSeq(101)).ok());
  r = VerifyLog(log->store());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems[0].status.message().find("101 leaves"), std::string::npos)
      << r.problems[0].status.ToString();
}

TEST(MerkleStore, ALogWithoutTheFamilyOpensReadOnlyAndGetsItFromTheWriter) {
  TempDir dir;
  {
    // A log as written before the tree: every family but `merkle`.
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (int i = 0; i < logfmt::kMerkle; ++i)
      cfs.emplace_back(logfmt::CfName(i), rocksdb::ColumnFamilyOptions());
    rocksdb::DBOptions o;
    o.create_if_missing = true;
    o.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir.path(), cfs, &handles, &db).ok());
    ASSERT_TRUE(db->Put({}, handles[logfmt::kMeta], logfmt::kMetaFormat, logfmt::kFormatName).ok());
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  {
    std::unique_ptr<LogStore> ro;
    Status s = LogStore::Open(dir.path(), OpenMode::kReadOnly, &ro);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(ro->cf(logfmt::kMerkle), nullptr);
    auto tree = OpenTree(*ro);
    EXPECT_FALSE(tree->present());
    EXPECT_EQ(tree->size(), 0u);
    EXPECT_FALSE(tree->Append({Hash{}}).ok());
    EXPECT_TRUE(VerifyLog(*ro).ok());
  }
  auto log = OpenLog(dir.path());
  ASSERT_NE(log->store().cf(logfmt::kMerkle), nullptr);
  AppendEvents(*log, 0, 5);
  auto tree = OpenTree(log->store());
  ASSERT_TRUE(tree->CatchUp(log->head_seq()).ok());
  ExpectRootOfRecords(*tree, log->store());
}

}  // namespace
}  // namespace tollgate
