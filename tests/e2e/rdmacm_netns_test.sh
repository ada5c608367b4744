#!/usr/bin/env bash
# rdma_cm across two network namespaces joined by a veth pair (docs/cm.md), for the programs that
# skip loopback interfaces: libfabric's verbs provider (Debian's libfabric-bin, unmodified) on the
# drop-in librdmacm and libibverbs, one uroce device per namespace on its veth address.
#   fi_info -p verbs: lists the uroce device's FI_EP_MSG domain (found through rdma_bind_addr on
#     the interface's address) with the FI_PROTO_RDMA_CM_IB_RC protocol, and the FI_EP_RDM
#     endpoints ofi_rxm builds on it (FI_PROTO_RXM);
#   fi_pingpong -p verbs -e msg: 100 64-byte ping-pongs over an RC QP connected by rdma_cm
#     (rdma_getaddrinfo from hints, rdma_migrate_id, RDMA_MAX_RESP_RES), both sides reporting
#     100 sent and 100 acknowledged;
#   fi_pingpong -p "verbs;ofi_rxm" -e rdm: the same over ofi_rxm's reliable datagram endpoints,
#     which connect RC QPs with rdma_cm on first use and open a CQ of 2^18 entries per endpoint.
# Needs root for the namespaces: skipped (77) otherwise.
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
for tool in fi_info fi_pingpong; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed (Debian package libfabric-bin)"; exit 77; }
done
# netns_lib.sh's names for the helpers abi_lib.sh has.
PIDS=()
cleanup_bench() { abi_cleanup; }
fail() { abi_fail "$@"; }
source "$(dirname "$0")/netns_lib.sh"
A=198.18.31.1 B=198.18.31.2
make_netns_pair cmx "$A" "$B"

in_a() { ip netns exec "$NS_A" env UROCE_DEVICES="urocea=$A" "$@"; }
in_b() { ip netns exec "$NS_B" env UROCE_DEVICES="uroceb=$B" "$@"; }

# ---- fi_info: the msg and rdm endpoints ---------------------------------------------------------
in_a timeout -k 5 30 fi_info -p verbs >"$ABI_TMP/fi_info" 2>&1 ||
  { cat "$ABI_TMP/fi_info" >&2; abi_fail "fi_info -p verbs failed"; }
grep -q "domain: urocea$" "$ABI_TMP/fi_info" && grep -q "type: FI_EP_MSG" "$ABI_TMP/fi_info" &&
  grep -q "protocol: FI_PROTO_RDMA_CM_IB_RC" "$ABI_TMP/fi_info" ||
  { cat "$ABI_TMP/fi_info" >&2; abi_fail "fi_info: no FI_EP_MSG domain urocea"; }
# One "provider:" block per endpoint: ofi_rxm's on the device's msg domain.
awk '/^provider:/ {p = $2} /domain:/ {d = $2} /type:/ {t = $2}
     /protocol:/ && p == "verbs;ofi_rxm" && d == "urocea" && t == "FI_EP_RDM" && $2 == "FI_PROTO_RXM" {n++}
     END {exit n > 0 ? 0 : 1}' "$ABI_TMP/fi_info" ||
  { cat "$ABI_TMP/fi_info" >&2; abi_fail "fi_info: no verbs;ofi_rxm FI_EP_RDM endpoint on urocea"; }
echo "ok   fi_info -p verbs: urocea FI_EP_MSG (FI_PROTO_RDMA_CM_IB_RC) and FI_EP_RDM (verbs;ofi_rxm)"

# ---- fi_pingpong ---------------------------------------------------------------------------------
show() {
  echo "---- server" >&2; cat "$ABI_TMP/pp.server" >&2
  echo "---- client" >&2; cat "$ABI_TMP/pp.client" >&2
}
# pingpong PROVIDER ENDPOINT PORT: 100 64-byte ping-pongs, both sides reporting all of them.
pingpong() {
  local prov=$1 ep=$2 port=$3
  in_b timeout -k 5 30 fi_pingpong -p "$prov" -e "$ep" -B "$port" -I 100 -S 64 >"$ABI_TMP/pp.server" 2>&1 &
  SERVER_PID=$!
  ABI_PIDS+=("$SERVER_PID")
  # The server listens for its control connection on TCP before anything else.
  for ((waited = 0; waited < 200; waited++)); do
    ip netns exec "$NS_B" ss -Htln 2>/dev/null | grep -q ":$port " && break
    sleep 0.1
  done
  CLIENT_RC=0
  in_a timeout -k 5 30 fi_pingpong -p "$prov" -e "$ep" -P "$port" -I 100 -S 64 "$B" >"$ABI_TMP/pp.client" 2>&1 ||
    CLIENT_RC=$?
  src=0
  wait "$SERVER_PID" || src=$?
  [[ $CLIENT_RC == 0 && $src == 0 ]] || { show; abi_fail "fi_pingpong -p '$prov' -e $ep: client $CLIENT_RC, server $src"; }
  for side in server client; do
    grep -Eq "^64 +100 +=100 " "$ABI_TMP/pp.$side" || { show; abi_fail "fi_pingpong -p '$prov' -e $ep: $side results"; }
  done
  echo "ok   fi_pingpong -p '$prov' -e $ep: 100 x 64 bytes"
}
pingpong verbs msg 7290
pingpong "verbs;ofi_rxm" rdm 7291
echo "PASS"
