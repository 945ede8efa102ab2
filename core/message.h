// The contract's view of a message bus: the topic set and a message as a
// stage sees it. No Kafka here: stages (which link the contract only) see
// these types; runtime/kafka_bus.h moves them over Kafka.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tollgate {

// The topic set of docs/architecture.md under a configurable prefix.
struct Topics {
  std::string prefix = "tollgate.";
  std::string requests() const { return prefix + "requests"; }
  std::string decide() const { return prefix + "decide"; }
  std::string approve() const { return prefix + "approve"; }
  std::string execute() const { return prefix + "execute"; }
  // The logical results topic: stages address results here, and the stage
  // runner's result publisher (runtime/result_publisher.h) signs each one
  // and sends it to its org's topic, results_for(org).
  std::string results() const { return prefix + "results"; }
  // `<prefix>results.<org>` (the org's name made topic-safe:
  // TopicSafeName), so that a Kafka ACL can give each org its own results;
  // results() itself when shared_results (the compatibility flag
  // --shared-results-topic: every org's results on one topic).
  std::string results_for(const std::string& org) const;
  bool shared_results = false;
  std::string approval_responses() const { return prefix + "approval-responses"; }
  std::string events() const { return prefix + "events"; }
  std::vector<std::string> All() const {
    return {requests(), decide(), approve(), execute(), results(), approval_responses(), events()};
  }
};

// Header names carried on every pipeline message.
inline constexpr const char* kHeaderRequestId = "request_id";
inline constexpr const char* kHeaderSessionId = "session_id";
inline constexpr const char* kHeaderTraceId = "trace_id";
// The W3C trace context of the request (core/trace.h): the agent's, or one
// ingest started. Set on every output by the stage runner.
inline constexpr const char* kHeaderTraceparent = "traceparent";
// Set by the stage runner on every output of a message: the StageContext
// source of the input it was made from (which stage input, where).
inline constexpr const char* kHeaderSource = "tollgate_source";
// On the events topic (the distributed deployment): the event's id.
inline constexpr const char* kHeaderEventId = "tollgate_event_id";

// The topic set `topic` belongs to: true (and *out's prefix set) when
// `topic` is one of a Topics' names under some prefix.
inline bool TopicsOf(const std::string& topic, Topics* out) {
  for (const std::string& name : Topics{""}.All()) {
    if (topic.size() >= name.size() && topic.compare(topic.size() - name.size(), name.size(), name) == 0) {
      out->prefix = topic.substr(0, topic.size() - name.size());
      return true;
    }
  }
  return false;
}

// `name` as the tail of a Kafka topic name: bytes of [A-Za-z0-9_-] as they
// are, any other byte as '.' and two lower-case hex digits, so distinct
// names stay distinct and a name cannot reach into another's (no '.' of
// its own). A result longer than 180 bytes is ".h" and 40 hex digits of
// its SHA-256 instead (Kafka names end at 249 bytes).
std::string TopicSafeName(const std::string& name);

// The largest message tollgate produces: its producers' message.max.bytes
// (a broker must accept as much; Apache Kafka's own default is ~1 MiB). It
// leaves room for a flow that carries a request of ingest's largest size
// plus a decision (bounded, decide/decide_stage.cpp). The stage runner and
// the reconciler never send a larger output: the request it belongs to ends
// with E_OUTPUT_TOO_LARGE instead (docs/errors.md), so one request cannot
// wedge a stage by failing every transaction it is in.
inline constexpr size_t kMaxMessageBytes = 4 << 20;

// A Kafka message as a stage sees it. Headers carry request_id, session_id,
// trace_id and traceparent (docs/architecture.md).
struct Message {
  std::string topic;
  int32_t partition = -1;
  int64_t offset = -1;
  std::string key;
  std::string value;
  std::map<std::string, std::string> headers;
  int64_t timestamp_ms = 0;  // as read: the broker's record timestamp; unused when sent
  // What the message counts for against kMaxMessageBytes: key, value,
  // headers and a margin for the record's framing.
  size_t bytes() const {
    size_t n = key.size() + value.size() + 512;
    for (const auto& [k, v] : headers) n += k.size() + v.size() + 16;
    return n;
  }
};

}  // namespace tollgate
