#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test: the full suite on a Release build, then again
# under AddressSanitizer + UndefinedBehaviorSanitizer, the threaded tests under ThreadSanitizer, and the
# fuzz targets' replays and short coverage-guided campaigns in a clang build (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export CTEST_OUTPUT_ON_FAILURE=1
BUILD_DIR=build ./scripts/build.sh
# (-j2: two tests at a time where both tolerate it; the others are RUN_SERIAL, tests/CMakeLists.txt)
(cd build && ctest -j2 --timeout 600 --output-on-failure)
BUILD_DIR=build-asan BUILD_TYPE=Debug ./scripts/build.sh -DMC_SANITIZE=ON
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ctest -j2 --timeout 900 \
  --output-on-failure)
BUILD_DIR=build-tsan BUILD_TYPE=RelWithDebInfo ./scripts/build.sh -DMC_TSAN=ON
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --timeout 900 --output-on-failure \
  -R '^(test_te|test_master|test_master_unit|test_store|test_store_xproc|test_auth|test_mrpc_defer|test_msg|test_hidx|test_master_hidx|test_master_placement|test_standalone)$')
# (only the fuzz binaries; two at a time: the campaigns are single-threaded and assert nothing about time)
BUILD_DIR=build-fuzz BUILD_TYPE=RelWithDebInfo CC=clang BUILD_TARGETS=fuzz_all ./scripts/build.sh -DMC_FUZZ=ON
(cd build-fuzz && ctest -R '^fuzz_' -j2 --timeout 300 --output-on-failure)
