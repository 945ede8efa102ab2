// The MCP gateway benchmark behind `tollgate bench mcp`: what an agent pays
// for speaking MCP to `tollgate mcp` (stdio) instead of publishing its
// signed requests to Kafka itself. One embedded pipeline (buffered log,
// the shipped default policy, which allows `echo`, plus the reference
// server as an upstream when node has it), one agent key, and three
// clients of the same `echo` call, one call at a time, in alternating rounds:
//
//   mcp       a `tollgate mcp` child process (this binary) spoken to over its
//             stdin/stdout: newline-delimited JSON-RPC, initialize, then
//             tools/call {name: echo}; timed from writing the line to reading
//             its response.
//   submit    the same call as `tollgate submit --wait` makes it: a request
//             signed with the same key, published to the requests topic and
//             awaited on the results topic by a consumer subscribed before
//             the clock starts (mcp::PipelineClient, the gateway's own bus
//             client); timed from making the request to its result.
//   upstream  (information) the same JSON-RPC client calling the reference
//             MCP server directly (`node .../server-everything/dist/index.js
//             stdio`, tool echo {message}); null with a reason when node or
//             the package is missing — the benchmark never fails for it.
//   via       (information) that server declared as the pipeline's upstream
//             MCP server `everything`, its echo called through `tollgate
//             mcp` as mcp__everything__echo; mcp_vs_upstream_direct =
//             p50(via) ÷ p50(upstream).
//
// mcp_overhead_vs_submit = p50(mcp) ÷ p50(submit), goal <= 1.2.
#pragma once

#include <cstddef>
#include <string>

#include "core/canonical_json.h"

namespace tollgate::bench {

struct McpBenchOptions {
  std::string dir;             // scratch directory (created, then removed); "" = a temp dir
  std::string binary;          // the tollgate binary to run `mcp` from; "" = this process's own executable
  std::string mcp_server_dir;  // where npm installed server-everything (tests/mcp, or the package
                               // itself); "" = tests/mcp above the binary, else of the source tree
  size_t calls = 40;           // timed calls per client per round ...
  size_t rounds = 5;           // ... in this many rounds (mcp, submit, upstream, mcp, ...)
  size_t warmup = 10;          // untimed calls per client first
  std::string durability = "buffered";  // of the pipeline's log, as the pipeline bench's headline
  bool quick = false;                   // small sizes, for tests
};

// Returns {"bench": "mcp", "mcp_overhead_vs_submit", "mcp_vs_upstream_direct"
// (null, with "upstream_unavailable", when the reference server cannot be
// run), "mcp_p50_ms", "mcp_p99_ms", "submit_p50_ms", "submit_p99_ms",
// "upstream_p50_ms", "upstream_p99_ms", "mcp_ping_p50_ms" and
// "mcp_tools_list_p50_ms" (where the gateway's time goes), sizes, "goals",
// "met", "notes"}, or {"error": ...} (the scratch directory, with the child
// processes' stderr, is then kept and named in "logs"). Progress goes to
// stderr. Every child process is killed before it returns.
Json RunMcpBench(const McpBenchOptions& options);

}  // namespace tollgate::bench
