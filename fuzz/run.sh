#!/bin/sh
# Runs one libFuzzer target for a bounded number of iterations from its seed
# corpus (fuzz/corpus/<target>, read only: what the run finds goes to a
# scratch dir). Usage: run.sh BINARY SEED_DIR RUNS
set -eu
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
exec "$1" -runs="$3" -max_len=65536 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$work" "$2"
