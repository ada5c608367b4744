#!/usr/bin/env bash
# perftest (Debian's package, unmodified) over the drop-in libibverbs between two processes on
# two loopback addresses, with -x 0 (GID 0, RoCEv2): ib_write_bw, ib_read_bw, ib_send_bw,
# ib_write_lat, ib_send_lat at the default size and with -a (every size 2 B .. 8 MiB). Fails if a
# tool exits non-zero, prints an error, or reports zero bandwidth.
# Usage: abi_perftest_test.sh <lib dir> [default|all]   (default sizes, or the -a sweeps)
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
mode=${2:-default}
abi_require ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_send_lat

# The two modes are separate ctest tests that may run at once: each has its own addresses.
if [[ $mode == default ]]; then
  S=127.0.22.2 C=127.0.22.1
else
  S=127.0.23.2 C=127.0.23.1
fi
port=18751

# Every result row ("  <bytes> <iterations> <numbers...>") must have a non-zero bandwidth
# (bw tools: BW average, column 4) or latency (lat tools: t_avg, column 6).
check_rows() {
  local name=$1 kind=$2 file=$3
  local rows
  rows=$(grep -E '^\s+[0-9]+\s+[0-9]+\s+[0-9.]+' "$file")
  [[ -n $rows ]] || abi_fail "$name: no result rows"
  local col=4
  [[ $kind == lat ]] && col=6
  echo "$rows" | awk -v c=$col -v n="$name" '
    { if ($c + 0 <= 0) { printf "zero result in %s: %s\n", n, $0; bad = 1 } }
    END { exit bad }' >&2 || abi_fail "$name: a zero result"
  echo "ok   $name: $(echo "$rows" | wc -l) sizes; last: $(echo "$rows" | tail -1 | tr -s ' ')"
}

run() {  # run NAME KIND TOOL ARGS...
  local name=$1 kind=$2 tool=$3
  shift 3
  abi_run_pair "$name" 240 $S $C \
    "$tool" -x 0 -p $port "$@" -- "$tool" -x 0 -p $port "$@" $S
  check_rows "$name" "$kind" "$ABI_TMP/$name.client"
  port=$((port + 1))
}

if [[ $mode == default ]]; then
  run write_bw bw ib_write_bw
  run read_bw bw ib_read_bw
  run send_bw bw ib_send_bw
  run write_lat lat ib_write_lat
  run send_lat lat ib_send_lat
else
  # Fewer iterations per size keep the sweeps of 23 sizes within CI time (bandwidth needs enough
  # messages that perftest's two decimals do not round a small size's MB/s to 0.00).
  port=18771
  run write_bw_all bw ib_write_bw -a -n 100
  run read_bw_all bw ib_read_bw -a -n 100
  run send_bw_all bw ib_send_bw -a -n 100
  run write_lat_all lat ib_write_lat -a -n 20
  run send_lat_all lat ib_send_lat -a -n 20
fi
echo "PASS"
