#include "audit/verify.h"

#include <rocksdb/iterator.h>

#include <algorithm>
#include <array>
#include <sstream>

#include "core/json_error.h"

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

  std::array<uint64_t, kNumCfs> expected_entries{};
  uint64_t expected_seq = 1;
  Digest prev = kGenesisHash;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, store.cf(kEvents)));
  std::string probe;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    uint64_t seq;
    if (!DecodeSeq(it->key().ToStringView(), &seq)) {
      c.Add(expected_seq, errc::kLogCorrupt, "events holds a malformed key after seq " + S(expected_seq - 1));
      continue;
    }
    if (seq != expected_seq) {
      c.Add(expected_seq, errc::kChainBroken,
            seq > expected_seq ? "seq " + S(expected_seq) + " to " + S(seq - 1) + " are missing"
                               : "seq " + S(seq) + " is out of order");
    }
    expected_seq = seq + 1;
    ++report.events;
    RecordView rec;
    Status s = DecodeRecord(it->value().ToStringView(), &rec);
    if (!s.ok()) {
      c.Add(seq, errc::kLogCorrupt, "seq " + S(seq) + ": " + s.message());
      continue;
    }
    if (rec.prev_hash != prev) {
      c.Add(seq, errc::kChainBroken,
            "seq " + S(seq) + " prev_hash does not match the hash of seq " + S(seq - 1));
    }
    if (ChainHash(rec.prev_hash, rec.body) != rec.hash) {
      c.Add(seq, errc::kChainBroken, "seq " + S(seq) + " hash does not match its contents");
    }
    prev = rec.hash;
    Event e;
    if (!CheckBody(seq, rec.body, c, &e)) continue;
    // Forward index check: every entry this event implies exists.
    for (const auto& [cf, key] : IndexEntries(e, seq)) {
      ++expected_entries[cf];
      ++report.index_entries;
      rocksdb::Status g = db->Get(ro, store.cf(cf), key, &probe);
      if (!g.ok()) {
        c.Add(seq, errc::kIndexMismatch, std::string(CfName(cf)) + " entry of seq " + S(seq) + " is missing");
      }
    }
    ++expected_entries[kDedupe];
    ++report.index_entries;
    rocksdb::Status g = db->Get(ro, store.cf(kDedupe), e.id, &probe);
    uint64_t dseq = 0;
    if (!g.ok() || !DecodeSeq(probe, &dseq) || dseq != seq) {
      c.Add(seq, errc::kIndexMismatch, "dedupe entry of event " + e.id + " does not point at seq " + S(seq));
    }
  }
  if (!it->status().ok()) c.Add(0, errc::kLogIO, "reading events failed: " + it->status().ToString());
  const uint64_t last = expected_seq - 1;
  report.head_seq = last;
  report.head_hash = ToHex(prev);
  report.from_seq = last > 0 ? 1 : 0;
  report.from_prev_hash = ToHex(kGenesisHash);

  // Meta must name the last record as head; a missing tail shows up here.
  uint64_t head_seq = 0;
  Digest head_hash{};
  std::string v;
  rocksdb::Status hs = db->Get(ro, store.cf(kMeta), kMetaHeadSeq, &v);
  if (hs.ok() && DecodeSeq(v, &head_seq)) {
    hs = db->Get(ro, store.cf(kMeta), kMetaHeadHash, &v);
    if (hs.ok() && v.size() == 32) std::copy(v.begin(), v.end(), head_hash.begin());
  } else if (!hs.IsNotFound()) {
    c.Add(last + 1, errc::kLogCorrupt, "meta head_seq is unreadable");
  }
  if (head_seq != last) {
    c.Add(std::min(head_seq, last) + 1, errc::kChainBroken,
          "meta says the head is seq " + S(head_seq) + " but the last record is seq " + S(last) +
              (head_seq > last ? " (records were removed from the end)" : " (records were added)"));
  } else if (last != 0 && head_hash != prev) {
    c.Add(last, errc::kChainBroken, "meta head hash does not match the hash of seq " + S(last));
  }

  // Reverse check: no entry beyond those the events imply. Every implied
  // entry was found above and keys are unique, so equal counts prove the
  // sets equal; on a mismatch, walk the family to name the stray entries.
  for (int cf = kBySession; cf <= kDedupe; ++cf) {
    uint64_t count = 0;
    std::unique_ptr<rocksdb::Iterator> ix(db->NewIterator(ro, store.cf(cf)));
    for (ix->SeekToFirst(); ix->Valid(); ix->Next()) ++count;
    if (count == expected_entries[cf]) continue;
    for (ix->SeekToFirst(); ix->Valid(); ix->Next()) {
      std::string_view key = ix->key().ToStringView();
      uint64_t seq = 0;
      bool well_formed;
      std::string_view value;
      int64_t t = 0;
      if (cf == kDedupe) {
        well_formed = DecodeSeq(ix->value().ToStringView(), &seq);
        value = key;
      } else if (cf == kByTime) {
        well_formed = ParseTimeKey(key, &t, &seq);
      } else {
        well_formed = ParseIndexKey(key, &value, &seq);
      }
      Event e;
      bool matches = false;
      if (well_formed && seq >= 1 && seq <= last) {
        std::string raw;
        if (store.ReadRaw(seq, &raw).ok() && LogStore::DecodeEvent(seq, raw, &e).ok()) {
          if (cf == kDedupe)
            matches = e.id == value;
          else if (cf == kByTime)
            matches = e.time_us == t;
          else
            matches = IndexedField(e, static_cast<Cf>(cf)) == value;
        }
      }
      if (!matches) {
        c.Add(
            seq != 0 ? seq : last + 1, errc::kIndexMismatch,
            std::string(CfName(cf)) + " holds an entry for seq " + S(seq) + " that the event does not imply");
      }
    }
  }
  if (snap != nullptr) db->ReleaseSnapshot(snap);
  c.Finish();
  return report;
}

