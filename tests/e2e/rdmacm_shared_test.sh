#!/usr/bin/env bash
# One device address shared by two processes (UROCE_SHARED_ADDRESS=1, docs/udp-link.md "One
# address, several processes"): server and client each open a uroce device on 127.0.62.1, and the
# SK_REUSEPORT program steers every datagram to the process that owns it. Root (the program needs
# CAP_BPF); skipped otherwise.
#   rping -s / rping -c -C 10 -v on the one address: every data line of both sides exact;
#   a listener killed with SIGKILL leaves its service behind in the address's map: a new server
#     on the same port takes it over, and a client connects to it;
#   ibv_rc_pingpong server and client on the one address (QPNs exchanged over TCP, then data
#     steered by the slot in each QPN): 100 iterations each;
#   a process without UROCE_SHARED_ADDRESS cannot open the address while it is shared
#     (EADDRINUSE, said on stderr).
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
for tool in rping ibv_rc_pingpong; do
  command -v $tool >/dev/null ||
    { echo "SKIP: $tool not installed (Debian packages rdmacm-utils, ibverbs-utils)"; exit 77; }
done
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: sharing an address needs root (the SK_REUSEPORT program needs CAP_BPF)"
  exit 77
fi

S=127.0.62.1 C=127.0.62.1
export UROCE_SHARED_ADDRESS=1
source "$(dirname "$0")/rdmacm_lib.sh"

check_rping() {  # check_rping NAME: both sides ended 0 with every data line
  [[ $CLIENT_RC == 0 && $src == 0 ]] || { show "$1"; abi_fail "$1: client $CLIENT_RC, server $src"; }
  diff <(expected_pings "" 10) <(grep -v '^client DISCONNECT EVENT\.\.\.$' "$ABI_TMP/$1.client") >&2 ||
    { show "$1"; abi_fail "$1: client output"; }
  diff <(expected_pings "server " 10) <(grep "^server ping data" "$ABI_TMP/$1.server") >&2 ||
    { show "$1"; abi_fail "$1: server data lines"; }
}

# ---- rping, both sides on one address ----------------------------------------------------------
UROCE_STATS=$ABI_TMP/server.stats serve rping rping -s -a $S -p 7262 -C 10 -v
UROCE_STATS=$ABI_TMP/client.stats client rping rping -c -a $S -p 7262 -C 10 -v
server_rc
check_rping rping
# Every datagram reached the process it was for: all the client's link sent, the server's
# received, and the CM MADs exactly: REQ, RTU and DREQ to the server, REP and DREP back. rping's
# client exits right after its DREQ, so the DREP may come after it left: then it is lost with the
# client's socket, or, once that socket is closed, the kernel's hash over the group hands it to
# the only member left, the server (an owner gone falls back to the hash, docs/udp-link.md), which
# then counts its own DREP once more among its datagrams and MADs; neither side dropped a packet
# for an unknown QP or a MAD.
stat() { awk -v name="$2" '{ split($1, k, "."); if (k[2] == name) print $2 }' "$ABI_TMP/$1.stats"; }
fail_stats() { cat "$ABI_TMP"/*.stats >&2; abi_fail "rping: $*"; }
[[ $(stat client gsi_rx_mads) == 2 || $(stat client gsi_rx_mads) == 1 ]] || fail_stats "the client's MADs"
own_drep=0
[[ $(stat client gsi_rx_mads) == 1 && $(stat server gsi_rx_mads) == 4 ]] && own_drep=1
[[ -n $(stat client link_tx_packets) &&
  $(($(stat client link_tx_packets) + own_drep)) == $(stat server link_rx_packets) ]] ||
  fail_stats "the client sent $(stat client link_tx_packets), the server got $(stat server link_rx_packets)"
[[ $(stat server gsi_rx_mads) == $((3 + own_drep)) && $(stat client gsi_tx_mads) == 3 &&
  $(stat server gsi_tx_mads) == 2 ]] || fail_stats "CM MAD counts"
((own_drep == 0)) || echo "note: the client left before its DREP; the server got it back"
for side in server client; do
  [[ $(stat $side rx_unknown_qpn_drops) == 0 && $(stat $side gsi_rx_drops) == 0 ]] ||
    fail_stats "$side dropped packets for unknown QPs or MADs"
done
echo "ok   rping -C 10 -v, server and client on $S: 10 verified ping-pongs, every datagram to its owner"

# ---- a listener killed: its service is taken over ----------------------------------------------
serve killed rping -s -a $S -p 7263
killed=$(LD_PRELOAD= pgrep -P "$SERVER_PID" -x rping)  # rping itself, under timeout; pgrep hangs with ASan preloaded
[[ -n $killed ]] || abi_fail "no rping server to kill"
kill -KILL "$killed"
{ wait "$SERVER_PID"; } 2>/dev/null
serve rping2 rping -s -a $S -p 7263 -C 10 -v
client rping2 rping -c -a $S -p 7263 -C 10 -v
server_rc
check_rping rping2
echo "ok   a listener killed with SIGKILL: the next server on its port serves"

# ---- ibv_rc_pingpong, both sides on one address ------------------------------------------------
UROCE_DEVICES="uroces=$S" timeout -k 5 30 ibv_rc_pingpong -d uroces -g 0 -n 100 -p 18762 \
  >"$ABI_TMP/pp.server" 2>&1 &
SERVER_PID=$!
ABI_PIDS+=("$SERVER_PID")
sleep 0.5
CLIENT_RC=0
for try in 1 2 3 4 5 6 7 8 9 10; do  # until the server's TCP port is up
  CLIENT_RC=0
  UROCE_DEVICES="urocec=$C" timeout -k 5 30 ibv_rc_pingpong -d urocec -g 0 -n 100 -p 18762 $S \
    >"$ABI_TMP/pp.client" 2>&1 || CLIENT_RC=$?
  grep -q "Couldn't connect" "$ABI_TMP/pp.client" || break
  sleep 0.3
done
server_rc
[[ $CLIENT_RC == 0 && $src == 0 ]] || { show pp; abi_fail "ibv_rc_pingpong: client $CLIENT_RC, server $src"; }
for side in server client; do
  grep -q "^100 iters in " "$ABI_TMP/pp.$side" || { show pp; abi_fail "ibv_rc_pingpong: $side iterations"; }
done
echo "ok   ibv_rc_pingpong -n 100, server and client on $S"

# ---- without UROCE_SHARED_ADDRESS, a shared address is taken ------------------------------------
serve held rping -s -a $S -p 7264
CLIENT_RC=0
UROCE_SHARED_ADDRESS= UROCE_DEVICES="urocec=$C" timeout -k 5 30 rping -c -a $S -p 7264 -C 1 \
  >"$ABI_TMP/plain.out" 2>&1 || CLIENT_RC=$?
kill -TERM "$SERVER_PID" 2>/dev/null
wait "$SERVER_PID" 2>/dev/null
grep -q "cannot serve $S (UDP port 4791): Address already in use" "$ABI_TMP/plain.out" ||
  { cat "$ABI_TMP/plain.out" >&2; abi_fail "a plain open of a shared address: no EADDRINUSE"; }
echo "ok   a process without UROCE_SHARED_ADDRESS: EADDRINUSE"
echo PASS
