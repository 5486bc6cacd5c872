#!/usr/bin/env bash
# test_rdma_guest_smoke (docs/testing.md, "The RDMA guest"): boots the RDMA guest and checks, from what runs in
# it, that rxe0's port is PORT_ACTIVE and that an ib_write_bw pair of 64 KiB writes over rxe0 (server and client
# on the one device, the client reaching the server through 127.0.0.1) reports a bandwidth above zero.
# Exits 77 (ctest: skipped) when no guest can be had here, with the runner's reason.
set -euo pipefail

if [ "${1:-}" = --guest ]; then
  # In the guest: the device, then the pair.
  ibv_devinfo -d rxe0
  exec "$2" pair ib_write_bw 65536 300
fi

here=$(cd "$(dirname "$0")" && pwd)
runner=$here/../scripts/rdma-guest.sh
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
# Bounded below ctest's 150 s: 100 s to boot (13-40 s on a busy machine), 40 s for the command.
MC_GUEST_BOOT_TIMEOUT=${MC_GUEST_BOOT_TIMEOUT:-100} "$runner" run -v --timeout 40 -- bash "$here/rdma_guest_smoke.sh" --guest "$runner" >"$out" || rc=$?
cat "$out"
[ "$rc" != 77 ] || exit 77
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" = 0 ] || fail "the guest's command exited $rc"
grep -Eq 'state:[[:space:]]+PORT_ACTIVE' "$out" || fail "ibv_devinfo -d rxe0 shows no PORT_ACTIVE"
bw=$(awk '$1 == 65536 && NF >= 5 { print $4; exit }' "$out")
[ -n "$bw" ] || fail "ib_write_bw printed no 65536-byte result line"
awk -v b="$bw" 'BEGIN { exit !(b > 0) }' || fail "ib_write_bw 64 KiB average bandwidth is $bw MB/s"
echo "PASS: rxe0 PORT_ACTIVE, ib_write_bw 64 KiB average $bw MB/s"
