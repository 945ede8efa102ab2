// RequestCache: the events of the requests that began in this process, kept
// in memory, so that a stage reads a request's history without an index scan
// and a JSON decode of every event (the hot read of every stage: ReadFlow).
//
// Complete or not used. An entry opens only when a request.received is
// appended for the first time (not a duplicate): the request's first event,
// since ingest writes it before anything else of that request exists. Every
// later event of the request is added by the LogSink that appended it, once
// durable, sorted by seq. So every writer of the running pipeline must
// append through that LogSink (the stage runners and the reconciler do); an
// event appended behind its back would make an entry incomplete. A request
// whose request.received was appended before this process started (or was
// evicted) has no entry, and its reads go to the log.
//
// Bounded: at most `capacity` requests, the oldest opened go first. Entries
// of ended requests stay until then: a re-sent copy reads them too.
//
// Thread-safe.
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/stage.h"

namespace tollgate {

class RequestCache {
 public:
  explicit RequestCache(size_t capacity = 8192) : capacity_(capacity == 0 ? 1 : capacity) {}

  // Records a durable group, taking the events it keeps: `events[i]` stored
  // at `appended[i].seq`, `appended[i].duplicate` when it was already in the
  // log. Requires every status ok (a failed group is not in the log, so it
  // is not added).
  void Add(std::vector<Event>&& events, const std::vector<EventSink::Appended>& appended);

  // The request's events in log order, seq set (prev_hash and hash are not,
  // as for LogSink listeners), when its whole history is here; false when
  // the log must be read.
  bool Get(const std::string& org_id, const std::string& request_id, std::vector<Event>* out) const;

  size_t size() const;

 private:
  struct Entry {
    std::vector<Event> events;  // sorted by seq
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
  std::deque<std::string> opened_;                  // guarded by mu_: eviction order
};

// A LogView that answers from the cache when it can and from `log` when not.
// Both must outlive it.
class CachedLogView : public LogView {
 public:
  CachedLogView(const RequestCache& cache, const LogView& log) : cache_(cache), log_(log) {}
  Status EventsOfRequest(const std::string& org_id, const std::string& request_id,
                         std::vector<Event>* out) const override;

 private:
  const RequestCache& cache_;
  const LogView& log_;
};

}  // namespace tollgate
