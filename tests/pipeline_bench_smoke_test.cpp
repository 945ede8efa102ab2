// `tollgate bench pipeline --quick` runs end to end and reports every figure.
// Speed is not asserted here (the goals live in the benchmark's own output);
// this keeps a broken benchmark from going unnoticed.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "bench/pipeline_bench.h"

namespace tollgate {
namespace {

TEST(PipelineBenchSmoke, QuickRunReportsEveryFigure) {
  bench::PipelineBenchOptions o;
  o.quick = true;
  Json r = bench::RunPipelineBench(o);
  std::cout << r.dump() << std::endl;
  ASSERT_FALSE(r.contains("error")) << r.dump();
  for (const char* key : {"throughput_vs_relay",
                          "p99_vs_relay",
                          "pipeline_req_per_s",
                          "pipeline_p50_ms",
                          "pipeline_p99_ms",
                          "relay_req_per_s",
                          "relay_p50_ms",
                          "relay_p99_ms",
                          "sync_throughput_vs_relay",
                          "sync_p99_vs_relay",
                          "pipeline_sync_req_per_s",
                          "pipeline_sync_p50_ms",
                          "pipeline_sync_p99_ms",
                          "requests",
                          "rate_per_s",
                          "verify_us_per_request",
                          "sign_us_per_request",
                          "min_relay_p50_ms",
                          "p50_vs_min_relay",
                          "p99_vs_min_relay",
                          "pipeline_latency_first_p50_ms"}) {
    ASSERT_TRUE(r.contains(key)) << key;
    ASSERT_TRUE(r[key].is_number()) << key << ": " << r[key];
    const double v = r[key].get<double>();
    EXPECT_TRUE(std::isfinite(v)) << key << " = " << v;
    EXPECT_GT(v, 0) << key;
  }
  for (const char* key : {"goals", "met"}) {
    ASSERT_TRUE(r.contains(key) && r[key].is_object()) << key;
    for (const char* goal :
         {"throughput_vs_relay", "p99_vs_relay", "p50_vs_min_relay", "latency_first_throughput_vs_relay"}) {
      EXPECT_TRUE(r[key].contains(goal)) << key << " " << goal;
    }
  }
  EXPECT_TRUE(r["met"]["throughput_vs_relay"].is_boolean());
  EXPECT_TRUE(r["met"]["p99_vs_relay"].is_boolean());
}

}  // namespace
}  // namespace tollgate
