#!/usr/bin/env bash
# What HA costs the hot path (docs/ha.md): two clusters side by side on this host, alternated round by round
# with the same store_bench client cases:
#   OFF  mooncake_master alone; holder and client given its address (no holder index, empty witness blocks)
#   ON   a 1-member etcd, mooncake_master --enable_ha; holder and client given "etcd://..." (they follow the
#        leader: holder index, witnesses of every put, the serve gate on every RPC)
# Both masters embed the HTTP metadata server. Prints GB/s, keys/s and per-call latency per case, and the ratio
# ON / OFF of the keys/s medians. Targets (the HA issue): unbatched put >= 0.8, batched put >= 0.9, get and
# exist unchanged.
# Usage: bench/run_ha_ab.sh [BUILD_DIR=./build]
#   CASES=put:4KiB:1,put:16KiB:1,put:16KiB:128,get:16KiB:1,get:16KiB:128,exist:16KiB:128  ROUNDS=3  DUR=2  PATH_=shm|tcp
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
B_DIR=${1:-build}
CASES=${CASES:-put:4KiB:1,put:16KiB:1,put:16KiB:128,get:16KiB:1,get:16KiB:128,exist:16KiB:128}
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-2}
PATH_=${PATH_:-shm}
BENCH=$B_DIR/tools/store_bench
need_bins "$B_DIR" "$BENCH" "$B_DIR/tools/mooncake_master"
need_cmds etcd
WORK=$(mktemp -d /tmp/ha_ab.XXXXXX)
BG_PIDS=()
trap finish EXIT
ft=0; [ "$PATH_" = tcp ] && ft=1

# OFF
start_master "$B_DIR"
ADDR_OFF=("${ADDR[@]}")
cp "$WORK/master.log" "$WORK/master_off.log"
start_holder "$B_DIR" "$ft" 512MiB off
HOLDER_OFF=$HOLDER_NAME
wait_warm off

# ON: etcd, an HA master, and clients following it through etcd
EP=$(free_port); PP=$(free_port)
etcd --name ab --data-dir "$WORK/etcd" --listen-client-urls "http://127.0.0.1:$EP" \
  --advertise-client-urls "http://127.0.0.1:$EP" --listen-peer-urls "http://127.0.0.1:$PP" \
  --initial-advertise-peer-urls "http://127.0.0.1:$PP" --initial-cluster "ab=http://127.0.0.1:$PP" \
  --log-level warn >"$WORK/etcd.log" 2>&1 &
BG_PIDS+=($!)
wait_port "$EP" "$!" || bench_fail "etcd did not start"
start_master "$B_DIR" --enable_ha --ha_backend_connstring="127.0.0.1:$EP" --rpc_address=127.0.0.1
wait_for "elected leader" "$WORK/master.log" 100 0.05 || bench_fail "the HA master was not elected"
META_ON=${ADDR[1]}
ADDR_ON=(--master_server_addr="etcd://127.0.0.1:$EP" "$META_ON")
ADDR=("${ADDR_ON[@]}")
start_holder "$B_DIR" "$ft" 512MiB on
HOLDER_ON=$HOLDER_NAME
wait_warm on

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); path $PATH_; ${DUR}s per case; $ROUNDS rounds, OFF then ON"
echo
echo "| round | setting | case | GB/s | keys/s | p50 / p99 per call (us) |"
echo "|---|---|---|---|---|---|"
: >"$WORK/results"
for r in $(seq "$ROUNDS"); do
  for which in OFF ON; do
    if [ "$which" = OFF ]; then addr=("${ADDR_OFF[@]}"); name=$HOLDER_OFF; else addr=("${ADDR_ON[@]}"); name=$HOLDER_ON; fi
    MC_FORCE_TCP=$ft "$BENCH" --mode=client "${addr[@]}" --global_segment_size=0 --preferred="$name" \
      --duration="$DUR" --cap_bytes=256MiB --cases="$CASES" 2>>"$WORK/client_$which.err" | grep '^RESULT' |
      while read -r line; do
        c="$(field "$line" op):$(field "$line" size):$(field "$line" batch)"
        echo "| $r | $which | $c | $(field "$line" gbps) | $(field "$line" keys_s) | $(field "$line" p50_us) / $(field "$line" p99_us) |"
        echo "$which $c $(field "$line" keys_s)" >>"$WORK/results"
      done
  done
done
echo
echo "| case | OFF keys/s (median) | ON keys/s (median) | ON / OFF |"
echo "|---|---|---|---|"
for c in $(awk '!seen[$2]++ { print $2 }' "$WORK/results"); do
  off=$(awk -v c="$c" '$1 == "OFF" && $2 == c { print $3 }' "$WORK/results" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
  on=$(awk -v c="$c" '$1 == "ON" && $2 == c { print $3 }' "$WORK/results" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
  echo "| $c | ${off:-n/a} | ${on:-n/a} | $(ratio "${on:-0}" "${off:-0}") |"
done
