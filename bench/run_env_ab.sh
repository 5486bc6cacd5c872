#!/usr/bin/env bash
# Two client settings alternated round by round against the same warm holder: for each path (same host,
# TCP) one master and one 1 GiB holder, then per round a store_bench client with A's environment and one
# with B's, each running CASES. Prints GB/s and keys/s per case.
# Usage: A="MC_STORE_PUT_EXTENTS=0" B="MC_STORE_PUT_EXTENTS=1" bench/run_env_ab.sh [BUILD_DIR=./build]
#   CASES=put:16KiB:128,put:64KiB:64,put:1MiB:16  ROUNDS=3  DUR=2  PATHS="shm tcp"
#   CLIENT_SEG=64MiB (the client's own segment; 0 = a pure client)
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
B_DIR=${1:-build}
CASES=${CASES:-put:16KiB:128,put:64KiB:64,put:1MiB:16}
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-2}
PATHS=${PATHS:-shm tcp}
CLIENT_SEG=${CLIENT_SEG:-64MiB}
if [ -z "${A:-}" ] || [ -z "${B:-}" ]; then
  echo "set A and B (environment assignments, e.g. A=MC_X=0 B=MC_X=1)" >&2
  exit 2
fi
BENCH=$B_DIR/tools/store_bench
need_bins "$B_DIR" "$BENCH" "$B_DIR/tools/mooncake_master"
WORK=$(mktemp -d /tmp/env_ab.XXXXXX)
BG_PIDS=()
trap finish EXIT
start_master "$B_DIR"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); A: $A; B: $B; client segment $CLIENT_SEG; ${DUR}s per case"
echo
echo "| path | round | setting | case | GB/s | keys/s | p50 / p99 per call (us) |"
echo "|---|---|---|---|---|---|---|"
for path in $PATHS; do
  ft=0; [ "$path" = tcp ] && ft=1
  start_holder "$B_DIR" "$ft" 1GiB "$path"
  wait_warm "$path"
  name=$HOLDER_NAME
  for r in $(seq "$ROUNDS"); do
    for which in A B; do
      # shellcheck disable=SC2086 # the setting is a list of assignments
      env ${!which} MC_FORCE_TCP=$ft "$BENCH" --mode=client "${ADDR[@]}" --global_segment_size="$CLIENT_SEG" \
        --preferred="$name" --duration="$DUR" --cap_bytes=256MiB --cases="$CASES" 2>/dev/null | grep '^RESULT' |
        while read -r line; do
          c="$(field "$line" op):$(field "$line" size):$(field "$line" batch)"
          echo "| $path | $r | $which | $c | $(field "$line" gbps) | $(field "$line" keys_s) | $(field "$line" p50_us) / $(field "$line" p99_us) |"
        done
    done
  done
  stop_bg "$HOLDER_PID"
done
