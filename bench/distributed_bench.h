// The distributed benchmark behind `tollgate bench pipeline --distributed`:
// the deployment of docs/deployments.md as real processes of the tollgate
// binary (`broker --partitions P`, the keeper `stage audit`, `stage ingest`,
// `stage decide`, `stage execute` once then twice; posix_spawn, no shell,
// output to files in the scratch directory, every one killed on every way
// out), agents registered with `agents add`, signed requests from the
// agent-side driver (bench/bench_driver.h). Two figures:
//
//   distributed_throughput_vs_relay  echo requests/s through the processes
//       ÷ the bare relay's over the same three hops (measured in the same
//       run, in this process, on its own embedded broker). Goal >= 0.3.
//   execute_scale_2x  requests/s of `cli:sleep` (a CLI tool that waits
//       20 ms: I/O, not CPU) with two execute processes ÷ with one. Goal
//       >= 1.8. Each process runs `workers` tools at once (default 1), so a
//       process's concurrency, not the machine's CPU, bounds it: a call costs
//       the sleep plus the sandbox's start-up (CPU), and at 8 workers a
//       single process already keeps a small machine's cores busy, where a
//       second process cannot add throughput. That case is reported too, as
//       information: execute_scale_2x_default_workers.
//
// Balance: two processes split the execute topic's partitions between them,
// so `partitions` must be even, and the agents (the request keys) are
// chosen so every partition carries the same number of requests
// (PartitionOfKey). The second process joins while nothing is in flight
// (a rebalance aborts open transactions, and on the embedded broker
// read_committed readers stop at aborted data); warm-up rounds then run
// until it has run calls, and one more, before the clock starts.
//
// Order: relay; cli:sleep at `workers` (execute-1, then execute-1 and -2);
// the same at `default_workers` (both started again); echo with execute-1
// alone, last. The embedded broker keeps ~5 MiB of the events topic
// (docs/deployments.md), and a stage process that starts needs every event
// since its last stop, so the requests before the second process joins are
// capped and the echo rounds, the most events, come after every start.
#pragma once

#include <cstddef>
#include <string>

#include "core/canonical_json.h"

namespace tollgate::bench {

struct DistributedBenchOptions {
  std::string dir;                      // scratch directory (created, then removed); "" = a temp dir
  std::string binary;                   // the tollgate binary to run; "" = this process's own executable
  size_t requests = 20000;              // echo: requests back to back per round (the relay: ~1 s) ...
  size_t sleep_requests = 240;          // cli:sleep: requests back to back per round ...
  size_t rounds = 3;                    // ... this many rounds each; the median round is reported
  int partitions = 4;                   // of every topic but the events topic (even)
  size_t agents = 8;                    // request keys: agents / partitions on each partition
  size_t workers = 1;                   // each execute process's tools at once, for execute_scale_2x
  size_t default_workers = 8;           // ... for execute_scale_2x_default_workers (`stage`'s default)
  std::string durability = "buffered";  // of the processes' logs, as the embedded bench's headline
  bool quick = false;                   // smaller sizes, for tests
};

// Returns {"distributed_throughput_vs_relay", "execute_scale_2x",
// "execute_scale_2x_default_workers", the req/s of each measurement, sizes,
// "partitions", "workers", "goals", "met", "notes", "detail", ...} or
// {"error": ...}. Progress goes to stderr.
Json RunDistributedBench(const DistributedBenchOptions& options);

}  // namespace tollgate::bench
