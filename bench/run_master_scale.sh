#!/usr/bin/env bash
# The store at a million keys: master memory per key and whole-keyspace operations, beside Redis holding
# the same keys (each with a 16-byte value, about what one replica location is to the master).
#   ours: bench/master_scale (one client with its own segment, batches of 1000): put, batch exist, batch
#         get, remove by regex (a tenth), remove all, then an overfill of twice as many keys with eviction.
#   Redis: the same key names loaded with MSET of 1000 keys per command (redis-cli --pipe), EXISTS of
#         1000 keys per command over all of them, FLUSHALL; used_memory before and after.
# Usage: bench/run_master_scale.sh [BUILD_DIR=./build]   (env KEYS, default 1000000; VALUE, default 200)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
BUILD=${1:-build}
KEYS=${KEYS:-1000000}
VALUE=${VALUE:-200}
SCALE=$BUILD/tools/master_scale
MASTER=$BUILD/tools/mooncake_master
need_bins "$BUILD" "$SCALE" "$MASTER"
need_cmds redis-server redis-cli python3
WORK=$(mktemp -d /tmp/master_scale.XXXXXX)
BG_PIDS=()
trap finish EXIT
export MC_LOG_LEVEL=${MC_LOG_LEVEL:-ERROR} # the overfill's -200 answers would flood the log
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
per_s() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", n / s }'; }

# segment: the first pass fits (about 75 % of it, under the 90 % eviction watermark); the overfill's
# twice as many keys do not
SEG_MIB=$(( KEYS * VALUE * 4 / 3 / 1048576 + 16 ))
echo "# master_scale: $KEYS keys of $VALUE B, segment $SEG_MIB MiB, $(date -u '+%F %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"

MPORT=$(free_port); HPORT=$(free_port); XPORT=$(free_port)
LEASE_MS=2000 # a short read lease: the overfill waits for the lookups' leases to end
"$MASTER" --rpc_port="$MPORT" --enable_http_metadata_server --http_metadata_server_port="$HPORT" \
  --metrics_port="$XPORT" --default_kv_lease_ttl="$LEASE_MS" >"$WORK/master.log" 2>&1 &
MPID=$!
BG_PIDS+=("$MPID")
wait_port "$MPORT" "$MPID" && wait_port "$HPORT" "$MPID" || { echo "master did not start" >&2; exit 1; }
"$SCALE" "127.0.0.1:$MPORT" "http://127.0.0.1:$HPORT/metadata" "$MPID" "$KEYS" "$VALUE" "$SEG_MIB" "$LEASE_MS" \
  >"$WORK/scale.out" 2>"$WORK/scale.err" || { cat "$WORK/scale.err" >&2; exit 1; }
cat "$WORK/scale.out"
stop_bg "$MPID"

RPORT=$(free_port)
redis-server --port "$RPORT" --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
RPID=$!
BG_PIDS+=("$RPID")
wait_port "$RPORT" "$RPID" || { echo "redis-server did not start" >&2; exit 1; }
used() { redis-cli -p "$RPORT" info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p'; }
# commands: MSET / EXISTS of 1000 keys each, in RESP
gen() {
  python3 - "$1" "$KEYS" <<'EOF'
import sys
op, n = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
val = b"x" * 16
for b in range(0, n, 1000):
    keys = [b"k%09d" % i for i in range(b, min(n, b + 1000))]
    if op == "mset":
        parts = [b"MSET"] + [x for k in keys for x in (k, val)]
    else:
        parts = [b"EXISTS"] + keys
    out.write(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
EOF
}
gen mset >"$WORK/mset.resp"
gen exists >"$WORK/exists.resp"
u0=$(used)
t=$(now); redis-cli -p "$RPORT" --pipe <"$WORK/mset.resp" >/dev/null; r_put=$(since "$t")
u1=$(used)
t=$(now); redis-cli -p "$RPORT" --pipe <"$WORK/exists.resp" >/dev/null; r_exist=$(since "$t")
n=$(redis-cli -p "$RPORT" dbsize)
t=$(now); redis-cli -p "$RPORT" flushall >/dev/null; r_flush=$(since "$t")
echo "REDIS keys=$n mset_secs=$r_put exists_secs=$r_exist flushall_secs=$r_flush used_before=$u0 used_after=$u1"

P=$(grep 'phase=put ' "$WORK/scale.out"); S0=$(grep 'phase=start' "$WORK/scale.out")
E=$(grep 'phase=batch_exist' "$WORK/scale.out"); A=$(grep 'phase=remove_all' "$WORK/scale.out")
ours_b=$(awk -v a="$(field "$P" rss_kib)" -v b="$(field "$S0" rss_kib)" -v n="$KEYS" 'BEGIN { printf "%.0f", (a - b) * 1024 / n }')
redis_b=$(awk -v a="$u1" -v b="$u0" -v n="$KEYS" 'BEGIN { printf "%.0f", (a - b) / n }')
echo
echo "| Measure | Ours | Redis (same keys, 16 B values) | Ratio (ours / Redis) |"
echo "|---|---|---|---|"
echo "| memory per key (master RSS growth / used_memory growth) | $ours_b B | $redis_b B | $(ratio "$ours_b" "$redis_b") |"
echo "| write all keys, batches of 1000 (keys/s) | $(field "$P" rate) | $(per_s "$KEYS" "$r_put") | $(ratio "$(field "$P" rate)" "$(per_s "$KEYS" "$r_put")") |"
echo "| existence of all keys, 1000 per call (keys/s) | $(field "$E" rate) | $(per_s "$KEYS" "$r_exist") | $(ratio "$(field "$E" rate)" "$(per_s "$KEYS" "$r_exist")") |"
echo "| remove all (s) | $(field "$A" secs) ($(field "$A" keys) keys) | $r_flush (FLUSHALL) | $(ratio "$(field "$A" secs)" "$r_flush") |"
