// The embedded deployment's glue between stages and the local log: an
// EventSink that appends to an EventLog (one group commit per batch) and a
// LogView that reads a request's events through the request index.
// Thread-safe: several stage runners share one of each.
#pragma once

#include <functional>
#include <mutex>

#include "audit/event_log.h"
#include "audit/request_cache.h"
#include "core/stage.h"

namespace tollgate {

class LogSink : public EventSink, public AppendFeed {
 public:
  // Sees every group this sink appended, after it is durable, with `seq` set
  // on each event (prev_hash/hash are not). Re-appended (duplicate) events
  // are passed again with their stored seq, so a listener must be idempotent
  // (key its state by event id or request id). Called on the appending
  // stage's thread: a listener guards its own state. It runs before the
  // sink's RequestCache has the group, so it must not read through a
  // CachedLogView.
  using Listener = std::function<void(const std::vector<Event>&)>;

  // `cache` (optional, outlives the sink) gets every durable group.
  explicit LogSink(EventLog& log, RequestCache* cache = nullptr) : log_(log), cache_(cache) {}
  void AppendAll(std::vector<Event> events, std::vector<Appended>* results) override;
  // Register before the stages start; listeners live as long as the sink.
  void AddListener(Listener listener);
  // AppendFeed: `s` as a listener.
  void Subscribe(LogSubscriber* s) override {
    AddListener([s](const std::vector<Event>& events) { s->OnAppended(events); });
  }

 private:
  EventLog& log_;
  RequestCache* cache_;
  std::mutex listeners_mu_;
  std::vector<Listener> listeners_;
};

class StoreLogView : public LogView {
 public:
  explicit StoreLogView(const LogStore& store) : store_(store) {}
  Status EventsOfRequest(const std::string& org_id, const std::string& request_id,
                         std::vector<Event>* out) const override;

 private:
  const LogStore& store_;
};

}  // namespace tollgate
