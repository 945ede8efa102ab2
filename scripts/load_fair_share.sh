#!/bin/sh
# The fair-sharing load test at full size (issue 28; docs/http_api.md,
# "Limits"): against a real `tollgate up`, one agent token opens 200 MCP
# event streams, 200 calls that ask for approval and hang up, 5,000 MCP
# sessions and 100 idle sockets, while an approver of another org lists and
# approves its agent's call, /healthz answers and that agent completes
# calls; then every slot must be free again within 10 s. ctest runs the same
# test at a fifth of this (Mcp.FairShareUnderAnAgentFlood).
#
#   scripts/load_fair_share.sh [SCALE]     # SCALE: 1 (default), 2 = double
#
# Needs the build (build/cli/tollgate) and tests/mcp/node_modules (setup.sh).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TOLLGATE_BIN:-$root/build/cli/tollgate}
[ -x "$bin" ] || { echo "no $bin: build first (cmake --build build)" >&2; exit 2; }
cd "$root/tests/mcp"
TOLLGATE_BIN=$bin TOLLGATE_FAIR_SHARE_SCALE=${1:-1} exec node --test --test-concurrency=1 fair_share.test.mjs
