// The completeness links of the log (docs/log_format.md, "Links"): each
// event with a request_id or session_id names the seq of the previous event
// of the same (org_id, request_id) and (org_id, session_id), 0 for the
// first. The writer assigns them (audit/event_log.cpp) and `verify`
// re-derives them (audit/verify.cpp) with this one tracker.
//
// The field indexes are keyed by the id alone, not by org, so an index
// walk skips events of other orgs that use the same id. The tracker keeps
// the last seq of recent keys in memory and walks the index only for a key
// it does not hold. Not thread-safe: one owner thread.
#pragma once

#include <rocksdb/iterator.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "audit/log_format.h"
#include "audit/log_store.h"

namespace tollgate {

class LinkTracker {
 public:
  explicit LinkTracker(const LogStore& store, size_t max_keys = size_t{1} << 16)
      : store_(store), max_keys_(max_keys) {}

  // The seq of the last event before `before` of (org, id) in index `cf`
  // (kByRequest or kBySession), or 0. What Note() recorded wins over the
  // index: events noted may not be written yet.
  Status Prev(logfmt::Cf cf, std::string_view org, std::string_view id, uint64_t before, uint64_t* out);
  // The event at `seq` is now the last of (org, id) in `cf`.
  void Note(logfmt::Cf cf, std::string_view org, std::string_view id, uint64_t seq);

  // The links of the event at `seq` with these ids (each present when its
  // id is not empty), which is then noted as the last of both.
  Status Step(std::string_view org, std::string_view request_id, std::string_view session_id, uint64_t seq,
              std::optional<uint64_t>* prev_in_request, std::optional<uint64_t>* prev_in_session);
  // Notes the event at `seq` as the last of both without deriving links (a
  // record that brings its own).
  void NoteBoth(std::string_view org, std::string_view request_id, std::string_view session_id, uint64_t seq);
  // Drops what is remembered (the batch it noted was not written).
  void Forget() {
    last_.clear();
    request_it_.reset();
    session_it_.reset();
  }
  // Drops what is remembered when it holds more than max_keys; only between
  // batches, when everything noted is written and the index knows it.
  void Trim() {
    if (last_.size() > max_keys_) last_.clear();
    request_it_.reset();
    session_it_.reset();
  }

 private:
  static std::string Key(logfmt::Cf cf, std::string_view org, std::string_view id);
  Status WalkIndex(logfmt::Cf cf, std::string_view org, std::string_view id, uint64_t before, uint64_t* out);

  const LogStore& store_;
  const size_t max_keys_;
  std::unordered_map<std::string, uint64_t> last_;
  std::unique_ptr<rocksdb::Iterator> request_it_, session_it_;  // until Trim or Forget
};

}  // namespace tollgate
