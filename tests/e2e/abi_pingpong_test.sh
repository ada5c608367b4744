#!/usr/bin/env bash
# ibv_rc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong (Debian's ibverbs-utils, unmodified)
# between two processes, each with its own uroce device on its own loopback address: default and
# non-default sizes, and event mode (-e, completion channels).
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
abi_require ibv_rc_pingpong ibv_ud_pingpong ibv_srq_pingpong

S=127.0.21.2 C=127.0.21.1
port=18721
iters=200
run() {  # run NAME TOOL ARGS...
  local name=$1 tool=$2
  shift 2
  abi_run_pair "$name" 60 $S $C \
    "$tool" -g 0 -p $port -n $iters "$@" -- "$tool" -g 0 -p $port -n $iters "$@" $S
  grep -q "$iters iters in" "$ABI_TMP/$name.client" || abi_fail "$name: no result line"
  grep -q "$iters iters in" "$ABI_TMP/$name.server" || abi_fail "$name: no server result line"
  echo "ok   $name: $(grep 'iters in' "$ABI_TMP/$name.client")"
  port=$((port + 1))
}

run rc_default ibv_rc_pingpong
run rc_small ibv_rc_pingpong -s 1 -r 16
run rc_large ibv_rc_pingpong -s 65536 -m 1024
run rc_event ibv_rc_pingpong -e
run ud_default ibv_ud_pingpong
run ud_small ibv_ud_pingpong -s 64
run ud_event ibv_ud_pingpong -e
run srq_default ibv_srq_pingpong
run srq_two_qps ibv_srq_pingpong -q 2 -s 1024
run srq_event ibv_srq_pingpong -e
echo "PASS"
