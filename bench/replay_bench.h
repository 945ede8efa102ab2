// The replay benchmark behind `tollgate bench replay`: re-decision of one
// large session (read what the decisions depended on, fold the policy and
// the budget ledger, re-decide every request with decide's engine, compare)
// against a raw scan of the same session measured in the same run (the
// session index walked and every record's bytes read, nothing decoded: the
// floor any reader of those events pays).
#pragma once

#include <cstddef>
#include <string>

#include "core/canonical_json.h"

namespace tollgate::bench {

struct ReplayBenchOptions {
  std::string dir;          // scratch directory (created, then removed); "" = a temp dir
  size_t requests = 25000;  // requests in the session (4 events each)
  size_t rounds = 5;        // alternating rounds; medians are reported
  bool quick = false;       // small sizes, for tests
};

// Returns {"redecide_vs_scan", "redecide_events_per_s", "scan_events_per_s",
// "decoded_scan_events_per_s", "events", "decisions", "goals", "met", ...}
// or {"error": ...}. Progress goes to stderr.
Json RunReplayBench(const ReplayBenchOptions& options);

}  // namespace tollgate::bench
