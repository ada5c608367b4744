#!/usr/bin/env bash
# Middleware over rdma_cm between two processes with their own uroce devices on two loopback
# addresses (docs/cm.md), each program unmodified:
#   qperf -cm1 rc_bw rc_lat: qperf's RC tests with the connection set up by rdma_cm (its control
#     channel is TCP; each side reports a figure in qperf's format);
#   rdma_xserver / rdma_xclient (rdmacm-utils), RC and XRC: the synchronous API with an SRQ on the
#     id (rdma_create_srq: an XRC SRQ in the device's XRC domain), an XRC_RECV QP from
#     rdma_get_request, a REQ of extended transport type XRC, the SRQ number in the REP's private
#     data read from id->event, 16 inline bytes sent to it; both sides end with status 0;
# (mckey, multicast, has its own script: rdmacm_mckey_test.sh.)
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
S=127.0.143.2 C=127.0.143.1
source "$(dirname "$0")/rdmacm_lib.sh"

# ---- qperf -cm1 ---------------------------------------------------------------------------------
if command -v qperf >/dev/null; then
  # qperf's server sends the client its rdma_cm port before it calls rdma_listen (cm_open_server
  # in qperf's rdma.c), so a REQ that comes first gets REJ 8 from uroce's CM, as it would from the
  # kernel's (where the window is far shorter than a loaded machine's scheduling delay). A run
  # rejected that way is retried with a fresh server: the old one still waits out its rejected
  # test, and a client that asked it for the next one timed out waiting for the port.
  for attempt in 1 2 3 4 5; do
    # qperf's server listens for its control channel on a TCP port (-lp) on every address.
    QPERF_PORT=$((19842 + attempt))
    UROCE_DEVICES="uroces=$S" timeout -k 5 60 qperf -lp $QPERF_PORT >"$ABI_TMP/qperf.server" 2>&1 &
    SERVER_PID=$!
    ABI_PIDS+=("$SERVER_PID")
    for ((waited = 0; waited < 200; waited++)); do
      ss -Htln 2>/dev/null | grep -q ":$QPERF_PORT " && break
      sleep 0.1
    done
    CLIENT_RC=0
    UROCE_DEVICES="urocec=$C" timeout -k 5 40 qperf -lp $QPERF_PORT -cm1 -t 1 $S rc_bw rc_lat \
      >"$ABI_TMP/qperf.client" 2>&1 || CLIENT_RC=$?
    kill -TERM "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
    grep -q "unexpected event from RDMA CM: Event rejected" "$ABI_TMP/qperf.client" || break
    echo "     qperf -cm1: attempt $attempt rejected (REQ before the server's rdma_listen); again"
  done
  [[ $CLIENT_RC == 0 ]] || { show qperf; abi_fail "qperf -cm1: client $CLIENT_RC"; }
  # Exactly the two tests' lines, each with its figure: nothing else (qperf prints errors there).
  /usr/bin/python3 - "$ABI_TMP/qperf.client" <<'PY' || { show qperf; abi_fail "qperf -cm1: output"; }
import re, sys
lines = [l.rstrip() for l in open(sys.argv[1]) if l.strip()]
pat = [r"rc_bw:", r"    bw  =  [0-9.]+ [KMG]?B/sec", r"rc_lat:", r"    latency  =  [0-9.]+ (ns|us|ms)"]
sys.exit(0 if len(lines) == 4 and all(re.fullmatch(p, l) for p, l in zip(pat, lines)) else 1)
PY
  echo "ok   qperf -cm1 rc_bw rc_lat"
else
  echo "skip qperf: not installed (Debian package qperf)"
fi
# ---- rdma_xserver / rdma_xclient ------------------------------------------------------------------
if command -v rdma_xserver >/dev/null; then
  for mode in r x; do
    serve xsrv$mode rdma_xserver -p 7481 -c $mode
    client xsrv$mode rdma_xclient -s $S -p 7481 -c $mode
    server_rc
    [[ $CLIENT_RC == 0 && $src == 0 ]] || { show xsrv$mode; abi_fail "rdma_xserver -c $mode: client $CLIENT_RC, server $src"; }
    diff <(printf 'rdma_xclient: start\nrdma_xclient: end 0\n') "$ABI_TMP/xsrv$mode.client" >&2 &&
      diff <(printf 'rdma_xserver: start\nrdma_xserver: end 0\n') "$ABI_TMP/xsrv$mode.server" >&2 ||
      { show xsrv$mode; abi_fail "rdma_xserver -c $mode: output"; }
    echo "ok   rdma_xserver / rdma_xclient -c $mode: end 0"
  done
else
  echo "skip rdma_xserver: not installed (Debian package rdmacm-utils)"
fi
echo "PASS"
