#!/usr/bin/env bash
# 1,000 rdma_cm connections at a time, established and torn down, twice, leak nothing (docs/cm.md):
# Debian's unmodified cmtime on the drop-in librdmacm and libibverbs. One long-lived cmtime server
# (it serves until killed) and two client runs of `cmtime -c 1000` one after the other, each
# creating 1,000 ids, resolving them, creating their QPs, connecting, disconnecting and destroying
# them. Checked:
#   - both clients end with status 0 and every step done for all 1,000 connections;
#   - each client's device has no QP or MR left when it exits (UROCE_STATS's qps_in_use,
#     mrs_in_use) and exactly 2 CQs: cmtime passes one qp_init_attr to all its rdma_create_qp
#     calls, which (rdma-core's too) write the first id's CQs into it, so every later QP shares
#     them and their destruction with the first QP fails with EBUSY, as with rdma-core;
#   - the server's open file descriptors are the same before the first client, after it and after
#     the second, and its threads too: its 2,000 connections' ids, QPs, CQs and channels are gone.
# cmtime prints the time of each step over all connections (docs/cm.md has the rate).
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
command -v cmtime >/dev/null || { echo "SKIP: cmtime not installed (Debian package rdmacm-utils)"; exit 77; }

S=127.0.34.2 C=127.0.34.1 PORT=7350 CONNECTIONS=1000
source "$(dirname "$0")/rdmacm_lib.sh"

serve cmtime cmtime -b $S -p $PORT
server_fds() { ls "/proc/$SERVER_PID/fd" 2>/dev/null | wc -l; }
server_threads() { ls "/proc/$SERVER_PID/task" 2>/dev/null | wc -l; }
# The server tears a connection down when its DISCONNECTED comes, on its own thread, a moment
# after the client is done: waits until its fd count has stopped changing.
settled_fds() {
  local last=-1 now i
  for ((i = 0; i < 50; i++)); do
    now=$(server_fds)
    [[ $now == "$last" ]] && break
    last=$now
    sleep 0.2
  done
  echo "$now"
}
fds_before=$(settled_fds)
threads_before=$(server_threads)
[[ $fds_before -gt 0 ]] || { show cmtime; abi_fail "cmtime server did not start"; }

for run in 1 2; do
  CLIENT_RC=0
  UROCE_STATS="$ABI_TMP/stats.$run" UROCE_DEVICES="urocec=$C" timeout -k 5 60 \
    cmtime -s $S -p $PORT -c $CONNECTIONS >"$ABI_TMP/cmtime.client" 2>&1 || CLIENT_RC=$?
  [[ $CLIENT_RC == 0 ]] || { show cmtime; abi_fail "cmtime client run $run: status $CLIENT_RC"; }
  for step in "create id" "resolve addr" "resolve route" "create qp" "connect" "disconnect" "destroy"; do
    grep -Eq "^$step *: +[0-9.]+ " "$ABI_TMP/cmtime.client" ||
      { show cmtime; abi_fail "cmtime client run $run: no '$step' line"; }
  done
  for expected in qps_in_use=0 cqs_in_use=2 mrs_in_use=0; do
    counter=${expected%=*}
    value=$(awk -v c="$counter" '{ split($1, name, "."); if (name[2] == c) print $2 }' \
      "$ABI_TMP/stats.$run")
    [[ $value == "${expected#*=}" ]] ||
      abi_fail "cmtime client run $run: $counter is '$value' at exit, not ${expected#*=}"
  done
  grep "^connect " "$ABI_TMP/cmtime.client"
  # Past the server's timewait (1 s): the CM holds at most 1,024 records, timewait included
  # (CmConfig::max_connections), and this run left 1,000.
  sleep 1.5
  fds_after=$(settled_fds)
  [[ $fds_after == "$fds_before" ]] ||
    abi_fail "cmtime server: $fds_after open fds after run $run, $fds_before before the first"
  threads_after=$(server_threads)
  [[ $threads_after == "$threads_before" ]] ||
    abi_fail "cmtime server: $threads_after threads after run $run, $threads_before before"
  echo "ok   cmtime -c $CONNECTIONS run $run: status 0, no QP or MR left; server fds $fds_after"
done
kill -TERM "$SERVER_PID" 2>/dev/null
echo "PASS"
