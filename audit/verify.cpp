#include "audit/verify.h"

#include <rocksdb/iterator.h>

#include <algorithm>
#include <array>
#include <sstream>

#include "audit/links.h"
#include "audit/merkle.h"
#include "audit/merkle_store.h"
#include "core/checkpoint.h"
#include "core/json_error.h"
#include "core/signed_note.h"

namespace tollgate {

using namespace logfmt;

uint64_t VerifyReport::first_bad_seq() const {
  uint64_t best = 0;
  for (const auto& p : problems) {
    if (p.seq != 0 && (best == 0 || p.seq < best)) best = p.seq;
  }
  return best;
}

std::string VerifyReport::Summary() const {
  std::ostringstream o;
  if (ok()) {
    o << "OK: seqs " << from_seq << ".." << head_seq << " (" << events << " events), " << index_entries
      << " index entries, head seq " << head_seq << " hash " << head_hash;
  } else {
    o << "FAILED: " << problems.size() << (truncated_problems ? "+" : "") << " problem(s), first bad seq "
      << first_bad_seq() << "; range checked seqs " << from_seq << ".." << head_seq;
  }
  if (selection) {
    o << "\nSELECTION: " << events << " events of seqs " << from_seq << ".." << head_seq
      << " chosen by a filter, not a contiguous range: each record matches its hash and " << linked
      << " consecutive pairs link. That they are in the log is proven by finding these hashes there; the "
         "log's "
         "head was seq "
      << source_head_seq << " hash " << source_head_hash << " when it was exported";
    return o.str();
  }
  if (from_seq > 1) {
    // A cut head verifies as well as a whole log: say what it cannot prove.
    o << "\nPARTIAL: starts at seq " << from_seq << ", not 1; seqs 1.." << from_seq - 1
      << " are not in it. It proves its records chain from prev_hash " << from_prev_hash
      << ", which must equal the hash of seq " << from_seq - 1 << " in the log it came from";
  }
  return o.str();
}

namespace {

class Collector {
 public:
  explicit Collector(VerifyReport* r) : r_(r) {}
  void Add(uint64_t seq, const char* code, std::string msg) {
    if (r_->problems.size() >= kMaxProblems) {
      r_->truncated_problems = true;
      return;
    }
    r_->problems.push_back({seq, Status::Error(code, std::move(msg))});
  }
  void Finish() {
    std::stable_sort(r_->problems.begin(), r_->problems.end(),
                     [](const VerifyProblem& a, const VerifyProblem& b) {
                       // Problems without a seq (file-level) sort last.
                       return (a.seq == 0 ? UINT64_MAX : a.seq) < (b.seq == 0 ? UINT64_MAX : b.seq);
                     });
  }

