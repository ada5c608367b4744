#!/usr/bin/env bash
# Unmodified verbs programs over the raw Ethernet link (docs/links.md) between two network
# namespaces: Debian's ibv_rc_pingpong and ibv_ud_pingpong (ibverbs-utils) and ib_send_bw / ib_write_bw (perftest)
# on the drop-in libibverbs with UROCE_LINK=raw, once with the GID table's RoCE v1 entry (-g 1 /
# -x 1) and once with its RoCEv2 entry (-g 0 / -x 0). A tshark capture on the receiving veth
# must decode every frame as RoCE of the version asked for (v1: EtherType 0x8915 and a GRH; v2:
# UDP 4791), with no malformed field and no expert warning. Then a PCP-tagged flow
# (UROCE_VLAN, ibv_rc_pingpong -l: the service level is the 802.1p priority) must show its VLAN
# ID and PCP in the capture, and a validated ping-pong (-c) must complete while the bridge that
# joins the namespaces drops 3% of the RoCE frames each way. Needs root: skipped (77) otherwise.
#
# Usage: netns_raw_verbs_test.sh LIB_DIR [raw|xdp [on|off]]. With `xdp` (e2e.netns_xdp_verbs) the
# same programs run over the AF_XDP link (UROCE_LINK=xdp): the v1 and v2 ping-pongs, ib_send_bw
# over v1 and ib_write_bw over v2, and the loss ping-pongs; the third argument says whether the
# build has the link (UROCE_XDP), and the test skips with a reason when it has not or when the
# kernel refuses the XDP program or the socket. XDP hands B's received frames to the socket
# before packet sockets see them, so the capture is taken on the bridge's port to B instead,
# where both directions pass through the kernel.
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
LINK=${2:-raw}
abi_require ibv_rc_pingpong ibv_ud_pingpong ib_send_bw ib_write_bw
command -v tshark >/dev/null || { echo "SKIP: tshark not installed (the captures are the proof)"; exit 77; }
if [[ $LINK == xdp && ${3:-on} != on ]]; then
  echo "SKIP: built without the AF_XDP link (-DUROCE_XDP=OFF)"
  exit 77
fi
# netns_lib.sh's names for the helpers abi_lib.sh has.
PIDS=()
cleanup_bench() { abi_cleanup; }
fail() { abi_fail "$@"; }
source "$(dirname "$0")/netns_lib.sh"
if [[ $LINK == xdp ]]; then
  A=198.18.33.5 B=198.18.33.6
  make_netns_bridged_pair xdpv "$A" "$B"
  # Where the capture is taken: the bridge's port to B (see the top).
  CAPTURE_NS=$NS_S CAPTURE_IF=sb
  # Can this kernel attach the program and bind the socket? A ping-pong server opens the link
  # as it allocates its PD and then waits for a client; one that cannot says why and exits.
  ip netns exec "$NS_B" env UROCE_LINK=xdp UROCE_DEVICES="uroceb=$B" timeout 3 \
    ibv_rc_pingpong -g 0 -p 18800 >"$ABI_TMP/probe.log" 2>&1
  if (($? != 124)) && grep -q "cannot serve" "$ABI_TMP/probe.log"; then
    echo "SKIP: the AF_XDP link cannot open here: $(grep -m1 "cannot serve" "$ABI_TMP/probe.log")"
    exit 77
  fi
else
  A=198.18.33.1 B=198.18.33.2
  make_netns_bridged_pair rawv "$A" "$B"
  CAPTURE_NS=$NS_B CAPTURE_IF=$VB
fi
export UROCE_LINK=$LINK

# The heuristic dissectors that claim RoCE payloads (wire_tshark_test.cpp's list), disabled so a
# random payload is not decoded as some upper protocol and called malformed.
NO_HEURISTICS=()
known=$(tshark -G protocols 2>/dev/null | cut -f3)
for p in rpcordma smb_direct iser nvme-rdma smc lnet fcoib infiniband_sdp infiniband.eoib drbd; do
  grep -qx "$p" <<<"$known" && NO_HEURISTICS+=(--disable-protocol "$p")
done

