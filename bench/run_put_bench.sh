#!/usr/bin/env bash
# Unbatched put rate before/after write extents (one client thread, warm holder segment):
#   (1) raw master: put = PutStart + PutEnd vs xput = one COMMIT_PUT into an extent reserved once per 16 MiB;
#   (2) store API put_from of 4 KiB / 16 KiB / 64 KiB, same-host and over TCP (MC_FORCE_TCP=1), with
#       MC_STORE_PUT_EXTENTS=0 (PutStart/PutEnd) and =1 (extents). The writer mounts a small segment of its
#       own (extents need a live client) and prefers the holder's segment, so bytes cross processes.
# Usage: bench/run_put_bench.sh [BUILD_DIR=./build]   (DUR = seconds per case, default 2)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
BUILD=${1:-build}
DUR=${DUR:-2}
BENCH=$BUILD/tools/store_bench
MASTER=$BUILD/tools/mooncake_master
WORK=$(mktemp -d /tmp/put_bench.XXXXXX)
BG_PIDS=()
trap finish EXIT
# wait_ready PATTERN FILE: wait_for, 10 s, or exit with a message.
wait_ready() { wait_for "$1" "$2" 100 0.1 || { echo "timeout waiting for $1 in $2" >&2; exit 1; }; }

MPORT=$(free_port); HPORT=$(free_port); XPORT=$(free_port)
"$MASTER" --rpc_port="$MPORT" --enable_http_metadata_server --http_metadata_server_port="$HPORT" \
  --metrics_port="$XPORT" >"$WORK/master.log" 2>&1 &
BG_PIDS+=($!)
wait_ready "Master service started" "$WORK/master.log"
ADDR=(--master_server_addr="127.0.0.1:$MPORT" --metadata_server="http://127.0.0.1:$HPORT/metadata")

echo "## raw master, 1 connection"
for op in put xput; do
  "$BENCH" --mode=rpc "${ADDR[@]}" --cases="$op:1" --duration="$DUR" --keys=1000 2>/dev/null | grep '^RPC' || true
done

for ft in 0 1; do
  MC_FORCE_TCP=$ft "$BENCH" --mode=holder "${ADDR[@]}" --global_segment_size=1GiB --local_buffer_size=1MiB \
    >"$WORK/holder$ft.log" 2>&1 &
  HPID=$!
  BG_PIDS+=($HPID)
  wait_ready "HOLDER ready" "$WORK/holder$ft.log"
  wait_for "HOLDER warm" "$WORK/holder$ft.log" 1200 0.1 || true # steady state
  H=$(sed -n 's/.*HOLDER ready name=\([^ ]*\).*/\1/p' "$WORK/holder$ft.log")
  path=same-host; [ "$ft" = 1 ] && path=tcp
  for ext in 0 1; do
    echo "## store API put_from, $path, MC_STORE_PUT_EXTENTS=$ext"
    MC_STORE_PUT_EXTENTS=$ext MC_FORCE_TCP=$ft "$BENCH" --mode=client "${ADDR[@]}" --global_segment_size=64MiB \
      --local_buffer_size=16MiB --preferred="$H" --duration="$DUR" --cap_bytes=64MiB \
      --cases=put:4KiB:1,put:16KiB:1,put:64KiB:1 2>/dev/null | grep '^RESULT' || true
  done
  stop_bg "$HPID"
done