 private:
  VerifyReport* r_;
};

std::string S(uint64_t v) { return std::to_string(v); }

// Checks one record body: canonical, a valid envelope. Returns the event.
bool CheckBody(uint64_t seq, std::string_view body, Collector& c, Event* e) {
  Json j;
  Status s = ParseJson(body, &j);
  if (s.ok()) s = EventFromJson(j, e);
  if (!s.ok()) {
    c.Add(seq, errc::kLogCorrupt, "seq " + S(seq) + " body is not a valid event: " + s.message());
    return false;
  }
  if (e->seq != seq) {
    c.Add(seq, errc::kChainBroken, "the record at seq " + S(seq) + " says it is seq " + S(e->seq));
  }
  std::string canon;
  if (!CanonicalBytes(j, &canon).ok() || canon != body) {
    c.Add(seq, errc::kLogCorrupt, "seq " + S(seq) + " body is not in canonical form");
  }
  return true;
}

// What VerifyLog's steps share: one snapshot's view of the store, and what
// the walk of the events found.
struct LogCheck {
  const LogStore& store;
  rocksdb::DB* db;
  const rocksdb::ReadOptions& ro;
  Collector& c;
  VerifyReport& report;
  std::array<uint64_t, kNumCfs> expected_entries{};
  uint64_t expected_seq = 1;
  Digest prev = kGenesisHash;
  std::string probe{};  // a read buffer, reused
  // The merkle family: its stored size, and the tree the records' hashes
  // imply, grown leaf by leaf as the walk meets them.
  bool merkle_present = false;
  uint64_t merkle_size = 0;
  merkle::Frontier merkle_edge{};
  uint64_t merkle_nodes = 0;  // nodes the stored size implies, each compared
  // The completeness links each event must carry, re-derived in seq order.
  LinkTracker links{store};
  uint64_t first_linked = 0;  // the first event that carries links
};

// The stored tree, read through the check's snapshot.
class StoredTree : public merkle::SubtreeSource {
 public:
  explicit StoredTree(const LogCheck& k) : k_(k) {}
  Status Get(int level, uint64_t index, merkle::Hash* out) const override {
    std::string v;
    rocksdb::Status g = k_.db->Get(k_.ro, k_.store.cf(kMerkle), MerkleNodeKey(level, index), &v);
    if (!g.ok() || v.size() != out->size()) {
      return Status::Error(errc::kNotFound, "no subtree (" + S(level) + ", " + S(index) + ")");
    }
    std::copy(v.begin(), v.end(), out->begin());
    return Status::Ok();
  }

