#!/usr/bin/env bash
# Installs every Debian package the project needs to build, test and benchmark.
# Idempotent: packages already present are skipped by apt. Needs root (or sudo).
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config python3 python3-dev python3-pytest python3-setuptools python3-numpy python3-pip python3-venv python3-wheel
  libcurl4-openssl-dev libmicrohttpd-dev libjansson-dev libhiredis-dev libssl-dev libpcre2-dev
  etcd-server etcd-client redis-server redis-tools iperf3 memcached iproute2 procps
  prometheus python3-yaml
  clang libclang-rt-14-dev
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
