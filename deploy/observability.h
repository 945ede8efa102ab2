// What `up` and a stage process add for operators beside their stages
// (docs/operations.md): the budget gauge read from decide's state, the
// tool catalog /metrics labels tools by, and the OTLP span export fed by
// the log sink.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "api/metrics.h"
#include "audit/log_sink.h"
#include "core/status.h"
#include "decide/decide_stage.h"
#include "decide/policy_in_force.h"
#include "deploy/local_log.h"
#include "deploy/notify_deliveries.h"
#include "execute/mcp_upstream.h"
#include "observe/approval_webhooks.h"
#include "observe/otlp_export.h"
#include "runtime/event_follower.h"

namespace tollgate {

// tollgate_budget_usage_ratio (decide/budget_shares.h) from `decide`'s
// folded state now; nothing when `decide` is null (decide runs elsewhere).
void WriteBudgetMetrics(MetricsText& t, const DecideStage* decide);

// The approvers' webhooks (observe/approval_webhooks.h) subscribed to
// `sink`, when `urls` is not empty (*out stays null otherwise).
void StartApprovalWebhooks(const std::vector<std::string>& urls, const LogView* view, LogSink& sink,
                           std::unique_ptr<ApprovalWebhooks>* out);

// Duragent's notify deliveries over `local`'s log (deploy/notify_deliveries.h):
// `no` completed with the view and the default secret derived from `key`,
// started from the log's head, and subscribed to its sink. Both deployments'
// one way to start them.
Status StartNotifyOnLog(NotifyOptions no, const EventsKey& key, LocalLog& local,
                        std::unique_ptr<NotifyDeliveries>* out);

// The approval webhook's counters (tollgate_webhook_*).
void WriteWebhookMetrics(MetricsText& t, const WebhookNotifier& w);

// The deployment's tool catalog for Metrics::SetToolCatalog: the tool
// names and http_request aliases of the policy in force (`policy`), the CLI
// tools of the execute policy's tools_dir (read from `policy_path`, as
// deploy/tool_directory.h does) and the tools `upstreams` last listed
// (null: none; the distributed keeper runs no execute, so it reports
// upstream MCP tools as "other"). Built-ins are Metrics' own. The names are
// read again at most once a second, when a name not among them is asked.
Metrics::ToolCatalog DeploymentToolCatalog(std::function<PolicyInForce()> policy,
                                           const std::string& policy_path, const std::string& data_dir,
                                           std::shared_ptr<const McpUpstreams> upstreams = nullptr);

// With `endpoint` set: an OtlpExporter (observe/otlp_export.h) listening on
// `sink`, its counters on `metrics`. E_INVALID_ARGS for an endpoint that
// is not an http(s) URL.
Status StartOtlpExport(const std::string& endpoint, LogSink& sink, Metrics& metrics,
                       std::shared_ptr<OtlpExporter>* out);

}  // namespace tollgate
