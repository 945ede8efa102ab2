#include "audit/open_requests.h"

#include <rocksdb/iterator.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <memory>

#include "audit/log_sink.h"
#include "core/log.h"
#include "core/request_state.h"

namespace tollgate {

using namespace logfmt;

bool HasOpenIndex(const LogStore& store) {
  std::string v;
  return store.db()->Get({}, store.cf(kMeta), kMetaOpenIndex, &v).ok() && v == "1";
}

namespace {

// Every unfinished request by a walk over the request.received events and
// each one's history; *walked counts the requests seen.
Status WalkUnfinished(const LogStore& store, std::vector<OpenRequest>* out, uint64_t* walked) {
  out->clear();
  *walked = 0;
  StoreLogView view(store);
  const std::string prefix = IndexPrefix(ev::kRequestReceived);
  std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator({}, store.cf(kByType)));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    uint64_t seq;
    if (!DecodeSeq(it->key().ToStringView().substr(prefix.size()), &seq)) {
      return Status::Error(errc::kLogCorrupt, "malformed type index key");
    }
    Event received;
    Status s = store.ReadEvent(seq, &received);
    if (!s.ok()) return s;
    std::vector<Event> events;
    s = view.EventsOfRequest(received.org_id, received.request_id, &events);
    if (!s.ok()) return s;
    ++*walked;
    RequestState st = Summarize(events);
    // The request.received that opened it last (a request may be received
    // again after the pipeline gave up on it).
    if (st.received == nullptr || st.received->seq != seq || st.terminal()) continue;
    out->push_back({received.org_id, received.request_id, seq});
  }
  return it->status().ok() ? Status::Ok() : FromRocks(it->status(), "cannot walk the requests");
}

}  // namespace

Status BuildOpenIndex(LogStore& store) {
  if (HasOpenIndex(store)) return Status::Ok();
  std::vector<OpenRequest> open;
  uint64_t walked = 0;
  Status s = WalkUnfinished(store, &open, &walked);
  if (!s.ok()) return s;
  rocksdb::WriteBatch wb;
  for (const OpenRequest& r : open)
    wb.Put(store.cf(kMeta), OpenKey(r.org_id, r.request_id), EncodeSeq(r.received_seq));
  wb.Put(store.cf(kMeta), kMetaOpenIndex, "1");
  rocksdb::WriteOptions wo;
  wo.sync = true;
  s = FromRocks(store.db()->Write(wo, &wb), "cannot write the open-request index");
  if (s.ok() && walked > 0) {
    log::Info({"log"}) << "indexed the log's unfinished requests once: " << open.size() << " open of "
                       << walked << "\n";
  }
  return s;
}

Status UnfinishedRequests(const LogStore& store, std::vector<OpenRequest>* out) {
  Status s = ListOpenRequests(store, out);
  if (s.ok() || s.code() != errc::kNotFound) return s;
  uint64_t walked = 0;
  return WalkUnfinished(store, out, &walked);
}

Status ListOpenRequests(const LogStore& store, std::vector<OpenRequest>* out) {
  out->clear();
  if (!HasOpenIndex(store)) return Status::Error(errc::kNotFound, "the log has no open-request index");
  std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator({}, store.cf(kMeta)));
  for (it->Seek(kMetaOpenPrefix); it->Valid() && it->key().starts_with(kMetaOpenPrefix); it->Next()) {
    OpenRequest r;
    if (!ParseOpenKey(it->key().ToStringView(), &r.org_id, &r.request_id) ||
        !DecodeSeq(it->value().ToStringView(), &r.received_seq)) {
      return Status::Error(errc::kLogCorrupt, "malformed open-request index entry");
    }
    out->push_back(std::move(r));
  }
  if (!it->status().ok()) return FromRocks(it->status(), "cannot read the open-request index");
  std::sort(out->begin(), out->end(),
            [](const OpenRequest& a, const OpenRequest& b) { return a.received_seq < b.received_seq; });
  return Status::Ok();
}

}  // namespace tollgate
