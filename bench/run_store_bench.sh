#!/usr/bin/env bash
# Measures the store (mooncake_master + libmooncake_store) against references taken in the same run, and prints
# markdown tables:
#   master RPC rate (exist, batch exist of 1000 keys, put = PutStart+PutEnd) with 1, 4 and 16 connections (one
#     client thread per connection, and for 4 and 16 also one client thread driving them all, as redis-benchmark
#     does) vs redis-server driven by redis-benchmark with as many connections (EXISTS, EXISTS of 1000 keys, SET);
#   put/get of 16 KiB, 64 KiB, 1 MiB and 16 MiB objects, unbatched and batched, over TCP (MC_FORCE_TCP=1) and same
#     host (shared memory), one client thread, vs redis-benchmark (-P 1 -c 4) and memcached (4 connections);
#   setup time with a 16 MiB and a 16 GiB segment; first pass of 1 MiB puts over a fresh segment vs a warm one,
#     and vs the rate at which this machine hands out fresh shared memory right after (shm_pages).
# Every reference figure is the mean of a run right before and a run right after ours (machine load drifts).
# Builds nothing: usage  bench/run_store_bench.sh [BUILD_DIR=./build]   (DUR = seconds per data case, default 2;
# RPC_DUR = seconds per RPC case, default 1.5). Takes ~4-5 minutes.
# Every background process it starts is stopped on exit (trap), by its own pid; any failure aborts the run.
set -u -o pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILD=${1:-./build}
DUR=${DUR:-2}
RPC_DUR=${RPC_DUR:-1.5}
BENCH=$BUILD/tools/store_bench
MASTER=$BUILD/tools/mooncake_master
MCREF=$BUILD/tools/memcached_ref
SHMPAGES=$BUILD/tools/shm_pages
need_bins "$BUILD" "$BENCH" "$MASTER" "$MCREF" "$SHMPAGES"
need_cmds redis-server redis-benchmark redis-cli memcached python3

WORK=$(mktemp -d /tmp/store_bench.XXXXXX)
BG_PIDS=()
trap finish EXIT
trap 'exit 130' INT TERM

export MC_LOG_LEVEL=${MC_LOG_LEVEL:-WARN}
meets() { awk -v r="$1" -v t="$2" 'BEGIN { print (r + 0 >= t) ? "met" : "**missed**" }'; }
mean() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (a + b) / 2 }'; }
fmt() { awk -v a="$1" -v d="${2:-2}" 'BEGIN { printf "%.*f", d, a }'; }
kfmt() { awk -v a="$1" 'BEGIN { if (a >= 1e6) printf "%.2f M", a / 1e6; else if (a >= 1e4) printf "%.0f k", a / 1e3; else if (a >= 1e3) printf "%.1f k", a / 1e3; else printf "%.0f", a }'; }

# ---------------------------------------------------------------- services

MPORT=$(free_port); HPORT=$(free_port); XPORT=$(free_port)
"$MASTER" --rpc_port="$MPORT" --enable_http_metadata_server --http_metadata_server_port="$HPORT" \
  --metrics_port="$XPORT" >"$WORK/master.log" 2>&1 &
MASTER_PID=$!
BG_PIDS+=("$MASTER_PID")
wait_port "$MPORT" "$MASTER_PID" && wait_port "$HPORT" "$MASTER_PID" || bench_fail "master did not start"
ADDR=(--master_server_addr="127.0.0.1:$MPORT" --metadata_server="http://127.0.0.1:$HPORT/metadata")

RPORT=$(free_port)
redis-server --port "$RPORT" --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
BG_PIDS+=("$REDIS_PID")
wait_port "$RPORT" "$REDIS_PID" || bench_fail "redis-server did not start"

