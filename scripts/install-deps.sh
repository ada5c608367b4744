#!/usr/bin/env bash
# Installs everything uroce needs to build, test and benchmark on Debian 12. Idempotent and quiet.
# Run as root (CI and fresh machines are root); with sudo elsewhere.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libisal-dev libibverbs-dev librdmacm-dev libfmt-dev libcli11-dev
  nlohmann-json3-dev libxdp-dev libbpf-dev
  clang-14 libclang-rt-14-dev clang-format
  python3 python3-scapy python3-pyverbs tshark
  iproute2 nftables ibverbs-utils rdmacm-utils perftest qperf ucx-utils libfabric-bin
  openmpi-bin libopenmpi-dev mpich libmpich-dev util-linux
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