 private:
  const LogCheck& k_;
};

// Merkle tree, per record: the leaf for `seq` and every subtree it
// completes must be stored as the records imply, up to the stored size.
void CheckMerkleLeaf(LogCheck& k, uint64_t seq, const Digest& record_hash) {
  if (!k.merkle_present || seq > k.merkle_size || seq != k.merkle_edge.size() + 1) return;
  StoredTree stored(k);
  k.merkle_edge.Append(merkle::LeafHash(record_hash), [&](int level, uint64_t index, const merkle::Hash& h) {
    ++k.merkle_nodes;
    merkle::Hash got;
    if (!stored.Get(level, index, &got).ok() || got != h) {
      k.c.Add(seq, errc::kChainBroken,
              "Merkle subtree (" + S(level) + ", " + S(index) + ") is missing or does not match the records");
    }
  });
}

// Forward index check: every entry this event implies exists, its dedupe
// entry included.
void CheckImpliedEntries(LogCheck& k, const Event& e, uint64_t seq) {
  for (const auto& [cf, key] : IndexEntries(e, seq)) {
    ++k.expected_entries[cf];
    ++k.report.index_entries;
    rocksdb::Status g = k.db->Get(k.ro, k.store.cf(cf), key, &k.probe);
    if (!g.ok()) {
      k.c.Add(seq, errc::kIndexMismatch, std::string(CfName(cf)) + " entry of seq " + S(seq) + " is missing");
    }
  }
  ++k.expected_entries[kDedupe];
  ++k.report.index_entries;
  rocksdb::Status g = k.db->Get(k.ro, k.store.cf(kDedupe), e.id, &k.probe);
  uint64_t dseq = 0;
  if (!g.ok() || !DecodeSeq(k.probe, &dseq) || dseq != seq) {
    k.c.Add(seq, errc::kIndexMismatch, "dedupe entry of event " + e.id + " does not point at seq " + S(seq));
  }
}

// The links of `e` (docs/log_format.md, "Links") name the previous event of
// its request and of its session. Events logged before links existed carry
// none; once one carries them, every later event with those ids must.
void CheckLinks(LogCheck& k, const Event& e, uint64_t seq) {
  if (seq % 4096 == 0) k.links.Trim();  // bounds its memory; every earlier event is in the index
  if (!e.prev_in_request && !e.prev_in_session) {
    if (k.first_linked != 0 && (!e.request_id.empty() || !e.session_id.empty())) {
      k.c.Add(seq, errc::kChainBroken,
              "seq " + S(seq) + " carries no links, but events from seq " + S(k.first_linked) + " do");
    }
    k.links.NoteBoth(e.org_id, e.request_id, e.session_id, seq);
    return;
  }
  if (k.first_linked == 0) k.first_linked = seq;
  std::optional<uint64_t> want_request, want_session;
  Status s = k.links.Step(e.org_id, e.request_id, e.session_id, seq, &want_request, &want_session);
  if (!s.ok()) return k.c.Add(seq, errc::kLogIO, "seq " + S(seq) + ": " + s.message());
  auto say = [](const std::optional<uint64_t>& v) { return v ? "seq " + S(*v) : std::string("none"); };
  if (e.prev_in_request != want_request) {
    k.c.Add(seq, errc::kChainBroken,
            "seq " + S(seq) + " names " + say(e.prev_in_request) +
                " as the previous event of its request, but it is " + say(want_request));
  }
  if (e.prev_in_session != want_session) {
    k.c.Add(seq, errc::kChainBroken,
            "seq " + S(seq) + " names " + say(e.prev_in_session) +
                " as the previous event of its session, but it is " + say(want_session));
  }
}

// 1. Walks the events in seq order: no gaps, each links to the one before
// and matches its hash, a valid canonical body, its index entries present.
void CheckEvents(LogCheck& k) {
  std::unique_ptr<rocksdb::Iterator> it(k.db->NewIterator(k.ro, k.store.cf(kEvents)));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    uint64_t seq;
    if (!DecodeSeq(it->key().ToStringView(), &seq)) {
      k.c.Add(k.expected_seq, errc::kLogCorrupt,
              "events holds a malformed key after seq " + S(k.expected_seq - 1));
      continue;
    }
    if (seq != k.expected_seq) {
      k.c.Add(k.expected_seq, errc::kChainBroken,
              seq > k.expected_seq ? "seq " + S(k.expected_seq) + " to " + S(seq - 1) + " are missing"
                                   : "seq " + S(seq) + " is out of order");
    }
    k.expected_seq = seq + 1;
    ++k.report.events;
    RecordView rec;
    Status s = DecodeRecord(it->value().ToStringView(), &rec);
    if (!s.ok()) {
      k.c.Add(seq, errc::kLogCorrupt, "seq " + S(seq) + ": " + s.message());
      continue;
    }
    if (rec.prev_hash != k.prev) {
      k.c.Add(seq, errc::kChainBroken,
              "seq " + S(seq) + " prev_hash does not match the hash of seq " + S(seq - 1));
    }
    if (ChainHash(rec.prev_hash, rec.body) != rec.hash) {
      k.c.Add(seq, errc::kChainBroken, "seq " + S(seq) + " hash does not match its contents");
    }
    k.prev = rec.hash;
    CheckMerkleLeaf(k, seq, rec.hash);
    Event e;
    if (!CheckBody(seq, rec.body, k.c, &e)) continue;
    CheckImpliedEntries(k, e, seq);
    CheckLinks(k, e, seq);
  }
  if (!it->status().ok()) k.c.Add(0, errc::kLogIO, "reading events failed: " + it->status().ToString());
}

// 2. Meta must name the last record as head; a missing tail shows up here.
void CheckMetaHead(LogCheck& k, uint64_t last) {
  uint64_t head_seq = 0;
  Digest head_hash{};
  std::string v;
  rocksdb::Status hs = k.db->Get(k.ro, k.store.cf(kMeta), kMetaHeadSeq, &v);
  if (hs.ok() && DecodeSeq(v, &head_seq)) {
    hs = k.db->Get(k.ro, k.store.cf(kMeta), kMetaHeadHash, &v);
    if (hs.ok() && v.size() == 32) std::copy(v.begin(), v.end(), head_hash.begin());
  } else if (!hs.IsNotFound()) {
    k.c.Add(last + 1, errc::kLogCorrupt, "meta head_seq is unreadable");
  }
  if (head_seq != last) {
    k.c.Add(std::min(head_seq, last) + 1, errc::kChainBroken,
            "meta says the head is seq " + S(head_seq) + " but the last record is seq " + S(last) +
                (head_seq > last ? " (records were removed from the end)" : " (records were added)"));
  } else if (last != 0 && head_hash != k.prev) {
    k.c.Add(last, errc::kChainBroken, "meta head hash does not match the hash of seq " + S(last));
  }
}

// Whether the entry at `ix` in family `cf` is one its event implies; sets
// *seq to the seq it names (0 when it names none).
bool EntryIsImplied(const LogStore& store, int cf, rocksdb::Iterator& ix, uint64_t last, uint64_t* seq) {
  std::string_view key = ix.key().ToStringView();
  bool well_formed;
  std::string_view value;
  int64_t t = 0;
  if (cf == kDedupe) {
    well_formed = DecodeSeq(ix.value().ToStringView(), seq);
    value = key;
  } else if (cf == kByTime) {
    well_formed = ParseTimeKey(key, &t, seq);
  } else {
    well_formed = ParseIndexKey(key, &value, seq);
  }
  Event e;
  bool matches = false;
  if (well_formed && *seq >= 1 && *seq <= last) {
    std::string raw;
    if (store.ReadRaw(*seq, &raw).ok() && LogStore::DecodeEvent(*seq, raw, &e).ok()) {
      if (cf == kDedupe)
        matches = e.id == value;
      else if (cf == kByTime)
        matches = e.time_us == t;
      else
        matches = IndexedField(e, static_cast<Cf>(cf)) == value;
    }
  }
  return matches;
}

// 3. Reverse check: no entry beyond those the events imply. Every implied
// entry was found above and keys are unique, so equal counts prove the
// sets equal; on a mismatch, walk the family to name the stray entries.
void CheckNoStrayEntries(LogCheck& k, uint64_t last) {
  for (int cf = kBySession; cf <= kDedupe; ++cf) {
    uint64_t count = 0;
    std::unique_ptr<rocksdb::Iterator> ix(k.db->NewIterator(k.ro, k.store.cf(cf)));
    for (ix->SeekToFirst(); ix->Valid(); ix->Next()) ++count;
    if (count == k.expected_entries[cf]) continue;
    for (ix->SeekToFirst(); ix->Valid(); ix->Next()) {
      uint64_t seq = 0;
      if (!EntryIsImplied(k.store, cf, *ix, last, &seq)) {
        k.c.Add(
            seq != 0 ? seq : last + 1, errc::kIndexMismatch,
            std::string(CfName(cf)) + " holds an entry for seq " + S(seq) + " that the event does not imply");
      }
    }
  }
}

// Merkle tree, before the walk: its stored size, if the log has the family.
void ReadMerkleSize(LogCheck& k) {
  k.merkle_present = k.store.cf(kMerkle) != nullptr;
  if (!k.merkle_present) return;
  std::string v;
  rocksdb::Status g = k.db->Get(k.ro, k.store.cf(kMerkle), kMerkleSizeKey, &v);
  if (!g.IsNotFound() && !(g.ok() && DecodeSeq(v, &k.merkle_size))) {
    k.c.Add(0, errc::kLogCorrupt, "the Merkle tree size is unreadable");
  }
}

// A stored checkpoint (audit/checkpointer.h): well formed, of a size the
// tree holds, and its root the tree's at that size. (Its signature needs
// the deployment's key: `tollgate audit verify-proof` checks that.)
void CheckStoredCheckpoint(LogCheck& k, std::string_view note) {
  SignedNote n;
  Checkpoint cp;
  Status s = ParseNote(note, &n);
  if (s.ok()) s = ParseCheckpointText(n.text, &cp);
  if (!s.ok()) {
    k.c.Add(0, errc::kChainBroken, "a stored checkpoint is malformed: " + s.message());
    return;
  }
  merkle::Hash root;
  if (cp.size > k.merkle_size || !merkle::RootAt(StoredTree(k), cp.size, &root).ok() || root != cp.root) {
    k.c.Add(cp.size, errc::kChainBroken,
            "the checkpoint of size " + S(cp.size) + " does not match the log's tree at that size");
  }
}

// Merkle tree, after the walk: no more leaves than records, the root the
// records imply, and no entry beyond the nodes and the size.
void CheckMerkleTree(LogCheck& k, uint64_t last) {
  if (!k.merkle_present) return;
  k.report.merkle_leaves = k.merkle_size;
  if (k.merkle_size > last) {
    k.c.Add(last + 1, errc::kChainBroken,
            "the Merkle tree has " + S(k.merkle_size) + " leaves but the last record is seq " + S(last));
    return;
  }
  if (k.merkle_edge.size() != k.merkle_size) return;  // the walk reported the gap
  merkle::Hash root;
  if (!merkle::RootAt(StoredTree(k), k.merkle_size, &root).ok() || root != k.merkle_edge.Root()) {
    k.c.Add(k.merkle_size, errc::kChainBroken,
            "the Merkle tree's root at size " + S(k.merkle_size) + " does not match the records");
  }
  uint64_t count = 0;
  std::unique_ptr<rocksdb::Iterator> it(k.db->NewIterator(k.ro, k.store.cf(kMerkle)));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (it->key().starts_with(
            rocksdb::Slice(kMerkleCheckpointPrefix.data(), kMerkleCheckpointPrefix.size()))) {
      CheckStoredCheckpoint(k, it->value().ToStringView());
    } else {
      ++count;
    }
  }
  const uint64_t expected = k.merkle_nodes + (k.merkle_size > 0 ? 1 : 0);
  if (count != expected) {
    k.c.Add(k.merkle_size + 1, errc::kChainBroken,
            "the Merkle family holds " + S(count) + " entries; a tree of " + S(k.merkle_size) +
                " leaves has " + S(expected));
  }
}

}  // namespace

