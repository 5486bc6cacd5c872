#!/usr/bin/env bash
# The RDMA guest (docs/testing.md, "The RDMA guest"): runs one command as root in a qemu (TCG) guest that has
# two Soft-RoCE devices, rxe0 and rxe1, ACTIVE, on the two ends of a veth pair, and the host's root read-only
# over 9p.
#
#   scripts/rdma-guest.sh run [--timeout S] [--env NAME[=VALUE]]... [-v] -- CMD ARGS...
#   scripts/rdma-guest.sh check          exits 0 when a guest can be started here, 77 (with the reason) if not
#   scripts/rdma-guest.sh pair TOOL SIZE ITERS    in the guest: a perftest pair (TOOL: ib_write_bw, ib_read_bw,
#                                                  ...) on rxe0, server and client, SIZE-byte messages
#
# CMD runs with the caller's working directory (read-only), a writable /tmp (the host's /tmp under a tmpfs
# overlay), HOME=/tmp, stdin /dev/null; PATH, LANG, LC_ALL, LD_LIBRARY_PATH, PYTHONPATH, every MC_* and
# *SAN_OPTIONS variable and those named with --env are passed in. Its stdout and stderr come out on the
# host's as it writes them.
# Exit status: CMD's; 77 when no guest can be had here (qemu, busybox or the guest kernel missing, or the
# kernel lacks a module the guest needs); 75 when the guest was started but did not come up (not up within
# MC_GUEST_BOOT_TIMEOUT seconds, default 180; a module that did not load; rxe0 not ACTIVE); 124 when CMD
# outlived --timeout S (default 600, counted from the end of the boot); 2 on a usage error. The guest is gone
# when this script returns.
# MC_GUEST_KERNEL_DIR names the unpacked kernel, laid out as scripts/install-deps.sh does (default: the one it
# made current); MC_GUEST_MEM the memory in MiB (2048); MC_GUEST_KEEP=1 keeps the run's directory (console
# log, initramfs) for a look.
set -euo pipefail

KDIR=${MC_GUEST_KERNEL_DIR:-/var/cache/mooncake/guest-kernel/current}
BOOT_TIMEOUT=${MC_GUEST_BOOT_TIMEOUT:-180}
MEM=${MC_GUEST_MEM:-2048}
# Loaded in the initramfs, with what they depend on (the host's root has no modules for the guest's kernel).
# crc32_generic: rxe computes its ICRC through the crypto API, and `rdma link add` fails with ENOENT without it.
MODULES="virtio_pci 9pnet_virtio 9p overlay veth crc32_generic ib_uverbs rdma_rxe rdma_ucm"

say() { echo "rdma-guest: $*" >&2; }
usage() {
  sed -n '5,8p' "$0" | sed 's/^# *//' >&2
  exit 2
}

# unavailable REASON: no guest can be had here.
unavailable() { say "SKIP: $*"; exit 77; }

