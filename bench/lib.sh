# shellcheck shell=bash
# Helpers shared by the bench/run_*.sh scripts. Source it before the script changes directory:
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# It defines functions only: it sets no shell options and installs no trap (each script keeps its own).
# The functions expect, where they say so, the caller's:
#   WORK     the run's temp dir (mktemp -d), which the script removes on exit (`finish` does that)
#   BG_PIDS  an array of the background processes the script started and has not waited for yet
# Every function works under `set -e` and `set -u`.

# need_bins BUILD FILE...: exits with a message unless every FILE (a path) is an executable, built in BUILD.
need_bins() {
  local build=$1 bin
  shift
  for bin in "$@"; do
    [ -x "$bin" ] || { echo "missing $bin (build first: cmake --build $build)" >&2; exit 1; }
  done
}

# need_cmds CMD...: exits with a message unless every CMD is on PATH.
need_cmds() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 1; }
  done
}

# free_port: prints a TCP port that nothing listens on and that this script run has not printed before. Two
# bind(0) calls in a row can get the same ephemeral port back from the kernel (a master then got one port for
# both its RPC and its HTTP listener and did not start), and free_port runs in $(...) subshells, so the ports
# it issued are remembered in the file $WORK/.free_ports (flock'd; it goes away with $WORK). Python is
# $LIB_PYTHON, default python3.
free_port() {
  "${LIB_PYTHON:-python3}" - "${WORK:?free_port needs WORK, the temp dir of the run}/.free_ports" <<'PY'
import fcntl, socket, sys
with open(sys.argv[1], "a+") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    f.seek(0)
    issued = set(f.read().split())
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if str(port) in issued:
            continue
        with socket.socket() as c:  # something listening there after all (e.g. on another stack)
            if c.connect_ex(("127.0.0.1", port)) == 0:
                continue
        break
    f.write(f"{port}\n")
print(port)
PY
}

# wait_for PATTERN FILE [TRIES=100] [STEP=0.1] [PID]: checks FILE for PATTERN (grep) up to TRIES times, STEP seconds
# apart. Returns 0 once found, 1 on timeout, 2 as soon as PID (when given) is no longer alive. Prints nothing.
wait_for() {
  local tries=${3:-100} step=${4:-0.1} pid=${5:-} _
  for _ in $(seq "$tries"); do
    grep -q -- "$1" "$2" 2>/dev/null && return 0
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && return 2
    sleep "$step"
  done
  return 1
}

# wait_port PORT [PID] [TRIES=200] [STEP=0.05]: tries to connect to 127.0.0.1:PORT up to TRIES times, STEP seconds
# apart (nothing is sent). Returns 0 once it connects, 1 on timeout or as soon as PID (when not empty) is no longer
# alive.
wait_port() {
  local pid=${2:-} tries=${3:-200} step=${4:-0.05} _
  for _ in $(seq "$tries"); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && return 1
    sleep "$step"
  done
  return 1
}

# forget PID: drops a pid that has been waited for from BG_PIDS, so that stop_all never signals a recycled pid.
forget() {
  local keep=() p
  for p in "${BG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  BG_PIDS=("${keep[@]}")
}

# stop_bg PID: SIGTERM to one background process, waits for it and forgets it.
stop_bg() {
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  forget "$1"
}

# stop_all: SIGTERM to every pid in BG_PIDS, then waits for them all; empties BG_PIDS.
stop_all() {
  local p
  for p in "${BG_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  BG_PIDS=()
}

# finish: the usual EXIT trap (`trap finish EXIT`): stop_all, then remove $WORK.
finish() {
  stop_all
  rm -rf "$WORK"
}

# ratio A B: A / B with two decimals, "n/a" when B is not positive.
# shmem_thp: the kernel's setting for 2 MiB pages on shared memory (the selected word), for report headers.
shmem_thp() { sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null || echo unknown; }

# start_master BUILD [FLAG...]: starts BUILD's mooncake_master with its embedded metadata server on free
# ports (log: $WORK/master.log; added to BG_PIDS), waits until it serves, and sets the array ADDR to the
# client flags that reach it. Exits with a message if it has not started within 5 s.
start_master() {
  local build=$1 mp hp xp
  shift
  mp=$(free_port); hp=$(free_port); xp=$(free_port)
  "$build/tools/mooncake_master" --rpc_port="$mp" --enable_http_metadata_server --http_metadata_server_port="$hp" \
    --metrics_port="$xp" "$@" >"$WORK/master.log" 2>&1 &
  BG_PIDS+=($!)
  wait_for "Master service started" "$WORK/master.log" 100 0.05 ||
    { echo "mooncake_master did not start (see $WORK/master.log)" >&2; exit 1; }
  # shellcheck disable=SC2034 # for the caller
  ADDR=(--master_server_addr="127.0.0.1:$mp" --metadata_server="http://127.0.0.1:$hp/metadata")
}

# bench_fail MESSAGE: prints it and the tail of every $WORK/*.err and *.log, then exits 1.
bench_fail() {
  local f
  echo "error: $*" >&2
  for f in "$WORK"/*.err "$WORK"/*.log; do [ -f "$f" ] && { echo "== $f" >&2; tail -5 "$f" >&2; }; done
  exit 1
}

# start_holder BUILD FORCE_TCP SIZE TAG: starts BUILD's store_bench --mode=holder with a SIZE segment
# (MC_FORCE_TCP=FORCE_TCP) against the master in ADDR, output in $WORK/holder_TAG.out and .err, added to
# BG_PIDS; waits until it is ready (10 s) and sets HOLDER_PID, HOLDER_NAME and HOLDER_SETUP_MS. Exits
# with a message if it is not.
start_holder() {
  local out=$WORK/holder_$4.out
  : >"$out"
  MC_FORCE_TCP=$2 "$1/tools/store_bench" --mode=holder "${ADDR[@]}" --global_segment_size="$3" \
    --local_buffer_size=1MiB >"$out" 2>"$WORK/holder_$4.err" &
  HOLDER_PID=$!
  BG_PIDS+=("$HOLDER_PID")
  wait_for "^HOLDER ready" "$out" 400 0.025 "$HOLDER_PID" || { [ $? = 2 ] && bench_fail "holder $4 exited"; }
  HOLDER_NAME=$(sed -n 's/^HOLDER ready name=\([^ ]*\).*/\1/p' "$out")
  # shellcheck disable=SC2034 # for the caller
  HOLDER_SETUP_MS=$(sed -n 's/^HOLDER ready.* setup_ms=\([^ ]*\).*/\1/p' "$out")
  [ -n "$HOLDER_NAME" ] || bench_fail "holder $4 did not become ready"
}

# wait_warm TAG: waits (up to 120 s) until holder TAG (start_holder) reports its background warm-up done
# ("HOLDER warm after_s=X") and sets WARMUP_S to X. Exits with a message if it does not.
wait_warm() {
  wait_for '^HOLDER warm' "$WORK/holder_$1.out" 1200 0.1
  WARMUP_S=$(sed -n 's/^HOLDER warm after_s=\([^ ]*\).*/\1/p' "$WORK/holder_$1.out")
  [ -n "$WARMUP_S" ] || bench_fail "holder $1 did not finish warming up within 120 s"
}

# field LINE NAME: the value of NAME=value in a RESULT/RPC/... line of the bench tools.
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
