#!/usr/bin/env bash
# Compares the links across two network namespaces on one veth pair (docs/links.md, "Measured"):
# for each round, UDP, raw and AF_XDP in turn, `uroce bench write` bandwidth at 64 KiB and 1 MiB,
# 8-byte latency (--lat) and 8-byte message rate, every byte verified. Prints one line per link
# and round, and the ratios to the UDP link within each round. Root only.
# Usage: [LINKS="udp raw xdp"] scripts/measure_links.sh path/to/uroce [ROUNDS]
# LINKS may also name xdp-generic (the AF_XDP link with its program attached in generic mode:
# --xdp-generic). The first must be udp: ratios are to it; xdp/raw and xdp/xdp-generic ratios are
# printed when both are measured.
set -euo pipefail
UROCE=$(realpath "${1:?usage: $0 path/to/uroce [ROUNDS]}")
ROUNDS=${2:-3}
LINKS=${LINKS:-udp raw xdp}
A=198.18.0.21 B=198.18.0.22 PORT=18651
NS_A=uroce-ml-a-$$ NS_B=uroce-ml-b-$$
TMP=$(mktemp -d /tmp/uroce-measure.XXXXXX)
trap 'ip netns del $NS_A 2>/dev/null; ip netns del $NS_B 2>/dev/null; rm -rf $TMP' EXIT
ip netns add $NS_A
ip netns add $NS_B
ip link add mla netns $NS_A type veth peer name mlb netns $NS_B
ip -n $NS_A addr add $A/30 dev mla
ip -n $NS_B addr add $B/30 dev mlb
for ns in $NS_A $NS_B; do ip -n $ns link set lo up; done
ip -n $NS_A link set mla up
ip -n $NS_B link set mlb up

# bench LINK OUT ARGS...: one verified client/server run, JSON to OUT.
bench() {
  local link=$1 out=$2 extra=()
  shift 2
  if [[ $link == xdp-generic ]]; then link=xdp extra=(--xdp-generic); fi
  ip netns exec $NS_B timeout 120 "$UROCE" bench --server --addr $B --port $PORT \
    --accept-timeout 30 --link "$link" "${extra[@]}" >"$TMP/server.log" 2>&1 &
  local spid=$!
  for _ in $(seq 100); do
    ip netns exec $NS_B ss -Htln 2>/dev/null | grep -q ":$PORT " && break
    sleep 0.05
  done
  ip netns exec $NS_A timeout 120 "$UROCE" bench --client --addr $A --peer $B --port $PORT \
    --link "$link" "${extra[@]}" --json "$out" "$@" >"$TMP/client.log" 2>&1
  wait $spid
}

for r in $(seq "$ROUNDS"); do
  for link in $LINKS; do
    bench $link "$TMP/$r.$link.bw.json" write -s 64K,1M -n 300
    bench $link "$TMP/$r.$link.lat.json" write --lat -s 8 -n 2000
    bench $link "$TMP/$r.$link.rate.json" write -s 8 -n 50000
  done
done
uptime
python3 - "$TMP" "$ROUNDS" $LINKS <<'PY'
import json, sys
tmp, rounds, links = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(r, link, kind):
    j = json.load(open(f"{tmp}/{r}.{link}.{kind}.json"))
    assert j["verified"], (r, link, kind)
    return j["results"]
for r in range(1, rounds + 1):
    row = {}
    for link in links:
        bw = load(r, link, "bw")
        lat = load(r, link, "lat")[0]
        rate = load(r, link, "rate")[0]
        row[link] = (bw[0]["bw_avg_gbps"], bw[1]["bw_avg_gbps"], lat["t_median_us"],
                     lat["t_p99_us"], rate["msg_rate_mpps"])
        print(f"round {r} {link}: 64K {row[link][0]:.2f} Gb/s, 1M {row[link][1]:.2f} Gb/s, "
              f"8 B latency median {row[link][2]:.1f} us p99 {row[link][3]:.1f} us, "
              f"8 B rate {row[link][4]*1000:.1f} kmsg/s")
    pairs = [(link, "udp") for link in links[1:]]
    pairs += [(a, b) for a, b in (("xdp", "raw"), ("xdp", "xdp-generic")) if a in row and b in row]
    for a, b in pairs:
        x, y = row[a], row[b]
        print(f"round {r} {a}/{b}: 64K {x[0]/y[0]:.2f}, 1M {x[1]/y[1]:.2f}, "
              f"latency median {x[2]/y[2]:.2f}, rate {x[4]/y[4]:.2f}")
PY
