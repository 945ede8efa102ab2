#include "api/metrics.h"

#include <cmath>
#include <cstdio>
#include <string_view>

#include "core/tool_catalog.h"

namespace tollgate {
namespace {

constexpr size_t kMaxOpenRequests = 200'000;  // past this, durations are not tracked

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A word of our own vocabulary, or "other": [a-z0-9_.-], at most 40 bytes.
std::string Word(const std::string& s) {
  if (s.empty() || s.size() > 40) return "other";
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
      return "other";
  }
  return s;
}

// E_SOMETHING, or "other".
std::string Code(const std::string& s) {
  if (s.size() < 3 || s.size() > 40 || s.rfind("E_", 0) != 0) return "other";
  for (char c : s) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return "other";
  }
  return s;
}

constexpr const char* kOther = "other";

// Valid UTF-8 without control characters (what a label value may hold).
bool PrintableUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    const size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    // No overlong form, surrogate or code point past U+10FFFF.
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) ||
        (c == 0xf4 && c1 > 0x8f)) {
      return false;
    }
    i += n;
  }
  return true;
}

// An org as a label value. "other" is the overflow bucket, never an org's
// own series (an org named "other" counts there, and sees none of it).
std::string OrgValue(const std::string& org) {
  if (org.empty() || org == kOther || org.size() > 256 || !PrintableUtf8(org)) return kOther;
  return org;
}

// decision.rule's kind: "mode:ask@org" -> mode, "budget:b" -> budget.
std::string RuleKind(const std::string& rule) {
  const size_t end = rule.find_first_of(":@");
  return Word(rule.substr(0, end));
}

}  // namespace

void MetricsText::Family(const std::string& name, const char* type, const std::string& help) {
  out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void MetricsText::Sample(const std::string& name,
                         const std::vector<std::pair<std::string, std::string>>& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += "{";
    for (size_t i = 0; i < labels.size(); ++i) {
      out_ += (i ? "," : "") + labels[i].first + "=\"" + Escape(labels[i].second) + "\"";
    }
    out_ += "}";
  }
  out_ += " " + Number(value) + "\n";
}

const std::vector<double>& Metrics::Buckets() {
  static const std::vector<double> b{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                     0.5,   1,      2.5,   5,    10,    30,   60,  300};
  return b;
}

