// The pipeline benchmark behind `tollgate bench pipeline`: requests through
// ingest -> decide -> execute(echo) -> results with every event logged, in
// this process on the embedded broker, against relays measured in the same
// run, each on its own broker: the bare relay moves the same messages
// through the same three topic hops (requests -> decide -> execute ->
// results) by consumer+producer loops that do no processing but use the
// stage runner's transactional batching (poll up to max_batch, begin txn,
// produce, send offsets, commit); the verifying relay is the same with its
// first hop checking each request's Ed25519 signature as ingest does (the
// floor of any authenticated gate); the minimal relay is the latency floor
// (no transactions, latency-first settings).
#pragma once

#include <cstddef>
#include <string>

#include "core/canonical_json.h"

namespace tollgate::bench {

struct PipelineBenchOptions {
  std::string dir;         // scratch directory (created, then removed); "" = a temp dir
  size_t requests = 5000;  // the throughput test: N requests published back to back ...
  size_t rounds = 3;       // ... this many times; the median round is reported
  double rate = 200;       // the latency test: requests per second ...
  double seconds = 5;      // ... for this long
  int partitions = 3;      // of every topic, as `tollgate up`
  size_t max_batch = 500;  // stage runner and relay batch size, as `tollgate up`
  bool sync = true;        // also measure durability=sync (extra figures)
  bool quick = false;      // smaller sizes, for tests
};

// Returns {"throughput_vs_relay", "throughput_vs_verifying_relay",
// "p99_vs_relay", "p50_vs_min_relay", "latency_first_throughput_cost",
// "default_settings" (which of the pipeline's two settings
// PipelineOptions::latency_first makes the default: the headline ratios and
// "pipeline_*" figures are that one's), per system (pipeline,
// pipeline_throughput_first, pipeline_latency_first, pipeline_sync, relay,
// min_relay, verifying_relay) "<system>_req_per_s", "_p50_ms", "_p99_ms" and
// "_cpu_us_per_request" (this process's CPU over the throughput rounds per
// request), "verify_us_per_request" (ingest's signature check of one
// request), "sign_us_per_request" (an agent's signing), "requests",
// "rounds", "rate_per_s", "goals", "met", ...}, or {"error": ...}. Progress
// goes to stderr.
//
// The pipeline's and the verifying relay's requests are signed
// (docs/trust.md) by the driver as it publishes them; the other relays'
// are not (they check nothing).
Json RunPipelineBench(const PipelineBenchOptions& options);

}  // namespace tollgate::bench
