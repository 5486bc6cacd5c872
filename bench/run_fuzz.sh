#!/usr/bin/env bash
# A long fuzz campaign per target (docs/testing.md, "Fuzzing"), for bench/RESULTS.md.
#   bench/run_fuzz.sh 10000000   # ten million executions per target
#   bench/run_fuzz.sh 600s       # ten minutes per target
# Builds the libFuzzer binaries with clang into $BUILD_DIR (default build-fuzz; configured with
# -DMC_FUZZ=ON when it has none), runs each target of $TARGETS (default: all twelve) from its committed
# seed and regression corpora plus what earlier runs kept in $BUILD_DIR/fuzz/corpus/<target>, and prints
# one line per target: executions, seconds, executions per second, crashes (inputs that crashed,
# leaked, timed out or ran out of memory; kept in $BUILD_DIR/fuzz/crashes/<target>). libFuzzer stops a
# target at its first crash. Exit status 1 when any target crashed.
# First it prints the reference for the per-connection targets: what a bare loopback connection costs
# on this machine (bench/conn_rate.c). MC_FUZZ_SKIP_REGEX=1 is passed through (fuzz_master skips the regex opcodes while that defect is open).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ] || ! [[ $1 =~ ^[0-9]+s?$ ]]; then
  echo "usage: $0 EXECUTIONS|SECONDSs   (e.g. 10000000 or 600s)" >&2
  exit 2
fi
BUILD_DIR=${BUILD_DIR:-build-fuzz}
TARGETS=${TARGETS:-"master dataport desc ctrl http config auth snapshot rdma p2p witness dummy"}
if [[ $1 == *s ]]; then limit=(-max_total_time="${1%s}"); else limit=(-runs="$1"); fi

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  CC=clang cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMC_FUZZ=ON >/dev/null
else
  cmake -S . -B "$BUILD_DIR" >/dev/null # targets added since it was configured
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" --target conn_rate $(for t in $TARGETS; do printf 'fuzz_%s_libfuzzer ' "$t"; done) >/dev/null
# the machine's own rate for the targets that open a connection per input (dataport, ctrl, http): a bare
# loopback request/answer per connection served by a thread (bench/conn_rate.c)
echo "reference: $("$BUILD_DIR/tools/conn_rate" 5) (bare loopback connection, request and answer)"

src=tests/fuzz
failed=0
printf '%-10s %14s %9s %11s %8s\n' target executions seconds execs/s crashes
for t in $TARGETS; do
  work="$BUILD_DIR/fuzz/corpus/$t" crashes="$BUILD_DIR/fuzz/crashes/$t" log="$BUILD_DIR/fuzz/$t.log"
  mkdir -p "$work" "$crashes"
  before=$(find "$crashes" -type f | wc -l)
  dict=()
  if [ -f "$src/$t.dict" ]; then dict=(-dict="$src/$t.dict"); fi
  start=$(date +%s.%N)
  MC_LOG_LEVEL=${MC_LOG_LEVEL:-ERROR} "$BUILD_DIR/tests/fuzz_${t}_libfuzzer" "${limit[@]}" "${dict[@]}" -timeout=20 \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$work" "$src/corpus/$t" "$src/regress/$t" >"$log" 2>&1 || true
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  runs=${runs:-$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)}
  new=$(($(find "$crashes" -type f | wc -l) - before))
  [ "$new" -eq 0 ] || failed=1
  printf '%-10s %14s %9.0f %11.0f %8d\n' "$t" "${runs:-?}" "$secs" "$(awk -v r="${runs:-0}" -v s="$secs" 'BEGIN { print r / s }')" "$new"
done
exit $failed
