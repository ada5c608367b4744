#!/usr/bin/env bash
# rdma_cm end to end (docs/cm.md): Debian's unmodified rdmacm-utils on the drop-in librdmacm and
# libibverbs, two processes with their own uroce devices on two loopback addresses, connecting
# through CM MADs on each device's GSI QP.
#   rping -s / rping -c -C 10 -v: ten verified ping-pongs (SEND, RDMA READ, RDMA WRITE), the
#     client's and the server's data lines exact;
#   rping against a device with no listener on the port: REJECTED with status 8 (invalid service
#     ID), the line rping prints against a hardware NIC;
#   rdma_server / rdma_client: the synchronous API (rdma_getaddrinfo, rdma_create_ep,
#     rdma_get_request, rdma_accept, rdma_connect), both ending with status 0;
#   rping over IPv6: two addresses of 2001:db8:31::/64 on the loopback of a network namespace of
#     its own (where one can be made; the part is skipped with a note otherwise);
#   ucmatose: four connections on one channel, ten messages each, the server disconnecting, in
#     the RDMA_PS_TCP and RDMA_PS_IB port spaces;
#   udaddy: two RDMA_PS_UDP ids resolving the server's UD QP with SIDR, five messages each way.
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
for tool in rping rdma_server rdma_client ucmatose; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed (Debian package rdmacm-utils)"; exit 77; }
done

S=127.0.31.2 C=127.0.31.1
source "$(dirname "$0")/rdmacm_lib.sh"

# ---- rping: ten verified ping-pongs -------------------------------------------------------------
serve rping rping -s -a $S -p 7174 -C 10 -v
client rping rping -c -a $S -p 7174 -C 10 -v
server_rc
[[ $CLIENT_RC == 0 && $src == 0 ]] || { show rping; abi_fail "rping: client $CLIENT_RC, server $src"; }
# Besides the data lines the client prints only "client DISCONNECT EVENT..." when the DREP beats
# its exit (as with a hardware NIC: a race).
diff <(expected_pings "" 10) <(grep -v '^client DISCONNECT EVENT\.\.\.$' "$ABI_TMP/rping.client") >&2 ||
  { show rping; abi_fail "rping: client output"; }
diff <(expected_pings "server " 10) <(grep "^server ping data" "$ABI_TMP/rping.server") >&2 ||
  { show rping; abi_fail "rping: server data lines"; }
echo "ok   rping -C 10 -v: 10 verified ping-pongs"

# ---- rping with nobody listening on the port: REJ invalid service ID -----------------------------
serve other rping -s -a $S -p 7175
CLIENT_RC=0
UROCE_DEVICES="urocec=$C" timeout -k 5 30 rping -c -a $S -p 7176 -C 1 -v \
  >"$ABI_TMP/norej.client" 2>&1 || CLIENT_RC=$?
kill -TERM "$SERVER_PID" 2>/dev/null
wait "$SERVER_PID" 2>/dev/null
grep -qx "cma event RDMA_CM_EVENT_REJECTED, error 8" "$ABI_TMP/norej.client" ||
  { cat "$ABI_TMP/norej.client" >&2; abi_fail "rping with no listener: no REJECTED with status 8"; }
[[ $CLIENT_RC != 0 ]] || abi_fail "rping with no listener exited 0"
echo "ok   rping with no listener: RDMA_CM_EVENT_REJECTED, error 8"

# ---- rdma_server / rdma_client -----------------------------------------------------------------
serve sync rdma_server -s $S -p 7177
client sync rdma_client -s $S -p 7177
server_rc
[[ $CLIENT_RC == 0 && $src == 0 ]] || { show sync; abi_fail "rdma_client $CLIENT_RC, rdma_server $src"; }
diff <(printf 'rdma_server: start\nrdma_server: end 0\n') "$ABI_TMP/sync.server" >&2 ||
  { show sync; abi_fail "rdma_server output"; }
diff <(printf 'rdma_client: start\nrdma_client: end 0\n') "$ABI_TMP/sync.client" >&2 ||
  { show sync; abi_fail "rdma_client output"; }
echo "ok   rdma_server / rdma_client: end 0"

