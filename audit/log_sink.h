// The embedded deployment's glue between stages and the local log: an
// EventSink that appends to an EventLog (one group commit per batch) and a
// LogView that reads a request's events through the request index.
// Thread-safe: several stage runners share one of each.
#pragma once

#include "audit/event_log.h"
#include "core/stage.h"

namespace tollgate {

class LogSink : public EventSink {
 public:
  explicit LogSink(EventLog& log) : log_(log) {}
  void AppendAll(std::vector<Event> events, std::vector<Appended>* results) override;

 private:
  EventLog& log_;
};

class StoreLogView : public LogView {
 public:
  explicit StoreLogView(const LogStore& store) : store_(store) {}
  Status EventsOfRequest(const std::string& request_id, std::vector<Event>* out) const override;

 private:
  const LogStore& store_;
};

}  // namespace tollgate
