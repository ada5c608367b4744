#!/usr/bin/env bash
# The raw Ethernet link (link/raw_link.h) on a real wire: `uroce bench write` and `send` across two
# network namespaces joined by a veth pair, once with RoCEv2 frames and once with RoCE v1 frames
# (EtherType 0x8915), untagged and with an 802.1Q tag, every message verified. A capture on the
# receiving side (tshark, when installed) must show the frames of the kind asked for, decoded as
# RoCE with nothing malformed, and no ICMP from the kernel. Skips (exit 77) where it cannot: not
# root, no ip/nft, no namespaces or veth here.
source "$(dirname "$0")/bench_lib.sh"
source "$(dirname "$0")/netns_lib.sh"
A=198.18.0.9
B=198.18.0.10
PORT=18647
make_netns_pair uroce-raw $A $B
VB=$(ip -n "$NS_B" -o link show type veth | awk -F': ' '{print $2}' | cut -d@ -f1)

# run NAME TEST ARGS...: one verified bench of TEST over the raw link with ARGS on both sides.
run() {
  local name=$1 test=$2; shift 2
  start_server "$name" ip netns exec "$NS_B" timeout 60 "$UROCE" bench --server --addr $B \
    --port $PORT --accept-timeout 30 --link raw "$@"
  ip netns exec "$NS_A" timeout 60 "$UROCE" bench --client --addr $A --peer $B --port $PORT \
    --link raw "$test" -s 4K,64K -n 200 --json "$TMP/$name.json" "$@" \
    >"$TMP/$name.client.log" 2>&1 || fail "$name: client exited with $?"
  wait "$SERVER_PID" || fail "$name: server exited with $?"
  json_check "$TMP/$name.json" \
    'j["verified"] and [r["iterations"] for r in j["results"]] == [200, 200]'
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
echo PASS
