// OtlpExporter: one OpenTelemetry span per tool call, built from the log
// and sent as OTLP/HTTP JSON to a configured collector (`up
// --otlp-endpoint URL`; docs/operations.md, "Trace context"). Like
// Metrics it is a LogSink listener: a span is the events of one request,
// from its request.received to the event that ends it (the open-request
// index's rule, audit/log_format.h OpenIndexOp), so the trace says what the
// log says.
//
// The span follows the OpenTelemetry GenAI conventions: name
// "execute_tool {tool}", kind INTERNAL, in the request's W3C trace
// (trace-id of its traceparent, parent its parent-id), attributes
// gen_ai.operation.name, gen_ai.tool.name, gen_ai.tool.call.id (the
// request_id), gen_ai.agent.id, gen_ai.conversation.id (the session),
// tollgate.org_id, tollgate.verdict, tollgate.outcome and error.type (the
// error code) when the call did not complete; status ERROR then. Every
// event of the request is a span event (its type and time). Its span id is
// derived from (org, request_id), so a span sent twice is the same span.
// Nothing from a call's arguments or result is exported.
//
// Delivery is a courtesy, like the approval webhook (it reuses its queue:
// observe/webhook.h): spans are batched (every second, or 512 at once),
// retried with backoff, and dropped and counted when the collector is down
// for long; the log is the record. Requests received before this process
// started are not exported. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/event.h"
#include "observe/webhook.h"

namespace tollgate {

struct OtlpOptions {
  // The collector: "http://host:4318" (spans go to /v1/traces) or the full
  // URL of its traces path.
  std::string endpoint;
  std::string service_name = "tollgate";
  size_t max_batch = 512;                       // spans per POST
  std::chrono::milliseconds flush_every{1000};  // a batch waits at most this long
  size_t max_open = 200'000;                    // requests tracked at once; past this, not exported
  size_t max_events_per_span = 64;              // span events kept per request
  int max_attempts = 5;
};

// One request's span as it is being built.
struct OtlpSpan {
  std::string org, request_id, tool, agent, session, traceparent;
  int64_t start_us = 0, end_us = 0;
  std::string verdict, outcome, error_code;
  std::vector<std::pair<std::string, int64_t>> events;  // type, time
};

class OtlpExporter {
 public:
  explicit OtlpExporter(OtlpOptions options);
  // Queues what has ended, then stops (a batch still queued or being
  // retried then is dropped: at most the last second's spans).
  ~OtlpExporter();

  // The LogSink listener.
  void Observe(const std::vector<Event>& events);

  // POST bodies queued (one per batch), spans ended, and spans never
  // exported (the open-request cap, or the queue full).
  uint64_t batches() const;
  uint64_t spans() const;
  uint64_t dropped() const;
  const WebhookNotifier& poster() const { return *poster_; }

  // The traces URL for `endpoint` (…/v1/traces appended unless present).
  static std::string TracesUrl(const std::string& endpoint);
  // The OTLP JSON ExportTraceServiceRequest for `spans` (pure; tests).
  static Json Body(const std::vector<OtlpSpan>& spans, const std::string& service_name);

 private:
  void Flush(std::unique_lock<std::mutex>& lock);  // `lock` holds mu_; released while posting
  void Loop();

  OtlpOptions options_;
  std::unique_ptr<WebhookNotifier> poster_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, OtlpSpan> open_;  // by org \n request_id
  std::vector<OtlpSpan> ended_;
  uint64_t batches_ = 0, spans_ = 0, dropped_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tollgate
