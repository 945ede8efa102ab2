#!/usr/bin/env bash
# Mutation check (docs/testing.md, "Mutation check"): removes each guarded
# check in turn from a scratch copy of the tree, builds the tests that should
# catch its removal and runs them. A mutation whose tests still pass is a
# check no test guards: the script prints its table and exits 1.
#
#   scripts/mutate.sh                 every mutation
#   scripts/mutate.sh 'role|redact'   those whose name matches (grep -E)
#   scripts/mutate.sh --list          the mutations; nothing is built
#   scripts/mutate.sh --check         each mutation's text is in the working
#                                     tree exactly once; nothing is built
#
# The copy and its build live in $TOLLGATE_MUTATE_DIR (default
# /tmp/tollgate-mutate) and are kept between runs: a run copies only the
# files that changed and the build recompiles only what they touch, so after
# the first (full) build each mutation costs one file's compile, a link and
# its tests. The working tree is only read (tracked and untracked files,
# not ignored ones). Builds run under `nice -n 19` so that other builds go
# first; TOLLGATE_MUTATE_LOCK=FILE also takes that flock around each build,
# TOLLGATE_MUTATE_JOBS sets -j (default 2).
#
# Each mutation replaces one exact piece of text, which must occur exactly
# once in its file: a mutation whose text is gone (the code was rewritten)
# fails the run before anything is built, so it never silently tests nothing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${TOLLGATE_MUTATE_DIR:-/tmp/tollgate-mutate}"
src="$work/src" build="$work/build" logs="$work/logs"
jobs="${TOLLGATE_MUTATE_JOBS:-2}"

names=() files=() froms=() tos=() targets=() tests=()
# mutation NAME FILE FROM TO TARGETS TESTS: in FILE, FROM becomes TO; then
# TARGETS (space-separated) are built and the ctest regex TESTS must fail.
mutation() { names+=("$1") files+=("$2") froms+=("$3") tos+=("$4") targets+=("$5") tests+=("$6"); }

# --- Guards of issue 28 (tests/guard_test.cpp) ---
mutation approver-role core/auth.cpp \
  'if (!who.Has("approver") && !who.Has("admin")) {' 'if (false) {' \
  guard_test 'GuardTest\.AKeyWithOnlyTheAuditorRole'
mutation known-kid-signature core/auth.cpp \
  'if (!key.Verify(jwt.signing_input, jwt.signature)) {' 'if (false) {' \
  guard_test 'GuardTest\.(AResponse|ARequest)NamingARegistered'
mutation file-subject execute/invocation_check.cpp \
  'if (!SameInvocation(decided_subject, subject)) {' 'if (false) {' \
  guard_test 'GuardTest\.A(Granted)?WriteFileDecidedForOnePath'

# --- Redaction: one vendor prefix at a time (core/redact.cpp) ---
redact_tests='RedactCorpus\.EveryVendorPrefixIsRedactedByItsOwnRule'
for p in glpat- npm_ ghs_ xoxb- sk_test_; do
  # The table's entry, e.g. {"glpat-", 20, TokenChar}, (checked below like any text).
  entry=$(grep -oE "\{\"$p\", [0-9]+, [A-Za-z]+\}," "$repo/core/redact.cpp" | head -1 || true)
  [ -n "$entry" ] || entry="{\"$p\", (no such entry)"
  mutation "redact-$p" core/redact.cpp "$entry" '' redact_corpus_test "$redact_tests"
done
mutation redact-ASIA core/redact.cpp '"AKIA", "ASIA",' '"AKIA",' redact_corpus_test "$redact_tests"

# --- Other security checks ---
mutation jwt-alg core/jwt.cpp \
  'if (*alg != "EdDSA") {' 'if (false) {' \
  jwt_test 'ParseJwtTest\.RefusesEveryAlgorithmButEdDsa'
mutation value-sha256 core/auth.cpp \
  'if (Str(jwt.claims, "value_sha256") != Sha256Hex(in.value)) {' 'if (false) {' \
  'stages_test approve_test' 'IngestTest\.IngestRefusesARequestWhoseBytesChangedAfterSigning|ApproveTest\.AnUnsignedResponseCountsForNothing'
mutation approve-args-hash approve/approve_stage.cpp \
  'if (resp["args_hash"] != req.value("args_hash", "")) {' 'if (false) {' \
  approve_test 'ApproveTest\.RefusalsAreLoggedWithTheirReason'
mutation approve-distinct-approvers approve/approve_stage.cpp \
  'if (g->data.value("approver", "") == approver) {' 'if (false) {' \
  approve_test 'ApproveTest\.QuorumOfTwoCountsDistinctApproversAndForwardsOnce'
mutation flow-matches-log core/flow_stage.cpp \
  'const std::string why = CompareWithLog(*flow, out->state, &code);' 'const std::string why;' \
  execute_stage_test 'ExecuteStageTest\.AFlow(WhoseRequestWasNeverReceived|ThatDiffersFromTheLog)DoesNotRun'
mutation execute-only-cleared execute/execute_stage.cpp \
  'if (flow.decision.is_null() || !state.cleared()) {' 'if (flow.decision.is_null()) {' \
  execute_stage_test 'ExecuteStageTest\.OnlyAllowedOrGrantedCallsRun'

