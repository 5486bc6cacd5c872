#!/usr/bin/env bash
# Soak: a master (embedded metadata server) and two holders on loopback, and bench/soak (16 store clients,
# one per thread, values of 1 KiB to 4 MiB, puts/gets/batch gets/exists/removes over a shared key space,
# every read checked byte for byte) run against them for DURATION seconds. Samples VmRSS and the open
# descriptors of every process (/proc/<pid>/status, /proc/<pid>/fd) once everything is warm and again at
# the end, and prints one summary: ops by kind, errors by code, wrong bytes (must be 0), RSS and fd growth.
#
#   bench/run_soak.sh [DURATION=600] [BUILD_DIR=./build]     (THREADS=16 KEYS=512 HOLDER_SIZE=1GiB override)
#
# Exits 1 when a read returned wrong bytes, a call passed its bound, or a process died. Builds nothing.
# Every background process it starts is stopped on exit (trap), by its own pid.
set -u -o pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION=${1:-600}
BUILD=${2:-./build}
THREADS=${THREADS:-16}
KEYS=${KEYS:-512}
HOLDER_SIZE=${HOLDER_SIZE:-1GiB}
SOAK=$BUILD/tools/soak
need_bins "$BUILD" "$SOAK" "$BUILD/tools/store_bench" "$BUILD/tools/mooncake_master"
need_cmds python3

WORK=$(mktemp -d /tmp/soak.XXXXXX)
BG_PIDS=()
trap finish EXIT
trap 'exit 130' INT TERM
start_master "$BUILD" --default_kv_lease_ttl=1000 --eviction_high_watermark_ratio=0.9
export MC_LOG_LEVEL=${MC_LOG_LEVEL:-WARN} # holders and the driver (start_master waits for an INFO line)
MASTER_PID=${BG_PIDS[0]}
start_holder "$BUILD" 1 "$HOLDER_SIZE" a
HOLDER_A=$HOLDER_PID
start_holder "$BUILD" 0 "$HOLDER_SIZE" b
HOLDER_B=$HOLDER_PID
wait_warm a
wait_warm b

# sample TAG PID...: "<name> <pid> <VmRSS> <RssAnon> <RssShmem> <fds>" (KiB) per process into $WORK/TAG.samples.
# VmRSS counts a shared page once per mapping of it: each client of the driver maps every holder's segment
# (same-host path) and warms it, so the driver's VmRSS approaches clients x holders x segment size without
# using that memory. RssAnon (private memory) is what a leak grows.
sample() {
  local tag=$1 pid name
  shift
  : >"$WORK/$tag.samples"
  for pid in "$@"; do
    name=$(cat "/proc/$pid/comm" 2>/dev/null) || name=gone
    echo "$name $pid $(awk '/^(VmRSS|RssAnon|RssShmem):/ { printf "%s ", $2 }' "/proc/$pid/status" 2>/dev/null)" \
      "$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)" >>"$WORK/$tag.samples"
  done
}

echo "soak: $THREADS clients, $KEYS keys, 1 KiB..4 MiB values, ${DURATION}s; holders $HOLDER_SIZE each (MC_FORCE_TCP=1 / same-host)"
"$SOAK" "${ADDR[@]}" --threads="$THREADS" --keys="$KEYS" --secs="$DURATION" --report_s=60 \
  >"$WORK/soak.out" 2>"$WORK/soak.err" &
SOAK_PID=$!
BG_PIDS+=("$SOAK_PID")
PIDS=("$MASTER_PID" "$HOLDER_A" "$HOLDER_B" "$SOAK_PID")
# the start sample once the clients are set up and every value size has been through (the first 30 s, or a
# tenth of a short run): what grows after that is growth, not warm-up
WARM=$((DURATION / 10 < 30 ? DURATION / 10 : 30))
sleep "$WARM"
sample start "${PIDS[@]}"
# the end sample a few seconds before the driver stops (it is a client too: its growth counts)
END_AT=$((DURATION - WARM - 5))
[ "$END_AT" -gt 0 ] && sleep "$END_AT"
sample end "${PIDS[@]}"
wait "$SOAK_PID"
SOAK_RC=$?
forget "$SOAK_PID"

alive=1
for p in "$MASTER_PID" "$HOLDER_A" "$HOLDER_B"; do kill -0 "$p" 2>/dev/null || alive=0; done

echo
echo "== soak summary (${DURATION}s, $THREADS clients)"
grep '^SOAK \(ops\|ok\|errors\|wrong_bytes\)' "$WORK/soak.out"
grep -c '^WRONG' "$WORK/soak.err" | sed 's/^/WRONG lines in the driver log: /'
grep -c '^SLOW' "$WORK/soak.err" | sed 's/^/SLOW lines in the driver log: /'
echo "(RSS and descriptors sampled ${WARM}s after the start and 5 s before the end)"
echo "process         pid      VmRSS_MiB start->end   RssAnon_MiB start->end (growth)   RssShmem_MiB start->end   fds start->end (growth)"
join -1 2 -2 2 <(sort -k2 "$WORK/start.samples") <(sort -k2 "$WORK/end.samples") |
  awk '{ printf "%-15s %-8s %9.1f -> %-9.1f %9.1f -> %-9.1f (%+.1f) %11.1f -> %-9.1f %6d -> %-5d (%+d)\n",
         $2, $1, $3 / 1024, $8 / 1024, $4 / 1024, $9 / 1024, ($9 - $4) / 1024, $5 / 1024, $10 / 1024, $6, $11, $11 - $6 }'
wrong=$(sed -n 's/^SOAK wrong_bytes=\([0-9]*\).*/\1/p' "$WORK/soak.out")
echo "driver exit status $SOAK_RC; master and holders alive: $([ $alive = 1 ] && echo yes || echo NO)"
if [ "$SOAK_RC" != 0 ] || [ "${wrong:-x}" != 0 ] || [ $alive != 1 ]; then tail -20 "$WORK/soak.err" >&2; exit 1; fi