MCUSER=()
[ "$(id -u)" = 0 ] && MCUSER=(-u root)
start_memcached() {
  MCPORT=$(free_port)
  memcached "${MCUSER[@]}" -p "$MCPORT" -m 4096 -I 32m -U 0 >"$WORK/memcached.log" 2>&1 &
  MC_PID=$!
  BG_PIDS+=("$MC_PID")
  wait_port "$MCPORT" "$MC_PID" || bench_fail "memcached did not start"
}

# client FORCE_TCP TAG ARGS...: runs store_bench --mode=client (pure client), prints its WARM/RESULT lines.
client() {
  local ft=$1 tag=$2
  shift 2
  MC_FORCE_TCP=$ft "$BENCH" --mode=client "${ADDR[@]}" --global_segment_size=0 --duration="$DUR" "$@" \
    >"$WORK/client_$tag.out" 2>"$WORK/client_$tag.err" || bench_fail "client $tag failed"
  cat "$WORK/client_$tag.out"
}

# redis_csv ARGS...: runs redis-benchmark --csv against our redis; prints "TEST rps p50_ms p99_ms" per test.
redis_csv() {
  redis-benchmark -p "$RPORT" --csv "$@" 2>/dev/null >"$WORK/redis.csv" || bench_fail "redis-benchmark $* failed"
  awk -F'","' 'NR > 1 { gsub(/"/, "", $1); split($1, t, " "); print t[1], $2, $5, $7 }' "$WORK/redis.csv"
}

echo "# Store and master vs references"
echo
echo "- host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)," \
  "MemAvailable $(awk '/MemAvailable/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "- $(redis-server --version | cut -d' ' -f1-3), memcached $(memcached -V | cut -d' ' -f2); DUR=${DUR}s per data case," \
  "RPC_DUR=${RPC_DUR}s per RPC case; one client thread unless said; GB/s = 1e9 B/s"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg); shmem huge pages (shmem_enabled): $(shmem_thp)"
echo

# ---------------------------------------------------------------- (1) setup time, 16 MiB vs 16 GiB

SETUP_ROWS=()
SMALL=(); BIG=()
need_kb=$(( (16 << 20) + (1 << 20) )) # 16 GiB segment + 1 GiB headroom, in KiB
avail_kb=$(awk '/MemAvailable/ { print $2 }' /proc/meminfo)
BIG_OK=1
if [ "$avail_kb" -lt "$need_kb" ]; then
  BIG_OK=0
  BIG_WHY="MemAvailable $((avail_kb >> 20)) GiB < 17 GiB (16 GiB segment + 1 GiB headroom): the setup memory check would refuse it"
fi
for i in 1 2 3; do
  start_holder "$BUILD" 0 16MiB setup_s
  SMALL+=("$HOLDER_SETUP_MS")
  stop_bg "$HOLDER_PID"
  if [ "$BIG_OK" = 1 ]; then
    start_holder "$BUILD" 0 16GiB setup_b
    BIG+=("$HOLDER_SETUP_MS")
    stop_bg "$HOLDER_PID"
  fi
done
median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
S_MED=$(median3 "${SMALL[@]}")
if [ "$BIG_OK" = 1 ]; then
  B_MED=$(median3 "${BIG[@]}")
  q=$(ratio "$B_MED" "$S_MED")
  SETUP_ROWS+=("| 16 MiB | ${SMALL[*]} | $S_MED | | |")
  SETUP_ROWS+=("| 16 GiB | ${BIG[*]} | $B_MED | $q | $(awk -v r="$q" 'BEGIN { print (r <= 2.0) ? "met" : "**missed**" }') |")
else
  SETUP_ROWS+=("| 16 MiB | ${SMALL[*]} | $S_MED | | |")
  SETUP_ROWS+=("| 16 GiB | not run: $BIG_WHY | | | not measured |")
fi

# ---------------------------------------------------------------- (2) master RPC rate vs redis

python3 -c '
import sys
w = sys.stdout.write
for i in range(100000):
    w("*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$16\r\nxxxxxxxxxxxxxxxx\r\n" % i)' | redis-cli -p "$RPORT" --pipe >/dev/null ||
  bench_fail "redis prefill failed"
