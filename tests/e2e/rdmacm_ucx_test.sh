#!/usr/bin/env bash
# UCX's sockaddr connection establishment over rdma_cm (docs/cm.md): UCX 1.13's rdmacm connection
# manager (the only one allowed: UCX_SOCKADDR_TLS_PRIORITY=rdmacm) on the drop-in librdmacm,
# between two processes with their own uroce devices on two loopback addresses. The program is
# UCX's own io_demo (Debian's ucx-utils, unmodified): a UCP listener on a socket address, a
# client that connects to it with ucp_ep_create(sockaddr), then 200 reads and writes of 1-8 KiB
# with its data integrity check (-q) over rc_verbs. Both sides must run clean, the client must
# end with status OK, and uroce's counters must show the payload crossed the devices.
# Usage: rdmacm_ucx_test.sh LIB_DIR UROCE_BINARY
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
UROCE=${2:?usage: $0 <lib dir> <uroce binary>}
source "$(dirname "$0")/ucx_lib.sh"
command -v io_demo >/dev/null || { echo "SKIP: io_demo not installed (Debian package ucx-utils)"; exit 77; }
ucx_require_node "$UROCE"

S=127.0.144.2 C=127.0.144.1
PORT=$(ucx_free_port 13470)
export UCX_SOCKADDR_TLS_PRIORITY=rdmacm UCX_TLS=rc_verbs,ud_verbs:aux UCX_NET_DEVICES=uroce0:1
export UROCE_STATS="$ABI_TMP/stats"

UROCE_DEVICES="uroce0=$S" timeout -k 5 60 io_demo -p "$PORT" -q -d 1024:8192 >"$ABI_TMP/io.server" 2>&1 &
SERVER_PID=$!
ABI_PIDS+=("$SERVER_PID")
for ((waited = 0; waited < 300; waited++)); do
  grep -q "started listener" "$ABI_TMP/io.server" && break
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
show() {
  echo "---- server" >&2; cat "$ABI_TMP/io.server" >&2
  echo "---- client" >&2; cat "$ABI_TMP/io.client" >&2
}
CLIENT_RC=0
UROCE_DEVICES="uroce0=$C" timeout -k 5 60 io_demo -p "$PORT" -q -o read,write -d 1024:8192 -i 200 \
  -c 3 "$S" >"$ABI_TMP/io.client" 2>&1 || CLIENT_RC=$?
# The server runs until stopped; its device's counters are written when it exits.
kill -INT "$SERVER_PID" 2>/dev/null
wait "$SERVER_PID" 2>/dev/null
[[ $CLIENT_RC == 0 ]] || { show; abi_fail "io_demo client: exit $CLIENT_RC"; }
grep -q "Connected to server \[0\] $S after 1 attempts" "$ABI_TMP/io.client" &&
  grep -q "Client exit with status 'OK'" "$ABI_TMP/io.client" ||
  { show; abi_fail "io_demo client: no connection or not OK"; }
grep -q "got new connection request .* from client $C:" "$ABI_TMP/io.server" ||
  { show; abi_fail "io_demo server: no connection request from $C"; }
ucx_check_clean "$ABI_TMP/io.server" "$ABI_TMP/io.client"
# 200 operations of at least 1 KiB, reads and writes: at least 100 KiB cross one way or the other.
ucx_check_counters "$ABI_TMP/stats" 51200
echo "ok   io_demo over UCX's rdmacm connection manager: 200 verified reads and writes"
echo "PASS"
