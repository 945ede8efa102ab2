#include "audit/export.h"

#include <rocksdb/iterator.h>

#include "audit/audit_proofs.h"
#include "audit/verify.h"

namespace tollgate {

using namespace logfmt;

namespace {

// The smallest seq range holding every event whose time is in [since, until).
Status SeqRangeForTime(const LogStore& store, const ExportRange& r, uint64_t* lo, uint64_t* hi) {
  std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator({}, store.cf(kByTime)));
  uint64_t min_seq = UINT64_MAX, max_seq = 0;
  for (it->Seek(TimeKey(r.since_us.value_or(INT64_MIN), 0)); it->Valid(); it->Next()) {
    int64_t t;
    uint64_t seq;
    if (!ParseTimeKey(it->key().ToStringView(), &t, &seq)) {
      return Status::Error(errc::kLogCorrupt, "malformed time index key; run `tollgate audit verify`");
    }
    if (r.until_us && t >= *r.until_us) break;
    min_seq = std::min(min_seq, seq);
    max_seq = std::max(max_seq, seq);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "reading the time index failed");
  *lo = std::max(*lo, min_seq == UINT64_MAX ? *hi + 1 : min_seq);
  *hi = std::min(*hi, max_seq);
  return Status::Ok();
}

// With `tree`: the record's proof fields, added to `rec`, which is then
// written canonical to `line` (the chain hashes the record without them).
class Prover {
 public:
  explicit Prover(const MerkleStore* tree) : tree_(tree) {}
  Status Start() { return tree_ != nullptr ? LatestProofBasis(*tree_, &basis_) : Status::Ok(); }
  Status Line(Json rec, std::string* line) const {
    if (tree_ != nullptr) {
      if (!rec.is_object() || !rec.contains("seq") || !rec["seq"].is_number_unsigned()) {
        return Status::Error(errc::kLogCorrupt, "an audit record without a seq");
      }
      Json fields;
      Status s = ProofFields(*tree_, basis_, rec["seq"].get<uint64_t>(), &fields);
      if (!s.ok()) return s;
      rec.update(fields);
    }
    return CanonicalBytes(rec, line);
  }
  bool on() const { return tree_ != nullptr; }

 private:
  const MerkleStore* tree_;
  ProofBasis basis_;
};

}  // namespace

Status ExportLog(const LogStore& store, const ExportRange& range, std::ostream& out, ExportStats* stats,
                 const MerkleStore* proofs) {
  Prover prover(proofs);
  Status ps = prover.Start();
  if (!ps.ok()) return ps;
  uint64_t head;
  Digest head_hash;
  Status s = store.ReadHead(&head, &head_hash);
  if (!s.ok()) return s;
  uint64_t lo = std::max<uint64_t>(range.from_seq.value_or(1), 1);
  uint64_t hi = std::min(range.to_seq.value_or(head), head);
  if (range.since_us || range.until_us) {
    s = SeqRangeForTime(store, range, &lo, &hi);
    if (!s.ok()) return s;
  }
  if (lo > hi) {  // nothing in range: an empty, still verifiable export
    lo = hi + 1;
  }
  Digest prev = kGenesisHash;
  if (lo > 1) {
    std::string raw;
    RecordView rec;
    s = store.ReadRaw(lo - 1, &raw);
    if (s.ok()) s = DecodeRecord(raw, &rec);
    if (!s.ok()) return s;
    prev = rec.hash;
  }
  Json header = {{"tollgate_export", 1}, {"from_seq", lo}, {"to_seq", hi}, {"prev_hash", ToHex(prev)}};
  out << header.dump() << '\n';
  std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator({}, store.cf(kEvents)));
  uint64_t expected = lo;
  std::string line;
  for (it->Seek(EncodeSeq(lo)); it->Valid() && expected <= hi; it->Next(), ++expected) {
    uint64_t seq;
    if (!DecodeSeq(it->key().ToStringView(), &seq) || seq != expected) {
      return Status::Error(errc::kLogCorrupt,
                           "seq " + std::to_string(expected) + " is missing; run `tollgate audit verify`");
    }
    Event e;
    s = LogStore::DecodeEvent(seq, it->value().ToStringView(), &e);
    if (!s.ok()) return s;
    s = prover.Line(e.RecordJson(), &line);
    if (!s.ok()) return s;
    out << line << '\n';
    prev = Digest{};
    DigestFromHex(e.hash, &prev);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "export failed");
  if (expected != hi + 1) {
    return Status::Error(errc::kLogCorrupt, "seq " + std::to_string(expected) + " is missing");
  }
  Json end = {
      {"tollgate_export_end", {{"count", hi + 1 - lo}, {"last_seq", hi}, {"last_hash", ToHex(prev)}}}};
  out << end.dump() << '\n';
  out.flush();
  if (!out) return Status::Error(errc::kLogIO, "writing the export failed");
  if (stats) *stats = ExportStats{lo, hi, hi + 1 - lo};
  return Status::Ok();
}

