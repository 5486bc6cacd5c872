#!/usr/bin/env bash
# First pass over one fresh holder at a time, nothing else running: a master, then for each path (TCP with
# MC_FORCE_TCP=1, then same host) a 1 GiB holder, WAIT seconds (default 0), and a pure client that makes 896
# unbatched 1 MiB puts into it (fresh) and the same again after removing them (warm).
# Usage: bench/run_first_pass.sh [BUILD_DIR=./build]   (env WAIT, and MC_SEGMENT_PREFAULT passes through)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
B=${1:-build}
WORK=$(mktemp -d /tmp/first_pass.XXXXXX)
BG_PIDS=()
trap finish EXIT
start_master "$B"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); WAIT=${WAIT:-0}; MC_SEGMENT_PREFAULT=${MC_SEGMENT_PREFAULT:-default}; shmem_enabled=$(shmem_thp)"
for path in tcp shm; do
  ft=1; [ $path = shm ] && ft=0
  start_holder "$B" "$ft" 1GiB "$path"
  name=$HOLDER_NAME
  sleep "${WAIT:-0}"
  MC_FORCE_TCP=$ft "$B/tools/store_bench" --mode=client "${ADDR[@]}" --global_segment_size=0 --preferred="$name" \
    --cases=put:1MiB:1,put:1MiB:1 --max_bytes=896MiB --cap_bytes=896MiB 2>/dev/null | grep '^RESULT' |
    awk -v p=$path 'NR == 1 { f = $0 } NR == 2 { w = $0 } END {
      match(f, /gbps=[0-9.]+/); fg = substr(f, RSTART + 5, RLENGTH - 5)
      match(w, /gbps=[0-9.]+/); wg = substr(w, RSTART + 5, RLENGTH - 5)
      printf "%s: fresh %.2f GB/s, warm %.2f GB/s, fresh/warm %.2f\n", p, fg, wg, fg / wg }'
  stop_bg "$HOLDER_PID"
done
