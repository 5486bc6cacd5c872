#!/usr/bin/env bash
# Builds the project into $BUILD_DIR (default ./build); only the targets in $BUILD_TARGETS when it is set
# (space-separated). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@" >/dev/null
# shellcheck disable=SC2086 # BUILD_TARGETS is a list
cmake --build "$BUILD_DIR" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
