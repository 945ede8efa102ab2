#include "audit/log_sink.h"

#include "audit/audit_query.h"

namespace tollgate {

void LogSink::AddListener(Listener listener) {
  std::lock_guard<std::mutex> lock(listeners_mu_);
  listeners_.push_back(std::move(listener));
}

void LogSink::AppendAll(std::vector<Event> events, std::vector<Appended>* results) {
  std::vector<Listener> listeners;
  {
    std::lock_guard<std::mutex> lock(listeners_mu_);
    listeners = listeners_;
  }
  // One group: a stage's batch lands in the log whole or not at all.
  std::vector<AppendFuture> futures = log_.AppendGroupAsync(events);
  results->clear();
  bool all_ok = true;
  for (auto& f : futures) {
    AppendResult r = f.get();
    all_ok = all_ok && r.status.ok();
    results->push_back({r.status, r.seq, r.duplicate});
  }
  if (!all_ok) return;
  // Before returning: whatever the caller publishes next is read by stages
  // that must find these events in every listener's state and in the cache.
  // Listeners first (they must not read through the cache: it lacks this
  // group until the next line), then the cache takes the events.
  for (size_t i = 0; i < events.size(); ++i) events[i].seq = (*results)[i].seq;
  for (const auto& l : listeners) l(events);
  if (cache_ != nullptr) cache_->Add(std::move(events), *results);
}

Status StoreLogView::EventsOfRequest(const std::string& org_id, const std::string& request_id,
                                     std::vector<Event>* out) const {
  out->clear();
  AuditQuery q;
  q.org_id = org_id;
  q.request_id = request_id;
  return ForEachEvent(store_, q, [out](Event& e) { out->push_back(std::move(e)); });
}

}  // namespace tollgate
