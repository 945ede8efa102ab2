#!/usr/bin/env bash
# The run command: installs what is missing, builds the tollgate binary, runs
# `tollgate up` on embedded defaults with its data under ./tollgate-data.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
cmake -S "$repo" -B "$repo/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$repo/build" -j2 --target tollgate
exec "$repo/build/cli/tollgate" up --data "${TOLLGATE_DATA:-$repo/tollgate-data}" "$@"
