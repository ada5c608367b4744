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
