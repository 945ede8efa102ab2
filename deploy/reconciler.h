// The reconciler: at start (and when a consumer finds its offset gone), it
// re-drives every request the log shows unfinished, because the embedded
// broker keeps messages in memory only and the log, not the broker, is the
// record. Stages recognise a re-driven copy of a step already in the log
// and ignore it, so re-driving is safe even when the original is still in
// a topic.
#pragma once

#include <optional>

#include "audit/event_log.h"
#include "core/messages.h"
#include "core/stage.h"
#include "runtime/kafka_bus.h"
#include "runtime/result_publisher.h"

namespace tollgate {

// What to do for one request, given its events in log order. Pure.
struct Redrive {
  Message message;             // to publish
  std::optional<Event> event;  // to append first (requests that cannot be re-driven)
  int log_seq_of_event = -1;   // as StageOutput
};
std::optional<Redrive> PlanRedrive(const std::vector<Event>& events, const Topics& topics, int64_t now_us);

struct ReconcileStats {
  uint64_t requests_seen = 0;  // unfinished (the open-request index's), not all

  uint64_t redriven = 0;
  // Could not be re-driven: ended with E_REQUEST_LOST (redacted secrets) or
  // E_OUTPUT_TOO_LARGE (its message is over kMaxMessageBytes: one such
  // request never stops the start).
  uint64_t failed_closed = 0;
};

// Walks the requests the log shows unfinished (audit/open_requests.h: the
// cost is O(unfinished), not O(history)) and applies PlanRedrive; events
// are appended through `sink` (the pipeline's, so its RequestCache and
// listeners see them: nothing may write the log behind the sink's back).
// Results go out through `results` (signed, to their org's topic) when
// it is not null.
Status Reconcile(const LogStore& store, EventSink& sink, Producer& producer, const Topics& topics,
                 ResultPublisher* results, ReconcileStats* stats);

}  // namespace tollgate
