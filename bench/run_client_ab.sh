#!/usr/bin/env bash
# The store API's put and get rates of two (or more) builds, alternated round by round so that the machine's
# drift hits them alike: per round and build, a fresh master and a warm holder of that build, then one client
# thread of store_bench --mode=client with CASES (put_from / get_into, size, batch) on the same-host path
# (MC_FORCE_TCP=0) and over TCP (=1). Prints one row per round, build, path and case (keys/s, p50, p99 per
# call), then the median per build and the ratio of each build's median to the first build's.
#
# Usage: bench/run_client_ab.sh BUILD_DIR [BUILD_DIR...]
#   ROUNDS=3  DUR=2 (seconds per case)  PATHS="0 1" (MC_FORCE_TCP values)
#   CASES="put:4KiB:1,get:4KiB:1,put:64KiB:16,get:64KiB:16"
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [BUILD_DIR...]" >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-2}
PATHS=${PATHS:-"0 1"}
CASES=${CASES:-"put:4KiB:1,get:4KiB:1,put:64KiB:16,get:64KiB:16"}
WORK=$(mktemp -d /tmp/client_ab.XXXXXX)
BG_PIDS=()
trap finish EXIT
for b in "$@"; do need_bins "$b" "$b/tools/mooncake_master" "$b/tools/store_bench"; done

ROWS=$WORK/rows
: >"$ROWS"
echo "| round | build | path | case (op:bytes:batch) | keys/s | p50 (us) | p99 (us) |"
echo "|---|---|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
  for b in "$@"; do
    for ft in $PATHS; do
      start_master "$b"
      start_holder "$b" "$ft" 1GiB "$ft"
      wait_warm "$ft"
      path=same-host; [ "$ft" = 1 ] && path=tcp
      MC_FORCE_TCP=$ft "$b/tools/store_bench" --mode=client "${ADDR[@]}" --global_segment_size=64MiB \
        --local_buffer_size=64MiB --preferred="$HOLDER_NAME" --duration="$DUR" --cases="$CASES" 2>/dev/null |
        grep '^RESULT' | while read -r line; do
          c="$(field "$line" op):$(field "$line" size):$(field "$line" batch)"; ops=$(field "$line" keys_s)
          echo "| $r | $b | $path | $c | $ops | $(field "$line" p50_us) | $(field "$line" p99_us) |"
          echo "$b $path $c $ops" >>"$ROWS"
        done
      stop_all
    done
  done
done

echo
echo "| build | path | case | median keys/s | ratio to $1 |"
echo "|---|---|---|---|---|"
python3 - "$ROWS" "$1" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = {}
for b, p, c, v in rows:
    med.setdefault((b, p, c), []).append(float(v))
for (b, p, c), v in sorted(med.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0] != sys.argv[2])):
    m = statistics.median(v)
    ref = statistics.median(med.get((sys.argv[2], p, c), [0])) or 0
    print(f"| {b} | {p} | {c} | {m:.0f} | {m / ref:.2f} |" if ref else f"| {b} | {p} | {c} | {m:.0f} | n/a |")
PY