void Metrics::Histogram::Add(double v) {
  if (counts.empty()) counts.assign(Buckets().size() + 1, 0);
  size_t i = 0;
  while (i < Buckets().size() && v > Buckets()[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

Metrics::Labels Metrics::Bound(const std::string& family, Labels labels) {
  auto& values = label_values_[family];
  for (auto& [name, value] : labels) {
    if (value == kOther) continue;
    std::set<std::string>& seen = values[name];
    if (seen.count(value)) continue;
    if (seen.size() >= kMaxLabelValues)
      value = kOther;
    else
      seen.insert(value);
  }
  return labels;
}

// A label set new to family map `m`, within the family's caps.
template <typename Map>
static std::vector<std::pair<std::string, std::string>> Admit(
    const Map& m, std::vector<std::pair<std::string, std::string>> labels) {
  if (!m.count(labels) && m.size() >= Metrics::kMaxSeries) {
    for (auto& [name, value] : labels) value = kOther;
  }
  return labels;
}

void Metrics::Count(const std::string& family, Labels labels, double by) {
  auto& m = counters_[family];
  if (!m.count(labels)) labels = Admit(m, Bound(family, std::move(labels)));
  m[labels] += by;
}

void Metrics::Measure(const std::string& family, Labels labels, double value) {
  auto& m = histograms_[family];
  if (!m.count(labels)) labels = Admit(m, Bound(family, std::move(labels)));
  m[labels].Add(value);
}

void Metrics::End(const Event& e, const std::string& outcome) {
  auto it = open_.find(e.org_id + "\n" + e.request_id);
  if (it == open_.end()) return;
  Measure("tollgate_request_duration_seconds", {{"outcome", outcome}, {"org", OrgValue(e.org_id)}},
          std::max<int64_t>(0, e.time_us - it->second) / 1e6);
  open_.erase(it);
}

// A built-in, or a tool the deployment's catalog holds (a CLI tool, an
// upstream MCP server's tool, an http_request alias); anything else --
// mcp:<server>/<whatever an agent made up> -- is "other" at once.
std::string Metrics::ToolLabel(const std::string& tool) const {
  if (FindBuiltinTool(tool) != nullptr) return tool;
  if (tool.empty() || tool.size() > 200 || !PrintableUtf8(tool) || !catalog_ || !catalog_(tool))
    return kOther;
  return tool;
}

void Metrics::SetToolCatalog(ToolCatalog catalog) {
  std::lock_guard<std::mutex> lock(mu_);
  catalog_ = std::move(catalog);
}

void Metrics::Observe(const std::vector<Event>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Event& e : events) {
    const std::string org = OrgValue(e.org_id);
    Count("tollgate_events_appended_total", {{"type", Word(e.type)}, {"org", org}});
    if (e.type == "request.received") {
      Count("tollgate_requests_total", {{"outcome", "received"}, {"org", org}});
      if (open_.size() < kMaxOpenRequests) open_[e.org_id + "\n" + e.request_id] = e.time_us;
    } else if (e.type == "request.rejected") {
      Count("tollgate_requests_total", {{"outcome", "rejected"}, {"org", org}});
      Count("tollgate_request_rejections_total", {{"code", Code(e.data.value("code", ""))}, {"org", org}});
      End(e, "rejected");
    } else if (e.type == "decision.made") {
      const std::string verdict = Word(e.data.value("verdict", ""));
      Count("tollgate_decisions_total",
            {{"verdict", verdict}, {"rule_kind", RuleKind(e.data.value("rule", ""))}, {"org", org}});
      if (verdict == "deny") End(e, "denied");
    } else if (e.type == "approval.requested" || e.type == "approval.granted" ||
               e.type == "approval.denied" || e.type == "approval.expired" || e.type == "approval.refused") {
      Count("tollgate_approvals_total", {{"outcome", e.type.substr(9)}, {"org", org}});
      if (e.type == "approval.denied" || e.type == "approval.expired") End(e, e.type.substr(9));
    } else if (e.type == "execution.completed") {
      const Json& r = e.data.contains("result") ? e.data["result"] : Json::object();
      const bool ok = r.is_object() && r.value("success", false);
      const std::string code = ok ? "ok"
                                  : Code(r.is_object() && r.contains("error") && r["error"].is_object()
                                             ? r["error"].value("code", "")
                                             : "");
      const std::string tool = ToolLabel(e.tool);
      Count("tollgate_executions_total", {{"tool", tool}, {"code", code}, {"org", org}});
      if (e.data.contains("duration_ms") && e.data["duration_ms"].is_number()) {
        Measure("tollgate_execution_duration_seconds", {{"tool", tool}, {"org", org}},
                e.data["duration_ms"].get<double>() / 1e3);
      }
      End(e, ok ? "completed" : "failed");
      if (e.data.contains("cost_usd") && e.data["cost_usd"].is_number()) {
        Count("tollgate_cost_usd_total", {{"org", org}}, e.data["cost_usd"].get<double>());
      }
    }
  }
}

void MetricsText::Histogram(const std::string& name,
                            const std::vector<std::pair<std::string, std::string>>& labels,
                            const std::vector<double>& bounds, const std::vector<uint64_t>& counts,
                            double sum) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds.size() && i < counts.size(); ++i) {
    cumulative += counts[i];
    auto l = labels;
    l.emplace_back("le", i < bounds.size() ? Number(bounds[i]) : "+Inf");
    Sample(name + "_bucket", l, static_cast<double>(cumulative));
  }
  Sample(name + "_sum", labels, sum);
  Sample(name + "_count", labels, static_cast<double>(cumulative));
}