# check_prereqs: sets KIMG (the kernel image), KVER and MODDIR, or says why no guest can be had here.
check_prereqs() {
  command -v qemu-system-x86_64 >/dev/null || unavailable "qemu-system-x86_64 not found (scripts/install-deps.sh installs qemu-system-x86)"
  command -v busybox >/dev/null || unavailable "busybox not found (scripts/install-deps.sh installs busybox-static)"
  [[ $(LC_ALL=C ldd "$(command -v busybox)" 2>&1) == *"not a dynamic"* ]] \
    || unavailable "busybox is not the static one (scripts/install-deps.sh installs busybox-static)"
  [ -e "$KDIR/.complete" ] || unavailable "no guest kernel in $KDIR (scripts/install-deps.sh unpacks it)"
  local found=("$KDIR"/boot/vmlinuz-*)
  KIMG=${found[0]}
  [ -f "$KIMG" ] || unavailable "no vmlinuz in $KDIR/boot"
  KVER=${KIMG##*/vmlinuz-}
  MODDIR=$KDIR/lib/modules/$KVER
  [ -f "$MODDIR/modules.dep" ] || unavailable "no modules.dep in $MODDIR"
}

# module_order: prints the paths (relative to MODDIR) of MODULES and their dependencies, each after what it
# needs; modules built into the kernel are left out. Fails naming a module that is neither.
module_order() {
  awk -v want="$MODULES" '
    function norm(p) { sub(/.*\//, "", p); sub(/\.ko(\.[a-z]+)?$/, "", p); gsub(/-/, "_", p); return p }
    function visit(m,   i, n, d) {
      if (m in done) return
      done[m] = 1
      n = split(deps[m], d, " ")
      for (i = n; i >= 1; i--) visit(norm(d[i]))
      print path[m]
    }
    FILENAME ~ /modules\.builtin$/ { builtin[norm($0)] = 1; next }
    { k = $1; sub(/:$/, "", k); m = norm(k); path[m] = k; $1 = ""; deps[m] = $0 }
    END {
      n = split(want, w, " ")
      for (i = 1; i <= n; i++) {
        m = w[i]; gsub(/-/, "_", m)
        if (m in path) visit(m)
        else if (!(m in builtin)) { print "MISSING " m; bad = 1 }
      }
      exit bad
    }' "$MODDIR/modules.builtin" "$MODDIR/modules.dep"
}

# resolve_modules: sets ORDER to module_order's list, or says which modules the kernel lacks.
resolve_modules() {
  ORDER=$(module_order) || unavailable "the guest kernel lacks modules: $(grep MISSING <<<"$ORDER" | cut -d' ' -f2 | xargs)"
}

# build_initramfs DIR: an uncompressed initramfs (TCG decompresses slowly) in DIR/initrd: busybox, the
# modules in load order, and /init (stage 1).
build_initramfs() {
  local d=$1/initramfs m
  resolve_modules
  mkdir -p "$d/bin" "$d/mod"
  cp "$(command -v busybox)" "$d/bin/busybox"
  for m in $ORDER; do
    case $m in
      *.ko) cp "$MODDIR/$m" "$d/mod/" ;;
      *.ko.xz) xz -dc "$MODDIR/$m" >"$d/mod/$(basename "$m" .xz)" ;;
      *.ko.zst) zstd -qdc "$MODDIR/$m" >"$d/mod/$(basename "$m" .zst)" ;;
      *) unavailable "cannot unpack module $m" ;;
    esac
    basename "${m%.ko*}.ko" >>"$d/mod/order"
  done
  cat >"$d/init" <<'EOF'
#!/bin/busybox sh
# Stage 1: load the modules, mount the host's root (9p, read-only) and the run's directory, switch into it.
/bin/busybox --install -s /bin
export PATH=/bin
die() { echo "MC_GUEST_FAIL: $*"; poweroff -f; sleep 60; }
mkdir -p /proc /sys /dev /newroot
mount -t proc proc /proc && mount -t sysfs sysfs /sys && mount -t devtmpfs devtmpfs /dev || die "mounting /proc /sys /dev"
while read -r m; do insmod "/mod/$m" || die "insmod $m"; done </mod/order
opts=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o "$opts,ro,cache=loose" root /newroot || die "mounting the host's root over 9p"
mount -t tmpfs -o mode=755 tmpfs /newroot/run || die "mounting /run"
mkdir /newroot/run/mc-guest && mount -t 9p -o "$opts" job /newroot/run/mc-guest || die "mounting the run's directory"
for f in proc sys dev; do mount --move "/$f" "/newroot/$f" || die "moving /$f"; done
exec switch_root /newroot /bin/bash /run/mc-guest/stage2.sh
die "switch_root"
EOF
  chmod +x "$d/init"
  (cd "$d" && find . | busybox cpio -o -H newc 2>/dev/null) >"$1/initrd"
}