VerifyReport VerifyLog(const LogStore& store) {
  VerifyReport report;
  Collector c(&report);
  rocksdb::DB* db = store.db();
  rocksdb::ReadOptions ro;
  // One snapshot for the whole check, so a live writer cannot make a
  // consistent log look broken (primary mode; secondaries are static
  // between catch-ups).
  const rocksdb::Snapshot* snap = store.mode() == OpenMode::kPrimary ? db->GetSnapshot() : nullptr;
  ro.snapshot = snap;
  LogCheck k{store, db, ro, c, report};
  ReadMerkleSize(k);
  CheckEvents(k);
  const uint64_t last = k.expected_seq - 1;
  report.head_seq = last;
  report.head_hash = ToHex(k.prev);
  report.from_seq = last > 0 ? 1 : 0;
  report.from_prev_hash = ToHex(kGenesisHash);
  CheckMetaHead(k, last);
  CheckNoStrayEntries(k, last);
  CheckMerkleTree(k, last);
  if (snap != nullptr) db->ReleaseSnapshot(snap);
  c.Finish();
  return report;
}

namespace {

// Where the check of an export is, between its lines.
struct ExportState {
  bool have_header = false, have_end = false;
  uint64_t expected_seq = 0, from_seq = 0, to_seq = 0;
  Digest prev{};
};

// Line 1 of a selection: a filter's records, each checked alone (see
// VerifyReport). False when checking should stop.
bool ReadSelectionHeader(Json& j, Collector& c, VerifyReport& report, ExportState& st) {
  auto hh = j.find("head_hash");
  if (!j.contains("selection") || !j["selection"].is_object() ||
      !j.value("head_seq", Json()).is_number_unsigned() || hh == j.end() || !hh->is_string() ||
      !DigestFromHex(hh->get<std::string>(), &st.prev)) {
    c.Add(0, errc::kExportInvalid, "line 1 is not a tollgate selection export header");
    return false;
  }
  st.have_header = true;
  report.selection = true;
  report.source_head_seq = j["head_seq"].get<uint64_t>();
  report.source_head_hash = hh->get<std::string>();
  st.prev = Digest{};
  st.expected_seq = 1;  // the least seq the next record may have
  return true;
}

// Line 1 of a range export. False when checking should stop.
bool ReadRangeHeader(Json& j, Collector& c, VerifyReport& report, ExportState& st) {
  auto version = j.find("tollgate_export");
  auto fs = j.find("from_seq");
  auto ts = j.find("to_seq");
  auto ph = j.find("prev_hash");
  if (version == j.end() || !version->is_number_unsigned() || *version != 1 || fs == j.end() ||
      !fs->is_number_unsigned() || *fs == 0 || ts == j.end() || !ts->is_number_unsigned() || ph == j.end() ||
      !ph->is_string() || !DigestFromHex(ph->get<std::string>(), &st.prev)) {
    c.Add(0, errc::kExportInvalid, "line 1 is not a tollgate export header");
    return false;
  }
  st.have_header = true;
  report.from_prev_hash = ph->get<std::string>();
  st.from_seq = fs->get<uint64_t>();
  st.to_seq = ts->get<uint64_t>();
  st.expected_seq = st.from_seq;
  if (st.from_seq == 1 && st.prev != kGenesisHash) {
    // The first record of a log links to the genesis hash, nothing else.
    c.Add(1, errc::kChainBroken, "the export starts at seq 1 but its prev_hash is not the genesis hash");
  }
  return true;
}

// The end line: it must match the records that came before it.
void CheckEndLine(const Json* end, const std::string& where, Collector& c, const VerifyReport& report,
                  ExportState& st) {
  st.have_end = true;
  if (report.selection) {
    if (!end->is_object() || end->value("count", UINT64_MAX) != report.events ||
        end->value("last_seq", UINT64_MAX) != (report.events ? st.expected_seq - 1 : 0) ||
        end->value("last_hash", std::string()) != (report.events ? ToHex(st.prev) : std::string())) {
      c.Add(st.expected_seq, errc::kExportInvalid,
            where + ": the end line does not match the records (count, last seq or last hash)");
    }
  } else {
    const uint64_t count = st.expected_seq - st.from_seq;
    if (!end->is_object() || end->value("count", UINT64_MAX) != count ||
        end->value("last_seq", UINT64_MAX) != st.expected_seq - 1 || st.expected_seq - 1 != st.to_seq ||
        end->value("last_hash", std::string()) != ToHex(st.prev)) {
      c.Add(st.expected_seq, errc::kExportInvalid,
            where + ": the end line does not match the records (count, last seq or last hash)");
    }
  }
}

// A record line: its seq in order, its hashes well-formed, linked and
// matching, its body a valid event in canonical form.
void CheckRecordLine(const std::string& line, Json& j, const std::string& where, Collector& c,
                     VerifyReport& report, ExportState& st) {
  auto seq_it = j.find("seq");
  uint64_t seq = seq_it != j.end() && seq_it->is_number_unsigned() ? seq_it->get<uint64_t>() : 0;
  // A selection's seqs only ascend; a range's follow one another.
  const bool linked = !report.selection || (report.events > 0 && seq == st.expected_seq);
  if (report.selection ? seq < st.expected_seq : seq != st.expected_seq) {
    c.Add(st.expected_seq, errc::kChainBroken,
          where + " holds seq " + S(seq) +
              (report.selection ? " after seq " + S(st.expected_seq - 1)
                                : " where seq " + S(st.expected_seq) + " was expected"));
  }
  if (report.selection && report.events == 0) st.from_seq = seq;
  Digest rec_prev{}, rec_hash{};
  bool hashes_ok = j.contains("prev_hash") && j["prev_hash"].is_string() &&
                   DigestFromHex(j["prev_hash"].get<std::string>(), &rec_prev) && j.contains("hash") &&
                   j["hash"].is_string() && DigestFromHex(j["hash"].get<std::string>(), &rec_hash);
  const uint64_t at = seq != 0 ? seq : st.expected_seq;
  if (!hashes_ok) {
    c.Add(at, errc::kChainBroken, where + " lacks a well-formed prev_hash or hash");
  } else {
    Json body = j;
    body.erase("prev_hash");
    body.erase("hash");
    // An export made with proofs (audit/export.h): they ride beside the
    // record, outside what its hash covers (`verify-proof` checks them).
    body.erase("proof");
    body.erase("proof_pending");
    std::string canon;
    Event e;
    Status s = CanonicalBytes(body, &canon);
    if (s.ok()) s = EventFromJson(body, &e);
    if (!s.ok()) {
      c.Add(at, errc::kExportInvalid, where + " is not a valid event: " + s.message());
    } else if (linked && rec_prev != st.prev) {
      c.Add(at, errc::kChainBroken,
            where + " (seq " + S(at) + ") prev_hash does not match the previous record");
    } else if (logfmt::ChainHash(rec_prev, canon) != rec_hash) {
      c.Add(at, errc::kChainBroken, where + " (seq " + S(at) + ") hash does not match its contents");
    }
    std::string line_canon;
    if (CanonicalBytes(j, &line_canon).ok() && line_canon != line) {
      c.Add(at, errc::kExportInvalid, where + " (seq " + S(at) + ") is not in canonical form");
    }
  }
  if (hashes_ok) st.prev = rec_hash;
  if (report.selection && linked && report.events > 0) ++report.linked;
  ++report.events;
  st.expected_seq = (seq != 0 ? seq : st.expected_seq) + 1;
}

}  // namespace

