#!/usr/bin/env bash
# The cluster secret's cost per new connection (bench/auth_cost.c): open and secret alternated, 3 rounds.
#   bench/run_auth_cost.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
cmake --build "$B" --target auth_cost >/dev/null
for r in 1 2 3; do
  for m in open secret; do MC_LOG_LEVEL=ERROR "$B/tools/auth_cost" "$m" 2000; done
done | awk '{print} /mode=open/ {split($4,a,"="); o+=a[2]} /mode=secret/ {split($4,a,"="); s+=a[2]}
            END {printf "secret/open per-call ratio: %.2f\n", s/o}'
