#!/usr/bin/env bash
# UCX sees the uroce device: `ucx_info -d` lists rc_verbs and ud_verbs on <device>:1, with no UCX
# error or warning. Needs /dev/infiniband/uroce (`uroce setup`; made here when root).
set -uo pipefail
HERE=$(dirname "$0")
source "$HERE/abi_lib.sh" "${1:?usage: $0 <lib dir> <uroce binary>}"
source "$HERE/ucx_lib.sh"
UROCE=${2:?usage: $0 <lib dir> <uroce binary>}
abi_require ucx_info
ucx_require_node "$UROCE"

UROCE_DEVICES=uroceucx=127.0.40.1 timeout 60 ucx_info -d >"$ABI_TMP/info" 2>&1 ||
  { cat "$ABI_TMP/info" >&2; abi_fail "ucx_info -d exited $?"; }
ucx_check_clean "$ABI_TMP/info"
for tl in rc_verbs ud_verbs; do
  awk -v tl="$tl" '/Transport:/ { cur = $3 } /Device:/ && cur == tl && $3 == "uroceucx:1" { found = 1 }
       END { exit !found }' "$ABI_TMP/info" ||
    { cat "$ABI_TMP/info" >&2; abi_fail "ucx_info -d does not list $tl on uroceucx:1"; }
done
echo "PASS"
