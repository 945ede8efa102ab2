#!/usr/bin/env bash
# The test command: installs what is missing, builds with -j2, runs every test.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
cmake -S "$repo" -B "$repo/build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$repo/build" -j2
cd "$repo/build"
ctest --output-on-failure -j2 "$@"
