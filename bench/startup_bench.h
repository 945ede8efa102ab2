// The start-up benchmark behind `tollgate bench startup`: how long `up`
// takes to be ready (Pipeline::Start: the log opened, identity folded, the
// reconciler's pass, every stage's state restored, the runners started, the
// API served) on two histories of the same rate, one `growth` times longer,
// with the same unfinished work (pending approvals). Start-up should cost
// what is unfinished and what came since the last snapshot, not the log's
// length: startup_growth_10x = long ÷ short, goal <= 1.5 (docs/operations.md).
#pragma once

#include <cstddef>
#include <string>

#include "core/canonical_json.h"

namespace tollgate::bench {

struct StartupBenchOptions {
  std::string dir;          // scratch directory (created, then removed); "" = a temp dir
  size_t requests = 20000;  // finished requests in the short history (4 events each)
  size_t growth = 10;       // the long history has growth x requests
  size_t pending = 200;     // pending approvals in both
  size_t rounds = 5;        // alternating starts of each; medians are reported
  bool quick = false;       // small sizes, for tests
};

// Returns {"startup_growth_10x", "short_startup_s", "long_startup_s",
// "short_events", "long_events", "full_fold_long_s", "goals", "met", ...}
// or {"error": ...}. Progress goes to stderr.
Json RunStartupBench(const StartupBenchOptions& options);

}  // namespace tollgate::bench