BE_ARGS=(EXISTS)
for _ in $(seq 1000); do BE_ARGS+=("key:__rand_int__"); done

# redis_rpc OP CONNS: sets RR_RATE (keys/s for batch_exist, requests/s otherwise), RR_P50, RR_P99 (us).
redis_rpc() {
  local n mul=1
  case $1 in
    exist) n=$(( $2 == 1 ? 30000 : 80000 )); redis_csv -c "$2" -n "$n" -r 100000 EXISTS key:__rand_int__ >"$WORK/rr.txt" ;;
    put) n=$(( $2 == 1 ? 30000 : 80000 )); redis_csv -c "$2" -n "$n" -r 100000 -d 16 -t set >"$WORK/rr.txt" ;;
    batch_exist) n=$(( $2 == 1 ? 1500 : 3000 )); mul=1000
      redis_csv -c "$2" -n "$n" -r 100000 "${BE_ARGS[@]}" >"$WORK/rr.txt" ;;
  esac
  set -- $(cat "$WORK/rr.txt")
  [ $# = 4 ] || bench_fail "unexpected redis-benchmark output: $*"
  RR_RATE=$(awk -v r="$2" -v m="$mul" 'BEGIN { printf "%.0f", r * m }')
  RR_P50=$(awk -v a="$3" 'BEGIN { printf "%.0f", a * 1000 }')
  RR_P99=$(awk -v a="$4" 'BEGIN { printf "%.0f", a * 1000 }')
}

RPC_ROWS=()
API_ROWS=()
# a small holder for the store-API exist cases (their keys need a segment); stopped before the fresh-segment runs
start_holder "$BUILD" 0 64MiB api
API_PID=$HOLDER_PID; API_HOLDER=$HOLDER_NAME
wait_warm api # steady state
for op in exist batch_exist put; do
  for c in 1 4 16; do
    redis_rpc "$op" "$c"; rb=$RR_RATE; rb50=$RR_P50; rb99=$RR_P99
    MC_FORCE_TCP=1 "$BENCH" --mode=rpc "${ADDR[@]}" --cases="$op:$c" --duration="$RPC_DUR" \
      >"$WORK/rpc.out" 2>"$WORK/rpc.err" || bench_fail "rpc $op:$c failed"
    line=$(grep '^RPC' "$WORK/rpc.out")
    api=""
    if [ "$c" = 1 ] && [ "$op" != put ]; then # the same calls through the store API
      b=1; [ "$op" = batch_exist ] && b=1000
      api=$(client 1 "api_$op" --preferred="$API_HOLDER" --cases="$op:64:$b" --duration="$RPC_DUR" | grep '^RESULT') ||
        exit 1
    fi
    redis_rpc "$op" "$c"; ra=$RR_RATE
    ref=$(mean "$rb" "$ra")
    unit=calls/s; [ "$op" = batch_exist ] && unit=keys/s; [ "$op" = put ] && unit=puts/s
    if [ "$op" = batch_exist ]; then v=$(field "$line" keys_s); else v=$(field "$line" calls_s); fi
    RPC_ROWS+=("| $op | $c | $(kfmt "$v") $unit | $(field "$line" p50_us) / $(field "$line" p99_us) | $(kfmt "$ref") ($(kfmt "$rb") / $(kfmt "$ra")) | $rb50 / $rb99 | $(ratio "$v" "$ref") |")
    eval "RPC_${op}_$c=$v"
    if [ "$c" != 1 ]; then # the same connections driven by one client thread, as redis-benchmark drives its own
      MC_FORCE_TCP=1 "$BENCH" --mode=rpc "${ADDR[@]}" --cases="$op:$c:conns" --duration="$RPC_DUR" \
        >"$WORK/rpc.out" 2>"$WORK/rpc.err" || bench_fail "rpc $op:$c:conns failed"
      line=$(grep '^RPC' "$WORK/rpc.out")
      if [ "$op" = batch_exist ]; then v=$(field "$line" keys_s); else v=$(field "$line" calls_s); fi
      RPC_ROWS+=("| $op | $c, one client thread | $(kfmt "$v") $unit | $(field "$line" p50_us) / $(field "$line" p99_us) | $(kfmt "$ref") ($(kfmt "$rb") / $(kfmt "$ra")) | $rb50 / $rb99 | $(ratio "$v" "$ref") |")
    fi
    if [ -n "$api" ]; then
      av=$(field "$api" keys_s)
      API_ROWS+=("| $op (store API) | 1 | $(kfmt "$av") $unit | $(field "$api" p50_us) / $(field "$api" p99_us) | $(kfmt "$ref") ($(kfmt "$rb") / $(kfmt "$ra")) | $rb50 / $rb99 | $(ratio "$av" "$ref") |")
      eval "API_${op}=$av"
    fi
  done
