// Metrics: what GET /metrics serves (docs/operations.md), in the Prometheus
// text exposition format 0.0.4. Counters and histograms are a fold of the
// events this process appends (Observe, a LogSink listener: the log is the
// source of every number, as of every audit answer); gauges and the stage
// runners' counters are read when scraped (collectors). Counters start at
// zero with the process, as Prometheus expects.
//
// Label sets are bounded by our own vocabulary, never by what an agent
// sends: verdicts, rule kinds, approval outcomes, stable error codes, stage
// names, orgs, and the names of tools in the deployment's catalog (a tool
// the catalog does not hold is "other" at once). Whatever gets through,
// every folded family has a fixed cap (kMaxLabelValues, kMaxSeries) with an
// "other" bucket beyond it. No session, request or agent labels.
//
// Tenancy: the per-request families carry an `org` label, and
// MetricsVisibleTo cuts the exposition down to one org's series for an
// org-scoped scraper (docs/operations.md). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "audit/event_log.h"
#include "core/event.h"
#include "runtime/stage_runner.h"

namespace tollgate {

// Writes families of samples in the text format.
class MetricsText {
 public:
  // `type`: counter, gauge or histogram. Once per family, before its samples.
  void Family(const std::string& name, const char* type, const std::string& help);
  // labels as {{"stage", "decide"}}; values are escaped here.
  void Sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
              double value);
  // A histogram's _bucket (cumulative, with le), _sum and _count samples
  // from per-bucket counts (the last above every bound).
  void Histogram(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
                 const std::vector<double>& bounds, const std::vector<uint64_t>& counts, double sum);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

// The exposition `text` as a scraper of org `org_id` may see it: the
// samples whose `org` label is that org, and no other sample (a series
// without an org label is deployment-wide: log, stages, lag, pending
// approvals, and so tells of every org's activity). "*" (a deployment-wide
// scraper) sees all of `text`. HELP and TYPE lines stay. The overflow
// bucket org="other" is nobody's: an org named "other" sees no sample.
std::string MetricsVisibleTo(const std::string& org_id, const std::string& text);

class Metrics {
 public:
  using Collector = std::function<void(MetricsText&)>;
  // Whether `tool` is in the deployment's catalog (deploy/observability.h
  // builds it: built-ins, the policy's tools and aliases, the CLI and
  // upstream MCP tools the executors hold). Called under the metrics lock
  // for an execution.completed whose tool is not a built-in.
  using ToolCatalog = std::function<bool(const std::string& tool)>;

  // Per folded family: each label takes at most this many distinct values
  // (the first seen), later ones are "other"; and at most kMaxSeries label
  // sets, a later one counting in the set whose every label is "other".
  static constexpr size_t kMaxLabelValues = 1000;
  static constexpr size_t kMaxSeries = 10000;

  void Observe(const std::vector<Event>& events);
  // Families written at every scrape, after the folded ones.
  void AddCollector(Collector c);
  // Unset (the default): only built-in tools keep their name.
  void SetToolCatalog(ToolCatalog catalog);
  std::string Render() const;

  // The bucket bounds of every latency histogram (seconds).
  static const std::vector<double>& Buckets();

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bucket, not cumulative
    double sum = 0;
    uint64_t count = 0;
    void Add(double v);
  };
  using Labels = std::vector<std::pair<std::string, std::string>>;
  void Count(const std::string& family, Labels labels, double by = 1);
  void Measure(const std::string& family, Labels labels, double value);
  // `labels` with each value past its label's cap (kMaxLabelValues) "other".
  Labels Bound(const std::string& family, Labels labels);
  void End(const Event& e, const std::string& outcome);
  std::string ToolLabel(const std::string& tool) const;

  mutable std::mutex mu_;
  ToolCatalog catalog_;
  // family -> label name -> the values it has taken.
  std::map<std::string, std::map<std::string, std::set<std::string>>> label_values_;
  std::map<std::string, std::map<Labels, double>> counters_;
  std::map<std::string, std::map<Labels, Histogram>> histograms_;
  // request.received time of requests still under way (org \n id).
  std::unordered_map<std::string, int64_t> open_;
  std::vector<Collector> collectors_;
};

// The stage runners' counters, per-batch time histograms (process,
// append, publish) and input lag by topic and partition, as `up` and each
// `tollgate stage` process serve them. `runners`: (stage name, runner).
void WriteRunnerMetrics(MetricsText& t,
                        const std::vector<std::pair<std::string, const StageRunner*>>& runners);

// The log this process appends to (`up`'s, or a stage process's copy): head
// seq, size, and the write and fsync latency histograms.
void WriteLogMetrics(MetricsText& t, const EventLog& log);

}  // namespace tollgate
