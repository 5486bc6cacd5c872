#!/usr/bin/env bash
# Measures transfer_engine_bench against its references in one run and prints a markdown table:
#   TCP path (MC_FORCE_TCP=1)      vs single-stream iperf3 over loopback (target: ratio >= 1.0)
#   same-host path (shared memory) vs single-thread memcpy, same block and working set (target >= 0.7)
#   4 KiB round-trip latency (batch 1, one thread) over both paths.
# Builds nothing: usage  bench/run_te_bench.sh [BUILD_DIR=./build]   (DUR=seconds per run, default 5)
# Every background process it starts is stopped on exit (trap), by its own pid; any failure aborts the run.
set -u -o pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILD=${1:-./build}
DUR=${DUR:-5}
BENCH=$BUILD/tools/transfer_engine_bench
MEMCPY=$BUILD/tools/memcpy_ref
need_bins "$BUILD" "$BENCH" "$MEMCPY"
need_cmds iperf3

WORK=$(mktemp -d /tmp/te_bench.XXXXXX)
BG_PIDS=()
trap finish EXIT
trap 'exit 130' INT TERM

export MC_LOG_LEVEL=${MC_LOG_LEVEL:-WARN}
ROWS=()
row() { ROWS+=("|$(printf ' %s |' "$@")"); }
fail() { echo "error: $*" >&2; for f in "$WORK"/*.err; do echo "== $f" >&2; tail -5 "$f" >&2; done; exit 1; }
meets() { awk -v r="$1" -v t="$2" 'BEGIN { print (r + 0 >= t) ? "yes" : "**no**" }'; }

# ---------------------------------------------------------------- helpers

TARGET_PID=""
SEG=""
# start_target FORCE_TCP BUFFER_SIZE: starts a P2PHANDSHAKE target, sets SEG to its segment name.
start_target() {
  local out=$WORK/target.out
  : >"$out"
  MC_FORCE_TCP=$1 "$BENCH" --mode=target --metadata_server=P2PHANDSHAKE --buffer_size="$2" \
    --threads=1 --batch_size=1 --block_size=4096 >"$out" 2>"$WORK/target.err" &
  TARGET_PID=$!
  BG_PIDS+=("$TARGET_PID")
  wait_for "Target ready" "$out" 300 0.05 "$TARGET_PID" || { [ $? = 2 ] && fail "target exited"; }
  SEG=$(sed -n 's/^Target ready: segment //p' "$out")
  [ -n "$SEG" ] || fail "target did not become ready"
}

stop_target() {
  kill -INT "$TARGET_PID" 2>/dev/null
  wait "$TARGET_PID" 2>/dev/null || echo "warning: target exited with $?" >&2
  forget "$TARGET_PID"
}

# initiator FORCE_TCP OP BLOCK BATCH [extra flags]: prints "<GB/s> <seconds> <batches> [<p50> <p99>]".
initiator() {
  local ft=$1 op=$2 block=$3 batch=$4
  shift 4
  local out=$WORK/init.out
  MC_FORCE_TCP=$ft "$BENCH" --mode=initiator --metadata_server=P2PHANDSHAKE --segment_id="$SEG" \
    --operation="$op" --block_size="$block" --batch_size="$batch" --threads=1 --duration="$DUR" \
    --buffer_size="$((block * batch))" "$@" >"$out" 2>"$WORK/init.err" || fail "initiator $op $block failed"
  local res lat
  res=$(sed -n 's/^Test completed: duration \([0-9.]*\), batch count \([0-9]*\), throughput \([0-9.]*\) GB\/s$/\3 \1 \2/p' "$out")
  lat=$(sed -n 's/^Batch latency: p50 \([0-9.]*\) us, p99 \([0-9.]*\) us.*/\1 \2/p' "$out")
  [ -n "$res" ] || fail "no result line from initiator"
  echo "$res $lat"
}

iperf_gbs() {
  local port
  port=$(free_port)
  iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
  local spid=$!
  BG_PIDS+=("$spid")
  sleep 0.3
  iperf3 -c 127.0.0.1 -p "$port" -t "$DUR" -J >"$WORK/iperf.json" 2>/dev/null || fail "iperf3 client failed"
  wait "$spid" 2>/dev/null
  forget "$spid"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.2f" % (d["end"]["sum_received"]["bits_per_second"] / 8e9))' \
    "$WORK/iperf.json"
}