done
MC_FORCE_TCP=1 "$BENCH" --mode=rpc "${ADDR[@]}" --cases="batch_lookup:1" --duration="$RPC_DUR" \
  >"$WORK/rpc.out" 2>"$WORK/rpc.err" || bench_fail "rpc batch_lookup failed"
line=$(grep '^RPC' "$WORK/rpc.out")
RPC_LOOKUP=$(field "$line" keys_s)
RPC_ROWS+=("| batch_lookup (BatchGetReplicaList, 1000 keys) | 1 | $(kfmt "$RPC_LOOKUP") keys/s | $(field "$line" p50_us) / $(field "$line" p99_us) | upstream on this machine: 157 k | | $(ratio "$RPC_LOOKUP" 157000) |")
redis-cli -p "$RPORT" flushall >/dev/null
stop_bg "$API_PID"

# ---------------------------------------------------------------- (3) holders; first pass over a fresh segment

# A fresh memcached, first pass of 1 MiB sets (the same first-touch cost on the reference side).
start_memcached
"$MCREF" --port="$MCPORT" --op=set --one_pass --value_size=1MiB --keys=896 --conns=4 >"$WORK/mc_fresh.out" \
  2>"$WORK/mc_fresh.err" || bench_fail "memcached fresh pass failed"
MC_FRESH=$(grep '^MEMCACHED' "$WORK/mc_fresh.out")
"$MCREF" --port="$MCPORT" --op=set --one_pass --value_size=1MiB --keys=896 --conns=4 >"$WORK/mc_fresh.out" \
  2>"$WORK/mc_fresh.err" || bench_fail "memcached second pass failed"
MC_WARM=$(grep '^MEMCACHED' "$WORK/mc_fresh.out")

FRESH_ROWS=()
# 896 MiB of 1 MiB unbatched puts into the fresh 1 GiB segment of a holder started just before (one fresh
# holder at a time, as a storage node comes up), then (keys removed) the same again: warm.
for path in tcp shm; do
  if [ $path = tcp ]; then
    start_holder "$BUILD" 1 1GiB tcp
    TCP_PID=$HOLDER_PID; TCP_HOLDER=$HOLDER_NAME
  else
    start_holder "$BUILD" 0 1GiB shm
    SHM_PID=$HOLDER_PID; SHM_HOLDER=$HOLDER_NAME
  fi
  ft=1; h=$TCP_HOLDER
  [ $path = shm ] && ft=0 h=$SHM_HOLDER
  out=$(client "$ft" "fresh_$path" --preferred="$h" --cases=put:1MiB:1,put:1MiB:1 --max_bytes=896MiB \
    --cap_bytes=896MiB | grep '^RESULT') || exit 1
  first=$(sed -n 1p <<<"$out"); second=$(sed -n 2p <<<"$out")
  f=$(field "$first" gbps); w=$(field "$second" gbps)
  FRESH_ROWS+=("| $path | $(fmt "$f") | $(field "$first" p50_us) / $(field "$first" p99_us) | $(fmt "$w") | $(field "$second" p50_us) / $(field "$second" p99_us) | $(ratio "$f" "$w") |")
  # The machine's limit for that pass, measured right after in the same conditions: how fast one thread
  # gets 896 MiB of fresh shared memory populated (page size as our segments ask for).
  m=$("$SHMPAGES" 896 populate | grep '^FRESH') || bench_fail "shm_pages failed"
  FRESH_ROWS+=("| this machine's fresh shared memory right after (one thread populating 896 MiB; the limit of a first pass) | $(fmt "$(field "$m" gbps)") | | | | |")
  eval "FRESH_$path=$f WARM_$path=$w FRESHMEM_$path=$(field "$m" gbps)"
