#include "audit/audit_query.h"

#include <rocksdb/iterator.h>

#include <algorithm>
#include <charconv>

#include "core/canonical_json.h"

namespace tollgate {

using namespace logfmt;

namespace {

Status Invalid(const std::string& msg) { return Status::Error(errc::kInvalidQuery, msg); }

bool ParseCursor(const std::string& c, uint64_t* seq) {
  if (c.size() < 2 || c[0] != 's') return false;
  auto [ptr, ec] = std::from_chars(c.data() + 1, c.data() + c.size(), *seq);
  return ec == std::errc() && ptr == c.data() + c.size() && *seq > 0;
}

std::string MakeCursor(uint64_t seq) { return "s" + std::to_string(seq); }

// The filters a query applies to what it reads that the envelope settles.
// `E` is an Event or an EnvelopeView (same field names).
template <class E>
bool EnvelopeMatches(const AuditQuery& q, const E& e, int64_t time_us) {
  if (!q.org_id.empty() && e.org_id != q.org_id) return false;
  if (!q.agent_id.empty() && e.agent_id != q.agent_id) return false;
  if (!q.session_id.empty() && e.session_id != q.session_id) return false;
  if (!q.request_id.empty() && e.request_id != q.request_id) return false;
  if (!q.tool.empty() && e.tool != q.tool) return false;
  if (!q.types.empty() && std::find(q.types.begin(), q.types.end(), e.type) == q.types.end()) return false;
  if (q.since_us && time_us < *q.since_us) return false;
  if (q.until_us && time_us >= *q.until_us) return false;
  return true;
}

// Every filter, verdict (which needs data) included.
bool Matches(const AuditQuery& q, const Event& e) {
  if (!EnvelopeMatches(q, e, e.time_us)) return false;
  if (!q.verdict.empty()) {
    auto v = e.data.find("verdict");
    if (e.type != ev::kDecisionMade || v == e.data.end() || !v->is_string() || *v != q.verdict) return false;
  }
  return true;
}

// One way of walking candidate seqs in order.
struct Plan {
  int cf = kEvents;
  std::string prefix;  // field indexes: value NUL
};

Plan ChoosePlan(const AuditQuery& q) {
  auto field = [](Cf cf, const std::string& v) { return Plan{cf, IndexPrefix(v)}; };
  if (!q.request_id.empty()) return field(kByRequest, q.request_id);
  if (!q.session_id.empty()) return field(kBySession, q.session_id);
  if (!q.agent_id.empty()) return field(kByAgent, q.agent_id);
  if (q.since_us && q.until_us) return Plan{kByTime, ""};
  if (!q.tool.empty()) return field(kByTool, q.tool);
  if (q.types.size() == 1) return field(kByType, q.types[0]);
  if (!q.verdict.empty()) return field(kByType, ev::kDecisionMade);
  if (!q.org_id.empty()) return field(kByOrg, q.org_id);
  if (q.since_us || q.until_us) return Plan{kByTime, ""};
  return Plan{kEvents, ""};
}

// The caller's scope and the query's own sense; the limit defaulted and the
// cursor parsed into `cursor_seq` (0 when there is none).
Status CheckQuery(const QueryScope& scope, AuditQuery* query, uint64_t* cursor_seq) {
  AuditQuery& q = *query;
  if (!scope.all_orgs) {
    if (q.org_id.empty()) return Invalid("org_id is required for a caller scoped to an org");
    if (q.org_id != scope.org_id) {
      return Status::Error(errc::kForbidden, "caller of org '" + scope.org_id +
                                                 "' may not read the audit log of org '" + q.org_id + "'");
    }
  }
  if (q.limit == 0) q.limit = kDefaultQueryLimit;
  if (q.limit > kMaxQueryLimit) {
    return Invalid("limit " + std::to_string(q.limit) + " exceeds the maximum of " +
                   std::to_string(kMaxQueryLimit));
  }
  for (const auto& t : q.types) {
    if (!IsKnownEventType(t)) return Invalid("unknown event type '" + t + "'");
  }
  if (!q.verdict.empty() && q.verdict != "allow" && q.verdict != "deny" && q.verdict != "ask") {
    return Invalid("verdict must be allow, deny or ask, not '" + q.verdict + "'");
  }
  if (q.since_us && q.until_us && *q.since_us >= *q.until_us) {
    return Invalid("the time range is empty: since must be before until");
  }
  if (!q.cursor.empty() && !ParseCursor(q.cursor, cursor_seq)) {
    return Invalid("cursor '" + q.cursor.substr(0, 40) + "' is not one this log issued");
  }
  return Status::Ok();
}

// Where to start: just past the cursor (or at the range's edge).
Status StartKey(const LogStore& store, const AuditQuery& q, const Plan& plan, uint64_t cursor_seq,
                std::string* start) {
  const bool desc = q.descending;
  if (plan.cf == kByTime) {
    int64_t t;
    uint64_t s;
    if (cursor_seq != 0) {
      Event at;
      Status st = store.ReadEvent(cursor_seq, &at);
      if (!st.ok()) return Invalid("cursor points at no event: " + st.message());
      t = at.time_us;
      s = desc ? cursor_seq - 1 : cursor_seq + 1;
    } else if (desc) {
      t = q.until_us ? *q.until_us - 1 : INT64_MAX;
      s = UINT64_MAX;
    } else {
      t = q.since_us ? *q.since_us : INT64_MIN;
      s = 0;
    }
    *start = TimeKey(t, s);
  } else {
    uint64_t s = cursor_seq != 0 ? (desc ? cursor_seq - 1 : cursor_seq + 1) : (desc ? UINT64_MAX : 0);
    *start = plan.prefix + EncodeSeq(s);
  }
  return Status::Ok();
}

// One page's walk: candidate seqs from the plan's iterator, each record read
// and, when it matches, added to the page.
struct PageWalk {
  const LogStore& store;
  const AuditQuery& q;
  const Plan& plan;
  rocksdb::Iterator* it;
  AuditPage* page;

