// `tollgate bench pipeline --quick` runs end to end and reports every figure.
// Speed is not asserted here (the goals live in the benchmark's own output);
// this keeps a broken benchmark from going unnoticed. Without the
// durability=sync pass (--no-sync): the same code as the buffered one, and
// ~7 s of this test's time.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "bench/pipeline_bench.h"

namespace tollgate {
namespace {

TEST(PipelineBenchSmoke, QuickRunReportsEveryFigure) {
  bench::PipelineBenchOptions o;
  o.quick = true;
  o.sync = false;
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
                          "requests",
                          "rate_per_s",
                          "verify_us_per_request",
                          "sign_us_per_request",
                          "min_relay_p50_ms",
                          "p50_vs_min_relay",
                          "p99_vs_min_relay",
                          "pipeline_latency_first_p50_ms",
                          "throughput_vs_verifying_relay",
                          "verifying_relay_req_per_s",
                          "verifying_relay_p50_ms",
                          "verifying_relay_p99_ms",
                          "pipeline_throughput_first_req_per_s",
                          "pipeline_latency_first_req_per_s",
                          "pipeline_cpu_us_per_request",
                          "pipeline_throughput_first_cpu_us_per_request",
                          "pipeline_latency_first_cpu_us_per_request",
                          "relay_cpu_us_per_request",
                          "min_relay_cpu_us_per_request",
                          "verifying_relay_cpu_us_per_request"}) {
    ASSERT_TRUE(r.contains(key)) << key;
    ASSERT_TRUE(r[key].is_number()) << key << ": " << r[key];
    const double v = r[key].get<double>();
    EXPECT_TRUE(std::isfinite(v)) << key << " = " << v;
    EXPECT_GT(v, 0) << key;
  }
  for (const char* key : {"goals", "met"}) {
    ASSERT_TRUE(r.contains(key) && r[key].is_object()) << key;
    for (const char* goal : {"throughput_vs_relay", "throughput_vs_verifying_relay", "p99_vs_relay",
                             "p50_vs_min_relay", "latency_first_throughput_vs_relay"}) {
      EXPECT_TRUE(r[key].contains(goal)) << key << " " << goal;
    }
  }
  EXPECT_TRUE(r["met"]["throughput_vs_relay"].is_boolean());
  EXPECT_TRUE(r["met"]["p99_vs_relay"].is_boolean());
  EXPECT_TRUE(r["met"]["throughput_vs_verifying_relay"].is_boolean());
  EXPECT_FALSE(r.contains("pipeline_sync_req_per_s")) << "--no-sync still measured sync";
  // Which settings are the default, and what latency first cost (a
  // fraction; negative when it was faster).
  ASSERT_TRUE(r.contains("default_settings"));
  EXPECT_TRUE(r["default_settings"] == "latency_first" || r["default_settings"] == "throughput_first")
      << r["default_settings"];
  ASSERT_TRUE(r.contains("latency_first_throughput_cost") && r["latency_first_throughput_cost"].is_number());
}

}  // namespace
}  // namespace tollgate
