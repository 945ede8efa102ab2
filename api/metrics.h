// Metrics: what GET /metrics serves (docs/operations.md), in the Prometheus
// text exposition format 0.0.4. Counters and histograms are a fold of the
// events this process appends (Observe, a LogSink listener: the log is the
// source of every number, as of every audit answer); gauges and the stage
// runners' counters are read when scraped (collectors). Counters start at
// zero with the process, as Prometheus expects.
//
// Label sets are bounded by our own vocabulary, never by what an agent
// sends: verdicts, rule kinds, approval outcomes, stable error codes, stage
// names, and the names of tools that ran (only tools the policy knows and
// an executor has run; anything else is "other"). No session, request or
// agent labels. Thread-safe.
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
  void Sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels, double value);
  // A histogram's _bucket (cumulative, with le), _sum and _count samples
  // from per-bucket counts (the last above every bound).
  void Histogram(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
                 const std::vector<double>& bounds, const std::vector<uint64_t>& counts, double sum);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

class Metrics {
 public:
  using Collector = std::function<void(MetricsText&)>;

  void Observe(const std::vector<Event>& events);
  // Families written at every scrape, after the folded ones.
  void AddCollector(Collector c);
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
  void Count(const std::string& family, Labels labels);
  void End(const Event& e, const std::string& outcome);
  std::string OrgLabel(const std::string& org);
  static constexpr size_t kMaxOrgLabels = 100;
  std::set<std::string> orgs_;

  mutable std::mutex mu_;
  std::map<std::string, std::map<Labels, double>> counters_;
  std::map<std::string, std::map<Labels, Histogram>> histograms_;
  // request.received time of requests still under way (org \n id).
  std::unordered_map<std::string, int64_t> open_;
  std::vector<Collector> collectors_;
};

// The stage runners' counters, per-batch time histograms (process,
// append, publish) and input lag by topic and partition, as `up` and each
// `tollgate stage` process serve them. `runners`: (stage name, runner).
void WriteRunnerMetrics(MetricsText& t, const std::vector<std::pair<std::string, const StageRunner*>>& runners);

// The log this process appends to (`up`'s, or a stage process's copy): head
// seq, size, and the write and fsync latency histograms.
void WriteLogMetrics(MetricsText& t, const EventLog& log);

}  // namespace tollgate