  size_t Found() const { return q.json_lines ? page->lines.size() : page->events.size(); }
  void Advance() { q.descending ? it->Prev() : it->Next(); }

  // Reads the next candidate seq from the iterator; false at the end of the range.
  bool NextCandidate(uint64_t* seq) {
    if (!it->Valid()) return false;
    std::string_view key = it->key().ToStringView();
    if (plan.cf == kEvents) {
      if (!DecodeSeq(key, seq)) return false;
    } else if (plan.cf == kByTime) {
      int64_t t;
      if (!ParseTimeKey(key, &t, seq)) return false;
      if (!q.descending && q.until_us && t >= *q.until_us) return false;
      if (q.descending && q.since_us && t < *q.since_us) return false;
    } else {
      if (key.size() != plan.prefix.size() + 8 || key.substr(0, plan.prefix.size()) != plan.prefix)
        return false;
      DecodeSeq(key.substr(plan.prefix.size()), seq);
    }
    return true;
  }

  // Reads the record of `seq`; true (and the page grown) if it matches.
  bool Take(uint64_t seq, std::string_view value, Status* st) {
    if (q.json_lines && q.verdict.empty()) {
      logfmt::RecordView rec;
      EnvelopeView v;
      int64_t t;
      *st = logfmt::DecodeRecord(value, &rec);
      if (!st->ok()) return false;
      if (ScanEnvelope(rec.body, &v) && ParseTime(v.time, &t)) {
        if (v.seq != seq) {
          *st = Status::Error(errc::kLogCorrupt, "the record at seq " + std::to_string(seq) +
                                                     " says it is seq " + std::to_string(v.seq));
          return false;
        }
        if (!EnvelopeMatches(q, v, t)) return false;
        page->lines.push_back(RecordText(rec.body, v, ToHex(rec.prev_hash), ToHex(rec.hash)));
        return true;
      }
      // Not in the writer's exact layout (e.g. escapes): decode it.
    }
    Event e;
    *st = LogStore::DecodeEvent(seq, value, &e);
    if (!st->ok() || !Matches(q, e)) return false;
    if (q.json_lines) {
      std::string line;
      *st = CanonicalBytes(e.RecordJson(), &line);
      if (!st->ok()) return false;
      page->lines.push_back(std::move(line));
    } else {
      page->events.push_back(std::move(e));
    }
    return true;
  }