// Checks one line of an export; false when checking should stop.
bool VerifyExportLine(const std::string& line, const std::string& where, Collector& c, VerifyReport& report,
                      bool& have_header, bool& have_end, uint64_t& expected_seq, uint64_t& from_seq,
                      uint64_t& to_seq, Digest& prev) {
  if (have_end) {
    c.Add(expected_seq, errc::kExportInvalid, where + " follows the end line");
    return false;
  }
  Json j;
  if (!ParseJson(line, &j).ok() || !j.is_object()) {
    c.Add(have_header ? expected_seq : 0, errc::kExportInvalid, where + " is not a JSON object");
    if (!have_header) return false;
    ++expected_seq;  // assume one record was mangled; keep checking the rest
    return true;
  }
  if (!have_header && j.value("tollgate_export", Json(0)) == 2) {
    // A selection: a filter's records, each checked alone (see VerifyReport).
    auto hh = j.find("head_hash");
    if (!j.contains("selection") || !j["selection"].is_object() ||
        !j.value("head_seq", Json()).is_number_unsigned() || hh == j.end() || !hh->is_string() ||
        !DigestFromHex(hh->get<std::string>(), &prev)) {
      c.Add(0, errc::kExportInvalid, "line 1 is not a tollgate selection export header");
      return false;
    }
    have_header = true;
    report.selection = true;
    report.source_head_seq = j["head_seq"].get<uint64_t>();
    report.source_head_hash = hh->get<std::string>();
    prev = Digest{};
    expected_seq = 1;  // the least seq the next record may have
    return true;
  }
  if (!have_header) {
    auto version = j.find("tollgate_export");
    auto fs = j.find("from_seq");
    auto ts = j.find("to_seq");
    auto ph = j.find("prev_hash");
    if (version == j.end() || !version->is_number_unsigned() || *version != 1 || fs == j.end() ||
        !fs->is_number_unsigned() || *fs == 0 || ts == j.end() || !ts->is_number_unsigned() ||
        ph == j.end() || !ph->is_string() || !DigestFromHex(ph->get<std::string>(), &prev)) {
      c.Add(0, errc::kExportInvalid, "line 1 is not a tollgate export header");
      return false;
    }
    have_header = true;
    report.from_prev_hash = ph->get<std::string>();
    from_seq = fs->get<uint64_t>();
    to_seq = ts->get<uint64_t>();
    expected_seq = from_seq;
    if (from_seq == 1 && prev != kGenesisHash) {
      // The first record of a log links to the genesis hash, nothing else.
      c.Add(1, errc::kChainBroken, "the export starts at seq 1 but its prev_hash is not the genesis hash");
    }
    return true;
  }
  if (auto end = j.find("tollgate_export_end"); end != j.end() && report.selection) {
    have_end = true;
    if (!end->is_object() || end->value("count", UINT64_MAX) != report.events ||
        end->value("last_seq", UINT64_MAX) != (report.events ? expected_seq - 1 : 0) ||
        end->value("last_hash", std::string()) != (report.events ? ToHex(prev) : std::string())) {
      c.Add(expected_seq, errc::kExportInvalid,
            where + ": the end line does not match the records (count, last seq or last hash)");
    }
    return true;
  }
  if (auto end = j.find("tollgate_export_end"); end != j.end()) {
    have_end = true;
    const uint64_t count = expected_seq - from_seq;
    if (!end->is_object() || end->value("count", UINT64_MAX) != count ||
        end->value("last_seq", UINT64_MAX) != expected_seq - 1 || expected_seq - 1 != to_seq ||
        end->value("last_hash", std::string()) != ToHex(prev)) {
      c.Add(expected_seq, errc::kExportInvalid,
            where + ": the end line does not match the records (count, last seq or last hash)");
    }
    return true;
  }
  auto seq_it = j.find("seq");
  uint64_t seq = seq_it != j.end() && seq_it->is_number_unsigned() ? seq_it->get<uint64_t>() : 0;
  // A selection's seqs only ascend; a range's follow one another.
  const bool linked = !report.selection || (report.events > 0 && seq == expected_seq);
  if (report.selection ? seq < expected_seq : seq != expected_seq) {
    c.Add(expected_seq, errc::kChainBroken,
          where + " holds seq " + S(seq) +
              (report.selection ? " after seq " + S(expected_seq - 1)
                                : " where seq " + S(expected_seq) + " was expected"));
  }
  if (report.selection && report.events == 0) from_seq = seq;
  Digest rec_prev{}, rec_hash{};
  bool hashes_ok = j.contains("prev_hash") && j["prev_hash"].is_string() &&
                   DigestFromHex(j["prev_hash"].get<std::string>(), &rec_prev) && j.contains("hash") &&
                   j["hash"].is_string() && DigestFromHex(j["hash"].get<std::string>(), &rec_hash);
  const uint64_t at = seq != 0 ? seq : expected_seq;
  if (!hashes_ok) {
    c.Add(at, errc::kChainBroken, where + " lacks a well-formed prev_hash or hash");
  } else {
    Json body = j;
    body.erase("prev_hash");
    body.erase("hash");
    std::string canon;
    Event e;
    Status s = CanonicalBytes(body, &canon);
    if (s.ok()) s = EventFromJson(body, &e);
    if (!s.ok()) {
      c.Add(at, errc::kExportInvalid, where + " is not a valid event: " + s.message());
    } else if (linked && rec_prev != prev) {
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
  if (hashes_ok) prev = rec_hash;
  if (report.selection && linked && report.events > 0) ++report.linked;
  ++report.events;
  expected_seq = (seq != 0 ? seq : expected_seq) + 1;
  return true;
}

VerifyReport VerifyExport(std::istream& in) {
  VerifyReport report;
  Collector c(&report);
  std::string line;
  uint64_t line_no = 0;
  bool have_header = false, have_end = false;
  uint64_t expected_seq = 0, from_seq = 0, to_seq = 0;
  Digest prev{};
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = "line " + S(line_no);
    // A field of the wrong type anywhere is a malformed export, not a crash.
    bool stop = false;
    try {
      stop = !VerifyExportLine(line, where, c, report, have_header, have_end, expected_seq, from_seq, to_seq,
                               prev);
    } catch (const Json::exception& e) {
      Json doc;  // to name the field
      const bool parsed = ParseJson(line, &doc).ok();
      c.Add(have_header ? expected_seq : 0, errc::kExportInvalid,
            where + ": " + JsonErrorText(e, parsed ? &doc : nullptr));
      stop = !have_header;
      if (have_header) ++expected_seq;
    }
    if (stop) break;
  }
  if (!have_header && report.problems.empty()) c.Add(0, errc::kExportInvalid, "the export is empty");
  if (have_header && !have_end) {
    c.Add(expected_seq, errc::kExportInvalid,
          "the export ends without its end line after seq " + S(expected_seq - 1) + " (truncated)");
  }
  report.head_seq = expected_seq == 0 ? 0 : expected_seq - 1;
  report.head_hash = ToHex(prev);
  report.from_seq = from_seq;
  c.Finish();
  return report;
}

}  // namespace tollgate