done
# Fresh segments again, but first given the time the holder's background warm-up takes; then one pass
# of the same puts. The two holders started above finish their own warm-up first (they serve the data
# cases below): a warm-up running beside a pass slows it, which is what the rows above measure, not these.
wait_warm tcp
wait_warm shm
for path in tcp shm; do
  ft=1; [ $path = shm ] && ft=0
  start_holder "$BUILD" "$ft" 1GiB "warmup_$path"
  wait_warm "warmup_$path"
  secs=$WARMUP_S
  first=$(client "$ft" "afterwarm_$path" --preferred="$HOLDER_NAME" --cases=put:1MiB:1 --max_bytes=896MiB \
    --cap_bytes=896MiB | grep '^RESULT') || exit 1
  f=$(field "$first" gbps); w=$(eval echo "\$WARM_$path")
  FRESH_ROWS+=("| $path, after the background warm-up ($(fmt "$secs" 1) s) | $(fmt "$f") | $(field "$first" p50_us) / $(field "$first" p99_us) | $(fmt "$w") (row above) | | $(ratio "$f" "$w") |")
  eval "AFTER_$path=$f WARMUP_S_$path=$secs"
  stop_bg "$HOLDER_PID"
done
FRESH_ROWS+=("| memcached, fresh process, 4 conns (reference) | $(fmt "$(field "$MC_FRESH" gbps)") | $(field "$MC_FRESH" p50_us) / $(field "$MC_FRESH" p99_us) | $(fmt "$(field "$MC_WARM" gbps)") | $(field "$MC_WARM" p50_us) / $(field "$MC_WARM" p99_us) | $(ratio "$(field "$MC_FRESH" gbps)" "$(field "$MC_WARM" gbps)") |")

# The engine took the intended path (the client logs each remote read at INFO).
check_path() { # FORCE_TCP HOLDER WANT
  MC_LOG_LEVEL=INFO MC_FORCE_TCP=$1 "$BENCH" --mode=client "${ADDR[@]}" --preferred="$2" --cases=get:64KiB:1 \
    --duration=0.05 --ws_bytes=1MiB >/dev/null 2>"$WORK/path.err" || bench_fail "path probe failed"
  grep -q "peer=$2 protocol=$3 " "$WORK/path.err" || bench_fail "expected the $3 path: $(grep -m1 TransferRequest "$WORK/path.err")"
}
check_path 1 "$TCP_HOLDER" tcp
check_path 0 "$SHM_HOLDER" shm

# ---------------------------------------------------------------- (4) put/get vs redis and memcached

