#!/usr/bin/env bash
# The main job: installs what is needed, builds, and runs a single-machine setup on the embedded
# metadata service: an HTTP metadata server, a target process contributing memory, and an initiator
# that writes into it and reads the bytes back (first over the same-host path, then over real TCP).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
BIN=build/tools
PORT=${MC_DEMO_PORT:-8080}
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$BIN/mooncake_http_metadata_server" --port="$PORT" --host=127.0.0.1 &
pids+=($!)
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
META="http://127.0.0.1:$PORT/metadata"

run_pair() { # $1 = label, rest = env for the initiator
  local label=$1; shift
  echo "== $label =="
  "$BIN/te_demo" --role=target --metadata_server="$META" --local_server_name=demo-target &
  local tpid=$!
  pids+=($tpid)
  sleep 0.5
  env "$@" "$BIN/te_demo" --role=initiator --metadata_server="$META" --local_server_name=demo-initiator \
      --segment_id=demo-target --message="hello mooncake ($label)"
  wait "$tpid"
}
run_pair "same-host path"
run_pair "TCP path" MC_FORCE_TCP=1
echo "demo finished"
