#!/usr/bin/env bash
# P2P store fan-out across hosts (docs/p2p-store.md, "Fan-out across hosts"): the namespace topology of
# tests/test_netns_p2p.c (a source and six consumers, each a mooncake_p2p process on its own tbf-shaped veth,
# 1 GiB in 64 MiB shards) in its bench mode, which measures in one run: the link rate with iperf3, one
# consumer alone, the six at once (P2P), and the source-only baselines (fetch --serve=false) one after
# another and all at once, then prints a Markdown table with the ideal for the links. Needs root, iproute2
# (ip, tc) and sch_tbf; iperf3 for the ideal.
# Usage: bench/run_p2p_fanout.sh [BUILD_DIR=./build]   RATE=200mbit (tbf rate of every veth, each direction)
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
B=${1:-build}
RATE=${RATE:-200mbit}
need_bins "$B" "$B/tests/test_netns_p2p" "$B/tools/mooncake_p2p" "$B/tools/mooncake_http_metadata_server"
need_cmds ip tc
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; tbf $RATE per veth and direction"
echo
MC_P2P_FANOUT_BENCH=1 MC_P2P_FANOUT_RATE=$RATE MC_TEST_BIN_DIR="$B/tools" "$B/tests/test_netns_p2p" 2>"${TMPDIR:-/tmp}/p2p_fanout.$$.log"
rc=$?
grep -E '^\s+(\[|iperf3|source:|all )' "${TMPDIR:-/tmp}/p2p_fanout.$$.log" >&2
[ $rc -eq 0 ] || { echo "the bench failed (exit $rc); its log: ${TMPDIR:-/tmp}/p2p_fanout.$$.log" >&2; exit $rc; }
rm -f "${TMPDIR:-/tmp}/p2p_fanout.$$.log"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
