#!/usr/bin/env bash
# ucx_perftest between two processes over one UCX verbs transport on uroce (127.0.40.2 and .3):
# put_bw, am_bw and put_lat. rc_verbs runs UCX's transport-level tests (put zero-copy, am
# buffered copy, put short); ud_verbs has no RDMA put, so it runs the UCP-level tests, where UCX
# carries puts as messages. Each run must print its "Final:" line without a UCX error or
# warning, and uroce's counters (UROCE_STATS) must show both processes received the data.
set -uo pipefail
HERE=$(dirname "$0")
usage="usage: $0 <lib dir> <uroce binary> rc_verbs|ud_verbs"
source "$HERE/abi_lib.sh" "${1:?$usage}"
source "$HERE/ucx_lib.sh"
UROCE=${2:?$usage}
TL=${3:?$usage}
abi_require ucx_perftest
ucx_require_node "$UROCE"
export UCX_NET_DEVICES=uroceucx:1 UCX_TLS=$TL
case $TL in
  rc_verbs)
    BASE_PORT=13400
    tests=("-d uroceucx:1 -x rc_verbs -t put_bw -D zcopy -s 65536"
      "-d uroceucx:1 -x rc_verbs -t am_bw -D bcopy -s 4096"
      "-d uroceucx:1 -x rc_verbs -t put_lat -s 8") ;;
  ud_verbs)
    BASE_PORT=13500
    tests=("-t ucp_put_bw -s 65536" "-t ucp_am_bw -s 4096" "-t ucp_put_lat -s 8") ;;
  *) abi_fail "$usage" ;;
esac

i=0
for t in "${tests[@]}"; do
  i=$((i + 1))
  stats=$ABI_TMP/stats.$i
  PORT=$(ucx_free_port $BASE_PORT)
  # shellcheck disable=SC2086  # $t is a list of options
  UROCE_STATS=$stats abi_run_pair "perf$i" 60 127.0.40.2 127.0.40.3 \
    env UROCE_DEVICES=uroceucx=127.0.40.2 ucx_perftest -p $PORT -- \
    env UROCE_DEVICES=uroceucx=127.0.40.3 ucx_perftest 127.0.40.2 -p $PORT -n 200 $t
  ucx_check_clean "$ABI_TMP/perf$i.server" "$ABI_TMP/perf$i.client"
  grep -q '^Final:' "$ABI_TMP/perf$i.client" ||
    { cat "$ABI_TMP/perf$i.client" >&2; abi_fail "no Final line: $t"; }
  # 200 iterations of the message size each way at least once (the server echoes or acks).
  size=${t##*-s }
  ucx_check_counters "$stats" $((200 * size))
  echo "$TL $t: $(grep '^Final:' "$ABI_TMP/perf$i.client")"
done
echo "PASS"
