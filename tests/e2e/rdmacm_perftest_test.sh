#!/usr/bin/env bash
# perftest over rdma_cm (docs/cm.md): Debian's unmodified ib_write_bw, ib_send_lat and ib_read_bw
# with -R (QPs connected by the CM, no TCP exchange) on the drop-in librdmacm and libibverbs, two
# processes with their own uroce devices on two loopback addresses; 100 messages each, both sides
# ending with status 0 and their results line.
# A check run by hand (docs/cm.md), not in ctest: on a loaded machine the client's REQ can come
# before perftest listens (REJ 8), and a retried client then sometimes ends with "Bad wc status
# 12" (issue 14's notes).
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
command -v ib_write_bw >/dev/null || { echo "SKIP: perftest not installed"; exit 77; }

S=127.0.32.2 C=127.0.32.1
PIDS=()

# serve NAME CMD...: starts CMD with the server's device and waits until its device is open
# (its UDP socket on $S:4791), then a moment for it to listen; the client retries a REJ 8 (rping's
# "REJECTED, error 8", perftest's "REJECTED; error: 8" or "Unexpected CM event bl blka 8"), or
# udaddy's SIDR_REP status 1 ("UNREACHABLE, error: 1"), in
# case it still came first.
serve() {
  local name=$1
  shift
  UROCE_DEVICES="uroces=$S" timeout -k 5 30 "$@" >"$ABI_TMP/$name.server" 2>&1 &
  SERVER_PID=$!
  ABI_PIDS+=("$SERVER_PID")
  local waited=0
  while ((waited < 200)); do
    ss -Huan 2>/dev/null | grep -q "$S:4791" && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
    waited=$((waited + 1))
  done
  sleep 0.2
}

client() {  # client NAME CMD...: runs it with the client's device; its exit code in $CLIENT_RC
  local name=$1 try
  shift
  for try in 1 2 3 4 5 6 7 8 9 10; do
    CLIENT_RC=0
    UROCE_DEVICES="urocec=$C" timeout -k 5 30 "$@" >"$ABI_TMP/$name.client" 2>&1 || CLIENT_RC=$?
    grep -q -e "REJECTED, error 8" -e "REJECTED; error: 8" -e "Unexpected CM event bl blka 8" \
      -e "UNREACHABLE, error: 1" "$ABI_TMP/$name.client" ||
      return 0
    sleep 0.5
  done
}

server_rc() {  # waits for the server; its exit code in $src
  src=0
  wait "$SERVER_PID" || src=$?
}

show() {
  echo "---- $1 server" >&2; cat "$ABI_TMP/$1.server" >&2
  echo "---- $1 client" >&2; cat "$ABI_TMP/$1.client" >&2
}

# rping's data lines (64-byte buffer): "rdma-ping-N: " and then the characters 'A'..'z' from 'A' + N
# on, wrapping, up to the closing NUL.
expected_pings() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys
prefix, count = sys.argv[1], int(sys.argv[2])
for n in range(count):
    head = "rdma-ping-%d: " % n
    tail = "".join(chr(65 + (n + i) % 58) for i in range(64 - 1 - len(head)))
    print("%sping data: %s%s" % (prefix, head, tail))
PY
}

# ---- perftest over rdma_cm (-R): the QPs connected by the CM, no TCP exchange --------------------
# Each pair moves 100 messages; both sides end with status 0 and print their results line.
port=7190
for tool in ib_write_bw ib_send_lat ib_read_bw; do
  # stdbuf: perftest's line saying it listens (printed after rdma_listen) is the sure sign; its
  # start can take seconds on a loaded machine, past the device's socket appearing.
  serve $tool stdbuf -oL $tool -R -d uroces -p $port -n 100
  for ((waited = 0; waited < 100; waited++)); do
    grep -q "Waiting for client to connect" "$ABI_TMP/$tool.server" && break
    sleep 0.1
  done
  client $tool $tool -R -d urocec -p $port -n 100 $S
  server_rc
  [[ $CLIENT_RC == 0 && $src == 0 ]] || { show $tool; abi_fail "$tool -R: client $CLIENT_RC, server $src"; }
  for side in server client; do
    grep -q "Data ex. method : rdma_cm" "$ABI_TMP/$tool.$side" &&
      grep -Eq "^ [0-9]+ +100 " "$ABI_TMP/$tool.$side" || { show $tool; abi_fail "$tool -R: $side results"; }
  done
  echo "ok   $tool -R -n 100"
  port=$((port + 1))
done
echo "PASS"
