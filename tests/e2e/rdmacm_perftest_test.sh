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
source "$(dirname "$0")/rdmacm_lib.sh"

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
