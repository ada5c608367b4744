#!/usr/bin/env bash
# perftest over rdma_cm (docs/cm.md): Debian's unmodified ib_write_bw, ib_send_lat and ib_read_bw
# with -R (QPs connected by the CM, no TCP exchange) on the drop-in librdmacm and libibverbs, two
# processes with their own uroce devices on two loopback addresses; 100 messages each, both sides
# ending with status 0 and their results line.
#
# perftest -R races itself, with any CM: it makes two rdma_cm connections on the same port, one to
# exchange its parameters and then the measured one, and after the exchange the client connects at
# once while the server only then creates, binds and listens on its second id; a REQ that comes
# first is rejected with reason 8 (invalid service ID), as by the kernel's CM. perftest 4.5-0.17's
# client then retries on ids it has already destroyed and crashes (later perftest recreates them).
# So a pair whose client was rejected with reason 8 is run again, server and client, on a new
# port (a client alone retried would reach the old server's second listener with its first
# connection: the two then disagree on what they connected, and the client's QP ends in
# RETRY_EXC). docs/cm.md has the race in detail.
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
command -v ib_write_bw >/dev/null || { echo "SKIP: perftest not installed"; exit 77; }

S=127.0.32.2 C=127.0.32.1
source "$(dirname "$0")/rdmacm_lib.sh"

# ---- perftest over rdma_cm (-R): the QPs connected by the CM, no TCP exchange --------------------
# Each pair moves 100 messages; both sides end with status 0 and print their results line.
port=7190
for tool in ib_write_bw ib_send_lat ib_read_bw; do
  for ((try = 1; try <= 20; try++)); do
    # stdbuf: perftest's line saying it waits (printed just before it listens) is the sure sign
    # that it got that far; its start can take seconds on a loaded machine, past the device's socket
    # appearing.
    serve $tool stdbuf -oL $tool -R -d uroces -p $port -n 100
    for ((waited = 0; waited < 100; waited++)); do
      grep -q "Waiting for client to connect" "$ABI_TMP/$tool.server" && break
      sleep 0.1
    done
    CLIENT_RC=0
    UROCE_DEVICES="urocec=$C" timeout -k 5 30 $tool -R -d urocec -p $port -n 100 $S \
      >"$ABI_TMP/$tool.client" 2>&1 || CLIENT_RC=$?
    port=$((port + 1))
    grep -q -e "REJECTED; error: 8" -e "Unexpected CM event bl blka 8" "$ABI_TMP/$tool.client" ||
      break
    kill -TERM "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
    echo "note: $tool -R: the client's REQ came before the server listened (REJ 8), try $try"
  done
  server_rc
  [[ $CLIENT_RC == 0 && $src == 0 ]] || { show $tool; abi_fail "$tool -R: client $CLIENT_RC, server $src"; }
  for side in server client; do
    grep -q "Data ex. method : rdma_cm" "$ABI_TMP/$tool.$side" &&
      grep -Eq "^ [0-9]+ +100 " "$ABI_TMP/$tool.$side" || { show $tool; abi_fail "$tool -R: $side results"; }
  done
  echo "ok   $tool -R -n 100"
done
echo "PASS"