DATA_ROWS=()
REF_ROWS=()
WARM_ROWS=()
for spec in "16384 128 16KiB" "65536 64 64KiB" "1048576 16 1MiB" "16777216 4 16MiB"; do
  set -- $spec
  size=$1 batch=$2 label=$3
  keys=$(( (256 << 20) / size ))
  rn=$(( 1536000000 / size ))
  [ "$rn" -lt $((keys * 5)) ] && rn=$((keys * 5))
  # untimed warm-up of both references for this size (their memory faults in like ours did above)
  redis-benchmark -p "$RPORT" -P 1 -c 4 -d "$size" -t set -n $((keys * 2)) -r "$keys" -q >/dev/null 2>&1
  "$MCREF" --port="$MCPORT" --op=set --value_size="$size" --keys="$keys" --duration=0.2 >/dev/null 2>&1 ||
    bench_fail "memcached warm-up failed"
  declare -A RB=()
  redis_csv -P 1 -c 4 -d "$size" -t set,get -n "$rn" -r "$keys" >"$WORK/rb.txt"
  while read -r t rps p50 p99; do RB[$t]="$rps $p50 $p99"; done <"$WORK/rb.txt"
  "$MCREF" --port="$MCPORT" --value_size="$size" --keys="$keys" --conns=4 --duration="$DUR" >"$WORK/mc.out" \
    2>"$WORK/mc.err" || bench_fail "memcached_ref $label failed"
  MCS=$(grep 'op=set' "$WORK/mc.out"); MCG=$(grep 'op=get' "$WORK/mc.out")
  cases="put:$size:1,put:$size:$batch,get:$size:1,get:$size:$batch"
  TCPR=$(client 1 "tcp_$label" --preferred="$TCP_HOLDER" --cases="$cases" | grep '^RESULT') || exit 1
  SHMO=$(client 0 "shm_$label" --preferred="$SHM_HOLDER" --warm_bytes=512MiB --cases="$cases") || exit 1
  SHMR=$(grep '^RESULT' <<<"$SHMO")
  W=$(grep '^WARM' <<<"$SHMO")
  WARM_ROWS+=("| the one that then ran the $label cases | $(fmt "$(field "$W" gbps)") | $(fmt "$(field "$W" secs)") |")
  declare -A RA=()
  redis_csv -P 1 -c 4 -d "$size" -t set,get -n "$rn" -r "$keys" >"$WORK/ra.txt"
  while read -r t rps p50 p99; do RA[$t]="$rps $p50 $p99"; done <"$WORK/ra.txt"
  for t in SET GET; do
    set -- ${RB[$t]}; b_rps=$1 b50=$2 b99=$3
    set -- ${RA[$t]}; a_rps=$1 a50=$2 a99=$3
    gb_b=$(awk -v r="$b_rps" -v s="$size" 'BEGIN { printf "%.3f", r * s / 1e9 }')
    gb_a=$(awk -v r="$a_rps" -v s="$size" 'BEGIN { printf "%.3f", r * s / 1e9 }')
    eval "REDIS_$t=$(mean "$gb_b" "$gb_a")"
    m=$MCS; [ $t = GET ] && m=$MCG
    eval "MC_$t=$(field "$m" gbps)"
    REF_ROWS+=("| $label | $t | $(fmt "$(mean "$gb_b" "$gb_a")") ($(fmt "$gb_b") / $(fmt "$gb_a")) | $(awk -v a="$b50" 'BEGIN { printf "%.0f", a * 1000 }') / $(awk -v a="$b99" 'BEGIN { printf "%.0f", a * 1000 }') | $(fmt "$(field "$m" gbps)") | $(field "$m" p50_us) / $(field "$m" p99_us) |")
  done
  for path in tcp shm; do
    res=$TCPR; pname="TCP"
    [ $path = shm ] && res=$SHMR pname="same host"
    while read -r line; do
      op=$(field "$line" op); b=$(field "$line" batch)
      ref=$REDIS_SET; mref=$MC_SET
      [ "$op" = get ] && ref=$REDIS_GET mref=$MC_GET
      v=$(field "$line" gbps)
      DATA_ROWS+=("| $label | $op | $b | $pname | $(fmt "$v") | $(kfmt "$(field "$line" keys_s)") | $(field "$line" p50_us) / $(field "$line" p99_us) | $(fmt "$ref") | $(ratio "$v" "$ref") | $(fmt "$mref") | $(ratio "$v" "$mref") |")
      key="D_${path}_${op}_${label}_$([ "$b" = 1 ] && echo single || echo batch)"
      eval "${key}=$v ${key}_keys=$(field "$line" keys_s) ${key}_ref=$ref"
    done <<<"$res"
  done
