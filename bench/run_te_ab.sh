#!/usr/bin/env bash
# A/B of transfer-engine settings over TCP (MC_FORCE_TCP=1): for each round and each setting (a string of
# VAR=value words applied to both target and initiator), one P2PHANDSHAKE target and one initiator per
# operation and batch size. Settings alternate so that machine drift hits them alike.
# Usage: bench/run_te_ab.sh [BUILD_DIR=./build] SETTING...      e.g. bench/run_te_ab.sh build X=1 MC_SPIN_US=0
#   A setting may name another build tree to compare code: BUILD=/path/to/other/build (its transfer_engine_bench
#   serves as both target and initiator for that setting), and may say MC_FORCE_TCP=0 to measure the same-host
#   path instead (target and initiator are on one host).
#   env: BLK (block bytes, default 1048576), BS (batch sizes, "16 1"), OPS ("read write"), DUR (s, 3),
#        ROUNDS (2), BUF (target/initiator buffer, 64MiB)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
B=${1:-build}
shift
[ $# -gt 0 ] || set -- X=1
BENCH=$B/tools/transfer_engine_bench
[ -x "$BENCH" ] || { echo "missing $BENCH (build first)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/te_ab.XXXXXX)
TP=""
cleanup() { [ -n "$TP" ] && kill -INT "$TP" 2>/dev/null && wait "$TP" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); block ${BLK:-1048576} B; GB/s and p50 per batch (us)"
for round in $(seq "${ROUNDS:-2}"); do
  for setting in "$@"; do
    BENCH=$B/tools/transfer_engine_bench
    for w in $setting; do [ "${w%%=*}" = BUILD ] && BENCH=${w#BUILD=}/tools/transfer_engine_bench; done
    : >"$WORK/t.out" # not the previous target's "Target ready" line
    # shellcheck disable=SC2086 # the setting is a list of VAR=value words
    env MC_FORCE_TCP=1 $setting "$BENCH" --mode=target --metadata_server=P2PHANDSHAKE --buffer_size="${BUF:-64MiB}" \
      --threads=1 --batch_size=1 --block_size=4096 >"$WORK/t.out" 2>"$WORK/t.err" &
    TP=$!
    wait_for "Target ready" "$WORK/t.out" 200 0.05 || true
    SEG=$(sed -n 's/^Target ready: segment //p' "$WORK/t.out")
    [ -n "$SEG" ] || { echo "target did not start" >&2; exit 1; }
    line="round $round, $setting:"
    for op in ${OPS:-read write}; do
      for bs in ${BS:-16 1}; do
        # shellcheck disable=SC2086
        r=$(env MC_FORCE_TCP=1 $setting "$BENCH" --mode=initiator --metadata_server=P2PHANDSHAKE --segment_id="$SEG" \
          --operation="$op" --block_size="${BLK:-1048576}" --batch_size="$bs" --threads=1 --duration="${DUR:-3}" \
          --buffer_size="${BUF:-64MiB}" --latency 2>/dev/null |
          sed -n 's/.*throughput \([0-9.]*\) GB.*/\1/p; s/^Batch latency: p50 \([0-9.]*\) us.*/\1/p' | paste -sd' ')
        line="$line  $op x$bs: $r"
      done
    done
    echo "$line"
    kill -INT "$TP"; wait "$TP" 2>/dev/null || true; TP=""
  done
done
