#include "audit/log_sink.h"

#include "audit/audit_query.h"

namespace tollgate {

void LogSink::AppendAll(std::vector<Event> events, std::vector<Appended>* results) {
  // One group: a stage's batch lands in the log whole or not at all.
  std::vector<std::future<AppendResult>> futures = log_.AppendGroupAsync(std::move(events));
  results->clear();
  for (auto& f : futures) {
    AppendResult r = f.get();
    results->push_back({r.status, r.seq, r.duplicate});
  }
}

Status StoreLogView::EventsOfRequest(const std::string& request_id, std::vector<Event>* out) const {
  out->clear();
  AuditQuery q;
  q.request_id = request_id;
  q.limit = kMaxQueryLimit;
  for (;;) {
    AuditPage page;
    Status s = GetAuditLog(store_, QueryScope::Operator(), q, &page);
    if (!s.ok()) return s;
    for (auto& e : page.events) out->push_back(std::move(e));
    if (page.next_cursor.empty()) return Status::Ok();
    q.cursor = page.next_cursor;
  }
}

}  // namespace tollgate
