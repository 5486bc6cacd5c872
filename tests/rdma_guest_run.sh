#!/usr/bin/env bash
# Runs one test program inside the RDMA guest (docs/testing.md, "The RDMA guest"): rdma-guest.sh run with a
# bounded boot and command time; the program's exit status is the test's. 77 (skipped) when no guest can be
# had here, with the runner's reason; 75 (the guest did not come up) and 124 (timeout) fail.
#   tests/rdma_guest_run.sh PROGRAM [ARGS...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
MC_GUEST_BOOT_TIMEOUT=${MC_GUEST_BOOT_TIMEOUT:-120} "$here/../scripts/rdma-guest.sh" run --timeout "${MC_GUEST_CMD_TIMEOUT:-280}" -- "$@"
rc=$?
case $rc in
  0) echo "PASS: $* in the RDMA guest" ;;
  77) echo "SKIP: no RDMA guest here" ;;
  75) echo "FAIL: the RDMA guest did not come up" ;;
  124) echo "FAIL: $* outlived its time in the RDMA guest" ;;
  *) echo "FAIL: $* exited $rc in the RDMA guest" ;;
esac
exit $rc
