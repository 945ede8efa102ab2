#include "audit/credentials_log.h"

#include <rocksdb/iterator.h>

#include <algorithm>

#include "audit/log_format.h"

namespace tollgate {

Status FoldCredentials(const LogStore& store, CredentialRegistry* registry) {
  std::vector<uint64_t> seqs;
  for (const char* type : {ev::kCredentialAdded, ev::kCredentialRevoked}) {
    const std::string prefix = logfmt::IndexPrefix(type);
    std::unique_ptr<rocksdb::Iterator> it(store.db()->NewIterator({}, store.cf(logfmt::kByType)));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      uint64_t seq;
      if (logfmt::DecodeSeq(it->key().ToStringView().substr(prefix.size()), &seq)) seqs.push_back(seq);
    }
    if (!it->status().ok()) return FromRocks(it->status(), "credentials scan failed");
  }
  // A revocation applies only to what was added before it.
  std::sort(seqs.begin(), seqs.end());
  for (uint64_t seq : seqs) {
    Event e;
    Status s = store.ReadEvent(seq, &e);
    if (!s.ok()) return s;
    registry->Apply(e);
  }
  return Status::Ok();
}

}  // namespace tollgate
