// LogHistory (core/stage.h) over the local RocksDB log: what every stage
// folds at start, read through the log's indexes. `log` outlives it.
#pragma once

#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "core/stage.h"

namespace tollgate {

class StoreHistory : public LogHistory {
 public:
  explicit StoreHistory(const EventLog& log) : log_(log), view_(log.store()) {}
  uint64_t head_seq() const override { return log_.head_seq(); }
  Status ReadEvent(uint64_t seq, Event* out) const override { return log_.store().ReadEvent(seq, out); }
  Status ForEachOpenApprovalEvent(const std::function<void(const Event&)>& visit) const override;
  const LogView& store() const override { return view_; }

 private:
  const EventLog& log_;
  StoreLogView view_;
};

}  // namespace tollgate
