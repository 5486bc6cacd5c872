#!/usr/bin/env bash
# The RDMA reference and the transport beside it: boots the RDMA guest once (scripts/rdma-guest.sh, docs/testing.md,
# "The RDMA guest") and, for WRITE and READ at 64 KiB and 1 MiB, runs perftest's ib_write_bw / ib_read_bw on rxe0
# (server and client on the one device) and our transfer_engine_bench --protocol=rdma --device_name=rxe0 (target and
# initiator processes, MC_SAME_HOST_PATH=0 so that they meet over rdma), alternating them ROUNDS times; prints the
# average MB/s of each and their ratio as a markdown table. Under TCG the figures measure the emulator, not a
# network; only ratios against runs in the same guest mean anything.
# Usage: bench/run_rdma_ref.sh   (N64K, N1M: perftest iterations per case, default 1000 and 100; DUR: seconds of
# each bench run, default 5; ROUNDS, default 2; BUILD: the build directory, default build)
# Builds nothing; exits 77 when no guest can be had here, non-zero on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N64K=${N64K:-1000}
N1M=${N1M:-100}
DUR=${DUR:-5}
ROUNDS=${ROUNDS:-2}
BUILD=${BUILD:-build}

# ours OP SIZE: one transfer_engine_bench pair over rdma; prints "OURS OP SIZE MB/s".
ours() {
  local op=$1 size=$2 batch=128 log seg
  [ "$size" = 65536 ] || batch=16
  log=$(mktemp)
  MC_SAME_HOST_PATH=0 "$BUILD/tools/transfer_engine_bench" --mode=target --protocol=rdma --device_name=rxe0 \
    --metadata_server=P2PHANDSHAKE --local_server_name=127.0.0.1 --buffer_size=64MiB >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do
    seg=$(sed -n 's/^Target ready: segment //p' "$log")
    [ -z "$seg" ] || break
    sleep 0.1
  done
  [ -n "$seg" ] || { cat "$log"; kill "$pid"; return 1; }
  MC_SAME_HOST_PATH=0 "$BUILD/tools/transfer_engine_bench" --mode=initiator --protocol=rdma --device_name=rxe0 \
    --metadata_server=P2PHANDSHAKE --local_server_name=127.0.0.1 --segment_id="$seg" --operation="$op" \
    --block_size="$size" --batch_size=$batch --threads=2 --duration="$DUR" --report_unit=MB >"$log.i" 2>&1 || true
  kill "$pid"
  wait "$pid" || true
  local mbs
  mbs=$(sed -n 's/.*throughput \([0-9.]*\) MB\/s.*/\1/p' "$log.i")
  [ -n "$mbs" ] || { cat "$log.i"; rm -f "$log" "$log.i"; return 1; }
  echo "OURS $op $size $mbs"
  rm -f "$log" "$log.i"
}

if [ "${1:-}" = --guest ]; then
  for round in $(seq "$ROUNDS"); do
    for tool in ib_write_bw ib_read_bw; do
      for size in 65536 1048576; do
        iters=$N64K
        [ "$size" = 65536 ] || iters=$N1M
        echo "CASE $tool $size $iters"
        scripts/rdma-guest.sh pair "$tool" "$size" "$iters"
        op=write
        [ "$tool" = ib_write_bw ] || op=read
        ours "$op" "$size"
      done
    done
  done
  exit 0
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
scripts/rdma-guest.sh run -v --timeout 900 --env N64K --env N1M --env DUR --env ROUNDS --env BUILD -- bench/run_rdma_ref.sh --guest >"$out" || rc=$?
[ "$rc" = 0 ] || { cat "$out"; echo "error: the guest's run exited $rc" >&2; exit "$rc"; }
echo "| operation | message | perftest average MB/s (rounds) | transfer_engine_bench rdma MB/s (rounds) | ratio of the means |"
echo "|---|---|---|---|---|"
awk '$1 == "CASE" { tool = $2; size = $3; next }
     tool != "" && $1 == size && NF >= 5 { k = tool " " size; ref[k] = ref[k] " " $4; rs[k] += $4; rn[k]++; tool = ""; next }
     $1 == "OURS" { k = ($2 == "write" ? "ib_write_bw" : "ib_read_bw") " " $3; us[k] = us[k] " " $4; os[k] += $4; on[k]++ }
     END {
       split("ib_write_bw 65536,ib_write_bw 1048576,ib_read_bw 65536,ib_read_bw 1048576", ks, ",")
       for (i = 1; i <= 4; i++) {
         k = ks[i]; split(k, p, " ")
         if (!rn[k] || !on[k]) continue
         printf "| %s | %s | %.2f (%s ) | %.2f (%s ) | %.2f |\n", (p[1] == "ib_write_bw" ? "WRITE" : "READ"),
                (p[2] == 65536 ? "64 KiB" : "1 MiB"), rs[k] / rn[k], ref[k], os[k] / on[k], us[k], (os[k] / on[k]) / (rs[k] / rn[k])
       }
     }' "$out"
