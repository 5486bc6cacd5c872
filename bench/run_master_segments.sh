#!/usr/bin/env bash
# The master at many segments (docs/master.md, "Scale"): for each N, a fresh mooncake_master pinned to one
# CPU (the bench on another when there is one) and bench/master_segments against it over raw RPCs: mount
# N segments of 64 MiB from N clients, the master's RSS, unbatched 1 KiB puts (rate and p99), and the
# master's CPU while every client pings once a second. One SEGSCALE line per N.
# Usage: bench/run_master_segments.sh [BUILD_DIR=./build]   (env NS, default "10 1000 10000 100000";
#        PUT_SECS, default 3; IDLE_SECS, default 5)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
BUILD=${1:-build}
NS=${NS:-10 1000 10000 100000}
SEGS=$BUILD/tools/master_segments
MASTER=$BUILD/tools/mooncake_master
need_bins "$BUILD" "$SEGS" "$MASTER"
need_cmds taskset
WORK=$(mktemp -d /tmp/master_segments.XXXXXX)
BG_PIDS=()
trap finish EXIT
export MC_LOG_LEVEL=${MC_LOG_LEVEL:-ERROR} # one mount line per segment otherwise
MCPU=0; BCPU=0
[ "$(nproc)" -gt 1 ] && BCPU=1
echo "# master_segments: N in $NS, master on CPU $MCPU, bench on CPU $BCPU, $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%F %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $NS; do
  port=$(free_port)
  # clients ping only from the idle phase on: client_ttl 15 s keeps them through the mounts and the puts (~10 s
  # at N = 100 000), and the expiry timers of their mounts come due (and are pushed again) while they ping
  taskset -c "$MCPU" "$MASTER" --rpc_port="$port" --metrics_port="$(free_port)" --client_ttl=15 \
    --rpc_thread_num=1 >"$WORK/master.$n.log" 2>&1 &
  mpid=$!
  BG_PIDS+=("$mpid")
  wait_port "$port" "$mpid" || { cat "$WORK/master.$n.log" >&2; echo "master did not start" >&2; exit 1; }
  taskset -c "$BCPU" "$SEGS" "$port" "$mpid" "$n" "${PUT_SECS:-3}" "${IDLE_SECS:-5}" || echo "# n=$n: bench exited $?"
  stop_bg "$mpid"
done
