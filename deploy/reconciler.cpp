#include "deploy/reconciler.h"

#include <iostream>

#include "audit/log_sink.h"
#include "audit/open_requests.h"
#include "core/log.h"
#include "core/request_state.h"
#include "core/trace.h"

namespace tollgate {

std::optional<Redrive> PlanRedrive(const std::vector<Event>& events, const Topics& topics, int64_t now_us) {
  RequestState st = Summarize(events);
  if (st.received == nullptr || st.terminal()) return std::nullopt;
  const Json& data = st.received->data;
  // What it re-sends goes on in the request's trace, as the stages' outputs do.
  const std::string tp = RequestTraceparent(events);
  auto traced = [&tp](Message m) {
    StampTraceparent(tp, &m);
    return m;
  };
  Flow flow{data.value("request", Json::object()), data.value("received_at", ""), data.value("args_hash", ""),
            nullptr};
  auto redacted = data.find("redacted");
  if (redacted != data.end() && redacted->is_array() && !redacted->empty()) {
    // The log holds the request with its secrets redacted; re-driving it would
    // run the tool with "[REDACTED]" values. End it, saying so.
    const std::string msg =
        "the request was received but the broker lost it before it finished, and its "
        "secret-bearing args are not kept in the log; submit it again";
    const Event& rx = *st.received;
    Event e = RequestRejectedEvent({{"org_id", rx.org_id},
                                    {"agent_id", rx.agent_id},
                                    {"session_id", rx.session_id},
                                    {"request_id", rx.request_id},
                                    {"tool", rx.tool}},
                                   errc::kRequestLost, msg, "reconcile", "reconciler", now_us);
    StampTraceparent(tp, &e);
    Json decision = st.decision ? WithoutProvenance(st.decision->data) : Json();
    Json result =
        MakeResult(flow.request, "failed", decision, nullptr, ToolResultError(errc::kRequestLost, msg, true));
    return Redrive{traced(MessageFor(topics.results(), flow.request, result)), std::move(e), 0};
  }
  if (st.decision == nullptr)
    return Redrive{traced(MessageFor(topics.decide(), flow.request, flow.ToJson())), {}, -1};
  flow.decision = WithoutProvenance(st.decision->data);
  const std::string verdict = st.verdict();
  if (verdict == "ask" && st.approval_settled == nullptr) {
    // A pending approval lives in the log: the approve stage rebuilds it
    // (deadline included) at start, so re-sending it would only re-ask.
    if (st.approval_requested != nullptr) return std::nullopt;
    return Redrive{traced(MessageFor(topics.approve(), flow.request, flow.ToJson())), {}, -1};
  }
  if (st.cleared()) {
    return Redrive{traced(MessageFor(topics.execute(), flow.request, flow.ToJson())), {}, -1};
  }
  return std::nullopt;
}

Status Reconcile(const LogStore& store, EventSink& sink, Producer& producer, const Topics& topics,
                 ResultPublisher* results, ReconcileStats* stats) {
  StoreLogView view(store);
  std::vector<OpenRequest> candidates;
  Status s = UnfinishedRequests(store, &candidates);
  if (!s.ok()) return s;
  const int64_t now = NowMicros();
  for (const OpenRequest& open : candidates) {
    std::vector<Event> events;
    s = view.EventsOfRequest(open.org_id, open.request_id, &events);
    if (!s.ok()) return s;
    if (events.empty()) continue;
    ++stats->requests_seen;
    auto plan = PlanRedrive(events, topics, now);
    if (!plan) continue;
    if (plan->message.bytes() > producer.max_message_bytes()) {
      // One request whose flow cannot be sent (a log written before
      // outputs were bounded) must not stop the start: it ends, with an
      // error result, and the rest are re-driven.
      Event e;
      Message result;
      if (!EndRequestForOversizeOutput(plan->message, topics, "reconciler", "reconciler", now, &e, &result,
                                       producer.max_message_bytes())) {
        continue;
      }
      log::Error({"reconciler", open.request_id})
          << open.request_id << " of org " << open.org_id << " cannot be re-driven (its message is "
          << plan->message.bytes() << " bytes); it ends with " << errc::kOutputTooLarge << "\n";
      const std::string tp = TraceparentOf(plan->message);
      StampTraceparent(tp, &result);
      StampTraceparent(tp, &e);
      plan->message = std::move(result);
      plan->event = std::move(e);
    }
    if (plan->event) {
      uint64_t seq = 0;
      s = AppendOne(sink, *plan->event, &seq);
      if (!s.ok()) return s;  // fail closed: publish nothing the log lacks
      SetLogSeq(&plan->message, seq);
      ++stats->failed_closed;
    } else {
      ++stats->redriven;
    }
    if (results != nullptr) s = results->Route(&plan->message);
    if (s.ok()) s = producer.Send(plan->message);
    if (!s.ok()) return s;
  }
  return producer.Flush(std::chrono::seconds(30));
}

}  // namespace tollgate
