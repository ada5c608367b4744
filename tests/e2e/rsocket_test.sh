#!/usr/bin/env bash
# rsockets end to end (docs/cm.md, "rsockets"): Debian's unmodified rstream, riostream, rcopy and
# udpong on the drop-in librdmacm, two processes with their own uroce devices on two loopback
# addresses.
#   rstream -C 100: non-blocking (its default: O_NONBLOCK, EAGAIN loops), blocking (-T b,
#     MSG_WAITALL) and rpoll-driven (-T a) transfers, both sides reporting the exact sizes and
#     counts; a verified run (-T v) checks every byte; blocking waits poll before they arm the
#     CQ and sleep (UROCE_RSOCKET_SPIN_US);
#   riostream -T v: riomap on both sides, riowrite into the peer's window, the receiver spinning
#     on the last byte of its own buffer (no library call), every byte checked;
#   rcopy: a 3 MB file copied (blocking rsend/rrecv) and compared;
#   udpong: datagram rsockets (UD QPs, the server's found with SIDR), 100 datagrams in a burst,
#     every one counted by the server (its echo mode, -T e, is a by-hand check: docs/cm.md);
#   rsocket_check (tests/e2e/rsocket_check.c, the second argument): what the programs do not
#     reach: EINPROGRESS, EAGAIN, rpoll timing out, rselect over an rsocket and a pipe, partial
#     reads, end of stream, EBADF.
# With "full" as third argument, also rstream's default run (latency and bandwidth for 64 B to
# 1 MB, two connections one after the other; long: a by-hand check, timings in docs/cm.md).
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
CHECK_BIN=${2:?usage: $0 <lib folder> <uroce_rsocket_check> [full]}
for tool in rstream riostream rcopy udpong; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed (Debian package rdmacm-utils)"; exit 77; }
done

S=127.0.33.2 C=127.0.33.1
source "$(dirname "$0")/rdmacm_lib.sh"

# rsock_client NAME CMD...: the client, retried while the server is not listening yet (REJ 8:
# rconnect's ECONNREFUSED; udpong: SIDR_REP status 1, EHOSTUNREACH).
rsock_client() {
  local name=$1 try
  shift
  for try in 1 2 3 4 5 6 7 8 9 10; do
    CLIENT_RC=0
    UROCE_DEVICES="urocec=$C" timeout -k 5 30 "$@" >"$ABI_TMP/$name.client" 2>&1 || CLIENT_RC=$?
    grep -q -e "Connection refused" -e "No route to host" "$ABI_TMP/$name.client" || return 0
    sleep 0.5
  done
}

# The result line of rstream/riostream: "custom", the size, the transfers, the iterations and the
# total bytes, exact (the times that follow are not checked).
result_fields() {
  awk '$1 == "custom" { print $1, $2, $3, $4, $5 }' "$1"
}

stream_case() {  # stream_case TOOL LABEL EXPECTED ARGS...
  local tool=$1 label=$2 expected=$3
  shift 3
  serve "$label" "$tool" -b $S -p 7180 "$@"
  rsock_client "$label" "$tool" -s $S -p 7180 "$@"
  server_rc
  [[ $CLIENT_RC == 0 && $src == 0 ]] || { show "$label"; abi_fail "$label: client $CLIENT_RC, server $src"; }
  [[ $(result_fields "$ABI_TMP/$label.client") == "$expected" ]] ||
    { show "$label"; abi_fail "$label: client result line"; }
  [[ $(result_fields "$ABI_TMP/$label.server") == "$expected" ]] ||
    { show "$label"; abi_fail "$label: server result line"; }
  echo "ok   $tool $* ($label, $SECONDS s)"
}

stream_case rstream rstream_nonblocking "custom 4k 100 1 800k" -C 100 -S 4096
stream_case rstream rstream_blocking "custom 97k 100 1 19m" -C 100 -S 100000 -T b
stream_case rstream rstream_poll "custom 64k 100 1 12m" -C 100 -S 65536 -T a
stream_case rstream rstream_verify "custom 1m 20 1 40m" -C 20 -S 1048576 -T v
stream_case riostream riostream_verify "custom 64k 100 1 12m" -C 100 -S 65536 -T v

# ---- a blocking wait polls before it sleeps ------------------------------------------------------
# The same blocking transfers with UROCE_RSOCKET_SPIN_US=0 (arm the CQ and sleep at once) and with
# a poll of up to a second first, counting the CQ arms of both processes (cq_notify_requests in
# UROCE_STATS): a wait that finds its data or credits by polling never arms. Without the poll
# about one arm per transfer; with it next to none, however loaded the machine (docs/cm.md,
# "rsockets"; the default poll of 50 us lies between and depends on the load).
arms() { awk '$1 ~ /[.]cq_notify_requests$/ { n += $2 } END { print n + 0 }' "$1"; }
for spin in 0 1000000; do
  rm -f "$ABI_TMP/arms.$spin"
  export UROCE_STATS="$ABI_TMP/arms.$spin" UROCE_RSOCKET_SPIN_US=$spin
  stream_case rstream rstream_blocking_spin_$spin "custom 64k 1k 1 125m" -C 1000 -S 65536 -T b
  unset UROCE_STATS UROCE_RSOCKET_SPIN_US
