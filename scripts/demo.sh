#!/usr/bin/env bash
# The main job in one command: builds the release `uroce` and runs a perftest-style RDMA WRITE
# bandwidth sweep (2 B .. 8 MiB) between two uroce processes on loopback: a server on 127.0.0.1
# and a client on 127.0.0.2, speaking RoCEv2 over UDP port 4791, with every byte verified.
#
# Usage: scripts/demo.sh [TEST] [uroce bench options]
#   scripts/demo.sh                      write bandwidth, sizes 2 B .. 8 MiB
#   scripts/demo.sh read -s 64K -n 5000  any test and options of `uroce bench` (see --help)
#   scripts/demo.sh send --lat           latency instead of bandwidth
# Needs what scripts/install-deps.sh installs (Debian 12).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${UROCE_BUILD_DIR:-build/release}
# Same configuration as scripts/test.sh, so the two share one build folder.
cmake -S . -B "$build" -G Ninja -DUROCE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" -j "$(nproc)" uroce >/dev/null
test=write
if [[ $# -gt 0 && $1 != -* ]]; then
  test=$1
  shift
fi
if [[ $# -eq 0 ]]; then
  set -- -a -n 200
fi
exec "$build/tools/uroce" bench --demo "$test" \
  --addr "${UROCE_DEMO_CLIENT:-127.0.0.2}" --peer "${UROCE_DEMO_SERVER:-127.0.0.1}" "$@"
