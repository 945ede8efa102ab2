#include "observe/otlp_export.h"

#include "audit/log_format.h"
#include "core/messages.h"
#include "core/sha256.h"
#include "core/trace.h"

namespace tollgate {
namespace {

Json Attr(const char* key, const std::string& value) {
  return {{"key", key}, {"value", {{"stringValue", value}}}};
}

std::string Nanos(int64_t us) { return std::to_string(us) + "000"; }

// What the ending event says about the call.
void End(const Event& e, OtlpSpan* s) {
  s->end_us = e.time_us;
  const Json& d = e.data;
  if (e.type == ev::kExecutionCompleted) {
    const Json& r = d.contains("result") && d["result"].is_object() ? d["result"] : Json::object();
    const bool ok = r.value("success", false);
    s->outcome = ok ? "completed" : "failed";
    if (!ok && r.contains("error") && r["error"].is_object()) s->error_code = r["error"].value("code", "");
  } else if (e.type == ev::kDecisionMade) {
    s->outcome = "denied";
    s->error_code = d.value("error_code", "");
  } else if (e.type == ev::kApprovalDenied) {
    s->outcome = "denied";
    s->error_code = errc::kApprovalDenied;
  } else if (e.type == ev::kApprovalExpired) {
    s->outcome = "expired";
    s->error_code = errc::kApprovalExpired;
  } else {
    s->outcome = "rejected";
    if (d.contains("error") && d["error"].is_object()) s->error_code = d["error"].value("code", "");
  }
  if (s->outcome != "completed" && s->error_code.empty()) s->error_code = "E_" + s->outcome;
}

}  // namespace

OtlpExporter::OtlpExporter(OtlpOptions options) : options_(std::move(options)) {
  WebhookOptions w;
  w.urls = {TracesUrl(options_.endpoint)};
  w.max_queue = 100;  // batches
  w.max_attempts = options_.max_attempts;
  w.what = "OTLP export to";
  w.log_stage = "otlp";
  w.user_agent = "tollgate-otlp/1";
  poster_ = std::make_unique<WebhookNotifier>(std::move(w));
  thread_ = std::thread([this] { Loop(); });
}

OtlpExporter::~OtlpExporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string OtlpExporter::TracesUrl(const std::string& endpoint) {
  std::string u = endpoint;
  while (!u.empty() && u.back() == '/') u.pop_back();
  const std::string suffix = "/v1/traces";
  if (u.size() >= suffix.size() && u.compare(u.size() - suffix.size(), suffix.size(), suffix) == 0) return u;
  return u + suffix;
}

Json OtlpExporter::Body(const std::vector<OtlpSpan>& spans, const std::string& service_name) {
  Json list = Json::array();
  for (const OtlpSpan& s : spans) {
    std::string tp = IsValidTraceparent(s.traceparent) ? s.traceparent : NewTraceparent(s.org, s.request_id);
    Json attrs = Json::array({Attr("gen_ai.operation.name", "execute_tool"), Attr("gen_ai.tool.name", s.tool),
                              Attr("gen_ai.tool.call.id", s.request_id), Attr("gen_ai.agent.id", s.agent),
                              Attr("gen_ai.conversation.id", s.session), Attr("tollgate.org_id", s.org),
                              Attr("tollgate.outcome", s.outcome)});
    if (!s.verdict.empty()) attrs.push_back(Attr("tollgate.verdict", s.verdict));
    if (!s.error_code.empty()) attrs.push_back(Attr("error.type", s.error_code));
    Json events = Json::array();
    for (const auto& [type, at] : s.events) events.push_back({{"timeUnixNano", Nanos(at)}, {"name", type}});
    Json status = s.outcome == "completed" ? Json{{"code", 1}} : Json{{"code", 2}, {"message", s.error_code}};
    list.push_back({{"traceId", tp.substr(3, 32)},
                    {"spanId", Sha256Hex("tollgate-span\n" + s.org + "\n" + s.request_id).substr(0, 16)},
                    {"parentSpanId", tp.substr(36, 16)},
                    {"name", "execute_tool " + s.tool},
                    {"kind", 1},  // SPAN_KIND_INTERNAL
                    {"startTimeUnixNano", Nanos(s.start_us)},
                    {"endTimeUnixNano", Nanos(std::max(s.end_us, s.start_us))},
                    {"attributes", std::move(attrs)},
                    {"events", std::move(events)},
                    {"status", std::move(status)}});
  }
  return {{"resourceSpans",
           Json::array({{{"resource", {{"attributes", Json::array({Attr("service.name", service_name)})}}},
                         {"scopeSpans", Json::array({{{"scope", {{"name", "tollgate"}, {"version", "1"}}},
                                                      {"spans", std::move(list)}}})}}})}};
}

void OtlpExporter::Observe(const std::vector<Event>& events) {
  std::unique_lock<std::mutex> lock(mu_);
  for (const Event& e : events) {
    if (e.request_id.empty()) continue;
    const std::string key = e.org_id + "\n" + e.request_id;
    const logfmt::OpenOp op = logfmt::OpenIndexOp(e);
    auto it = open_.find(key);
    if (op == logfmt::OpenOp::kOpen) {
      if (it != open_.end()) continue;  // a copy
      if (open_.size() >= options_.max_open) {
        ++dropped_;
        continue;
      }
      OtlpSpan s;
      s.org = e.org_id;
      s.request_id = e.request_id;
      s.tool = e.tool;
      s.agent = e.agent_id;
      s.session = e.session_id;
      s.traceparent = TraceparentOf(e);
      s.start_us = e.time_us;
      it = open_.emplace(key, std::move(s)).first;
    }
    if (it == open_.end()) continue;  // received before this process started
    OtlpSpan& s = it->second;
    if (s.events.size() < options_.max_events_per_span) s.events.emplace_back(e.type, e.time_us);
    if (e.type == ev::kDecisionMade) s.verdict = e.data.value("verdict", "");
    if (op != logfmt::OpenOp::kClose) continue;
    End(e, &s);
    ended_.push_back(std::move(s));
    open_.erase(it);
    ++spans_;
    if (ended_.size() >= options_.max_batch) Flush(lock);
  }
}

void OtlpExporter::Flush(std::unique_lock<std::mutex>& lock) {
  if (ended_.empty()) return;
  std::vector<OtlpSpan> batch;
  batch.swap(ended_);
  ++batches_;
  // The body is built and queued without the lock: appending threads call
  // Observe.
  lock.unlock();
  const bool queued = poster_->Enqueue(Body(batch, options_.service_name));
  lock.lock();
  if (!queued) dropped_ += batch.size();
}

void OtlpExporter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, options_.flush_every, [this] { return stopping_; });
    Flush(lock);
  }
}

uint64_t OtlpExporter::batches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_;
}

uint64_t OtlpExporter::spans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spans_;
}

uint64_t OtlpExporter::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace tollgate
