// What `up` and a stage process add for operators beside their stages
// (docs/operations.md): the budget gauge read from decide's state, and the
// OTLP span export fed by the log sink.
#pragma once

#include <memory>
#include <string>

#include "api/metrics.h"
#include "api/otlp_export.h"
#include "audit/log_sink.h"
#include "core/status.h"
#include "decide/decide_stage.h"

namespace tollgate {

// tollgate_budget_usage_ratio (decide/budget_shares.h) from `decide`'s
// folded state now; nothing when `decide` is null (decide runs elsewhere).
void WriteBudgetMetrics(MetricsText& t, const DecideStage* decide);

// With `endpoint` set: an OtlpExporter (api/otlp_export.h) listening on
// `sink`, its counters on `metrics`. E_INVALID_ARGS for an endpoint that
// is not an http(s) URL.
Status StartOtlpExport(const std::string& endpoint, LogSink& sink, Metrics& metrics,
                       std::shared_ptr<OtlpExporter>* out);

}  // namespace tollgate