done
# Unbatched 16 KiB puts from a client that contributes memory (a 64 MiB segment, as vLLM / SGLang clients
# do; under liveness, so its write extents are bounded by its pings) beside the pure client's rows above
# (lease-only extents). Both take one master round trip per put. Bytes still go to the holder (preferred),
# i.e. across processes.
SEG_ROWS=()
for path in tcp shm; do
  ft=1 h=$TCP_HOLDER; [ $path = shm ] && ft=0 h=$SHM_HOLDER
  line=$(client "$ft" "seg_$path" --global_segment_size=64MiB --preferred="$h" --cases=put:16KiB:1 \
    --cap_bytes=64MiB | grep '^RESULT') || exit 1
  SEG_ROWS+=("| $path | $(kfmt "$(field "$line" keys_s)") puts/s | $(field "$line" p50_us) / $(field "$line" p99_us) |")
  eval "SEGPUT_$path=$(field "$line" keys_s)"
done
stop_bg "$TCP_PID"
stop_bg "$SHM_PID"

# ---------------------------------------------------------------- report

echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "## Master RPC rate (raw master client, one connection per thread, or N connections of one thread where said; 100 000 existing keys)"
echo
echo "| Op | Connections | Ours | Ours p50 / p99 (us) | redis-benchmark, mean (before / after) | Redis p50 / p99 (us), before | Ratio |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${RPC_ROWS[@]}" "${API_ROWS[@]}"
echo
echo "Redis references: \`EXISTS key:__rand_int__\` (exist), \`EXISTS\` with 1000 random keys per request (batch exist," \
  "rate in keys/s), \`SET\` of 16 B (put; one request where our put is two RPCs), \`-r 100000\`, \`-c\` = connections."
echo
echo "## Put / get throughput (one client thread; batched = 128 / 64 / 16 / 4 keys per call)"
echo
echo "| Size | Op | Batch | Path | Ours (GB/s) | keys/s | p50 / p99 per call (us) | Redis (GB/s) | vs Redis | memcached (GB/s) | vs memcached |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${DATA_ROWS[@]}"
echo
echo "### Unbatched 16 KiB puts from a client with its own 64 MiB segment (write extents: one master round trip)"
echo
echo "| Path | Rate | p50 / p99 (us) |"
echo "|---|---|---|"
printf '%s\n' "${SEG_ROWS[@]}"
echo
echo "### References (4 connections each; Redis = mean of the runs before and after ours)"
echo
echo "| Size | Op | Redis GB/s, mean (before / after) | Redis p50 / p99 (us), before | memcached GB/s | memcached p50 / p99 (us) |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${REF_ROWS[@]}"
echo
echo "## Setup time (mooncake_store_setup of a holder, ms; three runs each)"
echo
echo "| Segment | Runs (ms) | Median (ms) | Ratio to 16 MiB | <= 2x |"
echo "|---|---|---|---|---|"
printf '%s\n' "${SETUP_ROWS[@]}"
echo
echo "## First pass over a fresh 1 GiB segment (896 x 1 MiB unbatched puts), then the same again (warm)"
echo
echo "| Path | Fresh (GB/s) | p50 / p99 (us) | Warm (GB/s) | p50 / p99 (us) | Fresh / warm |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${FRESH_ROWS[@]}"
echo
echo "A new same-host client process writing into the (already warm) holder, first 512 MiB of 1 MiB puts:"
echo
echo "| Client process | GB/s | seconds |"
echo "|---|---|---|"
printf '%s\n' "${WARM_ROWS[@]}"
echo

# ---------------------------------------------------------------- targets

T=()
target() { T+=("| $1 | $2 | $3 |"); }
for op in put get; do
  for mode in single batch; do
    k=D_tcp_${op}_1MiB_$mode
    q=$(ratio "${!k}" "$(eval echo \${${k}_ref})")
    target "1 MiB $op over TCP ($mode) >= 1.0x Redis" "$(fmt "${!k}") GB/s = ${q}x" "$(meets "$q" 1.0)"
  done
