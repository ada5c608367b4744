#!/usr/bin/env bash
# rdma-core's pyverbs test_rdmacm (Debian's python3-pyverbs, unmodified) against the drop-in
# librdmacm and libibverbs. Usage: pyverbs_rdmacm_test.sh <folder with libibverbs.so.1>
#
# Two things the module needs that a user-space device does not have by itself:
#  - a network interface for the device in sysfs: the suite's base.py lists
#    /sys/class/infiniband/<dev>/device/net/ and asks `ip -j addr show <ifname>` for the address
#    to bind and connect to (else every test skips with "Device uroce0 doesn't have net
#    interface"). A uroce device has no kernel device, so the test runs in a mount namespace of
#    its own with a tmpfs on /sys/class holding just infiniband/uroce0/device/net/lo: nothing
#    outside the namespace sees it (docs/ibverbs.md "pyverbs' rdma_cm tests").
#  - the passive and active sides in two processes on the one device address (forked from the
#    runner): UROCE_SHARED_ADDRESS=1 (docs/udp-link.md "One address, several processes").
# The namespace has a network namespace of its own too, whose loopback holds only 127.0.0.1 (the
# first address `ip` lists, which the suite takes), so no other test's address is disturbed.
# Root (mount and network namespaces, the SK_REUSEPORT program); skipped otherwise.
# Asserted: all 10 tests pass (multicast ones included: uroce's UD multicast over the loopback).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/abi_lib.sh" "$1"
source "$here/pyverbs_lib.sh"
pyverbs_require pyverbs.cmid test_rdmacm.py.gz test_rdmacm.py
if [[ $(id -u) != 0 ]] || ! command -v unshare >/dev/null; then
  echo "SKIP: needs root (mount and network namespaces, the SK_REUSEPORT program)"
  exit 77
fi

# Only test_rdmacm and the helpers beside it: the package's __init__.py imports every test_*.py.
rdmacm_and_helpers() { [[ $1 != test_* || $1 == test_rdmacm.py ]]; }
unpacked=$(pyverbs_unpack rdmacm_and_helpers)
: >"$ABI_TMP/no_skips.txt"

cat >"$ABI_TMP/inside.sh" <<'INSIDE'
set -eu
ip link set lo up
mount -t tmpfs uroce-sysfs /sys/class
mkdir -p /sys/class/infiniband/uroce0/device/net/lo
export UROCE_DEVICES=uroce0=127.0.0.1 UROCE_SHARED_ADDRESS=1 PYTHONDONTWRITEBYTECODE=1
exec "$@"
INSIDE
timeout -k 5 200 unshare --mount --net bash "$ABI_TMP/inside.sh" \
  "$PYVERBS_PYTHON" "$here/pyverbs_run.py" "$unpacked" "$ABI_TMP/no_skips.txt" --dev uroce0 \
  --port 1 --gid 0 >"$ABI_TMP/run.log" 2>&1
pyverbs_check_exit $? "pyverbs test_rdmacm"
grep -qx "pyverbs: 10 tests, 10 passed, 0 skipped, 0 failures, 0 errors" "$ABI_TMP/run.log" ||
  { cat "$ABI_TMP/run.log" >&2; abi_fail "pyverbs test_rdmacm: not 10 of 10 passed"; }
grep '^pyverbs:' "$ABI_TMP/run.log"
echo PASS
