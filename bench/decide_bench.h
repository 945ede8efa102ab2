// The policy-engine benchmark behind `tollgate bench decide`: decisions per
// second and latency of the pure engine (DecideInto, no Kafka, no log) over
// a realistic generated policy (deny/allow globs, agent tiers, argument
// rules, budgets with a pre-filled ledger), at 100 and 1,000 rules.
//
// Baseline, measured in the same run: matching the same invocation strings
// against the same 100-rule glob list with std::regex (each glob translated
// to a regex, scanned in order) - what a straightforward implementation
// would do for the glob step alone. Fixed references (not measured here):
// Cedar's published median 4-11 us and OPA's ~36 us per authorization.
#pragma once

#include <cstddef>

#include "core/canonical_json.h"

namespace tollgate::bench {

struct DecideBenchOptions {
  size_t decisions = 200000;  // timed decisions per policy size
  bool quick = false;         // small sizes, for tests
};

// Returns {"p50_us", "p99_us" (100 rules), "p50_us_1000", "p99_us_1000",
// "growth_10x", "p50_us_orgs" / "p99_us_orgs" (100 rules and 100 org
// sections), "p50_json_us" (incl. building the decision.made JSON),
// "decisions_per_s", "regex_baseline_per_s", "decide_vs_baseline",
// "vs_cedar_p50" (4 us / p50), "vs_opa" (36 us / p50), "goals", "met"},
// or {"error": ...}.
Json RunDecideBench(const DecideBenchOptions& options);

}  // namespace tollgate::bench
