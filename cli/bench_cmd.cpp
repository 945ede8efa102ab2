// `tollgate bench NAME`: benchmarks that print, as their last line, one JSON
// object of ratios against baselines measured in the same run.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "bench/child_process.h"
#include "bench/decide_bench.h"
#include "bench/distributed_bench.h"
#include "bench/log_bench.h"
#include "bench/mcp_bench.h"
#include "bench/pipeline_bench.h"
#include "bench/replay_bench.h"
#include "bench/startup_bench.h"
#include "cli/commands.h"
#include "cli/signals.h"

namespace tollgate::cli {
namespace {

// `bench pipeline`'s figures for a reader, one system a line, then the
// ratios against their goals (the JSON line that follows has them all).
void PrintPipelineSummary(const Json& r) {
  auto num = [&r](const std::string& k) { return r.value(k, 0.0); };
  const std::string def = r.value("default_settings", "");
  auto line = [&](const char* name, const std::string& k) {
    if (!r.contains(k + "_req_per_s")) return;
    std::printf("%-34s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  %6.1f us CPU/request\n", name,
                num(k + "_req_per_s"), num(k + "_p50_ms"), num(k + "_p99_ms"),
                num(k + "_cpu_us_per_request"));
  };
  line(def == "latency_first" ? "pipeline, latency first (default)" : "pipeline, latency first",
       "pipeline_latency_first");
  line(def == "throughput_first" ? "pipeline, throughput first (default)" : "pipeline, throughput first",
       "pipeline_throughput_first");
  line("pipeline, durability=sync", "pipeline_sync");
  line("relay", "relay");
  line("verifying relay", "verifying_relay");
  line("minimal relay", "min_relay");
  for (const char* k : {"throughput_vs_relay", "throughput_vs_verifying_relay", "p99_vs_relay",
                        "p50_vs_min_relay", "latency_first_throughput_vs_relay"}) {
    std::printf("%s %.3f (goal %s, %s)\n", k, num(k), r["goals"].value(k, "").c_str(),
                r["met"].value(k, false) ? "met" : "missed");
  }
  std::printf("latency_first_throughput_cost %.3f; verify %.1f us, sign %.1f us per request\n",
              num("latency_first_throughput_cost"), num("verify_us_per_request"), num("sign_us_per_request"));
  std::fflush(stdout);
}

// `bench log`: its flags and the run.
void AddLogBench(CLI::App* bench, int* exit_code) {
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

// `bench decide`: its flags and the run.
void AddDecideBench(CLI::App* bench, int* exit_code) {
  auto dopts = std::make_shared<bench::DecideBenchOptions>();
  auto* decide = bench->add_subcommand(
      "decide", "the policy engine: us per decision at 100 and 1,000 rules vs std::regex");
  decide->add_option("--decisions", dopts->decisions, "timed decisions per policy size")
      ->capture_default_str();
  decide->add_flag("--quick", dopts->quick, "small sizes (seconds)");
  decide->callback([dopts, exit_code] {
    Json result = bench::RunDecideBench(*dopts);
    if (!result.contains("error")) {
      std::cout << "decide: p50 " << result["p50_us"] << " us, p99 " << result["p99_us"]
                << " us per decision (100 rules); "
                << "1,000 rules p50 " << result["p50_us_1000"] << " us; with decision JSON p50 "
                << result["p50_json_us"] << " us; with 20 history rules over sessions of 1,000 calls p50 "
                << result["p50_us_history"] << " us, p99 " << result["p99_us_history"] << " us\n";
    }
    std::cout << result.dump() << std::endl;
    *exit_code = result.contains("error") ? 1 : 0;
  });
}

// `bench pipeline` (embedded or --distributed): its flags and the run.
void AddPipelineBench(CLI::App* bench, int* exit_code) {
  auto popts = std::make_shared<bench::PipelineBenchOptions>();
  auto distopts = std::make_shared<bench::DistributedBenchOptions>();
  auto distributed = std::make_shared<bool>(false);
  auto* pipeline = bench->add_subcommand(
      "pipeline",
      "requests end to end (ingest, decide, execute echo, every event logged) vs a bare 3-hop relay");
  pipeline->add_flag("--distributed", *distributed,
                     "one process per stage (`tollgate broker`, `stage ...`): throughput vs the relay, and "
                     "execute_scale_2x (a CLI tool that waits 20 ms, two execute processes / one)");
  pipeline->add_option("--dir", popts->dir, "scratch directory (default: a temp dir)");
  pipeline
      ->add_option("--requests", popts->requests, "requests for the throughput test (--distributed: 20000)")
      ->capture_default_str();
  pipeline->add_option("--rounds", popts->rounds, "throughput rounds (the median is reported)")
      ->capture_default_str();
  pipeline
      ->add_option("--sleep-requests", distopts->sleep_requests,
                   "--distributed: cli:sleep requests per round")
      ->capture_default_str();
  pipeline
      ->add_option("--workers", distopts->workers,
                   "--distributed: tools at once per execute process for execute_scale_2x")
      ->capture_default_str();
  pipeline->add_option("--rate", popts->rate, "requests per second for the latency test")
      ->capture_default_str();
  pipeline->add_option("--seconds", popts->seconds, "duration of the latency test")->capture_default_str();
  pipeline->add_option("--batch", popts->max_batch, "max batch of the stage runners and the relay")
      ->capture_default_str();
  pipeline->add_flag_function(
      "--no-sync", [popts](std::int64_t) { popts->sync = false; }, "skip the durability=sync figures");
  pipeline->add_flag("--quick", popts->quick, "small sizes (seconds, not minutes)");
  pipeline->callback([pipeline, popts, distopts, distributed, exit_code] {
    if (*distributed) {
      distopts->dir = popts->dir;
      distopts->quick = popts->quick;
      // Its own default: its relay rounds are short at the embedded default.
      if (pipeline->count("--requests") > 0) distopts->requests = popts->requests;
      distopts->rounds = popts->rounds;
      // Ctrl-C: the stage processes end with this one.
      BlockStopSignals();
      std::thread([] {
        const int sig = WaitForSignal();
        bench::KillEveryChild();
        std::_Exit(128 + sig);
      }).detach();
    }
    Json result = *distributed ? bench::RunDistributedBench(*distopts) : bench::RunPipelineBench(*popts);
    if (!*distributed && !result.contains("error")) PrintPipelineSummary(result);
    std::cout << result.dump() << std::endl;
    *exit_code = result.contains("error") ? 1 : 0;
  });
}

// `bench mcp`: its flags and the run.
void AddMcpBench(CLI::App* bench, int* exit_code) {
  auto mopts = std::make_shared<bench::McpBenchOptions>();
  auto* mcp = bench->add_subcommand(
      "mcp",
      "an echo tools/call through `tollgate mcp` (stdio) vs the same call submitted straight to Kafka");
  mcp->add_option("--dir", mopts->dir, "scratch directory (default: a temp dir)");
  mcp->add_option("--calls", mopts->calls, "timed calls per client per round")->capture_default_str();
  mcp->add_option("--rounds", mopts->rounds, "rounds (mcp, submit, upstream alternate)")
      ->capture_default_str();
  mcp->add_option("--warmup", mopts->warmup, "untimed calls per client first")->capture_default_str();
  mcp->add_option("--durability", mopts->durability, "the pipeline's log: buffered or sync")
      ->capture_default_str();
  mcp->add_option(
      "--mcp-server-dir", mopts->mcp_server_dir,
      "where npm installed @modelcontextprotocol/server-everything (default: tests/mcp of the source tree)");
  mcp->add_flag("--quick", mopts->quick, "small sizes (seconds)");
  mcp->callback([mopts, exit_code] {
    Json r = bench::RunMcpBench(*mopts);
    if (!r.contains("error")) {
      auto num = [&r](const char* k, const char* unit) {
        if (!r[k].is_number()) return std::string("n/a");
        char buf[48];
        std::snprintf(buf, sizeof buf, "%.2f%s", r[k].get<double>(), unit);
        return std::string(buf);
      };
      auto ms = [&num](const char* k) { return num(k, " ms"); };
      std::cout << "mcp (tollgate mcp, stdio): p50 " << ms("mcp_p50_ms") << ", p99 " << ms("mcp_p99_ms")
                << "\n"
                << "submit (Kafka, signed):    p50 " << ms("submit_p50_ms") << ", p99 " << ms("submit_p99_ms")
                << "\n"
                << "upstream MCP server:       p50 " << ms("upstream_p50_ms") << ", p99 "
                << ms("upstream_p99_ms")
                << (r.contains("upstream_unavailable")
                        ? " (" + r["upstream_unavailable"].get<std::string>() + ")"
                        : "")
                << "; through tollgate p50 " << ms("upstream_via_tollgate_p50_ms") << "\n"
                << "mcp_overhead_vs_submit " << num("mcp_overhead_vs_submit", "") << " (goal <= 1.2, "
                << (r["met"]["mcp_overhead_vs_submit"].get<bool>() ? "met" : "missed")
                << "); mcp_overhead_vs_submit_modern (2026-07-28) "
                << num("mcp_overhead_vs_submit_modern", "") << " (goal <= 1.2, "
                << (r["met"]["mcp_overhead_vs_submit_modern"].get<bool>() ? "met" : "missed")
                << "); mcp_vs_upstream_direct " << num("mcp_vs_upstream_direct", "") << "\n";
    }
    std::cout << r.dump() << std::endl;
    *exit_code = r.contains("error") ? 1 : 0;
  });
}

// `bench replay`: its flags and the run.
void AddReplayBench(CLI::App* bench, int* exit_code) {
  auto ropts = std::make_shared<bench::ReplayBenchOptions>();
  auto* rep =
      bench->add_subcommand("replay", "re-decision of a large session vs a raw scan of the same events");
  rep->add_option("--dir", ropts->dir, "scratch directory (default: a temp dir)");
  rep->add_option("--requests", ropts->requests, "requests in the session (4 events each)")
      ->capture_default_str();
  rep->add_option("--rounds", ropts->rounds, "measured rounds (medians are reported)")->capture_default_str();
  rep->add_flag("--quick", ropts->quick, "small sizes (seconds)");
  rep->callback([ropts, exit_code] {
    Json result = bench::RunReplayBench(*ropts);
    std::cout << result.dump() << std::endl;
    *exit_code = result.contains("error") ? 1 : 0;
  });
}

// `bench startup`: its flags and the run.
void AddStartupBench(CLI::App* bench, int* exit_code) {
  auto sopts = std::make_shared<bench::StartupBenchOptions>();
  auto* st =
      bench->add_subcommand("startup", "start-up time on a 10x longer history with the same unfinished work");
  st->add_option("--dir", sopts->dir, "scratch directory (default: a temp dir)");
  st->add_option("--requests", sopts->requests, "finished requests in the short history")
      ->capture_default_str();
  st->add_option("--growth", sopts->growth, "how many times longer the long history is")
      ->capture_default_str();
  st->add_option("--pending", sopts->pending, "pending approvals in both")->capture_default_str();
  st->add_option("--rounds", sopts->rounds, "alternating starts of each (medians are reported)")
      ->capture_default_str();
  st->add_flag("--quick", sopts->quick, "small sizes (seconds)");
  st->callback([sopts, exit_code] {
    Json r = bench::RunStartupBench(*sopts);
    if (!r.contains("error")) {
      std::cout << "startup_growth_10x " << r["startup_growth_10x"].get<double>() << " (goal <= 1.5, "
                << (r["met"]["startup_growth_10x"].get<bool>() ? "met" : "missed")
                << "): " << r["long_startup_s"].get<double>() << " s on " << r["long_events"] << " events vs "
                << r["short_startup_s"].get<double>() << " s on " << r["short_events"]
                << "; decide's whole-log fold of the long one alone: " << r["full_fold_long_s"].get<double>()
                << " s\n";
    }
    std::cout << r.dump() << std::endl;
    *exit_code = r.contains("error") ? 1 : 0;
  });
}

}  // namespace

void AddBenchCommands(CLI::App& app, int* exit_code) {
  auto* bench = app.add_subcommand("bench", "run a benchmark; the last line is a JSON object of ratios");
  bench->require_subcommand(1);
  // One function a benchmark, in the order `bench --help` lists them.
  AddLogBench(bench, exit_code);
  AddDecideBench(bench, exit_code);
  AddPipelineBench(bench, exit_code);
  AddMcpBench(bench, exit_code);
  AddReplayBench(bench, exit_code);
  AddStartupBench(bench, exit_code);
}

}  // namespace tollgate::cli