done
for mode in single batch; do
  k=D_shm_get_1MiB_$mode
  q=$(ratio "${!k}" "$(eval echo \${${k}_ref})")
  target "same-host 1 MiB get across processes ($mode) >= 3x Redis" "$(fmt "${!k}") GB/s = ${q}x" "$(meets "$q" 3.0)"
done
for path in tcp shm; do
  k=D_${path}_get_16KiB_batch_keys
  target "batched 16 KiB gets ($path) >= 65 k keys/s" "$(kfmt "${!k}") keys/s" "$(meets "${!k}" 65000)"
done
target "batch exist (master RPC, 1 connection) >= 1 M keys/s" "$(kfmt "$RPC_batch_exist_1") keys/s" "$(meets "$RPC_batch_exist_1" 1000000)"
target "batch exist (store API, 1 thread) >= 1 M keys/s" "$(kfmt "$API_batch_exist") keys/s" "$(meets "$API_batch_exist" 1000000)"
target "unbatched put (master PutStart+PutEnd, 1 connection) >= 20 k/s" "$(kfmt "$RPC_put_1") puts/s" "$(meets "$RPC_put_1" 20000)"
for path in tcp shm; do
  k=SEGPUT_$path
  target "unbatched put (store API, 16 KiB, $path, client with a segment) >= 20 k/s" "$(kfmt "${!k}") puts/s" "$(meets "${!k}" 20000)"
  k=D_${path}_put_16KiB_single_keys
  target "unbatched put (store API, 16 KiB, $path, pure client, lease-only extent) >= 20 k/s" "$(kfmt "${!k}") puts/s" "$(meets "${!k}" 20000)"
done
if [ "$BIG_OK" = 1 ]; then
  target "setup with 16 GiB <= 2x setup with 16 MiB" "$B_MED ms vs $S_MED ms = $(ratio "$B_MED" "$S_MED")x" \
    "$(awk -v r="$(ratio "$B_MED" "$S_MED")" 'BEGIN { print (r <= 2.0) ? "met" : "**missed**" }')"
else
  target "setup with 16 GiB <= 2x setup with 16 MiB" "not measured: $BIG_WHY" "not measured"
fi
for path in tcp shm; do
  f=FRESH_$path w=WARM_$path a=AFTER_$path ws=WARMUP_S_$path
  q=$(ratio "${!f}" "${!w}")
  target "no slow first pass, $path, right after setup (fresh >= 0.5x warm)" "$(fmt "${!f}") vs $(fmt "${!w}") GB/s = ${q}x" "$(meets "$q" 0.5)"
  # the same pass against memcached's own first pass in a fresh process, here (same host memory conditions)
  q=$(ratio "${!f}" "$(field "$MC_FRESH" gbps)")
  target "first pass, $path, right after setup, vs memcached's first pass here (>= 1.0x)" "$(fmt "${!f}") vs $(fmt "$(field "$MC_FRESH" gbps)") GB/s = ${q}x" "$(meets "$q" 1.0)"
  m=FRESHMEM_$path
  q=$(ratio "${!f}" "${!m}")
  target "first pass, $path, right after setup, vs this machine's fresh-memory rate right after (reference)" "$(fmt "${!f}") vs $(fmt "${!m}") GB/s = ${q}x" "reference"
  q=$(ratio "${!a}" "${!w}")
  target "no slow first pass, $path, after the $(fmt "${!ws}" 1) s background warm-up (>= 0.5x warm)" "$(fmt "${!a}") vs $(fmt "${!w}") GB/s = ${q}x" "$(meets "$q" 0.5)"
done
echo "## Targets"
echo
echo "| Target | Measured | Verdict |"
echo "|---|---|---|"
printf '%s\n' "${T[@]}"
