#!/usr/bin/env bash
# What durability and HA cost the hot path (docs/ha.md): three clusters side by side on this host, alternated
# round by round with the same store_bench client cases:
#   OFF  mooncake_master alone; holder and client with MC_STORE_HOLDER_INDEX=0 (no holder index, empty witness
#        blocks: a restarted master starts empty)
#   IDX  mooncake_master alone, clients as they come by default (the holder index and the writers' witnesses:
#        a restarted master gets its objects back)
#   ON   a 1-member etcd, mooncake_master --enable_ha; holder and client given "etcd://..." (they follow the
#        leader: holder index, witnesses of every put, the serve gate on every RPC)
# All masters embed the HTTP metadata server. Prints GB/s, keys/s and per-call latency per case, and the ratios
# IDX / OFF and ON / OFF of the keys/s medians. Targets (the HA issue): unbatched put >= 0.8, batched put >= 0.9,
# get and exist unchanged.
# Usage: bench/run_ha_ab.sh [BUILD_DIR=./build]
#   CASES=put:4KiB:1,put:16KiB:1,put:16KiB:128,get:16KiB:1,get:16KiB:128,batch_exist:1KiB:128  ROUNDS=3  DUR=2  PATH_=shm|tcp
#   WARM=500MiB (each client first puts and removes that much, untimed, and waits until its mapping of the
#   holder is warm: the cases then measure puts, not page faults). It covers nearly the whole 512 MiB holder
#   segment on purpose: with the holder index on, removed space is reused only once its DROP is acknowledged
#   (docs/ha.md), so the puts after each --cap_bytes cycle land on addresses OFF never used, and a client
#   mapping warmed for 256 MiB only faulted a fresh 2 MiB page every 512 puts of 4 KiB there (1-4 ms each,
#   most of what the unbatched case lost before: a first touch, not a cost of durability). Get cases read a
#   128 MiB working set: the set of the case before may still be held by its read leases when the next one
#   fills the 512 MiB segment (a case with failed reads ends the run)
#   SETTLE_MS=50 (put cases: after each untimed removal of a --cap_bytes cycle, every setting waits this long,
#   untimed: OFF frees the space inside the removal, IDX and ON hold it until the holder acknowledged the
#   DROPs and free it on the master's 10 ms discard tick, so without the wait the removal's own work would
#   fall into IDX's and ON's timed puts only)
#   HOLDER_IDLE=1 (each round runs the three settings twice: as they are, then again with every holder
#   process under SCHED_IDLE, `chrt --idle`, labelled OFF~ IDX~ ON~. A holder's index work then takes only
#   CPU time nothing else wants, as it would on its own host; the writer, the master and etcd are left as
#   they are. The difference between the two passes is what the holders' sharing of this machine's CPUs
#   with the writer's path costs, measured in the same run)
#   PIN=1 (every setting alike: the writer's path on CPU 0 — the store_bench client and the masters' RPC
#   workers, threads named mc-rpc — and everything off that path on CPU 1: the masters' other threads
#   (the index feed, eviction, housekeeping, HA), the holders, etcd. What durability adds off the path
#   (the holders' index tables, the feed's poll answers) then cannot slow the path by sharing its CPU, as
#   on separate hosts; what it adds on the path (records appended, witnesses in replies) still counts)
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
B_DIR=${1:-build}
CASES=${CASES:-put:4KiB:1,put:16KiB:1,put:16KiB:128,get:16KiB:1,get:16KiB:128,batch_exist:1KiB:128}
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

# OFF: no holder index
start_master "$B_DIR"
MASTER_OFF=${BG_PIDS[-1]}
ADDR_OFF=("${ADDR[@]}")
cp "$WORK/master.log" "$WORK/master_off.log"
MC_STORE_HOLDER_INDEX=0 start_holder "$B_DIR" "$ft" 512MiB off
HOLDER_OFF=$HOLDER_NAME
PIDS_OFF=$MASTER_OFF,$HOLDER_PID
HOLDERS=("$HOLDER_PID")
wait_warm off

# IDX: the defaults
start_master "$B_DIR"
MASTER_IDX=${BG_PIDS[-1]}
ADDR_IDX=("${ADDR[@]}")
cp "$WORK/master.log" "$WORK/master_idx.log"
start_holder "$B_DIR" "$ft" 512MiB idx
HOLDER_IDX=$HOLDER_NAME
PIDS_IDX=$MASTER_IDX,$HOLDER_PID
HOLDERS+=("$HOLDER_PID")
wait_warm idx

