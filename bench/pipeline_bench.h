// The pipeline benchmark behind `tollgate bench pipeline`: requests through
// ingest -> decide -> execute(echo) -> results with every event logged, in
// this process on the embedded broker, against a bare relay measured in the
// same run: the same messages moved through the same three topic hops
// (requests -> decide -> execute -> results) by consumer+producer loops that
// do no processing but use the stage runner's transactional batching (poll
// up to max_batch, begin txn, produce, send offsets, commit).
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

// Returns {"throughput_vs_relay", "p99_vs_relay", raw figures (req/s, p50/p99
// in ms of the pipeline and the relay), "verify_us_per_request" (ingest's
// signature check of one request), "sign_us_per_request" (an agent's
// signing), "requests", "rounds", "rate_per_s", "goals", "met", ...}, or
// {"error": ...}. Progress goes to stderr.
//
// The pipeline's requests are signed (docs/trust.md) by the driver as it
// publishes them; the relay's are not (it checks nothing).
Json RunPipelineBench(const PipelineBenchOptions& options);

}  // namespace tollgate::bench