# capture NAME: tshark on B's veth, or the bridge's port to it (RoCE, VLAN-tagged and ICMP
# frames), for the next run.
capture() {
  ip netns exec "$CAPTURE_NS" tshark -q -B 64 -i "$CAPTURE_IF" -w "$ABI_TMP/$1.pcap" -a duration:60 \
    -f "ether proto 0x8915 or udp port 4791 or icmp or vlan" >"$ABI_TMP/$1.tshark.log" 2>&1 &
  CAPTURE_PID=$!
  ABI_PIDS+=("$CAPTURE_PID")
  for _ in $(seq 100); do grep -q "Capture started" "$ABI_TMP/$1.tshark.log" 2>/dev/null && break; sleep 0.1; done
  sleep 0.3  # "started" is said as the capture opens; let it settle
}
count() {  # count NAME FILTER
  tshark -n -r "$ABI_TMP/$1.pcap" "${NO_HEURISTICS[@]}" -Y "$2" 2>/dev/null | wc -l
}
# check_capture NAME MIN FILTER: at least MIN RoCE frames, every one matching FILTER, none
# malformed or flagged, no ICMP.
check_capture() {
  local name=$1 min=$2 want=$3
  sleep 0.5
  kill -INT "$CAPTURE_PID" 2>/dev/null || true
  wait "$CAPTURE_PID" 2>/dev/null || true
  local roce wanted bad icmp
  roce=$(count "$name" infiniband)
  wanted=$(count "$name" "infiniband && ($want)")
  bad=$(count "$name" "_ws.malformed || _ws.expert.severity >= warning")
  icmp=$(count "$name" icmp)
  echo "     capture: $roce RoCE frames, $wanted as asked ($want), $bad malformed, $icmp ICMP"
  ((roce >= min)) || abi_fail "$name: $roce RoCE frames captured, expected at least $min"
  ((wanted == roce)) || abi_fail "$name: $((roce - wanted)) RoCE frames are not $want"
  ((bad == 0)) || abi_fail "$name: $bad malformed or flagged frames"
  ((icmp == 0)) || abi_fail "$name: $icmp ICMP messages"
}

