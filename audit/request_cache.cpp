#include "audit/request_cache.h"

#include <algorithm>

namespace tollgate {

void RequestCache::Add(std::vector<Event>&& events, const std::vector<EventSink::Appended>& appended) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < events.size() && i < appended.size(); ++i) {
    Event& e = events[i];
    const uint64_t seq = appended[i].seq;
    if (e.request_id.empty()) continue;
    const std::string key = RequestKey(e.org_id, e.request_id);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      // Only a request's first event, appended now, opens an entry.
      if (e.type != ev::kRequestReceived || appended[i].duplicate) continue;
      while (entries_.size() >= capacity_ && !opened_.empty()) {
        entries_.erase(opened_.front());
        opened_.pop_front();
      }
      it = entries_.emplace(key, Entry{}).first;
      opened_.push_back(key);
    }
    std::vector<Event>& have = it->second.events;
    // Sorted by seq; a duplicate (same seq) is already here.
    auto at =
        std::lower_bound(have.begin(), have.end(), seq, [](const Event& a, uint64_t s) { return a.seq < s; });
    if (at != have.end() && at->seq == seq) continue;
    e.seq = seq;
    have.insert(at, std::move(e));
  }
}

bool RequestCache::Get(const std::string& org_id, const std::string& request_id,
                       std::vector<Event>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(RequestKey(org_id, request_id));
  if (it == entries_.end()) return false;
  *out = it->second.events;
  return true;
}

size_t RequestCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

Status CachedLogView::EventsOfRequest(const std::string& org_id, const std::string& request_id,
                                      std::vector<Event>* out) const {
  if (cache_.Get(org_id, request_id, out)) return Status::Ok();
  return log_.EventsOfRequest(org_id, request_id, out);
}

}  // namespace tollgate