die() { echo "mutate.sh: $*" >&2; exit 2; }
# Occurrences of the literal text $2 in file $1.
count() { FROM="$2" perl -0777 -ne '$n = () = /\Q$ENV{FROM}\E/g; print $n' "$1"; }
check_texts() {  # ROOT INDEX...
  local root="$1" i n
  shift
  for i in "$@"; do
    n=$(count "$root/${files[$i]}" "${froms[$i]}")
    [ "$n" = 1 ] || die "mutation ${names[$i]}: its text occurs $n times in ${files[$i]} (expected once): ${froms[$i]}"
  done
}

if [ "${1:-}" = "--list" ]; then
  for i in "${!names[@]}"; do printf '%-28s %-30s %s\n' "${names[$i]}" "${files[$i]}" "${tests[$i]}"; done
  exit 0
fi
pick=()
for i in "${!names[@]}"; do
  if [ -z "${1:-}" ] || grep -qE -- "$1" <<<"${names[$i]}"; then pick+=("$i"); fi
done
if [ "${1:-}" = "--check" ]; then
  check_texts "$repo" "${!names[@]}"
  echo "mutate.sh: all ${#names[@]} mutations find their text"
  exit 0
fi
[ "${#pick[@]}" -gt 0 ] || die "no mutation matches '$1' (see --list)"


# 1. The scratch copy: the working tree's files, copied when they differ (a
#    fresh mtime, so make rebuilds exactly those).
mkdir -p "$src" "$build" "$logs"
git -C "$repo" ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -f "$repo/$f" ] || continue  # deleted in the working tree
  if ! cmp -s "$repo/$f" "$src/$f"; then
    mkdir -p "$(dirname "$src/$f")"
    cp "$repo/$f" "$src/$f"
  fi
done

# 2. Every picked mutation must find its text exactly once, before any build.
check_texts "$src" "${pick[@]}"

build_targets() {  # LOG TARGET...
  local log="$1"
  shift
  local cmd=(nice -n 19 cmake --build "$build" -j"$jobs" --target "$@")
  if [ -n "${TOLLGATE_MUTATE_LOCK:-}" ]; then cmd=(flock "$TOLLGATE_MUTATE_LOCK" "${cmd[@]}"); fi
  "${cmd[@]}" >"$log" 2>&1
}
run_tests() {  # LOG REGEX
  (cd "$build" && nice -n 19 ctest -R "$2" --timeout 300 --output-on-failure) >"$1" 2>&1
}
listed() { (cd "$build" && ctest -N -R "$1") | sed -n 's/^Total Tests: //p'; }

# 3. The baseline: configure (once), build every needed target, and every
#    picked mutation's tests pass unmutated (and exist).
valijson="$(sed -n 's/^VALIJSON_INCLUDE_DIR:PATH=//p' "$repo/build/CMakeCache.txt" 2>/dev/null || true)"
[ -n "$valijson" ] || valijson="$repo/.deps/valijson/include"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DVALIJSON_INCLUDE_DIR="$valijson" >"$logs/configure.log" 2>&1 ||
    die "configure failed: $logs/configure.log"
fi
all_targets=() all_tests=""
for i in "${pick[@]}"; do
  for t in ${targets[$i]}; do
    case " ${all_targets[*]} " in *" $t "*) ;; *) all_targets+=("$t") ;; esac
  done
  all_tests="${all_tests:+$all_tests|}${tests[$i]}"
done
echo "mutate.sh: building ${all_targets[*]} in $build (log: $logs/baseline-build.log)"
t0=$(date +%s)
build_targets "$logs/baseline-build.log" "${all_targets[@]}" || die "the unmutated build failed: $logs/baseline-build.log"
echo "mutate.sh: built in $(($(date +%s) - t0)) s; running the tests unmutated"
for i in "${pick[@]}"; do
  n=$(listed "${tests[$i]}")
  [ "${n:-0}" -gt 0 ] || die "mutation ${names[$i]}: no test matches '${tests[$i]}'"
done
run_tests "$logs/baseline-tests.log" "$all_tests" || die "the tests fail with no mutation: $logs/baseline-tests.log"

# 4. Each mutation: apply, build its targets, run its tests, restore.
applied="" saved="$work/saved"
restore() {
  if [ -n "$applied" ]; then
    cp "$saved" "$src/$applied"  # a fresh mtime: the next build recompiles it
    applied=""
  fi
}
trap restore EXIT
trap 'restore; exit 130' INT TERM
rows=() bad=0
for i in "${pick[@]}"; do
  name="${names[$i]}" file="${files[$i]}"
  cp "$src/$file" "$saved"
  applied="$file"
  FROM="${froms[$i]}" TO="${tos[$i]}" perl -0777 -i -pe 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$src/$file"
  cmp -s "$saved" "$src/$file" && die "mutation $name changed nothing in $file"
  t0=$(date +%s)
  n=$(listed "${tests[$i]}")
  if ! build_targets "$logs/$name-build.log" ${targets[$i]}; then
    caught="BUILD FAILED ($logs/$name-build.log)"
    bad=1
  elif run_tests "$logs/$name-tests.log" "${tests[$i]}"; then
    caught="NO ($logs/$name-tests.log)"
    bad=1
  else
    caught="yes"
  fi
  restore
  rows+=("| $name | $file | $n: \`${tests[$i]//|/\\|}\` | $caught |")  # a | in a cell is \|
  echo "mutate.sh: $name: caught $caught ($(($(date +%s) - t0)) s)"
done

echo
echo "| mutation | file | tests run | caught |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit "$bad"
