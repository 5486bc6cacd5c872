#!/usr/bin/env bash
# 4 KiB vs 2 MiB pages for segments, alternated round by round: for each kernel setting of
# /sys/kernel/mm/transparent_hugepage/shmem_enabled (never = 4 KiB pages, advise = the 2 MiB pages our
# segments ask for), a fresh 1 GiB holder; the seconds until its background warm-up is done; then one pure
# client per path (same host, TCP) that measures its first 512 MiB of 1 MiB puts (its own mapping cold)
# and the CASES below. Needs root (it writes the setting, and puts the old one back at exit).
# Usage: bench/run_thp_ab.sh [BUILD_DIR=./build]   ROUNDS=3  DUR=2  CASES=put:1MiB:1,get:1MiB:1,get:1MiB:16,get:16KiB:128
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
B=${1:-build}
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-2}
CASES=${CASES:-put:1MiB:1,get:1MiB:1,get:1MiB:16,get:16KiB:128}
THP=/sys/kernel/mm/transparent_hugepage/shmem_enabled
need_bins "$B" "$B/tools/mooncake_master" "$B/tools/store_bench"
OLD=$(shmem_thp)
[ -w "$THP" ] || { echo "cannot write $THP (needs root)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/thp_ab.XXXXXX)
BG_PIDS=()
restore() { echo "$OLD" >"$THP"; finish; }
trap restore EXIT
start_master "$B"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); cases $CASES, ${DUR}s each"
echo
hdr="| round | shmem_enabled | path | holder warm-up (s) | client's first 512 MiB (GB/s) |"
sep="|---|---|---|---|---|"
for c in ${CASES//,/ }; do hdr+=" $c (GB/s) |"; sep+="---|"; done
echo "$hdr"
echo "$sep"
for r in $(seq "$ROUNDS"); do
  for mode in never advise; do
    echo "$mode" >"$THP"
    for path in shm tcp; do
      ft=0; [ $path = tcp ] && ft=1
      start_holder "$B" "$ft" 1GiB "$path"
      wait_warm "$path"
      warm=$WARMUP_S name=$HOLDER_NAME
      out=$(MC_FORCE_TCP=$ft "$B/tools/store_bench" --mode=client "${ADDR[@]}" --global_segment_size=0 \
        --preferred="$name" --warm_bytes=512MiB --duration="$DUR" --cases="$CASES" 2>/dev/null)
      first=$(grep '^WARM' <<<"$out" | sed -n 's/.*gbps=\([0-9.]*\).*/\1/p')
      rates=$(grep '^RESULT' <<<"$out" | sed -n 's/.*gbps=\([0-9.]*\).*/\1/p' | paste -sd'|' | sed 's/|/ | /g')
      echo "| $r | $mode | $path | $warm | ${first:-n/a} | $rates |"
      stop_bg "$HOLDER_PID"
    done
  done
done