  // Collects candidates in chunks and reads their records with one MultiGet
  // each, until the page is full or the range ends; sets next_cursor when
  // candidates may remain past the last one read.
  Status Fill(const rocksdb::ReadOptions& ro) {
    std::vector<uint64_t> seqs;
    std::vector<std::string> keys;
    bool more = false;
    uint64_t last_read = 0;
    while (Found() < q.limit) {
      if (page->scanned >= kMaxScanPerPage) {
        more = true;
        break;
      }
      seqs.clear();
      size_t want = std::clamp<size_t>(q.limit - Found(), 16, 256);
      uint64_t seq;
      while (seqs.size() < want && NextCandidate(&seq)) {
        seqs.push_back(seq);
        Advance();
      }
      if (seqs.empty()) break;
      keys.clear();
      for (uint64_t s : seqs) keys.push_back(EncodeSeq(s));
      std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
      std::vector<rocksdb::PinnableSlice> values(seqs.size());
      std::vector<rocksdb::Status> statuses(seqs.size());
      store.db()->MultiGet(ro, store.cf(kEvents), slices.size(), slices.data(), values.data(),
                           statuses.data());
      for (size_t i = 0; i < seqs.size(); ++i) {
        ++page->scanned;
        last_read = seqs[i];
        if (!statuses[i].ok()) {
          return Status::Error(errc::kLogCorrupt, "index points at seq " + std::to_string(seqs[i]) +
                                                      " which cannot be read: " + statuses[i].ToString() +
                                                      "; run `tollgate audit verify`");
        }
        Status st;
        const bool matched = Take(seqs[i], values[i].ToStringView(), &st);
        if (!st.ok()) return st;
        if (!matched) continue;
        if (Found() == q.limit) {
          // Candidates read past the last match are read again next page.
          uint64_t peek;
          more = i + 1 < seqs.size() || NextCandidate(&peek);
          break;
        }
      }
    }
    if (!it->status().ok()) return FromRocks(it->status(), "audit query failed");
    if (more && last_read != 0) page->next_cursor = MakeCursor(last_read);
    return Status::Ok();
  }
};

}  // namespace

Status GetAuditLog(const LogStore& store, const QueryScope& scope, const AuditQuery& query, AuditPage* page) {
  *page = AuditPage();
  AuditQuery q = query;
  uint64_t cursor_seq = 0;
  if (Status s = CheckQuery(scope, &q, &cursor_seq); !s.ok()) return s;

  const Plan plan = ChoosePlan(q);
  page->index_used = CfName(plan.cf);
  std::string start;
  if (Status s = StartKey(store, q, plan, cursor_seq, &start); !s.ok()) return s;

  rocksdb::ReadOptions ro;
  std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator(ro, store.cf(plan.cf)));
  if (q.descending)
    it->SeekForPrev(start);
  else
    it->Seek(start);
  PageWalk walk{store, q, plan, it.get(), page};
  return walk.Fill(ro);
}

Status ForEachEvent(const LogStore& store, AuditQuery query, const std::function<void(Event&)>& visit) {
  query.limit = kMaxQueryLimit;
  query.json_lines = false;
  for (;;) {
    AuditPage page;
    Status s = GetAuditLog(store, QueryScope::Operator(), query, &page);
    if (!s.ok()) return s;
    for (Event& e : page.events) visit(e);
    if (page.next_cursor.empty()) return Status::Ok();
    query.cursor = page.next_cursor;
  }
}

}  // namespace tollgate