void WriteRunnerMetrics(MetricsText& t,
                        const std::vector<std::pair<std::string, const StageRunner*>>& runners) {
  using Field = std::atomic<uint64_t> RunnerStats::*;
  const std::tuple<const char*, Field, const char*> counters[] = {
      {"tollgate_stage_messages_total", &RunnerStats::messages, "Input messages a stage's runner took in."},
      {"tollgate_stage_batches_total", &RunnerStats::batches, "Batches a stage's runner committed."},
      {"tollgate_stage_events_total", &RunnerStats::events, "Events a stage appended."},
      {"tollgate_stage_outputs_total", &RunnerStats::outputs, "Messages a stage published."},
      {"tollgate_stage_retries_total", &RunnerStats::retries,
       "Batches a stage's runner retried after a failure."},
      {"tollgate_stage_publish_wait_seconds_total", &RunnerStats::publish_wait_us,
       "Time a stage's runner waited for the previous batch's transaction."}};
  for (const auto& [name, field, help] : counters) {
    t.Family(name, "counter", help);
    const bool seconds = std::string_view(name).find("_seconds") != std::string_view::npos;
    for (const auto& [stage, r] : runners) {
      const double v = static_cast<double>((r->stats().*field).load());
      t.Sample(name, {{"stage", stage}}, seconds ? v / 1e6 : v);
    }
  }
  using Hist = LatencyHistogram RunnerStats::*;
  const std::tuple<const char*, Hist, const char*> histograms[] = {
      {"tollgate_stage_process_seconds", &RunnerStats::process_hist,
       "Per batch: the stage's own processing."},
      {"tollgate_stage_append_seconds", &RunnerStats::append_hist,
       "Per batch: appending its events to the log."},
      {"tollgate_stage_publish_seconds", &RunnerStats::publish_hist,
       "Per batch: the Kafka transaction publishing its outputs and offsets."}};
  const std::vector<double> bounds(kLatencyBounds.begin(), kLatencyBounds.end());
  for (const auto& [name, field, help] : histograms) {
    t.Family(name, "histogram", help);
    for (const auto& [stage, r] : runners) {
      const LatencyHistogram& h = r->stats().*field;
      const auto c = h.counts();
      t.Histogram(name, {{"stage", stage}}, bounds, std::vector<uint64_t>(c.begin(), c.end()),
                  h.sum_seconds());
    }
  }
  using Gauge = std::atomic<uint64_t> RunnerStats::*;
  const std::tuple<const char*, Gauge, const char*> gauges[] = {
      {"tollgate_stage_workers_busy", &RunnerStats::deferred_running,
       "A stage's pool (execute: tool runs): works running now."},
      {"tollgate_stage_workers_queued", &RunnerStats::deferred_queued,
       "A stage's pool (execute: tool runs): works waiting for a worker."},
      {"tollgate_stage_foreign_group_members", &RunnerStats::foreign_members,
       "1 while a stage's consumer group holds a member that is not this process (docs/trust.md)."}};
  for (const auto& [name, field, help] : gauges) {
    t.Family(name, "gauge", help);
    for (const auto& [stage, r] : runners)
      t.Sample(name, {{"stage", stage}}, static_cast<double>((r->stats().*field).load()));
  }
  t.Family("tollgate_consumer_lag_messages", "gauge",
           "Messages in a stage's input partitions not read yet (high watermark minus position).");
  for (const auto& [stage, r] : runners) {
    for (const auto& l : r->consumer_lag()) {
      t.Sample("tollgate_consumer_lag_messages",
               {{"stage", stage}, {"topic", l.topic}, {"partition", std::to_string(l.partition)}},
               static_cast<double>(l.lag));
    }
  }
}

void WriteLogMetrics(MetricsText& t, const EventLog& log) {
  uint64_t seq = 0;
  Digest hash;
  if (log.store().ReadHead(&seq, &hash).ok()) {
    t.Family("tollgate_log_head_seq", "gauge", "The seq of the last event of this process's log (or copy).");
    t.Sample("tollgate_log_head_seq", {}, static_cast<double>(seq));
  }
  t.Family("tollgate_log_size_bytes", "gauge",
           "Bytes the event log takes (SST files and memtables; not the WAL).");
  t.Sample("tollgate_log_size_bytes", {}, static_cast<double>(log.store().ApproximateBytes()));
  t.Family("tollgate_log_refusing_appends", "gauge",
           "1 while the event log refuses appends (a full disk or a failed write; /healthz says why).");
  t.Sample("tollgate_log_refusing_appends", {}, log.refusing() ? 1.0 : 0.0);
  t.Family("tollgate_log_refused_appends_total", "counter",
           "Appends the event log refused or failed to write (each event counts).");
  t.Sample("tollgate_log_refused_appends_total", {}, static_cast<double>(log.refused_appends()));
  const std::vector<double> bounds(kLatencyBounds.begin(), kLatencyBounds.end());
  for (const auto& [name, h, help] :
       {std::tuple{"tollgate_log_write_seconds", &log.write_latency(), "Per batch: the log's RocksDB write."},
        std::tuple{"tollgate_log_fsync_seconds", &log.sync_latency(),
                   "Per WAL fsync (durability sync; one covers every batch written before it)."}}) {
    t.Family(name, "histogram", help);
    const auto c = h->counts();
    t.Histogram(name, {}, bounds, std::vector<uint64_t>(c.begin(), c.end()), h->sum_seconds());
  }
}

