#!/usr/bin/env bash
# The RDMA reference: boots the RDMA guest once (scripts/rdma-guest.sh, docs/testing.md, "The RDMA guest") and runs
# perftest's ib_write_bw and ib_read_bw on rxe0 (server and client on the one device) at 64 KiB and 1 MiB,
# printing the average MB/s of each as a markdown table: what the project's RDMA transport is compared with.
# Under TCG the figures measure the emulator, not a network; only ratios against runs in the same guest mean
# anything. Usage: bench/run_rdma_ref.sh   (N64K, N1M: iterations per case, default 1000 and 100)
# Builds nothing; exits 77 when no guest can be had here, non-zero on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N64K=${N64K:-1000}
N1M=${N1M:-100}

if [ "${1:-}" = --guest ]; then
  for tool in ib_write_bw ib_read_bw; do
    for size in 65536 1048576; do
      iters=$N64K
      [ "$size" = 65536 ] || iters=$N1M
      echo "CASE $tool $size $iters"
      scripts/rdma-guest.sh pair "$tool" "$size" "$iters"
    done
  done
  exit 0
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
scripts/rdma-guest.sh run -v --timeout 900 --env N64K --env N1M -- bench/run_rdma_ref.sh --guest >"$out" || rc=$?
[ "$rc" = 0 ] || { cat "$out"; echo "error: the guest's run exited $rc" >&2; exit "$rc"; }
echo "| tool | message | iterations | average MB/s | peak MB/s |"
echo "|---|---|---|---|---|"
awk '$1 == "CASE" { tool = $2; size = $3; next }
     tool != "" && $1 == size && NF >= 5 {
       printf "| %s | %s | %s | %s | %s |\n", tool, (size == 65536 ? "64 KiB" : "1 MiB"), $2, $4, $3
       tool = ""
     }' "$out"
