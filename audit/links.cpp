#include "audit/links.h"

#include <memory>
#include <tuple>

namespace tollgate {

using namespace logfmt;

std::string LinkTracker::Key(Cf cf, std::string_view org, std::string_view id) {
  std::string k(1, static_cast<char>(cf));
  k.append(org).push_back('\0');  // ids are free of NUL: the join is unambiguous
  k.append(id);
  return k;
}

void LinkTracker::Note(Cf cf, std::string_view org, std::string_view id, uint64_t seq) {
  last_[Key(cf, org, id)] = seq;
}

Status LinkTracker::Prev(Cf cf, std::string_view org, std::string_view id, uint64_t before, uint64_t* out) {
  if (auto it = last_.find(Key(cf, org, id)); it != last_.end() && it->second < before) {
    *out = it->second;
    return Status::Ok();
  }
  return WalkIndex(cf, org, id, before, out);
}

// Back from `before` along the id's index range to the first event of
// `org`. One iterator per family serves every walk of a batch (Trim drops
// them: the next batch must see what this one wrote).
Status LinkTracker::WalkIndex(Cf cf, std::string_view org, std::string_view id, uint64_t before,
                              uint64_t* out) {
  *out = 0;
  if (before <= 1) return Status::Ok();
  std::unique_ptr<rocksdb::Iterator>& it = cf == kByRequest ? request_it_ : session_it_;
  if (!it) it.reset(store_.db()->NewIterator({}, store_.cf(cf)));
  // Most misses are ids with no event yet (a new request): one forward
  // seek says so. SeekForPrev costs a direction switch of every level.
  it->Seek(IndexPrefix(id));
  std::string_view first_id;
  uint64_t first_seq = 0;
  if (!it->Valid() || !ParseIndexKey(it->key().ToStringView(), &first_id, &first_seq) || first_id != id ||
      first_seq >= before) {
    if (!it->status().ok())
      return FromRocks(it->status(), "cannot read the index of " + std::string(CfName(cf)));
    return Status::Ok();
  }
  for (it->SeekForPrev(IndexKey(id, before - 1)); it->Valid(); it->Prev()) {
    std::string_view value;
    uint64_t seq = 0;
    if (!ParseIndexKey(it->key().ToStringView(), &value, &seq) || value != id) break;
    std::string raw;
    RecordView rec;
    Status s = store_.ReadRaw(seq, &raw);
    if (s.ok()) s = DecodeRecord(raw, &rec);
    if (!s.ok()) return s;
    // The envelope scan reads the org without parsing the body; a body it
    // does not take (escaped strings) is decoded in full.
    EnvelopeView v;
    std::string org_of;
    if (ScanEnvelope(rec.body, &v)) {
      org_of = v.org_id;
    } else {
      Event e;
      if (s = EventFromText(rec.body, &e); !s.ok()) return s;
      org_of = e.org_id;
    }
    if (org_of == org) {
      *out = seq;
      return Status::Ok();
    }
  }
  if (!it->status().ok())
    return FromRocks(it->status(), "cannot read the index of " + std::string(CfName(cf)));
  return Status::Ok();
}

Status LinkTracker::Step(std::string_view org, std::string_view request_id, std::string_view session_id,
                         uint64_t seq, std::optional<uint64_t>* prev_in_request,
                         std::optional<uint64_t>* prev_in_session) {
  // Both looked up before either is noted: a failed step notes nothing.
  for (auto [cf, id, link] : {std::tuple{kByRequest, request_id, prev_in_request},
                              std::tuple{kBySession, session_id, prev_in_session}}) {
    link->reset();
    if (id.empty()) continue;
    uint64_t prev = 0;
    if (Status s = Prev(cf, org, id, seq, &prev); !s.ok()) return s;
    *link = prev;
  }
  NoteBoth(org, request_id, session_id, seq);
  return Status::Ok();
}

void LinkTracker::NoteBoth(std::string_view org, std::string_view request_id, std::string_view session_id,
                           uint64_t seq) {
  if (!request_id.empty()) Note(kByRequest, org, request_id, seq);
  if (!session_id.empty()) Note(kBySession, org, session_id, seq);
}

}  // namespace tollgate
