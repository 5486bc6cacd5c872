#!/usr/bin/env bash
# What test_rdma_guest runs inside the RDMA guest (one boot for all of it; docs/testing.md, "The RDMA guest"):
# the transfer engine's checks (tests/test_rdma_guest.c), then the store and the Python package over rdma
# (tests/rdma_guest_store.py). Exits with the first failure's status.
#   tests/rdma_guest_suite.sh TEST_RDMA_GUEST BIN_DIR PYTHON_DIR [PYTHON]   (the interpreter the package is built
#   for; python3 by default; PYTHON_DIR "-" in the sanitizer build: the store and Python part is not run)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$1"
rc=$?
[ "$rc" = 0 ] || exit "$rc"
if [ "$3" = "-" ]; then
  echo "sanitizer build: the store and Python part runs in the plain build only (an ASan-instrumented extension"
  echo "needs libasan preloaded into the interpreter, as for the other Python tests)"
  exit 0
fi
if [ ! -d "$3/mooncake" ]; then
  echo "the Python package is not built ($3): the store part is not run"
  exit 0
fi
PYTHONPATH=$3 "${4:-python3}" "$here/rdma_guest_store.py" "$2"
