// `tollgate bench mcp --quick` runs end to end — the real binary, its own
// `tollgate mcp` child, the reference MCP server when node has it — and
// prints its ratio as the last line. Speed is not asserted here (the goal
// lives in the benchmark's own output); this keeps a broken benchmark from
// going unnoticed. One test, one run (~7 s): ctest runs every test of a
// file in a process of its own, so a shared run would be repeated.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>

#include "core/canonical_json.h"
#include "tests/test_util.h"

namespace tollgate {
namespace {

using testing::RunCommand;
using testing::TempDir;

bool PositiveFinite(const Json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
}

TEST(McpBenchSmoke, PrintsTheOverheadRatioAsItsLastLine) {
  TempDir dir;
  const auto run = RunCommand(std::string(TOLLGATE_BIN) + " bench mcp --quick --dir " + dir.path());
  std::cout << run.out << std::flush;
  EXPECT_EQ(run.exit_code, 0);
  std::string out = run.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const size_t nl = out.rfind('\n');
  ASSERT_NE(nl, std::string::npos) << "human-readable lines come before the JSON";
  const std::string last = out.substr(nl + 1);
  Json r;
  ASSERT_TRUE(ParseJson(last, &r).ok() && r.is_object()) << "last line: " << last;
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_EQ(r.value("bench", ""), "mcp");

  EXPECT_TRUE(PositiveFinite(r.value("mcp_overhead_vs_submit", Json()))) << r.dump();
  EXPECT_TRUE(PositiveFinite(r.value("mcp_overhead_vs_submit_modern", Json()))) << r.dump();
  for (const char* key : {"mcp_p50_ms", "mcp_p99_ms", "mcp_modern_p50_ms", "submit_p50_ms", "submit_p99_ms",
                          "mcp_ping_p50_ms", "mcp_tools_list_p50_ms"}) {
    EXPECT_TRUE(PositiveFinite(r.value(key, Json()))) << key << " = " << r.value(key, Json());
  }
  EXPECT_EQ(r["goals"].value("mcp_overhead_vs_submit", ""), "<= 1.2");
  EXPECT_TRUE(r["met"].value("mcp_overhead_vs_submit", Json()).is_boolean());
  EXPECT_EQ(r["goals"].value("mcp_overhead_vs_submit_modern", ""), "<= 1.2");
  EXPECT_TRUE(r["met"].value("mcp_overhead_vs_submit_modern", Json()).is_boolean());

  // Information only: the reference server measured, or null with the reason.
  const Json upstream = r.value("mcp_vs_upstream_direct", Json());
  if (upstream.is_null()) {
    EXPECT_TRUE(r.value("upstream_unavailable", Json()).is_string()) << r.dump();
  } else {
    EXPECT_TRUE(PositiveFinite(upstream)) << r.dump();
    EXPECT_TRUE(PositiveFinite(r.value("upstream_p50_ms", Json()))) << r.dump();
  }
}

}  // namespace
}  // namespace tollgate