// Checks one line of an export; false when checking should stop.
bool VerifyExportLine(const std::string& line, const std::string& where, Collector& c, VerifyReport& report,
                      ExportState& st) {
  if (st.have_end) {
    c.Add(st.expected_seq, errc::kExportInvalid, where + " follows the end line");
    return false;
  }
  Json j;
  if (!ParseJson(line, &j).ok() || !j.is_object()) {
    c.Add(st.have_header ? st.expected_seq : 0, errc::kExportInvalid, where + " is not a JSON object");
    if (!st.have_header) return false;
    ++st.expected_seq;  // assume one record was mangled; keep checking the rest
    return true;
  }
  if (!st.have_header && j.value("tollgate_export", Json(0)) == 2)
    return ReadSelectionHeader(j, c, report, st);
  if (!st.have_header) return ReadRangeHeader(j, c, report, st);
  if (auto end = j.find("tollgate_export_end"); end != j.end()) {
    CheckEndLine(&*end, where, c, report, st);
    return true;
  }
  CheckRecordLine(line, j, where, c, report, st);
  return true;
}

VerifyReport VerifyExport(std::istream& in) {
  VerifyReport report;
  Collector c(&report);
  std::string line;
  uint64_t line_no = 0;
  ExportState st;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = "line " + S(line_no);
    // A field of the wrong type anywhere is a malformed export, not a crash.
    bool stop = false;
    try {
      stop = !VerifyExportLine(line, where, c, report, st);
    } catch (const Json::exception& e) {
      Json doc;  // to name the field
      const bool parsed = ParseJson(line, &doc).ok();
      c.Add(st.have_header ? st.expected_seq : 0, errc::kExportInvalid,
            where + ": " + JsonErrorText(e, parsed ? &doc : nullptr));
      stop = !st.have_header;
      if (st.have_header) ++st.expected_seq;
    }
    if (stop) break;
  }
  if (!st.have_header && report.problems.empty()) c.Add(0, errc::kExportInvalid, "the export is empty");
  if (st.have_header && !st.have_end) {
    c.Add(st.expected_seq, errc::kExportInvalid,
          "the export ends without its end line after seq " + S(st.expected_seq - 1) + " (truncated)");
  }
  report.head_seq = st.expected_seq == 0 ? 0 : st.expected_seq - 1;
  report.head_hash = ToHex(st.prev);
  report.from_seq = st.from_seq;
  c.Finish();
  return report;
}

}  // namespace tollgate
