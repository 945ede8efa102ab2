#!/bin/sh
# The layering of issue 16, checked on the source tree (run by ctest as
# Layering.StagesSeeNoKafkaNoRocksdbAndTheRuntimeNoStage):
#   - the contract (core/) and the stage libraries (ingest, decide, approve,
#     execute) include nothing of the runtime, the log, the deployments or
#     the HTTP API, and no Kafka or RocksDB header;
#   - their CMake targets link the contract only (plus yaml-cpp and curl);
#   - the runtime (runtime/) names no stage and includes no RocksDB;
#   - bench/ does not reach into cli/;
#   - the log (audit/), the HTTP API (api/) and the observers (observe/)
#     include no stage folder: they see stages only through core/ (issue 31;
#     docs/architecture.md "Layering").
# Prints each violation; exits 1 if there is any.
cd "$(dirname "$0")/.." || exit 2
bad=0
say() { echo "layering: $*"; bad=1; }

for d in core ingest decide approve execute; do
  hits=$(grep -rnE '#include [<"](runtime|audit|deploy|api|cli)/|#include [<"](rocksdb|librdkafka)/' "$d" --include='*.h' --include='*.cpp')
  [ -n "$hits" ] && say "$d includes what a stage must not see:
$hits"
done
for d in core ingest decide approve execute; do
  links=$(sed -n '/target_link_libraries/,/)/p' "$d/CMakeLists.txt" | tr -s ' \n' ' ')
  for lib in tollgate_runtime tollgate_audit tollgate_pipeline RocksDB RDKAFKA; do
    case "$links" in *"$lib"*) say "$d/CMakeLists.txt links $lib";; esac
  done
done
hits=$(grep -rniwE 'ingest|decide|approve|execute' runtime)
[ -n "$hits" ] && say "the runtime names a stage:
$hits"
hits=$(grep -rnE '#include [<"](rocksdb|audit)/' runtime)
[ -n "$hits" ] && say "the runtime reaches the log:
$hits"
hits=$(grep -rnE '#include "cli/' bench)
[ -n "$hits" ] && say "bench/ reaches into cli/:
$hits"
for d in audit api observe; do
  hits=$(grep -rnE '#include [<"](ingest|decide|approve|execute)/' "$d" --include='*.h' --include='*.cpp')
  [ -n "$hits" ] && say "$d includes a stage folder:
$hits"
done
[ $bad = 0 ] && echo "layering: ok"
exit $bad
