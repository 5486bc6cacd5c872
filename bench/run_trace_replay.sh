#!/usr/bin/env bash
# Replays the FAST'25 conversation trace against a fresh single-machine cluster at two pool capacities and
# prints a markdown table: observed hit ratio, the master's store_hit_ratio, the unbounded-cache ideal, exact LRU
# at the pool's capacity and at the eviction watermark (0.9 of it), and throughput.
# Each capacity gets its own cluster: mooncake_master (embedded metadata server) + NODES mooncake_store_node
# processes sharing the pool; trace_replay is a pure client (time scale 0: as fast as possible).
# Usage: bench/run_trace_replay.sh [BUILD_DIR=./build]
#   TRACE    trace file (default: MC_TRACE_FILE of the build's CMake cache; docs/testing.md, "Data sets")
#   CAPS     pool sizes (default "512MB 2GB"), BLOCK block bytes (default 16KiB), NODES (default 2)
#   MAX_REQ  requests replayed (default 0 = the whole trace), LEASE_MS master lease (default 20)
# The master's lease is shortened because the replay runs ~1000x faster than the trace's clock: with the
# default 10 s lease every block touched in the last 10 s of wall time (minutes of trace time) would be
# pinned against eviction. Every process it starts is stopped on exit, by its own pid.
set -u -o pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
BUILD=${1:-./build}
TRACE=${TRACE:-$(sed -n 's/^MC_TRACE_FILE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)}
CAPS=${CAPS:-"512MB 2GB"}
BLOCK=${BLOCK:-16KiB}
NODES=${NODES:-2}
MAX_REQ=${MAX_REQ:-0}
LEASE_MS=${LEASE_MS:-20}
need_bins "$BUILD" "$BUILD/tools/mooncake_master" "$BUILD/tools/mooncake_store_node" "$BUILD/tools/trace_replay"
[ -r "$TRACE" ] || { echo "trace $TRACE not readable (set TRACE=...)" >&2; exit 1; }
need_cmds python3

WORK=$(mktemp -d /tmp/trace_replay.XXXXXX)
BG_PIDS=()
trap finish EXIT
trap 'exit 130' INT TERM
export MC_LOG_LEVEL=${MC_LOG_LEVEL:-ERROR}
fail() { echo "error: $*" >&2; for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "== $f" >&2; tail -5 "$f" >&2; }; done; exit 1; }
bytes() { python3 -c "import sys,re; m=re.fullmatch(r'(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?', sys.argv[1].strip(), re.I); print(int(float(m.group(1)) * 1024 ** ' KMGT'.index((m.group(2) or ' ').upper())))" "$1"; }

echo "trace: $TRACE ($(wc -l <"$TRACE") requests), block $BLOCK, $NODES storage nodes, lease ${LEASE_MS} ms, requests replayed: ${MAX_REQ/#0/all}"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo
echo "| pool | observed hit ratio | master store_hit_ratio (hits / misses) | ideal, unbounded | exact LRU @ pool | exact LRU @ 0.9 x pool | put failures | requests/s | blocks/s | MiB/s put |"
echo "|---|---|---|---|---|---|---|---|---|---|"
block_bytes=$(bytes "$BLOCK")
for cap in $CAPS; do
  cap_bytes=$(bytes "$cap")
  node_bytes=$((cap_bytes / NODES))
  rpc=$(free_port); meta=$(free_port); admin=$(free_port)
  "$BUILD/tools/mooncake_master" --rpc_port="$rpc" --enable_http_metadata_server --http_metadata_server_port="$meta" \
    --metrics_port="$admin" --metrics_host=127.0.0.1 --default_kv_lease_ttl="$LEASE_MS" >"$WORK/master_$cap.log" 2>&1 &
  BG_PIDS+=($!)
  wait_port "$rpc" $! 300 && wait_port "$admin" $! 300 || fail "master did not start"
  for i in $(seq "$NODES"); do
    "$BUILD/tools/mooncake_store_node" --master_server_addr="127.0.0.1:$rpc" \
      --metadata_server="http://127.0.0.1:$meta/metadata" --global_segment_size="$node_bytes" \
      --local_buffer_size=1MB >"$WORK/node_${cap}_$i.log" 2>&1 &
    BG_PIDS+=($!)
  done
  for i in $(seq "$NODES"); do
    wait_for ready "$WORK/node_${cap}_$i.log" 300 0.05
    grep -q ready "$WORK/node_${cap}_$i.log" || fail "storage node $i did not start"
  done
  cap_blocks=$((cap_bytes / block_bytes))
  "$BUILD/tools/trace_replay" "$TRACE" --master="127.0.0.1:$rpc" --metadata="http://127.0.0.1:$meta/metadata" \
    --admin="127.0.0.1:$admin" --block-bytes="$BLOCK" --time-scale=0 --max-requests="$MAX_REQ" \
    --capacity-blocks2=$((cap_blocks * 9 / 10)) --json >"$WORK/replay_$cap.json" 2>"$WORK/replay_$cap.log" ||
    fail "trace_replay failed at $cap"
  python3 - "$WORK/replay_$cap.json" "$cap" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); m = r["master"]; lru = r["lru"]; t = r["throughput"]
f = lambda v: "n/a" if v is None else f"{v:.4f}"
print(f"| {sys.argv[2]} ({lru[0]['capacity_blocks']} blocks) | {f(r['observed']['hit_ratio'])} "
      f"| {f(m['store_hit_ratio'])} ({m['store_lookup_hits_total']:.0f} / {m['store_lookup_misses_total']:.0f}) "
      f"| {f(r['ideal_unbounded']['hit_ratio'])} | {f(lru[0]['hit_ratio'])} | {f(lru[1]['hit_ratio'])} "
      f"| {r['puts']['failed']} | {t['requests_per_s']:.0f} | {t['blocks_per_s']:.0f} | {t['put_bytes_per_s'] / 1048576:.1f} |")
PY
  stop_all
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
