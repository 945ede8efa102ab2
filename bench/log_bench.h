// The event log benchmark behind `tollgate bench log`. Every figure is a
// ratio against a baseline measured in the same run on the same machine.
#pragma once

#include <cstddef>
#include <string>

#include "core/canonical_json.h"

namespace tollgate::bench {

struct LogBenchOptions {
  std::string dir;  // scratch directory (created, then removed); "" = a temp dir
  size_t append_events = 50000;
  size_t sync_appenders = 32;
  size_t sync_events = 4000;
  size_t query_base_events = 50000;  // the smaller log of the growth test (10x: the larger)
  bool quick = false;                // smaller sizes, for tests
};

// Runs every measurement and returns
// {"append_vs_raw", "sync_group_vs_naive", "query_vs_raw_scan", "query_growth_10x", ...}
// plus the raw figures each ratio was computed from. Progress goes to stderr.
Json RunLogBench(const LogBenchOptions& options);

}  // namespace tollgate::bench