# write_stage2 DIR: the guest's second stage, run by the host's bash as PID 1 in the host's root.
write_stage2() {
  cat >"$1/stage2.sh" <<'EOF'
# Stage 2 (PID 1): writable places, the network and rxe0, then the command; its status goes to rc.
J=/run/mc-guest
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
off() { sync; echo o >/proc/sysrq-trigger; sleep 60; }
fail() { echo "$*" >"$J/fail"; echo "MC_GUEST_FAIL: $*"; off; }
mkdir -p /dev/pts /dev/shm /run/mc-tmp
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs tmpfs /run/mc-tmp && mkdir /run/mc-tmp/u /run/mc-tmp/w
mount -t overlay overlay -o lowerdir=/tmp,upperdir=/run/mc-tmp/u,workdir=/run/mc-tmp/w /tmp \
  || mount -t tmpfs -o mode=1777 tmpfs /tmp || fail "no writable /tmp"
chmod 1777 /tmp
hostname rdma-guest
ulimit -l unlimited
ip link set lo up || fail "lo"
ip link add veth0 mtu 9000 type veth peer name veth1 mtu 9000 && ip link set veth0 up && ip link set veth1 up || fail "veth pair"
# rxe0 on one end of the pair, rxe1 on the other: two devices whose traffic crosses the veth pair (rails
# between NICs); each also reaches itself
rdma link add rxe0 type rxe netdev veth0 || fail "rdma link add rxe0"
rdma link add rxe1 type rxe netdev veth1 || fail "rdma link add rxe1"
for d in rxe0 rxe1; do
  for i in $(seq 100); do
    grep -q ACTIVE /sys/class/infiniband/$d/ports/1/state 2>/dev/null && break
    sleep 0.1
  done
  grep -q ACTIVE /sys/class/infiniband/$d/ports/1/state || fail "$d port not ACTIVE: $(cat /sys/class/infiniband/$d/ports/1/state 2>&1)"
done
. "$J/env.sh"
. "$J/cmd.sh"
: >"$J/ready"
if cd "$MC_GUEST_CWD"; then
  "$@" </dev/null >>"$J/out" 2>>"$J/err"
  rc=$?
else
  echo "rdma-guest: cannot enter $MC_GUEST_CWD in the guest" >>"$J/err"
  rc=126
fi
echo "$rc" >"$J/rc.tmp" && mv "$J/rc.tmp" "$J/rc"
off
EOF
}

# write_job DIR ENVNAMES... -- CMD...: the environment and the command, quoted for stage 2.
write_job() {
  local dir=$1 n
  shift
  {
    for n in $(compgen -e); do
      case $n in MC_*|*SAN_OPTIONS) printf 'export %s=%q\n' "$n" "${!n}" ;; esac
    done
    for n in PATH LANG LC_ALL LD_LIBRARY_PATH PYTHONPATH; do
      [ -z "${!n+x}" ] || printf 'export %s=%q\n' "$n" "${!n}"
    done
    while [ "$1" != -- ]; do
      case $1 in
        *=*) printf 'export %s=%q\n' "${1%%=*}" "${1#*=}" ;;
        *) [ -z "${!1+x}" ] || printf 'export %s=%q\n' "$1" "${!1}" ;;
      esac
      shift
    done
    printf 'export HOME=/tmp MC_GUEST_CWD=%q\n' "$PWD"
  } >"$dir/env.sh"
  shift
  printf 'set --' >"$dir/cmd.sh"
  printf ' %q' "$@" >>"$dir/cmd.sh"
  echo >>"$dir/cmd.sh"
}

now_us() { echo "${EPOCHREALTIME/./}"; }

QPID=""
JOB=""
cleanup() {
  if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
    kill "$QPID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$QPID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$QPID" 2>/dev/null || true
  fi
  [ -z "$QPID" ] || wait "$QPID" 2>/dev/null || true
  QPID=""
  if [ -n "$JOB" ]; then
    if [ "${MC_GUEST_KEEP:-0}" = 1 ]; then say "kept $JOB"; else rm -rf "$JOB"; fi
  fi
}

# boot_failure REASON: the guest did not come up; shows the end of its console.
boot_failure() {
  say "the guest did not come up: $*"
  if [ -s "$JOB/console.log" ]; then
    say "last lines of its console:"
    tail -n 25 "$JOB/console.log" | tr -d '\r' | sed 's/^/  | /' >&2
  fi
  [ ! -s "$JOB/qemu.log" ] || sed 's/^/  qemu: /' "$JOB/qemu.log" >&2
  exit 75
}

