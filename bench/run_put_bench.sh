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
WORK=$(mktemp -d /tmp/put_bench.XXXXXX)
BG_PIDS=()
trap finish EXIT
start_master "$BUILD"

echo "## raw master, 1 connection"
for op in put xput; do
  "$BENCH" --mode=rpc "${ADDR[@]}" --cases="$op:1" --duration="$DUR" --keys=1000 2>/dev/null | grep '^RPC' || true
done

for ft in 0 1; do
  start_holder "$BUILD" "$ft" 1GiB "$ft"
  wait_warm "$ft" # steady state
  H=$HOLDER_NAME
  path=same-host; [ "$ft" = 1 ] && path=tcp
  for ext in 0 1; do
    echo "## store API put_from, $path, MC_STORE_PUT_EXTENTS=$ext"
    MC_STORE_PUT_EXTENTS=$ext MC_FORCE_TCP=$ft "$BENCH" --mode=client "${ADDR[@]}" --global_segment_size=64MiB \
      --local_buffer_size=16MiB --preferred="$H" --duration="$DUR" --cap_bytes=64MiB \
      --cases=put:4KiB:1,put:16KiB:1,put:64KiB:1 2>/dev/null | grep '^RESULT' || true
  done
  stop_bg "$HOLDER_PID"
done
