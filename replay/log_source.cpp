#include "replay/log_source.h"

#include <rocksdb/iterator.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <mutex>
#include <set>
#include <thread>

#include "audit/audit_query.h"
#include "replay/canonical_scan.h"
#include "replay/redecide.h"

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

// Reads data.cost_usd of a canonical data object without building a tree:
// a SAX pass that stops once the top-level key is read.
class CostReader : public nlohmann::json_sax<Json> {
 public:
  double cost = 0;
  bool redacted = false;  // a top-level "redacted" list with an entry: the result's redaction fired
  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t v) override { return Number(static_cast<double>(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Number(static_cast<double>(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Number(v); }
  bool string(string_t&) override {
    if (in_redacted_ && depth_ == 2) redacted = true;
    return Value();
  }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_object() override {
    --depth_;
    return depth_ > 0;
  }
  bool start_array(std::size_t) override {
    in_redacted_ = want_redacted_ && depth_ == 1;
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    if (depth_ == 1) in_redacted_ = false;
    return true;
  }
  bool key(string_t& k) override {
    want_ = depth_ == 1 && k == "cost_usd";
    want_redacted_ = depth_ == 1 && k == "redacted";
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool Value() {
    want_ = false;
    return true;
  }
  bool Number(double v) {
    if (want_ && depth_ == 1) {
      cost = v;
      want_ = false;
      return true;  // read on: "redacted" sorts after it
    }
    return Value();
  }
  int depth_ = 0;
  bool want_ = false;
  bool want_redacted_ = false, in_redacted_ = false;
};

// An Event of the envelope alone (data empty); its id only `with_id`.
bool EnvelopeEvent(const EnvelopeView& v, Event* e, bool with_id = true) {
  if (!ParseTime(v.time, &e->time_us)) return false;
  e->seq = v.seq;
  if (with_id) e->id.assign(v.id);
  e->type.assign(v.type);
  e->org_id.assign(v.org_id);
  e->agent_id.assign(v.agent_id);
  e->session_id.assign(v.session_id);
  e->request_id.assign(v.request_id);
  e->tool.assign(v.tool);
  e->data = Json::object();
  return true;
}

// The index range `prefix` (a field value NUL), as seqs, up to max_seq.
Status IndexSeqs(const LogStore& store, Cf cf, const std::string& prefix, uint64_t max_seq,
                 std::vector<uint64_t>* out) {
  std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator({}, store.cf(cf)));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    uint64_t seq;
    if (!DecodeSeq(it->key().ToStringView().substr(prefix.size()), &seq)) {
      return Status::Error(errc::kLogCorrupt, std::string("malformed ") + CfName(cf) + " entry");
    }
    if (max_seq != 0 && seq > max_seq) break;
    out->push_back(seq);
  }
  if (!it->status().ok()) return FromRocks(it->status(), std::string("reading ") + CfName(cf) + " failed");
  return Status::Ok();
}

// Reads the records at `seqs` in chunks (one MultiGet each) and hands each
// one's seq and value to `visit`.
Status ForRecords(const LogStore& store, const std::vector<uint64_t>& seqs,
                  const std::function<Status(uint64_t, std::string_view)>& visit) {
  constexpr size_t kChunk = 256;
  std::vector<std::string> keys;
  std::vector<rocksdb::Slice> slices;
  std::vector<rocksdb::PinnableSlice> values(kChunk);
  std::vector<rocksdb::Status> statuses(kChunk);
  for (size_t at = 0; at < seqs.size(); at += kChunk) {
    const size_t n = std::min(kChunk, seqs.size() - at);
    keys.clear();
    for (size_t i = 0; i < n; ++i) keys.push_back(EncodeSeq(seqs[at + i]));
    slices.assign(keys.begin(), keys.end());
    for (size_t i = 0; i < n; ++i) values[i].Reset();
    store.db()->MultiGet({}, store.cf(kEvents), n, slices.data(), values.data(), statuses.data());
    for (size_t i = 0; i < n; ++i) {
      if (!statuses[i].ok()) {
        return Status::Error(errc::kLogCorrupt, "an index points at seq " + std::to_string(seqs[at + i]) +
                                                    " which cannot be read: " + statuses[i].ToString());
      }
      Status s = visit(seqs[at + i], values[i].ToStringView());
      if (!s.ok()) return s;
    }
  }
  return Status::Ok();
}

}  // namespace

bool Target::Matches(const Event& e) const {
  if (!session_id.empty() && e.session_id != session_id) return false;
  if (!agent_id.empty() && e.agent_id != agent_id) return false;
  if (!org_id.empty() && e.org_id != org_id) return false;
  if (since_us && e.time_us < *since_us) return false;
  if (until_us && e.time_us >= *until_us) return false;
  return true;
}

namespace {

// One record of an org's range, filtered on its envelope before anything is
// decoded; appends what the fold reads (or nothing) to *out. With
// `keep_bytes`, a target decision.made's canonical data is kept as the bytes
// of its compared fields, and the envelope's id is not copied.
Status DecodeInput(uint64_t seq, std::string_view value, const Target& target, bool keep_bytes,
                   std::vector<DecisionInput>* out) {
  RecordView rec;
  Status st = DecodeRecord(value, &rec);
  if (!st.ok()) return st;
  EnvelopeView v;
  Event e;
  if (!ScanEnvelope(rec.body, &v)) {
    // Not in the writer's exact layout (escapes): decode it all.
    st = LogStore::DecodeEvent(seq, value, &e);
    if (!st.ok()) return st;
    std::string body;
    st = EncodeEventBody(e, SIZE_MAX, &body);
    if (!st.ok() || !ScanEnvelope(body, &v)) {
      return Status::Error(errc::kLogCorrupt, "seq " + std::to_string(seq) + " cannot be scanned");
    }
    // v points into `body`; decide on the decoded event instead.
    const bool full = e.type == ev::kDecisionMade || e.type == ev::kExecutionCompleted ||
                      e.type == ev::kApprovalDenied || e.type == ev::kApprovalExpired ||
                      e.type == ev::kApprovalGranted || (e.type == ev::kRequestReceived && target.Matches(e));
    if (full) out->push_back({std::move(e), {}});
    return Status::Ok();
  }
  if (v.seq != seq) {
    return Status::Error(errc::kLogCorrupt, "the record at seq " + std::to_string(seq) + " says it is seq " +
                                                std::to_string(v.seq));
  }
  const std::string_view type = v.type;
  const bool received = type == ev::kRequestReceived;
  if (!received && type != ev::kDecisionMade && type != ev::kExecutionCompleted &&
      type != ev::kApprovalDenied && type != ev::kApprovalExpired && type != ev::kApprovalGranted) {
    return Status::Ok();
  }
  if (!EnvelopeEvent(v, &e, /*with_id=*/!keep_bytes)) {
    return Status::Error(errc::kLogCorrupt, "seq " + std::to_string(seq) + " has a bad time");
  }
  DecisionInput& in = out->emplace_back();
  if (received || type == ev::kDecisionMade) {
    // The envelope from the scan, the data parsed alone: the fold needs
    // no hashes and the writer validated the envelope.
    const bool is_target = target.Matches(e);
    if (received && !is_target) {
      out->pop_back();
      return Status::Ok();
    }
    if (!received && keep_bytes && is_target &&
        CanonicalSubset(v.data, kComparedFields, &in.compared_bytes)) {
      e.data = Json();  // valid JSON: parsing it later cannot fail
    } else if (!keep_bytes || !ParseCanonicalObject(v.data, &e.data)) {
      // (The slow path parses with nlohmann alone: the tests hold the two
      // paths' inputs equal.)
      in.compared_bytes.clear();
      st = ParseJson(v.data, &e.data);
      if (!st.ok()) {
        out->pop_back();
        return Status::Error(errc::kLogCorrupt, "seq " + std::to_string(seq) + " data: " + st.message());
      }
    }
  } else if (type == ev::kExecutionCompleted) {
    CostReader cr;
    Json::sax_parse(v.data, &cr);
    e.data["cost_usd"] = cr.cost;
    if (cr.redacted) e.data["redacted"] = Json::array({"*"});  // what the session facts read of it
  } else if (type == ev::kApprovalGranted) {
    // Only a declassification matters to the fold (decide/session_facts.h).
    if (v.data.find("\"declassify\":true") == std::string_view::npos || !ParseJson(v.data, &e.data).ok()) {
      out->pop_back();
      return Status::Ok();
    }
  }
  in.event = std::move(e);
  return Status::Ok();
}

// The records at `seqs` (ascending) read in order with one iterator over
// the events: a short gap (other orgs' records) is stepped over, a long one
// sought past. A seq with no record is the error a point lookup gives.
class RecordCursor {
 public:
  RecordCursor(const LogStore& store, const std::vector<uint64_t>& seqs) : store_(store), seqs_(seqs) {
    if (!seqs.empty()) upper_ = EncodeSeq(seqs.back() + 1);
    bound_ = upper_;
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &bound_;
    it_.reset(store.db()->NewIterator(ro, store.cf(kEvents)));
  }
  // Visits seqs[from, to).
  Status Read(size_t from, size_t to, const std::function<Status(uint64_t, std::string_view)>& visit) {
    constexpr uint64_t kMaxStep = 16;  // past this many records, seek
    for (size_t i = from; i < to; ++i) {
      const uint64_t want = seqs_[i];
      if (!positioned_ || want > at_ + kMaxStep) {
        it_->Seek(EncodeSeq(want));
        positioned_ = true;
      }
      for (;;) {
        if (!it_->Valid()) {
          if (!it_->status().ok()) return FromRocks(it_->status(), "reading the log failed");
          at_ = UINT64_MAX;
          break;
        }
        if (!DecodeSeq(it_->key().ToStringView(), &at_))
          return Status::Error(errc::kLogCorrupt, "malformed events key");
        if (at_ >= want) break;
        it_->Next();
      }
      if (at_ != want) {
        return Status::Error(errc::kLogCorrupt,
                             "an index points at seq " + std::to_string(want) +
                                 " which cannot be read: " + rocksdb::Status::NotFound().ToString());
      }
      Status s = visit(want, it_->value().ToStringView());
      if (!s.ok()) return s;
      it_->Next();
      ++at_;  // at most the next record's seq; exact once read
    }
    return Status::Ok();
  }

 private:
  const LogStore& store_;
  const std::vector<uint64_t>& seqs_;
  std::string upper_;
  rocksdb::Slice bound_;
  std::unique_ptr<rocksdb::Iterator> it_;
  bool positioned_ = false;
  uint64_t at_ = 0;
};

// What every read of decision inputs starts with: the target's orgs and
// last seq, the policies in force up to then (in seq order), and the seqs
// of the orgs' records up to then (ascending).
Status PlanInputs(const LogStore& store, const Target& target, std::vector<Event>* policies,
                  std::vector<uint64_t>* org_seqs) {
  std::set<std::string> orgs;
  uint64_t max_seq = 0;
  // The orgs' records (an event has one org: the ranges are disjoint).
  auto read_org_seqs = [&] {
    org_seqs->clear();
    for (const std::string& org : orgs) {
      Status st = IndexSeqs(store, kByOrg, IndexPrefix(org), max_seq, org_seqs);
      if (!st.ok()) return st;
    }
    if (orgs.size() > 1) std::sort(org_seqs->begin(), org_seqs->end());
    return Status::Ok();
  };

  // 1. The target's orgs, last seq and the orgs' records up to it.
  std::vector<uint64_t> seqs;
  Status s;
  if (!target.session_id.empty()) {
    // A session: its seqs from its index, compared with its org's (keys
    // only). Session ids are the clients' own, so two orgs may share one:
    // with an org named, the session is that org's part of it; without,
    // its first event's org and the orgs of its seqs that org's index
    // lacks (only those records are read): no request is left out.
    s = IndexSeqs(store, kBySession, IndexPrefix(target.session_id), 0, &seqs);
    if (!s.ok()) return s;
    if (!seqs.empty()) {
      if (target.org_id.empty()) {
        Event first;
        s = store.ReadEvent(seqs.front(), &first);
        if (!s.ok()) return s;
        orgs.insert(first.org_id);
      } else {
        orgs.insert(target.org_id);
      }
      max_seq = seqs.back();
      s = read_org_seqs();
      if (!s.ok()) return s;
      if (!target.org_id.empty()) {
        std::vector<uint64_t> inside;
        std::set_intersection(seqs.begin(), seqs.end(), org_seqs->begin(), org_seqs->end(),
                              std::back_inserter(inside));
        max_seq = inside.empty() ? 0 : inside.back();
        org_seqs->erase(std::upper_bound(org_seqs->begin(), org_seqs->end(), max_seq), org_seqs->end());
      } else {
        std::vector<uint64_t> outside;
        std::set_difference(seqs.begin(), seqs.end(), org_seqs->begin(), org_seqs->end(),
                            std::back_inserter(outside));
        if (!outside.empty()) {
          s = ForRecords(store, outside, [&](uint64_t seq, std::string_view value) {
            Event e;
            Status st = LogStore::DecodeEvent(seq, value, &e);
            if (st.ok()) orgs.insert(e.org_id);
            return st;
          });
          if (!s.ok()) return s;
          s = read_org_seqs();
          if (!s.ok()) return s;
        }
      }
    }
  } else {
    // An agent: its events' envelopes, for the time range and the org.
    s = IndexSeqs(store, kByAgent, IndexPrefix(target.agent_id), 0, &seqs);
    if (!s.ok()) return s;
    s = ForRecords(store, seqs, [&](uint64_t seq, std::string_view value) {
      Event e;
      Status st = LogStore::DecodeEvent(seq, value, &e);
      if (!st.ok()) return st;
      if (target.Matches(e)) {
        orgs.insert(e.org_id);
        max_seq = std::max(max_seq, seq);
      }
      return Status::Ok();
    });
    if (!s.ok()) return s;
    if (max_seq != 0) s = read_org_seqs();
    if (!s.ok()) return s;
  }
  if (max_seq == 0) return Status::Error(errc::kNotFound, "no event of the requests to re-decide");

  // 2. Every policy in force up to then: the file's (they apply to every
  // org) and the agent-local rules of the target's orgs. Another org's
  // "allow always" is no part of these orgs' policy or version, and is not
  // read: a report must not reveal that it exists.
  s = ReadTypes(store, {ev::kPolicyUpdated, ev::kToolsAvailable}, max_seq, policies);
  if (!s.ok()) return s;
  policies->erase(std::remove_if(policies->begin(), policies->end(),
                                 [&](const Event& e) {
                                   return e.data.is_object() && e.data.value("tier", "file") != "file" &&
                                          orgs.count(e.org_id) == 0;
                                 }),
                  policies->end());
  return Status::Ok();
}

// Reads seqs[from, to) into *out, the policies before each record (and,
// with `last`, the rest) merged in by seq. `*policy` is the next policy.
Status ReadChunk(RecordCursor& cursor, size_t from, size_t to, bool last, const Target& target,
                 bool keep_bytes, std::vector<Event>& policies, size_t* policy,
                 std::vector<DecisionInput>* out) {
  Status s = cursor.Read(from, to, [&](uint64_t seq, std::string_view value) {
    while (*policy < policies.size() && policies[*policy].seq < seq)
      out->push_back({std::move(policies[(*policy)++]), {}});
    return DecodeInput(seq, value, target, keep_bytes, out);
  });
  if (!s.ok()) return s;
  while (last && *policy < policies.size()) out->push_back({std::move(policies[(*policy)++]), {}});
  return Status::Ok();
}

constexpr size_t kChunkRecords = 1024;

Status ReadInputs(const LogStore& store, const Target& target, bool keep_bytes,
                  std::vector<DecisionInput>* out) {
  out->clear();
  std::vector<Event> policies;
  std::vector<uint64_t> seqs;
  Status s = PlanInputs(store, target, &policies, &seqs);
  if (!s.ok()) return s;
  out->reserve(policies.size() + seqs.size());  // at most one input a record: no regrowth
  RecordCursor cursor(store, seqs);
  size_t policy = 0;
  return ReadChunk(cursor, 0, seqs.size(), true, target, keep_bytes, policies, &policy, out);
}

}  // namespace

Status ReadDecisionInputs(const LogStore& store, const Target& target, std::vector<Event>* out) {
  out->clear();
  std::vector<DecisionInput> inputs;
  Status s = ReadInputs(store, target, /*keep_bytes=*/false, &inputs);
  if (!s.ok()) return s;
  out->reserve(inputs.size());
  for (DecisionInput& in : inputs) out->push_back(std::move(in.event));
  return Status::Ok();
}

Status ReadDecisionInputs(const LogStore& store, const Target& target, std::vector<DecisionInput>* out) {
  out->clear();
  return StreamDecisionInputs(store, target, [out](std::vector<DecisionInput>& chunk) {
    for (DecisionInput& in : chunk) out->push_back(std::move(in));
  });
}

Status StreamDecisionInputs(const LogStore& store, const Target& target,
                            const std::function<void(std::vector<DecisionInput>& chunk)>& sink) {
  std::vector<Event> policies;
  std::vector<uint64_t> seqs;
  Status s = PlanInputs(store, target, &policies, &seqs);
  if (!s.ok()) return s;
  // The reader fills chunks and queues them; the caller folds them in order
  // and hands each back to be refilled (its vectors' memory reused).
  constexpr size_t kAhead = 4;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<DecisionInput>> ready, spare;
  bool done = false, stop = false;
  Status read_status;
  std::thread reader([&] {
    RecordCursor cursor(store, seqs);
    size_t policy = 0;
    for (size_t at = 0; at < seqs.size() || at == 0; at += kChunkRecords) {
      std::vector<DecisionInput> chunk;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || ready.size() < kAhead; });
        if (stop) break;
        if (!spare.empty()) {
          chunk = std::move(spare.front());
          spare.pop_front();
        }
      }
      chunk.clear();
      const size_t to = std::min(seqs.size(), at + kChunkRecords);
      Status st = ReadChunk(cursor, at, to, to == seqs.size(), target, /*keep_bytes=*/true, policies, &policy,
                            &chunk);
      std::lock_guard lock(mu);
      if (!st.ok()) {
        read_status = st;
        break;
      }
      ready.push_back(std::move(chunk));
      cv.notify_all();
      if (to == seqs.size()) break;
    }
    std::lock_guard lock(mu);
    done = true;
    cv.notify_all();
  });
  for (;;) {
    std::vector<DecisionInput> chunk;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return done || !ready.empty(); });
      if (ready.empty()) break;  // done, everything handed on
      chunk = std::move(ready.front());
      ready.pop_front();
      cv.notify_all();
    }
    try {
      sink(chunk);
    } catch (...) {
      {
        std::lock_guard lock(mu);
        stop = true;
        cv.notify_all();
      }
      reader.join();
      throw;
    }
    chunk.clear();  // what the fold left in it freed here: the reader is the busier thread
    std::lock_guard lock(mu);
    spare.push_back(std::move(chunk));
  }
  reader.join();
  return read_status;
}

Status ReadSession(const LogStore& store, const std::string& session_id, std::vector<Event>* out) {
  out->clear();
  AuditQuery q;
  q.session_id = session_id;
  Status s = QueryAll(store, q, out);
  if (s.ok() && out->empty())
    return Status::Error(errc::kNotFound, "no event of session '" + session_id + "'");
  return s;
}

Status ReadTargetEvents(const LogStore& store, const Target& target, std::vector<Event>* out) {
  out->clear();
  AuditQuery q;
  q.session_id = target.session_id;
  if (target.session_id.empty()) {
    q.agent_id = target.agent_id;
    q.since_us = target.since_us;
    q.until_us = target.until_us;
  }
  q.org_id = target.org_id;
  Status s = QueryAll(store, q, out);
  if (s.ok() && out->empty()) {
    return Status::Error(errc::kNotFound, target.session_id.empty()
                                              ? "no event of agent '" + target.agent_id + "' in that range"
                                              : "no event of session '" + target.session_id + "'");
  }
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
    if (!DecodeSeq(it->key().ToStringView(), &seq))
      return Status::Error(errc::kLogCorrupt, "malformed events key");
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
