// `tollgate bench log` in its quick mode: the benchmark runs and reports
// every ratio. Speed goals are not asserted here; they live in bench/.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/log_bench.h"
#include "bench/replay_bench.h"

namespace tollgate::bench {
namespace {

TEST(LogBench, QuickRunReportsEveryRatio) {
  LogBenchOptions o;
  o.quick = true;
  Json r = RunLogBench(o);
  ASSERT_FALSE(r.contains("error")) << r.dump();
  for (const char* key : {"append_vs_raw", "sync_group_vs_naive", "query_vs_raw_scan", "query_growth_10x"}) {
    ASSERT_TRUE(r.contains(key)) << key;
    double v = r[key].get<double>();
    EXPECT_TRUE(std::isfinite(v) && v > 0) << key << " = " << v;
    EXPECT_TRUE(r["met"].contains(key)) << key;
  }
}

// `tollgate bench replay --quick`: the clean session re-decides with no
// change (the bench fails otherwise) and the ratio is reported.
TEST(ReplayBench, QuickRunReportsTheRatio) {
  ReplayBenchOptions o;
  o.quick = true;
  Json r = RunReplayBench(o);
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_EQ(r["decisions"], 2000);
  EXPECT_EQ(r["events"], 8000);
  for (const char* key : {"redecide_vs_scan", "redecide_events_per_s", "scan_events_per_s"}) {
    ASSERT_TRUE(r.contains(key)) << key;
    double v = r[key].get<double>();
    EXPECT_TRUE(std::isfinite(v) && v > 0) << key << " = " << v;
  }
  EXPECT_TRUE(r["met"].contains("redecide_vs_scan"));
}

}  // namespace
}  // namespace tollgate::bench
