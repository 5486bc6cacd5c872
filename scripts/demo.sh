#!/usr/bin/env bash
# The main job: installs what is needed, builds, and runs a working single-machine cluster on the
# embedded metadata service: mooncake_master (with its HTTP metadata server), a storage client that
# contributes memory to the pool, and a Python client (the mooncake package of the build) that puts and
# gets through it. Then a raw transfer-engine round trip, over the same-host path and over real TCP.
# Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
BIN=build/tools
RPC_PORT=${MC_DEMO_RPC_PORT:-50051}
META_PORT=${MC_DEMO_META_PORT:-8080}
METRICS_PORT=${MC_DEMO_METRICS_PORT:-9003}
pids=()
# stop in reverse order of start (clients before the master they unmount from), each before the next
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
wait_port() { for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

echo "== starting mooncake_master on :$RPC_PORT (metadata server on :$META_PORT) =="
"$BIN/mooncake_master" --rpc_port="$RPC_PORT" --enable_http_metadata_server \
    --http_metadata_server_port="$META_PORT" --metrics_port="$METRICS_PORT" &
pids+=($!)
wait_port "$RPC_PORT" && wait_port "$META_PORT"
META="http://127.0.0.1:$META_PORT/metadata"
STORE=("$BIN/store_demo" --metadata_server="$META" --master_server_addr="127.0.0.1:$RPC_PORT")

echo "== a storage client contributes 256 MiB to the pool =="
"${STORE[@]}" --global_segment_size=256MB --hold_s=3600 &
pids+=($!)
sleep 1
echo "== a Python client (mooncake.store, contributing nothing) puts and gets through the pool =="
PYTHONPATH=build/python /usr/bin/python3 - "$META" "127.0.0.1:$RPC_PORT" <<'EOF'
import sys
from mooncake.store import MooncakeDistributedStore
store = MooncakeDistributedStore()
rc = store.setup("127.0.0.1", sys.argv[1], 0, 16 * 1024 * 1024, "tcp", "", sys.argv[2])
assert rc == 0, "setup failed: %d" % rc
print("put('test_key', b'hello_mooncake') ->", store.put("test_key", b"hello_mooncake"))
print("get('test_key') ->", store.get("test_key"))
print("is_exist('test_key') ->", store.is_exist("test_key"), " get_size('test_key') ->", store.get_size("test_key"))
store.close()
EOF

run_pair() { # $1 = label, rest = env for the initiator
  local label=$1; shift
  echo "== transfer engine: $label =="
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
