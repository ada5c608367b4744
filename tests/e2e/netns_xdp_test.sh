#!/usr/bin/env bash
# The AF_XDP link (link/xdp_link.h) across two network namespaces joined through a bridge
# (netns_lib.sh): `uroce bench --link xdp` write and send, RoCEv2 and RoCE v1 (with a priority
# tag), every byte verified, then the loss test (the bridge drops 1% of the RoCE frames; verified
# write and read over RoCEv2 and send over RoCE v1 must complete with retransmissions counted).
# Also: XDP_ZEROCOPY is refused on a veth (EOPNOTSUPP), and generic-mode XDP moves verified data.
# Skips (exit 77) where it cannot: not root, no namespaces or veth, or the kernel refuses the XDP program or the AF_XDP
# socket (the reason is printed).
source "$(dirname "$0")/bench_lib.sh"
source "$(dirname "$0")/netns_lib.sh"
A=198.18.0.13
B=198.18.0.14
PORT=18649
make_netns_bridged_pair uroce-xdp $A $B

# Can this kernel attach the program and bind the socket? A client opens its link before it
# connects (a server only once a client has come), so one with no server to reach says why it
# cannot open the link at once, or keeps trying to connect once it has (cut short).
probe_client() {
  ip netns exec "$NS_A" timeout 3 "$UROCE" bench --client --addr $A --peer $B --port $PORT \
    --link xdp "$@" write -s 4K -n 1 2>&1 || true
}
probe_client >"$TMP/probe.log"
if grep -q "cannot open an AF_XDP link" "$TMP/probe.log"; then
  skip "$(grep -m1 "cannot open an AF_XDP link" "$TMP/probe.log")"
fi

# Modes (docs/links.md, "Copy and zero-copy, native and generic"): a veth has no zero-copy
# AF_XDP, so asking for it is refused where the socket binds, with the errno said; without it the
# program runs in the veth's driver (native) mode.
# The first probe's socket leaves the queue when the kernel has released it, which can be a
# moment after that process is gone: until then a bind there is EBUSY.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  probe_client --xdp-zero-copy >"$TMP/zero_copy.log"
  grep -q "queue 0: Device or resource busy" "$TMP/zero_copy.log" || break
  sleep 0.5
done
grep -q "AF_XDP socket on $VA queue 0: Operation not supported" "$TMP/zero_copy.log" ||
  fail "XDP_ZEROCOPY on a veth: expected EOPNOTSUPP at the socket, got: $(cat "$TMP/zero_copy.log")"
echo "zero copy refused: $(grep -o 'AF_XDP socket.*' "$TMP/zero_copy.log")"

SIZES=4K,64K
ITERS=200
# run NAME TEST ARGS...: one verified bench over the AF_XDP link (as netns_raw_test.sh's run).
run() {
  local name=$1 test=$2; shift 2
  local want
  want=$(python3 -c 'import sys; print([int(sys.argv[2])] * len(sys.argv[1].split(",")))' "$SIZES" "$ITERS")
  start_server "$name" ip netns exec "$NS_B" timeout 60 "$UROCE" bench --server --addr $B \
    --port $PORT --accept-timeout 30 --link xdp "$@"
  ip netns exec "$NS_A" timeout 60 "$UROCE" bench --client --addr $A --peer $B --port $PORT \
    --link xdp --timeout 16 "$test" -s "$SIZES" -n "$ITERS" --json "$TMP/$name.json" "$@" \
    >"$TMP/$name.client.log" 2>&1 || fail "$name: client exited with $? ($(tail -2 "$TMP/$name.client.log"))"
  wait "$SERVER_PID" || fail "$name: server exited with $?"
  json_check "$TMP/$name.json" \
    "j['verified'] and [r['iterations'] for r in j['results']] == $want"
  echo "$name: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(" ".join("%s B %.2f Gb/s" % (r["bytes"], r["bw_avg_gbps"]) for r in j["results"]))' "$TMP/$name.json")"
}

run v2 write
run v1 write --roce-v1
run v1_vlan send --roce-v1 --vlan 0
# The program attached in generic (skb) mode instead of the veth's native one.
run v2_generic write --xdp-generic

set_bridge_loss 10
retransmitted() {
  json_check "$TMP/$1.json" \
    'j["counters"]["local"]["retransmitted_packets"] + j["counters"]["remote"]["retransmitted_packets"] > 0'
}
SIZES=64K,1M
ITERS=12
for case in "write" "read" "send --roce-v1"; do
  name=loss_${case// --roce-/_}
  before=$(bridge_dropped)
  run "$name" $case
  retransmitted "$name"
  echo "$name: the bridge dropped $(($(bridge_dropped) - before)) frames; data verified"
done
(($(bridge_dropped) > 0)) || fail "the bridge dropped nothing"
echo PASS
