#!/usr/bin/env bash
# rdma_cm with packets lost (docs/cm.md): Debian's unmodified rping on the drop-in librdmacm and
# libibverbs in two network namespaces joined by a veth pair, with nftables rules in each
# namespace's prerouting hook dropping RoCE packets (UDP 4791) it receives:
#   - the first CM MAD each side receives (a UD SEND ONLY to QPN 1): the server's namespace loses
#     the client's first REQ, the client's the server's first REP, so both sides' CM timeouts and
#     retransmissions (REQ, REP) must run for the connection to come up;
#   - a fifth of the other RoCE packets, at random: the data path's retransmissions under rping.
# rping -C 10 -v must connect and finish: ten verified ping-pongs, every data line exact on both
# sides, each first-MAD rule having dropped exactly one packet and the random ones some.
# The CM's later MADs are spared: rping's client exits right after its DREQ, and its CM goes with
# it (a kernel's CM would retransmit a lost DREQ after the process is gone), so a lost DREQ would
# leave the server waiting; lost MADs of every kind are the sans-I/O tests' part
# (tests/unit/cm_state_machine_test.cpp).
# Needs root for the namespaces: skipped (77) otherwise.
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
command -v rping >/dev/null || { echo "SKIP: rping not installed (Debian package rdmacm-utils)"; exit 77; }
PIDS=()
cleanup_bench() { abi_cleanup; }
fail() { abi_fail "$@"; }
source "$(dirname "$0")/netns_lib.sh"
A=198.18.33.1 B=198.18.33.2
LOSS_PERCENT=20
make_netns_pair cml "$A" "$B"
# A CM MAD: BTH opcode 0x64 (UD SEND ONLY) right after the UDP header, destination QP 1.
CM_MAD='udp dport 4791 @th,64,8 0x64 @th,104,24 1'
for ns in "$NS_A" "$NS_B"; do
  ip netns exec "$ns" nft -f - <<NFT || abi_fail "nft: cannot add the drop rules"
table inet uroce_loss {
  chain prerouting {
    type filter hook prerouting priority 0;
    $CM_MAD numgen inc mod 1000000 < 1 counter drop comment "first MAD"
    $CM_MAD accept
    udp dport 4791 numgen random mod 100 < $LOSS_PERCENT counter drop comment "random"
  }
}
NFT
done

in_a() { ip netns exec "$NS_A" env UROCE_DEVICES="urocea=$A" "$@"; }
in_b() { ip netns exec "$NS_B" env UROCE_DEVICES="uroceb=$B" "$@"; }

# expected_pings, exit_status: rdmacm_lib.sh (its serve/client/show are not used here).
source "$(dirname "$0")/rdmacm_lib.sh"

# A lost REQ or REP waits for the CM's response timeout (rdma_cm's 2^20 * 4.096 us, about 4.3 s,
# plus twice the packet lifetime) before it is sent again.
in_b timeout -k 5 90 rping -s -a $B -p 7330 -C 10 -v >"$ABI_TMP/server" 2>&1 &
SERVER_PID=$!
ABI_PIDS+=("$SERVER_PID")
for ((waited = 0; waited < 200; waited++)); do
  ip netns exec "$NS_B" ss -Huan 2>/dev/null | grep -q "$B:4791" && break
  sleep 0.1
done
sleep 0.5
CLIENT_RC=0
in_a timeout -k 5 90 rping -c -a $B -p 7330 -C 10 -v >"$ABI_TMP/client" 2>&1 || CLIENT_RC=$?
src=0
wait "$SERVER_PID" || src=$?
CLIENT_RC=$(exit_status "$CLIENT_RC" "$ABI_TMP/client")
src=$(exit_status "$src" "$ABI_TMP/server")
show() {
  echo "---- server" >&2; cat "$ABI_TMP/server" >&2
  echo "---- client" >&2; cat "$ABI_TMP/client" >&2
}
[[ $CLIENT_RC == 0 && $src == 0 ]] || { show; abi_fail "rping with loss: client $CLIENT_RC, server $src"; }
diff <(expected_pings "" 10) <(grep -v '^client DISCONNECT EVENT\.\.\.$' "$ABI_TMP/client") >&2 ||
  { show; abi_fail "rping with loss: client output"; }
diff <(expected_pings "server " 10) <(grep "^server ping data" "$ABI_TMP/server") >&2 ||
  { show; abi_fail "rping with loss: server data lines"; }
# dropped NS COMMENT: packets the rule with that comment dropped.
dropped_by() {
  ip netns exec "$1" nft list chain inet uroce_loss prerouting | awk -v c="\"$2\"" '
    index($0, "comment " c) { for (i = 1; i <= NF; i++) if ($i == "packets") print $(i + 1) }'
}
for ns in "$NS_A" "$NS_B"; do
  first=$(dropped_by "$ns" "first MAD")
  [[ $first == 1 ]] || abi_fail "$ns: the first-MAD rule dropped '$first' packets, not 1"
done
dropped=$(($(dropped_by "$NS_A" random) + $(dropped_by "$NS_B" random)))
((dropped > 0)) || abi_fail "the random drop rules dropped nothing"
echo "ok   rping -C 10 -v, the first REQ, the first REP and $dropped of the other RoCE packets ($LOSS_PERCENT%) lost"
echo "PASS"