# ON: etcd, an HA master, and clients following it through etcd
EP=$(free_port); PP=$(free_port)
etcd --name ab --data-dir "$WORK/etcd" --listen-client-urls "http://127.0.0.1:$EP" \
  --advertise-client-urls "http://127.0.0.1:$EP" --listen-peer-urls "http://127.0.0.1:$PP" \
  --initial-advertise-peer-urls "http://127.0.0.1:$PP" --initial-cluster "ab=http://127.0.0.1:$PP" \
  --log-level warn >"$WORK/etcd.log" 2>&1 &
BG_PIDS+=($!)
ETCD_PID=$!
wait_port "$EP" "$!" || bench_fail "etcd did not start"
start_master "$B_DIR" --enable_ha --ha_backend_connstring="127.0.0.1:$EP" --rpc_address=127.0.0.1
MASTER_ON=${BG_PIDS[-1]}
wait_for "elected leader" "$WORK/master.log" 100 0.05 || bench_fail "the HA master was not elected"
META_ON=${ADDR[1]}
ADDR_ON=(--master_server_addr="etcd://127.0.0.1:$EP" "$META_ON")
ADDR=("${ADDR_ON[@]}")
start_holder "$B_DIR" "$ft" 512MiB on
HOLDER_ON=$HOLDER_NAME
PIDS_ON=$MASTER_ON,$HOLDER_PID,$ETCD_PID
HOLDERS+=("$HOLDER_PID")
SETTINGS="OFF IDX ON"
if [ "${HOLDER_IDLE:-0}" = 1 ]; then
  need_cmds chrt
  SETTINGS="OFF IDX ON idle OFF~ IDX~ ON~ normal"
fi
# holders_sched idle|other: every thread of every holder process under that scheduling policy
holders_sched() {
  local p
  for p in "${HOLDERS[@]}"; do chrt -a "--$1" -p 0 "$p" >/dev/null || bench_fail "chrt --$1 of holder $p failed"; done
}
wait_warm on

CLIENT_PIN=()
if [ "${PIN:-0}" = 1 ]; then
  need_cmds taskset
  [ "$(nproc)" -ge 2 ] || bench_fail "PIN=1 needs 2 CPUs"
  for mp in "$MASTER_OFF" "$MASTER_IDX" "$MASTER_ON"; do
    for t in /proc/"$mp"/task/*; do
      cpu=1; [ "$(cat "$t/comm")" = mc-rpc ] && cpu=0
      taskset -p -c "$cpu" "${t##*/}" >/dev/null || bench_fail "taskset of thread ${t##*/} failed"
    done
  done
  for p in "${HOLDERS[@]}" "$ETCD_PID"; do taskset -a -p -c 1 "$p" >/dev/null || bench_fail "taskset of $p failed"; done
  CLIENT_PIN=(taskset -c 0)
  echo "pinned: the store_bench client and the masters' mc-rpc threads on CPU 0, the rest on CPU 1"
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); path $PATH_; ${DUR}s per case; $ROUNDS rounds: ${SETTINGS//idle /}" | sed 's/ normal//' 
echo
echo "| round | setting | case | GB/s | keys/s | p50 / p99 per call (us) | CPU us per key | CPUs busy |"
echo "|---|---|---|---|---|---|---|---|"
: >"$WORK/results"
: >"$WORK/each"
for r in $(seq "$ROUNDS"); do
  for which in $SETTINGS; do
    idx=1
    case $which in
      OFF | OFF~) addr=("${ADDR_OFF[@]}"); name=$HOLDER_OFF; pids=$PIDS_OFF; idx=0 ;;
      IDX | IDX~) addr=("${ADDR_IDX[@]}"); name=$HOLDER_IDX; pids=$PIDS_IDX ;;
      ON | ON~) addr=("${ADDR_ON[@]}"); name=$HOLDER_ON; pids=$PIDS_ON ;;
      idle) holders_sched idle; continue ;;
      normal) holders_sched other; continue ;;
    esac
    MC_STORE_HOLDER_INDEX=$idx MC_FORCE_TCP=$ft "${CLIENT_PIN[@]}" "$BENCH" --mode=client "${addr[@]}" --global_segment_size=0 --preferred="$name" \
      --duration="$DUR" --cap_bytes=256MiB --settle_ms="${SETTLE_MS:-50}" --ws_bytes=128MiB --warm_bytes="${WARM:-500MiB}" --cpu_pids="$pids" --cases="$CASES" \
      2>>"$WORK/client_$which.err" | grep -E '^(RESULT|CPUEACH)' |
      while read -r line; do
        c="$(field "$line" op):$(field "$line" size):$(field "$line" batch)"
        if [ "${line%% *}" = CPUEACH ]; then
          echo "$which $c $(field "$line" each)" >>"$WORK/each"
          continue
        fi
        echo "| $r | $which | $c | $(field "$line" gbps) | $(field "$line" keys_s) | $(field "$line" p50_us) / $(field "$line" p99_us) | $(field "$line" cpu_us_per_key) | $(field "$line" cpus_busy) |"
        echo "$which $c $(field "$line" keys_s) $(field "$line" cpu_us_per_key)" >>"$WORK/results"
      done
  done
