#!/usr/bin/env bash
# Measures what scraping /metrics once a second adds to mooncake_master's CPU under a steady RPC load
# (issue 5: target < 2 %). The load is store_bench --mode=rpc (ExistKey calls back to back over one
# connection, LOAD_CASE to change it); rounds alternate "no scraper" and "curl /metrics every second" so that
# machine drift hits both alike. Master CPU comes from /proc/<pid>/stat (utime + stime). Prints, per setting,
# the master's CPU (% of one core), its RPC rate and its CPU per RPC, and the added CPU per RPC with the
# scraper. Then the direct cost: BURST back-to-back scrapes, CPU per scrape, and what 1 scrape/s of that is
# as a share of the loaded master's CPU.
# Builds nothing: usage  bench/run_metrics_overhead.sh [BUILD_DIR=./build]
# (DUR = seconds per run, default 5; ROUNDS, default 3; BURST, default 200). Takes ~DUR*2*ROUNDS + 10 s.
# Every background process it starts is stopped on exit, by its own pid.
set -u -o pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILD=${1:-./build}
DUR=${DUR:-5}
ROUNDS=${ROUNDS:-3}
BURST=${BURST:-200}
LOAD_CASE=${LOAD_CASE:-exist:1}
BENCH=$BUILD/tools/store_bench
MASTER=$BUILD/tools/mooncake_master
need_bins "$BUILD" "$BENCH" "$MASTER"
need_cmds curl

WORK=$(mktemp -d /tmp/metrics_overhead.XXXXXX)
BG_PIDS=()
trap finish EXIT
trap 'exit 130' INT TERM
export MC_LOG_LEVEL=${MC_LOG_LEVEL:-WARN}

# CPU ticks (utime + stime) of a pid.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

MPORT=$(free_port); XPORT=$(free_port)
"$MASTER" --rpc_port="$MPORT" --metrics_port="$XPORT" --metrics_host=127.0.0.1 >"$WORK/master.log" 2>&1 &
MASTER_PID=$!
BG_PIDS+=("$MASTER_PID")
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$XPORT/health" >/dev/null && break; sleep 0.05; done
curl -sf "http://127.0.0.1:$XPORT/health" >/dev/null || { echo "master did not start" >&2; cat "$WORK/master.log"; exit 1; }

# run MODE: one load run of DUR s; appends "mode ticks calls" to $WORK/runs.
run() {
  local scraper=""
  if [ "$1" = on ]; then
    (while :; do curl -s -o /dev/null "http://127.0.0.1:$XPORT/metrics"; sleep 1; done) &
    scraper=$!
  fi
  local t0; t0=$(ticks "$MASTER_PID")
  MC_FORCE_TCP=1 "$BENCH" --mode=rpc --master_server_addr="127.0.0.1:$MPORT" --cases="$LOAD_CASE" \
    --duration="$DUR" >"$WORK/bench.out" 2>"$WORK/bench.err" || { echo "store_bench failed" >&2; cat "$WORK/bench.err"; exit 1; }
  local t1; t1=$(ticks "$MASTER_PID")
  [ -n "$scraper" ] && { kill "$scraper"; wait "$scraper" 2>/dev/null; }
  local calls; calls=$(sed -n 's/.* calls=\([0-9]*\).*/\1/p' "$WORK/bench.out")
  echo "$1 $((t1 - t0)) $calls" >>"$WORK/runs"
}

for r in $(seq "$ROUNDS"); do run off; run on; done

# Direct cost of one scrape (the master otherwise idle).
t0=$(ticks "$MASTER_PID")
for _ in $(seq "$BURST"); do curl -s -o /dev/null "http://127.0.0.1:$XPORT/metrics"; done
t1=$(ticks "$MASTER_PID")
SIZE=$(curl -s "http://127.0.0.1:$XPORT/metrics" | wc -c)

awk -v hz="$HZ" -v dur="$DUR" -v burst="$BURST" -v bt="$((t1 - t0))" -v size="$SIZE" -v load="$LOAD_CASE" '
  { cpu[$1] += $2 / hz; calls[$1] += $3; secs[$1] += dur }
  END {
    printf "load: store_bench --mode=rpc --cases=%s, %d s per run, runs alternating without/with a 1/s scraper\n\n", load, dur
    printf "| scraper | master CPU (%% of a core) | RPC/s | master CPU per RPC (us) |\n|---|---|---|---|\n"
    for (m in cpu) {
      per[m] = calls[m] ? cpu[m] / calls[m] * 1e6 : 0
      printf "| %s | %.1f | %.0f | %.3f |\n", m == "on" ? "1 scrape/s" : "none", 100 * cpu[m] / secs[m], calls[m] / secs[m], per[m]
    }
    printf "\nadded master CPU per RPC with the scraper: %+.2f %%\n", per["off"] ? 100 * (per["on"] / per["off"] - 1) : 0
    scrape_ms = bt / hz / burst * 1000
    printf "direct: %d scrapes of %d bytes cost %.2f ms of master CPU each; 1 scrape/s = %.3f %% of one core = %.2f %% of the loaded master CPU above\n",
      burst, size, scrape_ms, scrape_ms / 10, cpu["off"] ? scrape_ms / 1000 / (cpu["off"] / secs["off"]) * 100 : 0
  }' "$WORK/runs"
