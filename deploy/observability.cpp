#include "deploy/observability.h"

#include <chrono>
#include <mutex>
#include <set>

#include "core/invocation.h"
#include "core/log.h"
#include "deploy/policy_source.h"
#include "deploy/tool_directory.h"
#include "execute/config.h"
#include "execute/tools/cli_tool.h"

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

namespace {

// The alias names of an http_request section, and the exact `tools:` names
// of a tier (a glob entry names no one tool).
void PolicyNames(const Json& tier, std::set<std::string>* out) {
  if (!tier.is_object()) return;
  if (auto h = tier.find("http_request"); h != tier.end() && h->is_object()) {
    if (auto a = h->find("aliases"); a != h->end() && a->is_object()) {
      for (auto it = a->begin(); it != a->end(); ++it) out->insert(it.key());
    }
  }
  if (auto t = tier.find("tools"); t != tier.end() && t->is_object()) {
    for (auto it = t->begin(); it != t->end(); ++it) {
      if (it.key().find_first_of("*?[\\") == std::string::npos) out->insert(McpToolPattern(it.key()));
    }
  }
  for (const char* nested : {"agents", "orgs"}) {
    if (auto n = tier.find(nested); n != tier.end() && n->is_object()) {
      for (const auto& [id, sub] : n->items()) PolicyNames(sub, out);
    }
  }
}

struct ToolCatalogCache {
  std::function<PolicyInForce()> policy;
  std::string tools_dir;
  std::shared_ptr<const McpUpstreams> upstreams;
  std::mutex mu;
  std::set<std::string> names;
  std::chrono::steady_clock::time_point read_at{};
  bool read = false;

  bool Has(const std::string& tool) {
    std::lock_guard<std::mutex> lock(mu);
    if (names.count(tool)) return true;
    const auto now = std::chrono::steady_clock::now();
    if (read && now - read_at < std::chrono::seconds(1)) return false;
    read = true;
    read_at = now;
    names.clear();
    const PolicyInForce p = policy ? policy() : PolicyInForce();
    if (p.has_policy()) PolicyNames(p.file()->doc(), &names);
    for (const ToolDescriptor& d : CliToolDescriptors(tools_dir)) names.insert(d.name);
    if (upstreams) {
      for (const ToolDescriptor& d : UpstreamDescriptors(upstreams->Describe())) names.insert(d.name);
    }
    return names.count(tool) > 0;
  }
};

}  // namespace

Metrics::ToolCatalog DeploymentToolCatalog(std::function<PolicyInForce()> policy,
                                           const std::string& policy_path, const std::string& data_dir,
                                           std::shared_ptr<const McpUpstreams> upstreams) {
  auto cache = std::make_shared<ToolCatalogCache>();
  ExecutePolicy ep;
  if (!LoadDeploymentExecutePolicy(policy_path, data_dir, &ep).ok()) ep = DefaultExecutePolicy(data_dir);
  cache->policy = std::move(policy);
  cache->tools_dir = ep.tools_dir;
  cache->upstreams = std::move(upstreams);
  return [cache](const std::string& tool) { return cache->Has(tool); };
}

Status StartOtlpExport(const std::string& endpoint, LogSink& sink, Metrics& metrics,
                       std::shared_ptr<OtlpExporter>* out) {
  if (endpoint.empty()) return Status::Ok();
  if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0) {
    return Status::Error("E_INVALID_ARGS",
                         "--otlp-endpoint must be an http:// or https:// URL, not '" + endpoint + "'");
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
    t.Sample("tollgate_otlp_batches_total", {{"outcome", "delivered"}},
             static_cast<double>(w.delivered.load()));
    t.Sample("tollgate_otlp_batches_total", {{"outcome", "failed"}}, static_cast<double>(w.failed.load()));
    t.Sample("tollgate_otlp_batches_total", {{"outcome", "dropped"}}, static_cast<double>(w.dropped.load()));
  });
  *out = std::move(exporter);
  log::Info({"otlp"}) << "exporting spans to " << OtlpExporter::TracesUrl(endpoint) << "\n";
  return Status::Ok();
}

void StartApprovalWebhooks(const std::vector<std::string>& urls, const LogView* view, LogSink& sink,
                           std::unique_ptr<ApprovalWebhooks>* out) {
  if (urls.empty()) return;
  WebhookOptions w;
  w.urls = urls;
  *out = std::make_unique<ApprovalWebhooks>(w, view);
  sink.Subscribe(out->get());
}

Status StartNotifyOnLog(NotifyOptions no, const EventsKey& key, LocalLog& local,
                        std::unique_ptr<NotifyDeliveries>* out) {
  no.view = local.store_view.get();
  const std::string derived = key.Derive("notify-webhook");
  Status s = NotifyDefaultSecret(no.data_dir,
                                 ToHex(reinterpret_cast<const uint8_t*>(derived.data()), derived.size()),
                                 &no.default_secret);
  if (s.ok()) s = NotifyDeliveries::Start(std::move(no), local.log->store(), local.log->head_seq(), out);
  if (!s.ok()) return s;
  NotifyDeliveries* n = out->get();
  local.sink->AddListener([n](const std::vector<Event>& events) { n->OnAppended(events); });
  return Status::Ok();
}

void WriteWebhookMetrics(MetricsText& t, const WebhookNotifier& w) {
  t.Family("tollgate_webhook_attempts_total", "counter", "Webhook POSTs tried (retries included).");
  t.Sample("tollgate_webhook_attempts_total", {}, static_cast<double>(w.attempts.load()));
  t.Family("tollgate_webhook_deliveries_total", "counter", "Webhook deliveries by outcome.");
  t.Sample("tollgate_webhook_deliveries_total", {{"outcome", "delivered"}},
           static_cast<double>(w.delivered.load()));
  t.Sample("tollgate_webhook_deliveries_total", {{"outcome", "failed"}},
           static_cast<double>(w.failed.load()));
  t.Sample("tollgate_webhook_deliveries_total", {{"outcome", "dropped"}},
           static_cast<double>(w.dropped.load()));
}

}  // namespace tollgate