done
echo
echo "Medians over the rounds. Throughput: keys/s. Cost: CPU microseconds per key of the client, master and"
echo "holder (and etcd for ON) together; its ratio is OFF / setting, so that, like the throughput's, 1.00 means"
echo "no cost and lower is worse (on a machine whose CPUs are all busy, the two agree)."
echo
echo "| case | OFF keys/s | IDX keys/s | ON keys/s | IDX / OFF | ON / OFF | OFF CPU us/key | IDX | ON | OFF / IDX (CPU) | OFF / ON (CPU) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
median() { awk -v w="$1" -v c="$2" -v f="$3" '$1 == w && $2 == c { print $f }' "$WORK/results" | sort -g |
  awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
for c in $(awk '!seen[$2]++ { print $2 }' "$WORK/results"); do
  off=$(median OFF "$c" 3); idx=$(median IDX "$c" 3); on=$(median ON "$c" 3)
  coff=$(median OFF "$c" 4); cidx=$(median IDX "$c" 4); con=$(median ON "$c" 4)
  echo "| $c | ${off:-n/a} | ${idx:-n/a} | ${on:-n/a} | $(ratio "${idx:-0}" "${off:-0}") | $(ratio "${on:-0}" "${off:-0}") |" \
    "${coff:-n/a} | ${cidx:-n/a} | ${con:-n/a} | $(ratio "${coff:-0}" "${cidx:-0}") | $(ratio "${coff:-0}" "${con:-0}") |"
done
if [ "${HOLDER_IDLE:-0}" = 1 ]; then
  echo
  echo "The same rounds with every holder under SCHED_IDLE (OFF~ IDX~ ON~): keys/s medians and their ratios, and"
  echo "the per-round ratios (each setting against the OFF of its own pass and round)."
  echo
  echo "| case | OFF~ keys/s | IDX~ keys/s | ON~ keys/s | IDX~ / OFF~ | ON~ / OFF~ | per round ON / OFF | per round ON~ / OFF~ |"
  echo "|---|---|---|---|---|---|---|---|"
  per_round() { # setting base case: the ratio of each round's keys/s, in order
    awk -v a="$1" -v b="$2" -v c="$3" '$2 == c && $1 == b { base[++nb] = $3 } $2 == c && $1 == a { v[++na] = $3 }
      END { for (i = 1; i <= na && i <= nb; i++) printf "%s%.2f", (i > 1 ? " " : ""), v[i] / base[i] }' "$WORK/results"
  }
  for c in $(awk '!seen[$2]++ { print $2 }' "$WORK/results"); do
    off=$(median 'OFF~' "$c" 3); idx=$(median 'IDX~' "$c" 3); on=$(median 'ON~' "$c" 3)
    echo "| $c | ${off:-n/a} | ${idx:-n/a} | ${on:-n/a} | $(ratio "${idx:-0}" "${off:-0}") | $(ratio "${on:-0}" "${off:-0}") |" \
      "$(per_round ON OFF "$c") | $(per_round 'ON~' 'OFF~' "$c") |"
  done
fi
echo
echo "CPU microseconds per key by process, medians over the rounds: client / master / holder (/ etcd for ON). A"
echo "holder's cost runs, in a cluster, on the holder's host, off the writer's path; here all share two CPUs."
echo
echo "| case | OFF | IDX | ON |"
echo "|---|---|---|---|"
each_median() {
  local col out="" m
  local nf
  nf=$(awk -v w="$1" -v c="$2" '$1 == w && $2 == c { print $3 }' "$WORK/each" | awk -F/ '{ if (NF > n) n = NF } END { print n + 0 }')
  for col in $(seq "$nf"); do
    m=$(awk -v w="$1" -v c="$2" '$1 == w && $2 == c { print $3 }' "$WORK/each" | cut -d/ -f"$col" | sort -g |
      awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
    out="$out${out:+ / }$m"
  done
  echo "$out"
}
for c in $(awk '!seen[$2]++ { print $2 }' "$WORK/each"); do
  echo "| $c | $(each_median OFF "$c") | $(each_median IDX "$c") | $(each_median ON "$c") |"
done
