#!/usr/bin/env bash
# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (docs/testing.md): builds build-asan with TOLLGATE_SANITIZE=ON (-j2) and
# runs every test. Extra arguments go to ctest (e.g. -R Trust).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
cmake -S "$repo" -B "$repo/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOLLGATE_SANITIZE=ON
cmake --build "$repo/build-asan" -j2
cd "$repo/build-asan"
# halt_on_error: a report fails the test that caused it. Leaks are reported
# too (LeakSanitizer); suppressions for third-party libraries' intentional
# process-lifetime allocations live in scripts/lsan.supp.
export ASAN_OPTIONS="halt_on_error=1:detect_stack_use_after_return=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$repo/scripts/lsan.supp:${LSAN_OPTIONS:-}"
ctest --output-on-failure -j2 --timeout 1200 "$@"