run() {
  local timeout=600 verbose=0 envs=()
  while [ $# -gt 0 ]; do
    case $1 in
      --timeout) [ $# -ge 2 ] || usage; timeout=$2; shift 2 ;;
      --timeout=*) timeout=${1#*=}; shift ;;
      --env) [ $# -ge 2 ] || usage; envs+=("$2"); shift 2 ;;
      --env=*) envs+=("${1#*=}"); shift ;;
      -v) verbose=1; shift ;;
      --) shift; break ;;
      *) usage ;;
    esac
  done
  [ $# -gt 0 ] || usage
  [[ $timeout =~ ^[0-9]+$ ]] || usage
  check_prereqs
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  JOB=$(mktemp -d "${TMPDIR:-/tmp}/rdma-guest.XXXXXX")
  build_initramfs "$JOB"
  write_stage2 "$JOB"
  write_job "$JOB" "${envs[@]}" -- "$@"
  : >"$JOB/out"
  : >"$JOB/err"
  local t0 deadline rc
  t0=$(now_us)
  qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m "$MEM" \
    -nodefaults -no-user-config -display none -monitor none -nic none -no-reboot \
    -kernel "$KIMG" -initrd "$JOB/initrd" \
    -append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init" \
    -serial "file:$JOB/console.log" \
    -virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$JOB,mount_tag=job,security_model=none,multidevs=remap" \
    </dev/null >"$JOB/qemu.log" 2>&1 &
  QPID=$!
  exec {ofd}<"$JOB/out" {efd}<"$JOB/err"
  deadline=$((t0 + BOOT_TIMEOUT * 1000000))
  local booted=0
  while :; do
    cat <&"$ofd"
    cat <&"$efd" >&2
    [ ! -e "$JOB/rc" ] || break
    [ ! -e "$JOB/fail" ] || boot_failure "$(cat "$JOB/fail")"
    kill -0 "$QPID" 2>/dev/null || break
    if [ $booted = 0 ] && [ -e "$JOB/ready" ]; then
      booted=1
      [ $verbose = 0 ] || say "up with rxe0 ACTIVE after $(( ($(now_us) - t0) / 1000 )) ms"
      deadline=$(( $(now_us) + timeout * 1000000 ))
    fi
    if [ "$(now_us)" -gt "$deadline" ]; then
      [ $booted = 1 ] || boot_failure "not up after ${BOOT_TIMEOUT} s"
      cat <&"$ofd"
      cat <&"$efd" >&2
      say "the command did not finish within ${timeout} s; guest stopped"
      exit 124
    fi
    sleep 0.2
  done
  cat <&"$ofd"
  cat <&"$efd" >&2
  [ -e "$JOB/rc" ] || {
    [ $booted = 1 ] || boot_failure "qemu exited before the guest was up"
    say "the guest stopped before the command finished"
    exit 75
  }
  rc=$(cat "$JOB/rc")
  for _ in $(seq 100); do kill -0 "$QPID" 2>/dev/null || break; sleep 0.1; done
  [ $verbose = 0 ] || say "done in $(( ($(now_us) - t0) / 1000 )) ms, status $rc"
  exit "$rc"
}

# pair TOOL SIZE ITERS: a perftest server on rxe0 in the background, the client reaching it through 127.0.0.1
# once it listens; prints the client's report (the server's too if it failed) and fails if either did.
pair() {
  [ $# = 3 ] || usage
  [ -e /sys/class/infiniband/rxe0 ] || { say "pair: no rxe0 here (run it in the guest)"; exit 2; }
  local tool=$1 size=$2 iters=$3 srv log
  log=$(mktemp)
  "$tool" -d rxe0 -s "$size" -n "$iters" -F >"$log" 2>&1 &
  srv=$!
  for _ in $(seq 100); do
    ss -ltn | grep -q ':18515 ' && break
    sleep 0.2
  done
  "$tool" -d rxe0 -s "$size" -n "$iters" -F 127.0.0.1 || { kill "$srv" 2>/dev/null; wait "$srv" || true; cat "$log"; exit 1; }
  wait "$srv" || { echo "$tool server failed:"; cat "$log"; exit 1; }
  rm -f "$log"
}

case ${1:-} in
  run) shift; run "$@" ;;
  pair) shift; pair "$@" ;;
  check) check_prereqs; resolve_modules; echo "rdma-guest: kernel $KVER" ;;
  *) usage ;;
esac
