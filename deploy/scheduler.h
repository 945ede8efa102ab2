// The scheduler: fires the scheduled calls of the log (core/schedules.h) in
// the process that writes the log (`up`, or the keeper of the distributed
// deployment), as the reconciler re-drives requests from it.
//
// At start it folds every schedule call of the log (the by-tool index:
// O(schedule calls), not O(log)), then every group appended through the
// sink (a listener). Pending schedules wait in a min-heap by due time; at
// due time (at once for those overdue after a restart) it publishes on the
// requests topic the call the create's request.received holds: same org,
// agent and session, tool, args and action, request_id FireRequestIdOf,
// metadata {scheduled_by, schedule_request_id}, signed with the service key
// on the agent's behalf. Ingest checks it against the log; it then goes
// through decide like any call, received_at being the fire time.
//
// Fires once: before publishing, the log is asked whether the fire request
// is already there (received or rejected: then it has fired); a publish
// repeated after a crash, or a resend when no request.received came within
// resend_after, is the same request_id and content, which ingest
// de-duplicates. A schedule whose cancel the fold holds never fires.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "audit/log_sink.h"
#include "audit/log_store.h"
#include "core/jwt.h"
#include "runtime/kafka_bus.h"

namespace tollgate {

struct SchedulerOptions {
  BusConfig bus;                            // where the requests topic is
  std::shared_ptr<const JwtSigner> signer;  // the service key
  // A fire the log has not seen received by then is published again.
  std::chrono::milliseconds resend_after{30'000};
};

class Scheduler {
 public:
  // Registers on `sink` (which must outlive nothing of this: the listener
  // holds the shared state), folds `store`, then starts the firing thread.
  static Status Start(const LogStore& store, LogSink& sink, SchedulerOptions options,
                      std::unique_ptr<Scheduler>* out);
  // Stops the thread; a fire in progress completes.
  ~Scheduler();

  size_t pending() const;      // scheduled, not yet seen fired or cancelled
  uint64_t published() const;  // fire messages sent (resends included)

 private:
  struct State;
  Scheduler() = default;
  void Loop();
  // Publishes the fire of `schedule_id`; false when the log shows it fired.
  bool Fire(const std::string& schedule_id, Status* error);

  const LogStore* store_ = nullptr;
  SchedulerOptions options_;
  std::shared_ptr<State> state_;
  std::unique_ptr<Producer> producer_;
  std::atomic<uint64_t> published_{0};
  std::thread thread_;
};

}  // namespace tollgate
