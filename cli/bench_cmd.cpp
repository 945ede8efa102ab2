// `tollgate bench NAME`: benchmarks that print, as their last line, one JSON
// object of ratios against baselines measured in the same run.
#include <iostream>

#include "bench/log_bench.h"
#include "cli/commands.h"

namespace tollgate::cli {

void AddBenchCommands(CLI::App& app, int* exit_code) {
  auto* bench = app.add_subcommand("bench", "run a benchmark; the last line is a JSON object of ratios");
  bench->require_subcommand(1);
  auto opts = std::make_shared<bench::LogBenchOptions>();
  auto* log = bench->add_subcommand("log", "event log: append, group commit, query");
  log->add_option("--dir", opts->dir, "scratch directory (default: a temp dir)");
  log->add_option("--events", opts->append_events, "events for the append test")->capture_default_str();
  log->add_flag("--quick", opts->quick, "small sizes (seconds, not minutes)");
  log->callback([opts, exit_code] {
    Json result = bench::RunLogBench(*opts);
    std::cout << result.dump() << std::endl;
    *exit_code = result.contains("error") ? 1 : 0;
  });
}

}  // namespace tollgate::cli
