#!/usr/bin/env bash
# Python vs C on the same work: batch_put_from and batch_get_into of 64 KiB and 1 MiB objects (batches of
# $BATCH) from a pure client into a storage client's segment, through the Python package
# (bench/py_store_bench.py) and through the C API (store_bench --mode=client, the same cases and method).
# Each C figure is the mean of a run right before and right after the Python one (machine load drifts);
# prints a markdown table with the ratio Python / C (target >= 0.9).
# Builds nothing: usage  bench/run_py_bench.sh [BUILD_DIR=./build]   (DUR seconds per case, default 2;
# BATCH default 16). Takes ~1 minute. Every process it starts is stopped on exit, by its own pid.
set -u -o pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BUILD=${1:-./build}
DUR=${DUR:-2}
BATCH=${BATCH:-16}
PY=${PYTHON:-/usr/bin/python3}
LIB_PYTHON=$PY # free_port's python
BENCH=$BUILD/tools/store_bench
MASTER=$BUILD/tools/mooncake_master
HERE=$(cd "$(dirname "$0")" && pwd)
for f in "$BENCH" "$MASTER"; do [ -x "$f" ] || { echo "missing $f (build first)" >&2; exit 1; }; done
[ -d "$BUILD/python/mooncake" ] || { echo "missing $BUILD/python/mooncake (build first)" >&2; exit 1; }
export PYTHONPATH=$BUILD/python

WORK=$(mktemp -d /tmp/py_bench.XXXXXX)
BG_PIDS=()
trap finish EXIT
trap 'exit 130' INT TERM
fail() { echo "run_py_bench: $*" >&2; exit 1; }

RPC=$(free_port); META=$(free_port); METRICS=$(free_port)
"$MASTER" --rpc_port="$RPC" --enable_http_metadata_server --http_metadata_server_port="$META" \
  --metrics_port="$METRICS" >"$WORK/master.log" 2>&1 &
BG_PIDS+=($!)
wait_port "$RPC" "" 100 0.1 && wait_port "$META" "" 100 0.1 || fail "master did not start"
ADDR=(--metadata_server="http://127.0.0.1:$META/metadata" --master_server_addr="127.0.0.1:$RPC")
"$BENCH" --mode=holder "${ADDR[@]}" --global_segment_size=2GiB --local_buffer_size=1MiB >"$WORK/holder.out" 2>&1 &
BG_PIDS+=($!)
wait_for "^HOLDER ready" "$WORK/holder.out" 100 0.1
HOLDER=$(sed -n 's/^HOLDER ready name=\([^ ]*\).*/\1/p' "$WORK/holder.out")
[ -n "$HOLDER" ] || fail "holder did not become ready"

gbps() { sed -n 's/^RESULT .* gbps=\([^ ]*\).*/\1/p'; }
run_c() { "$BENCH" --mode=client "${ADDR[@]}" --global_segment_size=0 --preferred="$HOLDER" --duration="$DUR" \
            --cases="$1" 2>>"$WORK/c.err" | gbps; }
run_py() { "$PY" "$HERE/py_store_bench.py" "${ADDR[@]}" --preferred="$HOLDER" --duration="$DUR" --cases="$1" \
             2>>"$WORK/py.err" | gbps; }

echo "| op | object | batch | C GB/s | Python GB/s | Python / C |"
echo "|---|---|---|---|---|---|"
for size in 64KiB 1MiB; do
  for op in put get; do
    case_="$op:$size:$BATCH"
    c1=$(run_c "$case_") || fail "C $case_"
    p=$(run_py "$case_") || fail "Python $case_ ($(tail -3 "$WORK/py.err"))"
    c2=$(run_c "$case_") || fail "C $case_"
    [ -n "$c1" ] && [ -n "$p" ] && [ -n "$c2" ] || fail "no result for $case_"
    "$PY" -c "import sys; c=(float(sys.argv[1])+float(sys.argv[2]))/2; p=float(sys.argv[3]);
print('| batch_%s | %s | %s | %.2f | %.2f | %.2fx |' % (sys.argv[4], sys.argv[5], sys.argv[6], c, p, p / c))" \
      "$c1" "$c2" "$p" "$([ "$op" = put ] && echo put_from || echo get_into)" "$size" "$BATCH"
  done
done