# memcpy_gbs BLOCK WORKING_SET: single-thread memcpy throughput in GB/s.
memcpy_gbs() {
  local v
  v=$("$MEMCPY" --block_size="$1" --buffer_size="$2" --duration=2 | sed -n 's/.*throughput \([0-9.]*\) GB\/s$/\1/p')
  [ -n "$v" ] || fail "memcpy_ref failed"
  echo "$v"
}

# Checks that the engine took the intended path (the initiator logs it at INFO).
check_path() {
  local want=$1
  MC_LOG_LEVEL=INFO MC_FORCE_TCP=$2 "$BENCH" --metadata_server=P2PHANDSHAKE --segment_id="$SEG" --threads=1 \
    --batch_size=1 --block_size=4096 --buffer_size=4096 --duration=1 >/dev/null 2>"$WORK/path.err" || fail "path probe failed"
  grep -q "using protocol $want" "$WORK/path.err" || fail "expected the $want path: $(grep protocol "$WORK/path.err")"
}

# ---------------------------------------------------------------- machine

echo "# transfer_engine_bench vs references"
echo
echo "- host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
echo "- duration per run: ${DUR} s, one initiator thread, P2PHANDSHAKE, sizes in GB/s (1e9 B/s)"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# ---------------------------------------------------------------- (a) + (b) TCP vs iperf3
# Loopback bandwidth and memory bandwidth drift in VMs, so every pair of our runs (write, read) sits
# between two reference runs, and its ratio is taken against the mean of those two.

mean() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (a + b) / 2 }'; }

start_target 1 32MiB
check_path tcp 1
ref_before=$(iperf_gbs) || exit 1
for spec in "65536 128 64KiB" "1048576 16 1MiB" "4194304 8 4MiB"; do
  set -- $spec
  w=$(initiator 1 write "$1" "$2" | cut -d' ' -f1) || exit 1
  r=$(initiator 1 read "$1" "$2" | cut -d' ' -f1) || exit 1
  ref_after=$(iperf_gbs) || exit 1
  ref=$(mean "$ref_before" "$ref_after")
  for op in write read; do
    v=$w
    [ "$op" = read ] && v=$r
    q=$(ratio "$v" "$ref")
    row "TCP (MC_FORCE_TCP=1)" "$op" "$3" "$2" "$v" "iperf3, 1 stream: $ref ($ref_before / $ref_after)" "$q" ">= 1.0" "$(meets "$q" 1.0)"
  done
  ref_before=$ref_after
done
stop_target

# ---------------------------------------------------------------- (c) same host vs memcpy
# memcpy, write, memcpy, read, memcpy: each of our runs is compared with the two memcpy runs around it.

start_target 0 128MiB
check_path shm 0
for spec in "1048576 64 1MiB" "4194304 16 4MiB" "67108864 2 64MiB"; do
  set -- $spec
  ws=$(($1 * $2))
  ref_before=$(memcpy_gbs "$1" "$ws") || exit 1
  for op in write read; do
    v=$(initiator 0 "$op" "$1" "$2" | cut -d' ' -f1) || exit 1
    ref_after=$(memcpy_gbs "$1" "$ws") || exit 1
    ref=$(mean "$ref_before" "$ref_after")
    q=$(ratio "$v" "$ref")
    row "same host (shm)" "$op" "$3" "$2" "$v" "memcpy, 1 thread, $((ws >> 20)) MiB: $ref ($ref_before / $ref_after)" "$q" ">= 0.7" "$(meets "$q" 0.7)"
    ref_before=$ref_after
  done
done

# ---------------------------------------------------------------- (d) 4 KiB latency

LAT=()
for ft in 0 1; do
  if [ "$ft" = 1 ]; then
    stop_target
    start_target 1 1MiB
  fi
  for op in write read; do
    res=$(initiator "$ft" "$op" 4096 1 --latency) || exit 1
    set -- $res
    LAT+=("| $( [ "$ft" = 1 ] && echo TCP || echo 'same host') | $op | $4 | $5 | $(awk -v n="$3" -v s="$2" 'BEGIN { printf "%.0f", n / s }') |")
  done
done
stop_target

# ---------------------------------------------------------------- report

echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

echo "## Throughput"
echo
echo "| Path | Op | Block | Batch | Ours (GB/s) | Reference (GB/s) | Ratio | Target | Met |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "## 4 KiB latency (batch 1, 1 thread; submit to all tasks terminal)"
echo
echo "| Path | Op | p50 (us) | p99 (us) | ops/s |"
echo "|---|---|---|---|---|"
printf '%s\n' "${LAT[@]}"
