#!/usr/bin/env bash
# ibv_devices and ibv_devinfo -v (Debian's ibverbs-utils, unmodified) list the configured uroce
# devices through the drop-in libibverbs: port ACTIVE, link layer Ethernet, GID 0 the RoCEv2 GID
# of the configured address.
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
abi_require ibv_devices ibv_devinfo

# Every libibverbs symbol (name and version node) that the installed tools import is exported.
if command -v objdump >/dev/null; then
  objdump -T "$ABI_LIB_DIR/libibverbs.so.1" | awk '$2 == "g" && /DF/ { print $(NF-1), $NF }' |
    sort -u >"$ABI_TMP/exports"
  for tool in /usr/bin/ibv_* /usr/bin/ib_* /usr/bin/qperf; do
    [[ -x $tool ]] && objdump -T "$tool" | awk '/\*UND\*/ && /IBVERBS/ { print $(NF-1), $NF }'
  done | tr -d '()' | sort -u >"$ABI_TMP/imports"
  missing=$(comm -13 "$ABI_TMP/exports" "$ABI_TMP/imports")
  [[ -z $missing ]] || abi_fail "imported but not exported: $missing"
  echo "ok   $(wc -l <"$ABI_TMP/imports") imported libibverbs symbols all exported"
fi

export UROCE_DEVICES="uroce0=127.0.0.1,uroce9=127.0.9.9"

timeout 20 ibv_devices >"$ABI_TMP/devices.out" 2>&1 || abi_fail "ibv_devices exited $?"
abi_check_clean "$ABI_TMP/devices.out"
grep -Eq '^\s+uroce0\s+02007ffffe000001$' "$ABI_TMP/devices.out" ||
  abi_fail "ibv_devices does not list uroce0 with its GUID: $(cat "$ABI_TMP/devices.out")"
grep -Eq '^\s+uroce9\s' "$ABI_TMP/devices.out" || abi_fail "ibv_devices does not list uroce9"

timeout 20 ibv_devinfo -v >"$ABI_TMP/devinfo.out" 2>&1 || abi_fail "ibv_devinfo -v exited $?"
abi_check_clean "$ABI_TMP/devinfo.out" '(timestamp_mask|core clock|tag matching) not supported'
out="$ABI_TMP/devinfo.out"
[[ $(grep -c '^hca_id:' "$out") == 2 ]] || abi_fail "expected two devices in ibv_devinfo"
grep -q 'state:.*PORT_ACTIVE (4)' "$out" || abi_fail "port not ACTIVE"
grep -q 'link_layer:.*Ethernet' "$out" || abi_fail "link layer not Ethernet"
grep -Eq 'GID\[  0\]:.*::ffff:127\.0\.0\.1, RoCE v2' "$out" || abi_fail "uroce0 GID 0 wrong"
grep -Eq 'GID\[  0\]:.*::ffff:127\.0\.9\.9, RoCE v2' "$out" || abi_fail "uroce9 GID 0 wrong"

# One device by name, and a name that does not exist.
timeout 20 ibv_devinfo -d uroce9 >"$ABI_TMP/one.out" 2>&1 || abi_fail "ibv_devinfo -d exited $?"
[[ $(grep -c '^hca_id:' "$ABI_TMP/one.out") == 1 ]] || abi_fail "-d uroce9 shows other devices"
if timeout 20 ibv_devinfo -d nosuch >/dev/null 2>&1; then abi_fail "-d nosuch succeeded"; fi

# The configuration file, used when UROCE_DEVICES is unset.
unset UROCE_DEVICES
printf '# test\nfilez 127.0.5.5   # comment\n\n' >"$ABI_TMP/devices.conf"
UROCE_CONFIG="$ABI_TMP/devices.conf" timeout 20 ibv_devinfo >"$ABI_TMP/file.out" 2>&1 ||
  abi_fail "ibv_devinfo with UROCE_CONFIG exited $?"
grep -q '^hca_id:.filez' "$ABI_TMP/file.out" || abi_fail "device from UROCE_CONFIG missing"
echo "PASS"
