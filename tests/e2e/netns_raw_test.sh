#!/usr/bin/env bash
# The raw Ethernet link (link/raw_link.h) on a real wire: `uroce bench write` and `send` across two
# network namespaces joined by a veth pair, once with RoCEv2 frames and once with RoCE v1 frames
# (EtherType 0x8915), untagged and with an 802.1Q tag, every message verified. A capture on the
# receiving side (tshark, when installed) must show the frames of the kind asked for, decoded as
# RoCE with nothing malformed, and no ICMP from the kernel. Then the loss test on this link:
# the bridge between the namespaces drops 1% of the RoCE frames (nftables), and verified
# write, read and send runs (v2 and v1) must complete with the retransmission counters showing the
# recovery. The namespaces are joined through a bridge (a third namespace), which makes the loss.
# Skips (exit 77) where it cannot: not root, no ip/nft, no namespaces or veth here.
source "$(dirname "$0")/bench_lib.sh"
source "$(dirname "$0")/netns_lib.sh"
A=198.18.0.9
B=198.18.0.10
PORT=18647
make_netns_bridged_pair uroce-raw $A $B

# run NAME TEST ARGS...: one verified bench of TEST over the raw link with ARGS on both sides
# (SIZES and ITERS: 4K,64K and 200 unless set). The ACK timeout is 4.096 us * 2^16 = 268 ms: the
# raw link moves a frame per skb, several times slower than the UDP link's GSO here, and the
# receiver's 8 MiB socket buffer can hold a hundred milliseconds of frames when the machine is
# loaded; with the UDP loss test's 17 ms (--timeout 12), a 1 MiB write at 1% loss ran out of
# retries on a loaded machine.
SIZES=4K,64K
ITERS=200
run() {
  local name=$1 test=$2; shift 2
  local want
  want=$(python3 -c 'import sys; print([int(sys.argv[2])] * len(sys.argv[1].split(",")))' "$SIZES" "$ITERS")
  start_server "$name" ip netns exec "$NS_B" timeout 60 "$UROCE" bench --server --addr $B \
    --port $PORT --accept-timeout 30 --link raw "$@"
  ip netns exec "$NS_A" timeout 60 "$UROCE" bench --client --addr $A --peer $B --port $PORT \
    --link raw --timeout 16 "$test" -s "$SIZES" -n "$ITERS" --json "$TMP/$name.json" "$@" \
    >"$TMP/$name.client.log" 2>&1 || fail "$name: client exited with $?"
  wait "$SERVER_PID" || fail "$name: server exited with $?"
  json_check "$TMP/$name.json" \
    "j['verified'] and [r['iterations'] for r in j['results']] == $want"
  echo "$name: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(" ".join("%s B %.2f Gb/s" % (r["bytes"], r["bw_avg_gbps"]) for r in j["results"]))' "$TMP/$name.json")"
}

HAVE_TSHARK=0
command -v tshark >/dev/null && HAVE_TSHARK=1
# capture NAME: starts tshark on B's veth (RoCE frames and ICMP only) for the next run.
capture() {
  ((HAVE_TSHARK)) || return 0
  ip netns exec "$NS_B" tshark -q -i "$VB" -w "$TMP/$1.pcap" -a duration:30 \
    -f "ether proto 0x8915 or udp port 4791 or icmp or vlan" >"$TMP/$1.tshark.log" 2>&1 &
  CAPTURE_PID=$!
  PIDS+=("$CAPTURE_PID")
  for _ in $(seq 50); do grep -q "Capturing on" "$TMP/$1.tshark.log" 2>/dev/null && break; sleep 0.1; done
}
# check_capture NAME ETHERTYPE-FILTER: every RoCE frame matches, nothing malformed, no ICMP.
check_capture() {
  ((HAVE_TSHARK)) || return 0
  local name=$1 want=$2
  sleep 0.5
  kill -INT "$CAPTURE_PID" 2>/dev/null || true
  wait "$CAPTURE_PID" 2>/dev/null || true
  local total roce wanted bad icmp
  total=$(tshark -n -r "$TMP/$name.pcap" 2>/dev/null | wc -l)
  roce=$(tshark -n -r "$TMP/$name.pcap" -Y infiniband 2>/dev/null | wc -l)
  wanted=$(tshark -n -r "$TMP/$name.pcap" -Y "infiniband && $want" 2>/dev/null | wc -l)
  bad=$(tshark -n -r "$TMP/$name.pcap" -Y "_ws.malformed || _ws.expert.severity >= warning" 2>/dev/null | wc -l)
  icmp=$(tshark -n -r "$TMP/$name.pcap" -Y "icmp" 2>/dev/null | wc -l)
  echo "$name capture: $total frames, $roce RoCE, $wanted as asked ($want), $bad malformed, $icmp ICMP"
  ((roce > 400)) || fail "$name: only $roce RoCE frames captured"
  ((wanted == roce)) || fail "$name: $((roce - wanted)) RoCE frames are not $want"
  ((bad == 0)) || fail "$name: $bad malformed frames"
  ((icmp == 0)) || fail "$name: the kernel sent $icmp ICMP messages"
}

capture v2
run v2 write
check_capture v2 "ip && udp.dstport == 4791 && !vlan"
capture v1
run v1 write --roce-v1
check_capture v1 "eth.type == 0x8915"
capture v1_vlan
run v1_vlan send --roce-v1 --vlan 0
check_capture v1_vlan "vlan.etype == 0x8915"

# Loss, made by the bridge (netns_lib.sh, make_netns_bridged_pair says why there).
set_bridge_loss 10
dropped() { bridge_dropped; }
retransmitted() {
  json_check "$TMP/$1.json" \
    'j["counters"]["local"]["retransmitted_packets"] + j["counters"]["remote"]["retransmitted_packets"] > 0'
}
SIZES=4K,64K,1M
ITERS=16
for v in v2 v1; do
  args=()
  [[ $v == v1 ]] && args=(--roce-v1)
  for test in write read send; do
    before=$(dropped)
    run "loss_${test}_$v" "$test" "${args[@]}"
    retransmitted "loss_${test}_$v"
    echo "loss_${test}_$v: the bridge dropped $(($(dropped) - before)) frames; data verified"
  done
done
(($(dropped) > 0)) || fail "the bridge dropped nothing"
echo PASS