Status ImportLog(EventLog& log, std::istream& in, uint64_t* imported) {
  VerifyReport report = VerifyExport(in);
  if (!report.ok()) {
    return Status::Error(errc::kExportInvalid, "the export does not verify (" + report.Summary() +
                                                   "): " + report.problems.front().status.ToString());
  }
  in.clear();
  in.seekg(0);
  std::string line;
  std::getline(in, line);  // header: VerifyExport checked it
  Json header;
  Status hs = ParseJson(line, &header);  // VerifyExport checked it; never throw regardless
  if (!hs.ok() || !header.is_object() || !header.contains("from_seq") ||
      !header["from_seq"].is_number_unsigned() || !header.contains("prev_hash") ||
      !header["prev_hash"].is_string()) {
    return Status::Error(errc::kExportInvalid, "line 1 is not a tollgate export header");
  }
  if (header["from_seq"].get<uint64_t>() != log.head_seq() + 1 ||
      header["prev_hash"].get<std::string>() != log.head_hash()) {
    return Status::Error(errc::kChainBroken, "the export starts at seq " + header["from_seq"].dump() +
                                                 " but the log's next seq is " +
                                                 std::to_string(log.head_seq() + 1) +
                                                 " (or its prev_hash is not the log's head hash)");
  }
  uint64_t n = 0;
  while (std::getline(in, line)) {
    Json j;
    Status ps = ParseJson(line, &j);
    if (!ps.ok()) return ps;
    if (j.is_object() && j.contains("tollgate_export_end")) break;
    if (j.is_object()) {  // an export with proofs: not part of the record
      j.erase("proof");
      j.erase("proof_pending");
    }
    Event e;
    Status s = EventFromJson(j, &e);
    if (!s.ok()) return s;
    AppendResult r = log.AppendRecord(std::move(e));
    if (!r.status.ok()) return r.status;
    ++n;
  }
  if (imported) *imported = n;
  return Status::Ok();
}

Status ExportSelection(const LogStore& store, const QueryScope& scope, AuditQuery query, std::ostream& out,
                       ExportStats* stats, const MerkleStore* proofs) {
  Prover prover(proofs);
  Status ps = prover.Start();
  if (!ps.ok()) return ps;
  query.json_lines = true;
  query.descending = false;
  query.cursor.clear();
  query.limit = kMaxQueryLimit;
  Json filter = Json::object();
  for (const auto& [k, v] : {std::pair<const char*, const std::string*>{"org_id", &query.org_id},
                             {"agent_id", &query.agent_id},
                             {"session_id", &query.session_id},
                             {"request_id", &query.request_id},
                             {"tool", &query.tool},
                             {"verdict", &query.verdict}}) {
    if (!v->empty()) filter[k] = *v;
  }
  if (!query.types.empty()) filter["types"] = query.types;
  if (query.since_us) filter["since"] = FormatTime(*query.since_us);
  if (query.until_us) filter["until"] = FormatTime(*query.until_us);
  std::vector<std::string> lines;
  for (;;) {
    AuditPage page;
    Status s = GetAuditLog(store, scope, query, &page);
    if (!s.ok()) return s;
    for (auto& l : page.lines) lines.push_back(std::move(l));
    if (lines.size() > kMaxSelectionEvents) {
      return Status::Error(errc::kInvalidQuery, "the filter matches over " +
                                                    std::to_string(kMaxSelectionEvents) +
                                                    " events: narrow it (time range, session, type)");
    }
    if (page.next_cursor.empty()) break;
    query.cursor = page.next_cursor;
  }
  // The head after the last read: every record exported is at or below it.
  uint64_t head;
  Digest head_hash;
  Status s = store.ReadHead(&head, &head_hash);
  if (!s.ok()) return s;
  out << Json{{"tollgate_export", 2},
              {"selection", filter},
              {"head_seq", head},
              {"head_hash", ToHex(head_hash)}}
             .dump()
      << '\n';
  Json last = Json::object();
  for (std::string& l : lines) {
    if (prover.on()) {  // the record's proof fields, the line kept canonical
      Json rec;
      s = ParseJson(l, &rec);
      if (s.ok()) s = prover.Line(std::move(rec), &l);
      if (!s.ok()) return s;
    }
    out << l << '\n';
  }
  if (!lines.empty()) ParseJson(lines.back(), &last);
  Json end = {{"tollgate_export_end",
               {{"count", lines.size()},
                {"last_seq", last.value("seq", uint64_t{0})},
                {"last_hash", last.value("hash", "")}}}};
  out << end.dump() << '\n';
  out.flush();
  if (!out) return Status::Error(errc::kLogIO, "writing the export failed");
  if (stats != nullptr) {
    Json first;
    if (!lines.empty()) ParseJson(lines.front(), &first);
    *stats = ExportStats{first.value("seq", uint64_t{0}), last.value("seq", uint64_t{0}), lines.size()};
  }
  return Status::Ok();
}

}  // namespace tollgate
