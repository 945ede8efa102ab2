// `tollgate bench pipeline --distributed --quick` runs end to end against
// real processes of the tollgate binary and reports every figure. Speed is
// not asserted here (the goals live in the benchmark's own output); this
// keeps a broken benchmark from going unnoticed.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "bench/distributed_bench.h"

namespace tollgate {
namespace {

TEST(DistributedBenchSmoke, QuickRunReportsEveryFigure) {
  bench::DistributedBenchOptions o;
  o.quick = true;
  o.binary = TOLLGATE_BIN;
  Json r = bench::RunDistributedBench(o);
  std::cout << r.dump() << std::endl;
  ASSERT_FALSE(r.contains("error")) << r.dump();
  // Every figure present, a finite number, positive: one list of those that are not.
  std::vector<std::string> bad;
  for (const char* key :
       {"distributed_throughput_vs_relay", "execute_scale_2x", "execute_scale_2x_default_workers",
        "distributed_req_per_s", "relay_req_per_s", "sleep_req_per_s_1_execute", "sleep_req_per_s_2_executes",
        "sleep_default_workers_req_per_s_1_execute", "sleep_default_workers_req_per_s_2_executes",
        "sleep_ms_per_call_1_worker", "requests", "sleep_requests", "rounds", "partitions", "workers",
        "default_workers"}) {
    const Json v = r.value(key, Json());
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) bad.push_back(key);
  }
  EXPECT_EQ(bad, std::vector<std::string>{});
  for (const char* goal : {"distributed_throughput_vs_relay", "execute_scale_2x"}) {
    EXPECT_TRUE(r["goals"].contains(goal)) << goal;
    EXPECT_TRUE(r["met"][goal].is_boolean()) << goal;
  }
  EXPECT_EQ(r["partitions"].get<int>() % 2, 0) << "two execute processes split the partitions evenly";
}

}  // namespace
}  // namespace tollgate
