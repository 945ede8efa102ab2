#include "deploy/observability.h"

#include "core/log.h"

namespace tollgate {

void WriteBudgetMetrics(MetricsText& t, const DecideStage* decide) {
  if (decide == nullptr) return;
  t.Family("tollgate_budget_usage_ratio", "gauge",
           "Per org and budget: the largest share of the limit any one holder (org, agent or session, by the "
           "budget's scope) has used in its current window; 1 = the next call is denied.");
  for (const BudgetShare& s : decide->BudgetShares(NowMicros())) {
    t.Sample("tollgate_budget_usage_ratio", {{"org", s.org}, {"budget", s.budget}}, s.share);
  }
}

Status StartOtlpExport(const std::string& endpoint, LogSink& sink, Metrics& metrics,
                       std::shared_ptr<OtlpExporter>* out) {
  if (endpoint.empty()) return Status::Ok();
  if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0) {
    return Status::Error("E_INVALID_ARGS", "--otlp-endpoint must be an http:// or https:// URL, not '" + endpoint + "'");
  }
  OtlpOptions o;
  o.endpoint = endpoint;
  auto exporter = std::make_shared<OtlpExporter>(o);
  sink.AddListener([exporter](const std::vector<Event>& events) { exporter->Observe(events); });
  metrics.AddCollector([exporter](MetricsText& t) {
    t.Family("tollgate_otlp_spans_total", "counter",
             "Spans of ended tool calls: exported (queued for the collector) or dropped (not exported).");
    t.Sample("tollgate_otlp_spans_total", {{"outcome", "ended"}}, static_cast<double>(exporter->spans()));
    t.Sample("tollgate_otlp_spans_total", {{"outcome", "dropped"}}, static_cast<double>(exporter->dropped()));
    const WebhookNotifier& w = exporter->poster();
    t.Family("tollgate_otlp_batches_total", "counter", "OTLP export POSTs by outcome.");
    t.Sample("tollgate_otlp_batches_total", {{"outcome", "delivered"}}, static_cast<double>(w.delivered.load()));
    t.Sample("tollgate_otlp_batches_total", {{"outcome", "failed"}}, static_cast<double>(w.failed.load()));
    t.Sample("tollgate_otlp_batches_total", {{"outcome", "dropped"}}, static_cast<double>(w.dropped.load()));
  });
  *out = std::move(exporter);
  log::Info({"otlp"}) << "exporting spans to " << OtlpExporter::TracesUrl(endpoint) << "\n";
  return Status::Ok();
}

}  // namespace tollgate
