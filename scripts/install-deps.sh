#!/usr/bin/env bash
# Installs every Debian package the project needs to build, test and benchmark, and unpacks the kernel of
# the RDMA test guest (docs/testing.md, "The RDMA guest") into /var/cache/mooncake/guest-kernel/<version>/.
# Idempotent: packages already present are skipped by apt, a kernel already unpacked is kept. Needs root
# (or sudo). Everything comes through apt; nothing else is downloaded.
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config python3 python3-dev python3-pytest python3-setuptools python3-numpy python3-pip python3-venv python3-wheel
  python3-torch
  # docs/packaging.md: sd_notify readiness, man pages from --help, and what the tests of both use
  python3-packaging libsystemd-dev help2man man-db
  libcurl4-openssl-dev libmicrohttpd-dev libjansson-dev libhiredis-dev libssl-dev libpcre2-dev libyaml-dev
  zlib1g-dev uuid-dev liburing-dev
  etcd-server etcd-client redis-server redis-tools iperf3 memcached fio iproute2 procps
  prometheus python3-yaml
  clang libclang-rt-14-dev
  qemu-system-x86 busybox-static rdma-core ibverbs-utils ibverbs-providers perftest libibverbs-dev librdmacm-dev
)
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The RDMA guest's kernel: the versioned package linux-image-amd64 depends on, unpacked (not installed) with
# its module index built by busybox's depmod; `current` names the version scripts/rdma-guest.sh boots.
KCACHE=/var/cache/mooncake/guest-kernel
kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
kpkg=$(kernel_pkg)
if [ -z "$kpkg" ]; then
  $SUDO apt-get update -qq
  kpkg=$(kernel_pkg)
fi
[ -n "$kpkg" ] || { echo "install-deps: apt knows no linux-image-amd64" >&2; exit 1; }
kver=${kpkg#linux-image-}
if [ ! -e "$KCACHE/$kver/.complete" ]; then
  echo "unpacking the RDMA guest kernel $kver into $KCACHE/$kver"
  ktmp=$(mktemp -d)
  trap 'rm -rf "$ktmp"' EXIT
  (cd "$ktmp" && apt-get download -qq -o APT::Sandbox::User=root "$kpkg")
  dpkg-deb -x "$ktmp"/"$kpkg"_*.deb "$ktmp/root"
  mkdir -p "$ktmp/k/lib"            # the modules are under lib/ or usr/lib/ depending on the release
  mv "$ktmp/root/boot" "$ktmp/k/"
  for m in "$ktmp"/root/lib/modules "$ktmp"/root/usr/lib/modules; do [ ! -d "$m" ] || mv "$m" "$ktmp/k/lib/"; done
  busybox depmod -b "$ktmp/k" "$kver"
  $SUDO mkdir -p "$KCACHE"
  $SUDO rm -rf "$KCACHE/$kver"
  $SUDO mv "$ktmp/k" "$KCACHE/$kver"
  $SUDO touch "$KCACHE/$kver/.complete"
fi
$SUDO ln -sfn "$kver" "$KCACHE/current"