# pair NAME TCP_PORT SERVER_CMD... -- CLIENT_CMD...: the server in B, then the client in A once
# the server listens; both must exit 0 and print no error.
pair() {
  local name=$1 port=$2
  shift 2
  local server=() client=()
  while [[ $1 != -- ]]; do server+=("$1"); shift; done
  shift
  client=("$@")
  ip netns exec "$NS_B" env UROCE_DEVICES="uroceb=$B" timeout -k 5 90 "${server[@]}" \
    >"$ABI_TMP/$name.server" 2>&1 &
  local spid=$!
  ABI_PIDS+=("$spid")
  for _ in $(seq 200); do
    ip netns exec "$NS_B" ss -Htln 2>/dev/null | grep -q ":$port " && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  local crc=0 src=0 benign='^$^'
  PAIR_DONE=client  # the side whose output holds the result line
  ip netns exec "$NS_A" env UROCE_DEVICES="urocea=$A" timeout -k 5 90 "${client[@]}" \
    >"$ABI_TMP/$name.client" 2>&1 || crc=$?
  wait "$spid" || src=$?
  # Under loss one ending is benign: when a side's peer has finished every exchange and exited
  # before the ACK of the side's last SEND got through, the side retries into a QP that no longer
  # exists and ends in RETRY_EXC, as against a hardware NIC (a destroyed QP answers nothing).
  if [[ ${LOSSY:-0} == 1 && $crc != "$src" && ($crc == 0 || $src == 0) ]]; then
    local failed=$ABI_TMP/$name.server done=$ABI_TMP/$name.client
    [[ $crc != 0 ]] && failed=$ABI_TMP/$name.client done=$ABI_TMP/$name.server
    if grep -q "transport retry counter exceeded" "$failed" && grep -q "^$ITERS iters in" "$done"; then
      echo "     note: $name: the side whose peer left first ended its last SEND in RETRY_EXC"
      crc=0 src=0 benign='transport retry counter exceeded|parse WC failed'
      PAIR_DONE=${done##*.}
    fi
  fi
  if [[ $crc != 0 || $src != 0 ]]; then
    echo "---- $name server (exit $src)" >&2; cat "$ABI_TMP/$name.server" >&2
    echo "---- $name client (exit $crc)" >&2; cat "$ABI_TMP/$name.client" >&2
    abi_fail "$name: exit codes server $src client $crc"
  fi
  abi_check_clean "$ABI_TMP/$name.server" "$benign"
  abi_check_clean "$ABI_TMP/$name.client" "$benign"
  ! grep -qi "invalid data" "$ABI_TMP/$name.server" "$ABI_TMP/$name.client" ||
    abi_fail "$name: ibv_rc_pingpong -c found invalid data"
}

ITERS=500
[[ $LINK == xdp ]] && ITERS=200  # fewer over AF_XDP: its frames are the raw link's
# pingpong NAME GID ARGS...: a validated ibv_rc_pingpong of ITERS exchanges.
pingpong() {
  local name=$1 gid=$2 port=$3
  shift 3
  pair "$name" "$port" ibv_rc_pingpong -g "$gid" -p "$port" -n $ITERS -c "$@" -- \
    ibv_rc_pingpong -g "$gid" -p "$port" -n $ITERS -c "$@" "$B"
  # The client's, or under loss the server's when the client was the side left in RETRY_EXC.
  grep -q "$ITERS iters in" "$ABI_TMP/$name.$PAIR_DONE" || abi_fail "$name: no result line"
  echo "ok   $name: $(grep 'iters in' "$ABI_TMP/$name.$PAIR_DONE")"
}
# perf NAME TOOL GID PORT: a short perftest bandwidth run of 64 KiB messages.
perf() {
  local name=$1 tool=$2 gid=$3 port=$4
  pair "$name" "$port" "$tool" -x "$gid" -p "$port" -s 65536 -n 200 -- \
    "$tool" -x "$gid" -p "$port" -s 65536 -n 200 "$B"
  local row
  row=$(grep -E '^\s+65536\s+200\s+[0-9.]+' "$ABI_TMP/$name.client") || abi_fail "$name: no result row"
  awk '{ exit !($4 > 0) }' <<<"$row" || abi_fail "$name: zero bandwidth: $row"
  echo "ok   $name: $(tr -s ' ' <<<"$row")"
}

V1='eth.type == 0x8915 && !ip && !udp'
V2='ip && udp.dstport == 4791 && !vlan'
# Each exchange is a SEND each way, each acknowledged: at least 2 * ITERS frames on B's veth.
capture pp_v1
pingpong pp_v1 1 18801
check_capture pp_v1 $((2 * ITERS)) "$V1"
capture pp_v2
pingpong pp_v2 0 18802
check_capture pp_v2 $((2 * ITERS)) "$V2"
# UD over v1: each datagram lands behind the v1 GRH (docs/ibverbs.md); one frame per message.
# The raw link only: the AF_XDP link shares its frame code (RawLink::build_frame, receive_frame).
if [[ $LINK == raw ]]; then
  capture ud_v1
  pair ud_v1 18809 ibv_ud_pingpong -g 1 -p 18809 -n $ITERS -s 512 -- \
    ibv_ud_pingpong -g 1 -p 18809 -n $ITERS -s 512 "$B"
  grep -q "$ITERS iters in" "$ABI_TMP/ud_v1.client" || abi_fail "ud_v1: no result line"
  echo "ok   ud_v1: $(grep 'iters in' "$ABI_TMP/ud_v1.client")"
  check_capture ud_v1 $((2 * ITERS)) "$V1 && infiniband.bth.opcode == 100"
fi
# 200 messages of 64 packets (1024-byte MTU on this veth's 1500): a capture on a loaded machine
# may lose some of the 12800, so a tenth of them is the floor.
capture send_bw_v1
perf send_bw_v1 ib_send_bw 1 18803
check_capture send_bw_v1 1280 "$V1"
capture write_bw_v2
perf write_bw_v2 ib_write_bw 0 18804
check_capture write_bw_v2 1280 "$V2"

# PCP: VLAN 7, service level 5 on both sides; every frame tagged VID 7, PCP 5 (the kernel hands
# tagged frames to packet sockets with the tag in metadata, so B's link receives them without a
# VLAN interface). The raw link only, as UD above.
if [[ $LINK == raw ]]; then
  capture pcp_v1
  UROCE_VLAN=7 pingpong pcp_v1 1 18805 -l 5
  check_capture pcp_v1 $((2 * ITERS)) "vlan.id == 7 && vlan.priority == 5 && vlan.etype == 0x8915"
  capture pcp_v2
  UROCE_VLAN=7 pingpong pcp_v2 0 18806 -l 3
  check_capture pcp_v2 $((2 * ITERS)) "vlan.id == 7 && vlan.priority == 3 && vlan.etype == 0x0800"
fi

# Loss: the bridge between the namespaces drops 3% of the RoCE frames each way (netns_lib.sh,
# make_netns_bridged_pair, says why there). The UROCE_STATS counters must show the recovery.
set_bridge_loss 30
export UROCE_STATS=$ABI_TMP/loss.stats
ITERS=200  # each loss costs a retransmission timeout; enough for a few dozen of them
LOSSY=1
pingpong loss_v1 1 18807 -s 16384
d1=$(bridge_dropped)
pingpong loss_v2 0 18808 -s 16384
d2=$(($(bridge_dropped) - d1))
resent=$(awk '/\.retransmitted_packets / { n += $2 } END { print n + 0 }' "$UROCE_STATS")
echo "     the bridge dropped $d1 (v1) and $d2 (v2) RoCE frames; $resent packets retransmitted"
((d1 > 0 && d2 > 0)) || abi_fail "the bridge dropped nothing: $d1 / $d2"
((resent > 0)) || abi_fail "no retransmission counted"
echo "PASS"
