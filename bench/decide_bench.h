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
//
// History (docs/policy.md, "History"), in the same run: the 100-rule
// policy plus `labels:` and 20 history rules (14 sequence rules with
// windows of calls and of minutes, 6 label rules), deciding calls of 200
// sessions of 1,000 completed calls each (folded into SessionFacts as the
// stage folds decision.made and execution.completed, so every pattern's
// ring of matches is full). Most history conditions are false, as in
// production, but then: names the timed calls' tools, so the session
// lookup and the match scans run; history_decided_share says how many
// decisions a history rule made.
#pragma once

#include <cstddef>

#include "core/canonical_json.h"

namespace tollgate::bench {

struct DecideBenchOptions {
  size_t decisions = 200000;  // timed decisions per policy size
  bool quick = false;         // small sizes (history: 20 sessions of 300 calls), for tests
};

// Returns {"p50_us", "p99_us" (100 rules), "p50_us_1000", "p99_us_1000",
// "growth_10x", "p50_us_orgs" / "p99_us_orgs" (100 rules and 100 org
// sections), "p50_json_us" (incl. building the decision.made JSON),
// "decisions_per_s", "regex_baseline_per_s", "decide_vs_baseline",
// "vs_cedar_p50" (4 us / p50), "vs_opa" (36 us / p50), "p50_us_history" /
// "p99_us_history" (100 rules + 20 history rules, sessions of 1,000 calls),
// "p50_us_history_plain" / "p99_us_history_plain" (the same requests
// without the history rules, timed in rounds alternating with them),
// "history_vs_plain_p50" (p50_us_history / p50_us_history_plain),
// "history_decided_share",
// "history_sessions", "history_calls_per_session", "history_fold_s" (the
// fold of those sessions, information), "goals", "met" (p50_us <= 2,
// p99_us <= 20, growth_10x <= 1.5, p50_us_history <= 2, p99_us_history <=
// 20)}, or {"error": ...}.
Json RunDecideBench(const DecideBenchOptions& options);

}  // namespace tollgate::bench
