// `tollgate bench log` in its quick mode: the benchmark runs and reports
// every ratio. Speed goals are not asserted here; they live in bench/.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/decide_bench.h"
#include "bench/log_bench.h"
#include "bench/replay_bench.h"
#include "bench/startup_bench.h"

namespace tollgate::bench {
namespace {

TEST(LogBench, QuickRunReportsEveryRatio) {
  LogBenchOptions o;
  o.quick = true;
  Json r = RunLogBench(o);
  ASSERT_FALSE(r.contains("error")) << r.dump();
  for (const char* key : {"append_vs_raw", "sync_vs_rocksdb_group", "query_vs_raw_scan", "query_growth_10x",
                          "append_tree_vs_off", "sync_tree_vs_off", "proofs_verify_vs_goal"}) {
    ASSERT_TRUE(r.contains(key)) << key;
    double v = r[key].get<double>();
    EXPECT_TRUE(std::isfinite(v) && v > 0) << key << " = " << v;
    EXPECT_TRUE(r["met"].contains(key)) << key;
  }
  // Information, without a goal.
  EXPECT_GT(r.value("sync_group_vs_naive", 0.0), 0);
  EXPECT_FALSE(r["met"].contains("sync_group_vs_naive"));
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
  for (const char* key : {"redecide_vs_floor", "floor_events_per_s", "redecide_vs_scan",
                          "redecide_events_per_s", "scan_events_per_s"}) {
    ASSERT_TRUE(r.contains(key)) << key;
    double v = r[key].get<double>();
    EXPECT_TRUE(std::isfinite(v) && v > 0) << key << " = " << v;
  }
  EXPECT_TRUE(r["met"].contains("redecide_vs_floor"));
  EXPECT_FALSE(r["met"].contains("redecide_vs_scan"));
}

// `tollgate bench startup --quick`: both histories start (restoring every
// pending approval, re-driving nothing: the bench fails otherwise) and the
// ratio is reported.
TEST(StartupBench, QuickRunReportsTheRatio) {
  StartupBenchOptions o;
  o.quick = true;
  Json r = RunStartupBench(o);
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_EQ(r["short_events"], 2000 * 4 + 50 * 3);
  EXPECT_EQ(r["long_events"], 20000 * 4 + 50 * 3);
  for (const char* key : {"startup_growth_10x", "short_startup_s", "long_startup_s", "full_fold_long_s"}) {
    ASSERT_TRUE(r.contains(key)) << key;
    double v = r[key].get<double>();
    EXPECT_TRUE(std::isfinite(v) && v > 0) << key << " = " << v;
  }
  EXPECT_TRUE(r["met"].contains("startup_growth_10x"));
}

// `tollgate bench decide --quick`: every figure present, finite, positive.
TEST(DecideBench, QuickRunReportsEveryFigure) {
  bench::DecideBenchOptions o;
  o.quick = true;
  Json r = bench::RunDecideBench(o);
  ASSERT_FALSE(r.contains("error")) << r.dump();
  for (const char* key : {"p50_us", "p99_us", "p50_us_1000", "p99_us_1000", "growth_10x", "p50_json_us",
                          "decisions_per_s", "regex_baseline_per_s", "decide_vs_baseline", "vs_cedar_p50",
                          "vs_opa", "p50_us_history", "p99_us_history", "history_vs_plain_p50"}) {
    ASSERT_TRUE(r.contains(key) && r[key].is_number()) << key << " in " << r.dump();
    EXPECT_TRUE(std::isfinite(r[key].get<double>())) << key;
    EXPECT_GT(r[key].get<double>(), 0) << key;
  }
  EXPECT_TRUE(r["met"]["p50_us"].is_boolean());
  EXPECT_TRUE(r["met"]["p99_us_history"].is_boolean());
  // History rules decide some of the timed calls, and most are decided
  // elsewhere, as in production.
  const double share = r["history_decided_share"].get<double>();
  EXPECT_GT(share, 0) << r.dump();
  EXPECT_LT(share, 0.5) << r.dump();
}

}  // namespace
}  // namespace tollgate::bench