# ---- ucmatose: several connections ----------------------------------------------------------------
port=7178
for ps in tcp ib; do
  serve ucmatose_$ps ucmatose -b $S -p $port -P $ps -c 4 -C 10
  client ucmatose_$ps ucmatose -s $S -p $port -P $ps -c 4 -C 10
  server_rc
  [[ $CLIENT_RC == 0 && $src == 0 ]] ||
    { show ucmatose_$ps; abi_fail "ucmatose -P $ps: client $CLIENT_RC, server $src"; }
  diff <(printf '%s\n' "cmatose: starting server" "initiating data transfers" "completing sends" \
    "receiving data transfers" "data transfers complete" "cmatose: disconnecting" "disconnected" \
    "test complete" "return status 0") "$ABI_TMP/ucmatose_$ps.server" >&2 ||
    { show ucmatose_$ps; abi_fail "ucmatose -P $ps: server output"; }
  diff <(printf '%s\n' "cmatose: starting client" "cmatose: connecting" "receiving data transfers" \
    "sending replies" "data transfers complete" "test complete" "return status 0") \
    "$ABI_TMP/ucmatose_$ps.client" >&2 || { show ucmatose_$ps; abi_fail "ucmatose -P $ps: client output"; }
  echo "ok   ucmatose -P $ps -c 4 -C 10"
  port=$((port + 1))
done
# ---- udaddy: RDMA_PS_UDP ids resolved with SIDR, UD QPs -------------------------------------------
if command -v udaddy >/dev/null; then
  serve udaddy udaddy -b $S -c 2 -C 5
  client udaddy udaddy -s $S -c 2 -C 5
  server_rc
  [[ $CLIENT_RC == 0 && $src == 0 ]] || { show udaddy; abi_fail "udaddy: client $CLIENT_RC, server $src"; }
  diff <(printf '%s\n' "udaddy: starting server" "receiving data transfers" "sending replies" \
    "data transfers complete" "test complete" "return status 0") "$ABI_TMP/udaddy.server" >&2 ||
    { show udaddy; abi_fail "udaddy: server output"; }
  diff <(printf '%s\n' "udaddy: starting client" "udaddy: connecting" "initiating data transfers" \
    "receiving data transfers" "data transfers complete" "test complete" "return status 0") \
    "$ABI_TMP/udaddy.client" >&2 || { show udaddy; abi_fail "udaddy: client output"; }
  echo "ok   udaddy -c 2 -C 5 (SIDR)"
fi
# ---- rping over IPv6, in a namespace with two IPv6 loopback addresses -----------------------------
NS=uroce-cm6-$$
if [[ $(id -u) -eq 0 ]] && command -v ip >/dev/null && ip netns add "$NS" 2>/dev/null; then
  trap 'ip netns del "$NS" 2>/dev/null; abi_cleanup' EXIT
  ip -n "$NS" link set lo up
  ip -n "$NS" -6 addr add 2001:db8:31::1/128 dev lo nodad
  ip -n "$NS" -6 addr add 2001:db8:31::2/128 dev lo nodad
  ip netns exec "$NS" env UROCE_DEVICES=uroces=2001:db8:31::2 timeout -k 5 30 \
    rping -s -a 2001:db8:31::2 -p 7180 -C 5 -v >"$ABI_TMP/rping6.server" 2>&1 &
  SERVER_PID=$!
  ABI_PIDS+=("$SERVER_PID")
  for ((waited = 0; waited < 200; waited++)); do
    ip netns exec "$NS" ss -Huan 2>/dev/null | grep -q "2001:db8:31::2\]:4791" && break
    sleep 0.1
  done
  sleep 0.2
  CLIENT_RC=0
  ip netns exec "$NS" env UROCE_DEVICES=urocec=2001:db8:31::1 timeout -k 5 30 \
    rping -c -a 2001:db8:31::2 -p 7180 -C 5 -v >"$ABI_TMP/rping6.client" 2>&1 || CLIENT_RC=$?
  server_rc
  [[ $CLIENT_RC == 0 && $src == 0 ]] || { show rping6; abi_fail "rping over IPv6: client $CLIENT_RC, server $src"; }
  diff <(expected_pings "" 5) <(grep -v '^client DISCONNECT EVENT\.\.\.$' "$ABI_TMP/rping6.client") >&2 ||
    { show rping6; abi_fail "rping6: client output"; }
  echo "ok   rping over IPv6 -C 5 -v"
else
  echo "note: no network namespace here, rping over IPv6 not run"
fi
echo "PASS"