done
a0=$(arms "$ABI_TMP/arms.0") a1=$(arms "$ABI_TMP/arms.1000000")
((a0 >= 200 && a1 <= 20 && a1 * 10 < a0)) ||
  abi_fail "blocking waits: $a1 CQ arms with a poll before sleeping, $a0 without"
# Nor does a wait spin on news it leaves unread: rclose's wait for its last ACKs once spun on the
# peer's DISCONNECTED, arming the CQ some 190,000 times in one close, until the ACKs came.
((a0 < 20 * 1000)) || abi_fail "blocking waits without a poll armed the CQ $a0 times for 1000 transfers"
echo "ok   blocking rstream: $a1 CQ arms with a poll before sleeping, $a0 without"

# ---- rcopy: a file copied and compared ------------------------------------------------------------
head -c 3000000 /dev/urandom >"$ABI_TMP/source.bin"
serve rcopy rcopy -p 7181
rsock_client rcopy rcopy "$ABI_TMP/source.bin" "$S:$ABI_TMP/copy.bin" -p 7181
kill -TERM "$SERVER_PID" 2>/dev/null  # rcopy's server serves forever
wait "$SERVER_PID" 2>/dev/null
[[ $CLIENT_RC == 0 ]] || { show rcopy; abi_fail "rcopy: client $CLIENT_RC"; }
grep -q "^3000000 bytes in" "$ABI_TMP/rcopy.client" || { show rcopy; abi_fail "rcopy: no byte count"; }
cmp "$ABI_TMP/source.bin" "$ABI_TMP/copy.bin" >&2 || { show rcopy; abi_fail "rcopy: the copy differs"; }
echo "ok   rcopy: 3000000 bytes copied, identical ($SECONDS s)"

# ---- udpong: datagram rsockets ----------------------------------------------------------------------
# Its server's default address is "localhost", whose first answer is ::1: uroce has no IPv6 device
# there, so the server is given its address.
serve udpong stdbuf -oL udpong -b $S -p 7182
rsock_client udpong udpong -s $S -p 7182 -C 100 -S 1000
kill -TERM "$SERVER_PID" 2>/dev/null  # udpong's server serves forever
wait "$SERVER_PID" 2>/dev/null
[[ $CLIENT_RC == 0 ]] || { show udpong; abi_fail "udpong: client $CLIENT_RC"; }
# The client sends 100 datagrams without waiting, then asks the server how many it received: all
# 100 (a receive queue sized from udpong's SO_RCVBUF, 384 slots, holds the burst), 97k of 1000
# bytes.
[[ $(awk '$1 == "custom" { print $1, $2, $3, $4 }' "$ABI_TMP/udpong.client") == "custom 1000 100 97k" ]] ||
  { show udpong; abi_fail "udpong: client result line"; }
grep -qx "client login from $C" "$ABI_TMP/udpong.server" || { show udpong; abi_fail "udpong: server login line"; }
echo "ok   udpong -C 100 -S 1000: 100 datagrams, all received ($SECONDS s)"

# ---- rsocket_check -------------------------------------------------------------------------------
serve check "$CHECK_BIN" server $S 7184
rsock_client check "$CHECK_BIN" client $S 7184
server_rc
[[ $CLIENT_RC == 0 && $src == 0 ]] || { show check; abi_fail "rsocket_check: client $CLIENT_RC, server $src"; }
grep -qx "client ok" "$ABI_TMP/check.client" && grep -qx "server ok" "$ABI_TMP/check.server" ||
  { show check; abi_fail "rsocket_check: no ok lines"; }
echo "ok   rsocket_check: EINPROGRESS, EAGAIN, rpoll, rselect, partial reads, end of stream ($SECONDS s)"

if [[ ${3:-} == full ]]; then
  UROCE_DEVICES="uroces=$S" timeout -k 5 180 rstream -b $S -p 7183 >"$ABI_TMP/rstream_full.server" 2>&1 &
  SERVER_PID=$!
  ABI_PIDS+=("$SERVER_PID")
  sleep 1
  CLIENT_RC=0
  UROCE_DEVICES="urocec=$C" timeout -k 5 180 rstream -s $S -p 7183 >"$ABI_TMP/rstream_full.client" 2>&1 ||
    CLIENT_RC=$?
  server_rc
  [[ $CLIENT_RC == 0 && $src == 0 ]] || { show rstream_full; abi_fail "rstream full: client $CLIENT_RC, server $src"; }
  [[ $(awk 'NR > 1 { print $1 }' "$ABI_TMP/rstream_full.client" | tr '\n' ' ') == \
    "64_lat 4k_lat 64k_lat 1m_lat 64_bw 4k_bw 64k_bw 1m_bw " ]] ||
    { show rstream_full; abi_fail "rstream full: result lines"; }
  echo "ok   rstream (default run): 8 tests over two connections"
fi
echo "PASS: rsockets"
