#!/usr/bin/env bash
# A RoCE v1 path to a peer off the local Ethernet segment is refused at once with EHOSTUNREACH
# (docs/links.md), through the unmodified Debian pyverbs on the drop-in libibverbs: in a
# namespace whose veth holds 198.18.81.1/24 and whose routing table reaches 198.19.81.0/24
# through a gateway, `ibv_create_ah` with the v1 GID (index 1) to an on-link peer succeeds, to a
# peer behind the gateway fails with EHOSTUNREACH, and with the v2 GID (index 0) to that peer
# succeeds; on the raw link and, when the kernel takes the XDP program, the AF_XDP link. Needs
# root (skips with 77 otherwise); a few seconds.
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (a namespace, a raw link)"; exit 77; }
python=/usr/bin/python3
"$python" -c 'import pyverbs.addr' 2>/dev/null ||
  { echo "SKIP: pyverbs not installed (Debian package python3-pyverbs)"; exit 77; }
NS=uroce-v1u-$$
VETH=v1u$$
cleanup() { ip netns del "$NS" 2>/dev/null; ip link del "${VETH}p" 2>/dev/null; abi_cleanup; }
trap cleanup EXIT
ip netns add "$NS" 2>/dev/null || { echo "SKIP: cannot create a network namespace"; exit 77; }
ip link add "$VETH" netns "$NS" type veth peer name "${VETH}p" ||
  { echo "SKIP: cannot create a veth pair"; exit 77; }
ip link set "${VETH}p" up
ip -n "$NS" link set lo up
ip -n "$NS" addr add 198.18.81.1/24 dev "$VETH"
ip -n "$NS" link set "$VETH" up
ip -n "$NS" route add 198.19.81.0/24 via 198.18.81.2

cat >"$ABI_TMP/ah.py" <<'PY'
import errno, ipaddress
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.addr import AHAttr, GID, GlobalRoute, AH
from pyverbs.pyverbs_error import PyverbsRDMAError
ctx = Context(name='uroce0')
pd = PD(ctx)
for dst, index in (('198.18.81.2', 1), ('198.19.81.7', 1), ('198.19.81.7', 0)):
    gid = GID(ipaddress.IPv6Address('::ffff:' + dst).exploded)
    try:
        AH(pd, attr=AHAttr(gr=GlobalRoute(dgid=gid, sgid_index=index), is_global=1, port_num=1))
        result = 'ok'
    except PyverbsRDMAError as e:
        result = errno.errorcode.get(e.error_code, str(e.error_code))
    print(dst, index, result)
PY
want=$'198.18.81.2 1 ok\n198.19.81.7 1 EHOSTUNREACH\n198.19.81.7 0 ok'
for link in raw xdp; do
  got=$(ip netns exec "$NS" env UROCE_LINK=$link UROCE_DEVICES=uroce0=198.18.81.1 \
    timeout 30 "$python" "$ABI_TMP/ah.py" 2>"$ABI_TMP/$link.err")
  if [[ $link == xdp && -z $got ]] && grep -q "AF_XDP" "$ABI_TMP/$link.err"; then
    echo "xdp: skipped, the link does not open here: $(grep -m1 AF_XDP "$ABI_TMP/$link.err")"
    continue
  fi
  echo "$link:"; echo "$got"
  [[ $got == "$want" ]] || { cat "$ABI_TMP/$link.err" >&2; abi_fail "$link: expected $want"; }
done
echo PASS