void Metrics::AddCollector(Collector c) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(c));
}

std::string Metrics::Render() const {
  static const std::map<std::string, std::string> kHelp{
      {"tollgate_events_appended_total", "Events this process appended to the log, by type."},
      {"tollgate_requests_total", "Tool requests received (logged) or rejected at ingest."},
      {"tollgate_request_rejections_total", "Requests rejected at ingest, by error code."},
      {"tollgate_decisions_total", "Decisions made, by verdict and the kind of rule that decided."},
      {"tollgate_approvals_total", "Approval events: requested, granted, denied, expired, refused."},
      {"tollgate_executions_total", "Tool executions completed, by tool and error code (ok on success)."},
      {"tollgate_request_duration_seconds", "From request.received to the request's end, by outcome."},
      {"tollgate_execution_duration_seconds", "Tool run time as execute measured it, by tool."},
      {"tollgate_cost_usd_total",
       "Cost of the tool calls executed (execution.completed cost_usd), by org: "
       "what budgets count, as a rate over any window."},
  };
  MetricsText t;
  std::vector<Collector> collectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Every folded family is written even before its first event, so a
    // dashboard's query sees 0 rather than nothing.
    for (const auto& [name, help] : kHelp) {
      const bool histogram = name.size() > 8 && name.compare(name.size() - 8, 8, "_seconds") == 0;
      t.Family(name, histogram ? "histogram" : "counter", help);
      if (!histogram) {
        auto it = counters_.find(name);
        if (it == counters_.end()) continue;
        for (const auto& [labels, v] : it->second) t.Sample(name, labels, v);
        continue;
      }
      auto it = histograms_.find(name);
      if (it == histograms_.end()) continue;
      for (const auto& [labels, h] : it->second) t.Histogram(name, labels, Buckets(), h.counts, h.sum);
    }
    collectors = collectors_;
  }
  for (const auto& c : collectors) c(t);
  return t.text();
}

namespace {

// The unescaped value of label `label` of exposition sample line `line`
// (name{a="x",b="y"} value); false when it has none or is malformed.
bool LabelOf(std::string_view line, std::string_view label, std::string* out) {
  size_t i = line.find_first_of("{ ");
  if (i == std::string_view::npos || line[i] != '{') return false;
  ++i;
  while (i < line.size() && line[i] != '}') {
    const size_t eq = line.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"') return false;
    const std::string_view name = line.substr(i, eq - i);
    std::string value;
    size_t j = eq + 2;
    for (; j < line.size() && line[j] != '"'; ++j) {
      if (line[j] == '\\' && j + 1 < line.size()) {
        ++j;
        value += line[j] == 'n' ? '\n' : line[j];
      } else {
        value += line[j];
      }
    }
    if (j >= line.size()) return false;
    if (name == label) {
      *out = std::move(value);
      return true;
    }
    i = j + 1;
    if (i < line.size() && line[i] == ',') ++i;
  }
  return false;
}

}  // namespace

std::string MetricsVisibleTo(const std::string& org_id, const std::string& text) {
  if (org_id == "*") return text;
  std::string out;
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    std::string org;
    const bool keep = (!line.empty() && line[0] == '#') ||
                      (org_id != kOther && LabelOf(line, "org", &org) && org == org_id);
    if (keep) {
      out.append(line);
      out += '\n';
    }
  }
  return out;
}

}  // namespace tollgate
