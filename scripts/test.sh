#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test: the full suite on a Release build, then the
# unit and engine tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export CTEST_OUTPUT_ON_FAILURE=1
BUILD_DIR=build ./scripts/build.sh
(cd build && ctest --timeout 600 --output-on-failure)
BUILD_DIR=build-asan BUILD_TYPE=Debug ./scripts/build.sh -DMC_SANITIZE=ON
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --timeout 900 --output-on-failure)
