#!/usr/bin/env bash
# Raw master RPC rates of two (or more) builds, alternated round by round so that the machine's drift
# hits all of them alike: a fresh master per case, store_bench --mode=rpc (one connection per client
# thread, 10 000 existing keys), and the master's context switches and CPU time during the case
# (perf stat, when perf is installed).
#
# Usage: bench/run_rpc_ab.sh BUILD_DIR [BUILD_DIR...]
#   ROUNDS=3  CASES="exist:1 exist:4 exist:16 put:1 put:4 put:16 batch_exist:1 batch_exist:4 batch_exist:16"
#   DUR=2 (seconds per case)  CLIENT_NICE=0 (nice value of the client process: 10 gives the master the CPU
#   it would have on a machine of its own; the clients share this one's)  MASTER_FLAGS="" (e.g. --rpc_thread_num=1)
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [BUILD_DIR...]" >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
CASES=${CASES:-"exist:1 exist:4 exist:16 put:1 put:4 put:16 batch_exist:1 batch_exist:4 batch_exist:16"}
DUR=${DUR:-2}
CLIENT_NICE=${CLIENT_NICE:-0}
WORK=$(mktemp -d /tmp/rpc_ab.XXXXXX)
MP=
cleanup() { [ -n "$MP" ] && kill "$MP" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
HAVE_PERF=0
command -v perf >/dev/null && perf stat -e task-clock true >/dev/null 2>&1 && HAVE_PERF=1

echo "| round | build | case | calls/s or keys/s | p50 (us) | p99 (us) | master context switches | master CPU (ms) |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
  for c in $CASES; do
    for B in "$@"; do
      MPORT=$(free_port); HPORT=$(free_port); XPORT=$(free_port)
      : >"$WORK/master.log" # not the previous master's "Master service started" line
      # shellcheck disable=SC2086
      "$B/tools/mooncake_master" --rpc_port="$MPORT" --enable_http_metadata_server --http_metadata_server_port="$HPORT" \
        --metrics_port="$XPORT" ${MASTER_FLAGS:-} >"$WORK/master.log" 2>&1 &
      MP=$!
      wait_for "Master service started" "$WORK/master.log" 50 0.1
      PP=
      if [ "$HAVE_PERF" = 1 ]; then
        perf stat -e context-switches,task-clock -p "$MP" -o "$WORK/perf.txt" &
        PP=$!
        sleep 0.2
      fi
      line=$(nice -n "$CLIENT_NICE" "$B/tools/store_bench" --mode=rpc --master_server_addr="127.0.0.1:$MPORT" \
        --metadata_server="http://127.0.0.1:$HPORT/metadata" --cases="$c" --duration="$DUR" --keys=10000 2>/dev/null |
        grep '^RPC')
      cs=-; cpu=-
      if [ -n "$PP" ]; then
        kill -INT "$PP"; wait "$PP" 2>/dev/null
        cs=$(awk '/context-switches/{gsub(",","",$1); print $1}' "$WORK/perf.txt")
        cpu=$(awk '/task-clock/{gsub(",","",$1); printf "%.0f", $1}' "$WORK/perf.txt")
      fi
      kill "$MP" 2>/dev/null; wait "$MP" 2>/dev/null; MP=
      get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
      echo "| $r | $B | $c | $(get keys_s) | $(get p50_us) | $(get p99_us) | $cs | $cpu |"
    done
  done
done
