#!/usr/bin/env bash
# `uroce bench` across two network namespaces joined by a veth pair (198.18.0.0/15, the
# benchmarking range), with the kernel dropping 1% and then 5% of the RoCE packets in each
# receiving namespace's prerouting hook (nftables numgen). Every test must still complete with
# its data verified, and the retransmission counters must show the recovery. The test creates
# and removes its own namespaces; where it cannot (not root, no ip/nft), it skips (exit 77).
source "$(dirname "$0")/bench_lib.sh"
source "$(dirname "$0")/netns_lib.sh"
A=198.18.0.1
B=198.18.0.2
PORT=18643
make_netns_pair uroce $A $B

# set_loss PER_MILLE: in both namespaces (each receives: data one way, ACKs and read responses
# the other), drop that share of UDP 4791 packets before routing. `counter` lets us prove drops.
set_loss() {
  for ns in "$NS_A" "$NS_B"; do
    ip netns exec "$ns" nft delete table inet uroce_loss 2>/dev/null || true
    ip netns exec "$ns" nft -f - <<NFT || skip "nftables rules cannot be loaded here"
table inet uroce_loss {
  chain pre {
    type filter hook prerouting priority -300; policy accept;
    udp dport 4791 numgen random mod 1000 < $1 counter drop
  }
}
NFT
  done
}
dropped() {
  local total=0 n
  for ns in "$NS_A" "$NS_B"; do
    n=$(ip netns exec "$ns" nft list table inet uroce_loss | sed -n 's/.*packets \([0-9]*\).*/\1/p')
    total=$((total + ${n:-0}))
  done
  echo $total
}

run() {
  local name=$1; shift
  start_server "$name" ip netns exec "$NS_B" timeout 200 "$UROCE" bench --server --addr $B \
    --port $PORT --accept-timeout 60
  ip netns exec "$NS_A" timeout 200 "$UROCE" bench --client --addr $A --peer $B --port $PORT \
    --timeout 12 --json "$TMP/$name.json" "$@" >"$TMP/$name.client.log" 2>&1 ||
    fail "$name: client exited with $?"
  wait "$SERVER_PID" || fail "$name: server exited with $?"
  # Recovery shows in the counters: requests resent after a NAK or timeout, or duplicates the
  # responder had to answer again.
  json_check "$TMP/$name.json" \
    "j['verified'] and all(r['iterations'] == $(iterations_arg "$@") for r in j['results'])"
  # Atomics are small: veth GRO merges many into one skb that nftables keeps or drops whole, so
  # a short atomic run may see no drop at all. Its data is still verified; the bulk runs must
  # show recovery.
  [[ $name == atomic_* ]] || json_check "$TMP/$name.json" \
    'j["counters"]["local"]["retransmitted_packets"] + j["counters"]["remote"]["retransmitted_packets"] > 0'
  python3 - "$TMP/$name.json" "$name" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); c = j["counters"]
keys = ["retransmitted_packets", "local_ack_timeout_err", "packet_seq_err", "seq_naks_sent",
        "duplicate_request", "out_of_sequence"]
print("ok: %s: %s; %s" % (sys.argv[2],
      ", ".join("%s %.2f Gb/s" % (r["bytes"], r["bw_avg_gbps"]) for r in j["results"]),
      ", ".join("%s %d/%d" % (k, c["local"].get(k, 0), c["remote"].get(k, 0)) for k in keys)))
PY
}

for loss in 10 50; do
  set_loss $loss
  run "write_loss$loss" write -s 4K,64K,1M -n 40
  run "read_loss$loss" read -s 4K,64K,1M -n 40
  run "send_loss$loss" send -s 0,4K,64K,1M -n 40
  run "atomic_loss$loss" atomic -n 500
  echo "loss $loss/1000: the kernel dropped $(dropped) RoCE packets"
  (($(dropped) > 0)) || fail "nftables dropped nothing at $loss/1000"
done
