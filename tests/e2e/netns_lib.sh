# Shared by the netns_* tests: two network namespaces joined by a veth pair, made and removed by
# the test, with addresses from the benchmarking range (198.18.0.0/15). Sourced after
# bench_lib.sh, not run.
#
# make_netns_pair PREFIX ADDR_A ADDR_B: sets NS_A and NS_B, puts ADDR_A/30 in NS_A and ADDR_B/30
# in NS_B, and removes both at exit. Skips the test (exit 77) where it cannot: not root, no ip or
# nft, no namespaces or veth here.
skip() {
  echo "SKIP: $*"
  exit 77
}
cleanup_ns() {
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
}
make_netns_pair() {
  local prefix=$1 a=$2 b=$3
  [[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces"
  command -v ip >/dev/null || skip "no ip (iproute2)"
  command -v nft >/dev/null || skip "no nft (nftables)"
  NS_A=$prefix-a-$$
  NS_B=$prefix-b-$$
  trap 'cleanup_bench; cleanup_ns' EXIT
  ip netns add "$NS_A" 2>/dev/null || skip "cannot create network namespaces here"
  ip netns add "$NS_B" || skip "cannot create a second network namespace"
  # Interface names are at most 15 bytes: the prefix's first letter and the PID.
  local va="${prefix:0:1}a$$" vb="${prefix:0:1}b$$"
  ip link add "$va" netns "$NS_A" type veth peer name "$vb" netns "$NS_B" ||
    skip "cannot create a veth pair"
  for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
  ip -n "$NS_A" addr add "$a/30" dev "$va"
  ip -n "$NS_B" addr add "$b/30" dev "$vb"
  ip -n "$NS_A" link set "$va" up
  ip -n "$NS_B" link set "$vb" up
  ip -n "$NS_A" link show "$va" | grep -q "state UP\|LOWER_UP" || fail "veth pair is not up"
}

# make_netns_bridged_pair PREFIX ADDR_A ADDR_B: as make_netns_pair, but A and B are joined
# through a Linux bridge in a third namespace, NS_S (a switch: it forwards every frame as it is,
# VLAN tags included). Loss is made there with nftables' bridge family (set_bridge_loss), which
# drops a frame on the wire whatever sent it: packet sockets receive a frame before the netdev
# ingress hook runs, and a send that the egress hook drops is indistinguishable from a full
# socket buffer within a sendmmsg batch. Sets VA and VB, the interfaces in NS_A and NS_B.
make_netns_bridged_pair() {
  local prefix=$1 a=$2 b=$3
  [[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces"
  command -v ip >/dev/null || skip "no ip (iproute2)"
  command -v nft >/dev/null || skip "no nft (nftables)"
  NS_A=$prefix-a-$$
  NS_B=$prefix-b-$$
  NS_S=$prefix-s-$$
  trap 'cleanup_bench; cleanup_ns; ip netns del "$NS_S" 2>/dev/null || true' EXIT
  ip netns add "$NS_A" 2>/dev/null || skip "cannot create network namespaces here"
  ip netns add "$NS_B" || skip "cannot create a second network namespace"
  ip netns add "$NS_S" || skip "cannot create a third network namespace"
  ip -n "$NS_S" link add br0 type bridge 2>/dev/null || skip "cannot create a bridge"
  VA="${prefix:0:1}a$$"
  VB="${prefix:0:1}b$$"
  ip link add "$VA" netns "$NS_A" type veth peer name sa netns "$NS_S" ||
    skip "cannot create a veth pair"
  ip link add "$VB" netns "$NS_B" type veth peer name sb netns "$NS_S"
  for ns in "$NS_A" "$NS_B" "$NS_S"; do ip -n "$ns" link set lo up; done
  ip -n "$NS_S" link set sa master br0
  ip -n "$NS_S" link set sb master br0
  for dev in sa sb br0; do ip -n "$NS_S" link set "$dev" up; done
  ip -n "$NS_A" addr add "$a/30" dev "$VA"
  ip -n "$NS_B" addr add "$b/30" dev "$VB"
  ip -n "$NS_A" link set "$VA" up
  ip -n "$NS_B" link set "$VB" up
}

# set_bridge_loss PER_MILLE: the bridge drops that share of RoCE frames (v1, and v2 over IPv4)
# in both directions, counted; 0 removes the rule. bridge_dropped: how many so far.
set_bridge_loss() {
  ip netns exec "$NS_S" nft delete table bridge uroce_loss 2>/dev/null || true
  (($1 > 0)) || return 0
  ip netns exec "$NS_S" nft -f - <<NFT || skip "nftables' bridge family is not available here"
table bridge uroce_loss {
  chain drops {
    type filter hook forward priority 0; policy accept;
    ether type 0x8915 numgen random mod 1000 < $1 counter drop
    ether type ip udp dport 4791 numgen random mod 1000 < $1 counter drop
  }
}
NFT
}
bridge_dropped() {
  local total=0 n
  for n in $(ip netns exec "$NS_S" nft list table bridge uroce_loss 2>/dev/null |
    sed -n 's/.*packets \([0-9]*\).*/\1/p'); do
    total=$((total + n))
  done
  echo $total
}
