#include "replay/log_source.h"

#include <rocksdb/iterator.h>

#include <algorithm>

#include "audit/audit_query.h"

namespace tollgate::replay {

using namespace logfmt;

namespace {

// Follows get_audit_log's cursors to the end of `q`.
Status QueryAll(const LogStore& store, AuditQuery q, std::vector<Event>* out) {
  q.limit = kMaxQueryLimit;
  for (;;) {
    AuditPage page;
    Status s = GetAuditLog(store, QueryScope::Operator(), q, &page);
    if (!s.ok()) return s;
    for (Event& e : page.events) out->push_back(std::move(e));
    if (page.next_cursor.empty()) return Status::Ok();
    q.cursor = page.next_cursor;
  }
}

}  // namespace

Status ReadSession(const LogStore& store, const std::string& session_id, std::vector<Event>* out) {
  out->clear();
  AuditQuery q;
  q.session_id = session_id;
  Status s = QueryAll(store, q, out);
  if (s.ok() && out->empty()) return Status::Error(errc::kNotFound, "no event of session '" + session_id + "'");
  return s;
}

Status ReadAgent(const LogStore& store, const std::string& agent_id, std::optional<int64_t> since_us,
                 std::optional<int64_t> until_us, std::vector<Event>* out) {
  out->clear();
  AuditQuery q;
  q.agent_id = agent_id;
  q.since_us = since_us;
  q.until_us = until_us;
  return QueryAll(store, q, out);
}

Status ReadTypes(const LogStore& store, const std::vector<std::string>& types, uint64_t max_seq,
                 std::vector<Event>* out) {
  out->clear();
  rocksdb::ReadOptions ro;
  for (const std::string& type : types) {
    const std::string prefix = IndexPrefix(type);
    std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator(ro, store.cf(kByType)));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      uint64_t seq;
      if (!DecodeSeq(it->key().ToStringView().substr(prefix.size()), &seq)) {
        return Status::Error(errc::kLogCorrupt, "malformed type index entry for " + type);
      }
      if (max_seq != 0 && seq > max_seq) break;
      Event e;
      Status s = store.ReadEvent(seq, &e);
      if (!s.ok()) return s;
      out->push_back(std::move(e));
    }
    if (!it->status().ok()) return FromRocks(it->status(), "reading the type index failed");
  }
  // Each type came in seq order; merge them.
  std::stable_sort(out->begin(), out->end(), [](const Event& a, const Event& b) { return a.seq < b.seq; });
  return Status::Ok();
}

Status ScanAll(const LogStore& store, const std::function<bool(const Event&)>& visit) {
  std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator({}, store.cf(kEvents)));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    uint64_t seq;
    if (!DecodeSeq(it->key().ToStringView(), &seq)) return Status::Error(errc::kLogCorrupt, "malformed events key");
    Event e;
    Status s = LogStore::DecodeEvent(seq, it->value().ToStringView(), &e);
    if (!s.ok()) return s;
    if (!visit(e)) break;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scanning the log failed");
  return Status::Ok();
}

Status ReadLink(const LogStore& store, uint64_t seq, ChainLink* out) {
  std::string raw;
  Status s = store.ReadRaw(seq, &raw);
  if (!s.ok()) return s;
  RecordView rec;
  s = DecodeRecord(raw, &rec);
  if (!s.ok()) return s;
  out->prev_hash = ToHex(rec.prev_hash);
  out->hash = ToHex(rec.hash);
  return Status::Ok();
}

}  // namespace tollgate::replay
