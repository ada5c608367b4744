#!/usr/bin/env bash
# One run of uroce's benchmarks on this machine (see bench/README.md):
#   1. the raw UDP ceiling (bench/udp_ceiling): one datagram per system call, sendmmsg/recvmmsg,
#      UDP GSO/GRO, the same through uroce's UdpLink, and busy-polling ping-pong latency;
#   2. what users would pick instead: TCP (qperf tcp_bw/tcp_lat) and UCX over TCP (ucx_perftest
#      with UCX_TLS=tcp: put bandwidth and latency);
#   3. uroce bench (write/read/send bandwidth at 64 KiB and 1 MiB, message rate at 8 B, latency
#      at 8 B and 4 KiB, the 8 B median and 99th percentile), each as a ratio to the ceiling;
#   4. bandwidth against the run's highest ceiling;
#   5. the drop-in path: perftest on the drop-in libibverbs against `uroce bench` for the same
#      operation and size, interleaved, with the ratio drop-in / native (bench/abi_path.sh; needs
#      perftest and the libraries in BUILD/lib);
#   6. the fabric simulator on htsim's scenario beside htsim (bench/htsim_compare.sh; SIM=0 skips).
# Everything runs on the same two addresses, A and B.
#
# Usage: bench/run.sh [BUILD_DIR]   (default build/release; built here if udp_ceiling is absent)
# Environment: A, B (addresses, default 127.0.0.1 and 127.0.0.2), SECONDS_EACH (default 2),
#   REPEAT (runs of each figure, ceilings and uroce alike; the best is kept; default 3), UROCE
#   (the uroce binary).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
A=${A:-127.0.0.1}
B=${B:-127.0.0.2}
SECS=${SECONDS_EACH:-2}
REPEAT=${REPEAT:-3}
UROCE=${UROCE:-$BUILD/tools/uroce}
CEIL=$BUILD/bench/udp_ceiling
MTU_DGRAM=4150  # a 4096-byte payload with BTH, RETH, ImmDt and ICRC, rounded up

if [[ ! -x $CEIL ]]; then
  echo "# building udp_ceiling in $BUILD"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
    ninja -C "$BUILD" -j2 udp_ceiling >/dev/null || { echo "build failed"; exit 1; }
fi

declare -A FIG  # figures by name, for the ratios at the end
started=()
cleanup() { for p in "${started[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
lower_than() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
# best NAME FIELD max|min CMD...: runs CMD REPEAT times, keeps the best FIELD value (and, for a
# ping-pong, the lowest 99th percentile as NAME_p99).
best() {
  local name=$1 key=$2 dir=$3; shift 3
  local bestv="" v line p99 bestp99=""
  for ((i = 0; i < REPEAT; i++)); do
    line=$("$@" 2>&1 | tail -1)
    v=$(echo "$line" | field "$key")
    [[ -z $v ]] && { echo "  $name: failed: $line"; continue; }
    if [[ -z $bestv ]] || awk -v a="$v" -v b="$bestv" -v d="$dir" \
      'BEGIN { exit !((d == "max" && a > b) || (d == "min" && a < b)) }'; then bestv=$v; fi
    p99=$(echo "$line" | field half_rtt_p99_us)
    [[ -n $p99 ]] && { [[ -z $bestp99 ]] || lower_than "$p99" "$bestp99"; } && bestp99=$p99
  done
  FIG[$name]=$bestv
  if [[ -n $bestp99 ]]; then
    FIG[${name}_p99]=$bestp99
    printf '  %-34s %s %s, p99 %s\n' "$name" "${bestv:-n/a}" "$key" "$bestp99"
  else
    printf '  %-34s %s %s\n' "$name" "${bestv:-n/a}" "$key"
  fi
}

echo "# uroce benchmarks: $(date -u +%FT%TZ), $(uname -r), $(nproc) cores, A=$A B=$B," \
  "${SECS}s per figure, best of $REPEAT; load: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "## 1. UDP ceiling ($MTU_DGRAM-byte datagrams unless noted)"
for mode in single mmsg gso link-single link-mmsg link-gso link-gso-gather; do  # link-*: UdpLink
  best "$(echo "${mode/link-/link_}" | tr - _)" gbps max $CEIL --mode $mode --size $MTU_DGRAM \
    --seconds "$SECS" --a "$A" --b "$B"
done
# Message-rate ceiling: the datagram of an 8-byte RoCE SEND (BTH 12 + 8 + ICRC 4).
for mode in mmsg gso link-gso; do
  best "${mode/link-/link_}_24B" mpps max $CEIL --mode $mode --size 24 --seconds "$SECS" --a "$A" --b "$B"
done
# Ping-pong: the median half round trip (compared with uroce's median) and its 99th percentile.
for size in 8 4096; do
  best "udp_pingpong_${size}B" half_rtt_median_us min \
    $CEIL --mode pingpong --size $size --seconds "$SECS" --a "$A" --b "$B"
  best "link_pingpong_${size}B" half_rtt_median_us min \
    $CEIL --mode link-pingpong --size $((size + 16)) --seconds "$SECS" --a "$A" --b "$B"
done

echo "## 2. What users would pick instead"
QPORT=19765
if command -v qperf >/dev/null; then
  qperf --listen_port $QPORT >/dev/null 2>&1 &
  started+=($!)
  sleep 0.5
  for size in 65536 1048576; do
    v=$(qperf "$B" --listen_port $QPORT -t "$SECS" -ub -m $size tcp_bw 2>&1 | sed -n 's/.*bw *= *\([0-9.]*\) Gb\/sec.*/\1/p')
    FIG[tcp_bw_$size]=$v
    printf '  %-34s %s gbps\n' "tcp_bw (qperf, $size B)" "${v:-n/a}"
  done
  for size in 8 4096; do
    v=$(qperf "$B" --listen_port $QPORT -t "$SECS" -m $size tcp_lat 2>&1 | sed -n 's/.*latency *= *\([0-9.]*\) us.*/\1/p')
    FIG[tcp_lat_$size]=$v
    printf '  %-34s %s us (half round trip)\n' "tcp_lat (qperf, $size B)" "${v:-n/a}"
  done
else
  echo "  qperf: not installed (apt-get install qperf)"
fi

if command -v ucx_perftest >/dev/null; then
  UPORT=13337
  # ucx_perftest's server answers one test and exits, so each test starts its own.
  # It runs inside $(...), a subshell, so it stops its own server rather than leave it to the trap.
  ucx() {
    UCX_TLS=tcp UCX_NET_DEVICES=lo ucx_perftest -p $UPORT >/dev/null 2>&1 &
    local server=$!
    sleep 1
    UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 60 ucx_perftest "$B" -p $UPORT "$@" 2>&1 | awk '/^Final:/ { print }'
    kill $server 2>/dev/null
    wait $server 2>/dev/null
  }
  for size in 65536 1048576; do
    iters=$((size > 65536 ? 2000 : 20000))
    line=$(ucx -t ucp_put_bw -s $size -n $iters)
    # Final: iterations, overhead 50%/avg/overall, MB/s avg/overall, msg/s avg/overall
    v=$(echo "$line" | awk '{ printf "%.2f", $7 * 8 * 1048576 / 1e9 }')
    FIG[ucx_bw_$size]=$v
    printf '  %-34s %s gbps\n' "ucx put_bw (tcp, $size B)" "${line:+$v}"
  done
  for size in 8 4096; do
    line=$(ucx -t ucp_put_lat -s $size -n 10000)
    v=$(echo "$line" | awk '{ print $3 }')
    FIG[ucx_lat_$size]=$v
    printf '  %-34s %s us (half round trip, median)\n' "ucx put_lat (tcp, $size B)" "${line:+$v}"
  done
else
  echo "  ucx_perftest: not installed (apt-get install ucx-utils)"
fi

echo "## 3. uroce bench, as a ratio to the UDP ceiling"
# ==== SLOTS for `uroce bench` ====
# Each figure is one `uroce bench` client run against a fresh server, both on the addresses the
# ceiling used, at the ceiling's datagram size (MTU 4096), without data verification (the tests
# verify; this measures), and the figure is read from the client's JSON.
UPORT_BENCH=18515
# uroce_fig TEST MODE SIZE JSON_KEY [EXTRA...]: prints value=<number>.
uroce_fig() {
  local test=$1 mode=$2 size=$3 key=$4; shift 4
  UPORT_BENCH=$((UPORT_BENCH + 1))
  $UROCE bench --server --addr "$A" -p $UPORT_BENCH --accept-timeout 20 >/dev/null 2>&1 &
  local server=$!
  local json=""
  for ((try = 0; try < 50; try++)); do  # the server needs a moment to listen
    json=$($UROCE bench --client --addr "$B" --peer "$A" -p $UPORT_BENCH "$test" $mode -s "$size" \
      -D "$SECS" -m 4096 --no-verify --json - "$@" 2>/dev/null) && break
    json=""
    sleep 0.1
  done
  wait $server 2>/dev/null
  [[ -n $json ]] && echo "$json" | python3 -c \
    "import json, sys; print('value=%s' % json.load(sys.stdin)['results'][0]['$key'])"
}
uroce_cmd() {  # NAME -> the command for that figure
  case $1 in
    write_bw_*) echo "uroce_fig write '' ${1#write_bw_} bw_avg_gbps" ;;
    # The same WRITEs as FIRST/MIDDLE/LAST on the wire (the default is a WRITE ONLY per MTU).
    write_msg_bw_*) echo "uroce_fig write '' ${1#write_msg_bw_} bw_avg_gbps --write-segments message" ;;
    read_bw_*) echo "uroce_fig read '' ${1#read_bw_} bw_avg_gbps" ;;
    send_bw_*) echo "uroce_fig send '' ${1#send_bw_} bw_avg_gbps" ;;
    msg_rate_8) echo "uroce_fig send '' 8 msg_rate_mpps" ;;
    lat_8) echo "uroce_fig send --lat 8 t_median_us" ;;
    lat_8_p99) echo "uroce_fig send --lat 8 t_p99_us" ;;
    lat_4096) echo "uroce_fig send --lat 4096 t_median_us" ;;
    write_lat_8) echo "uroce_fig write --lat 8 t_median_us" ;;
  esac
}
# The raw GSO ceiling on this shared VM moves between runs by a third or more (55 to 95 Gb/s within
# an hour). So that a slow phase during section 1 cannot flatter the ratios, each run of a bandwidth
# figure is preceded by a run of the ceiling: the figure's ratio is to the highest ceiling seen so
# far, and the median of the REPEAT paired ratios (each uroce run over the ceiling measured just
# before it) is printed beside it, the estimate least moved by the host's load.
LAST_CEIL=""
refresh_gso_ceiling() {
  LAST_CEIL=$($CEIL --mode gso --size $MTU_DGRAM --seconds "$SECS" --a "$A" --b "$B" 2>&1 |
    tail -1 | field gbps)
  [[ -n $LAST_CEIL ]] && awk -v a="$LAST_CEIL" -v b="${FIG[gso]:-0}" 'BEGIN { exit !(a > b) }' &&
    FIG[gso]=$LAST_CEIL
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)] }'; }
# slot NAME UNIT CEILING_NAME higher|lower
slot() {
  local name=$1 unit=$2 better=$4 v="" ceil
  if [[ ! -x $UROCE ]]; then
    printf '  %-34s (not run: %s absent)  ceiling %s %s\n' "$name" "$UROCE" "${FIG[$3]:-n/a}" "$unit"
    return
  fi
  # Best of REPEAT runs, as for the ceilings, so that the ratio compares like with like.
  local try one pairs=""
  for ((try = 0; try < REPEAT; try++)); do
    [[ $3 == gso ]] && refresh_gso_ceiling
    one=$(eval "$(uroce_cmd "$name")" 2>&1 | tail -1 | field value)
    [[ -z $one ]] && continue
    [[ $3 == gso && -n $LAST_CEIL ]] &&
      pairs+=" $(awk -v v="$one" -v c="$LAST_CEIL" 'BEGIN { printf "%.3f", v / c }')"
    if [[ -z $v ]] || awk -v a="$one" -v b="$v" -v d="$better" \
      'BEGIN { exit !((d == "higher" && a > b) || (d == "lower" && a < b)) }'; then v=$one; fi
  done
  ceil=${FIG[$3]:-}
  [[ -n $v ]] && v=$(awk -v v="$v" 'BEGIN { printf (v < 10 ? "%.3f" : "%.2f"), v }')
  if [[ -z $v ]]; then
    printf '  %-34s (failed: %s)\n' "$name" "$(uroce_cmd "$name")"
    return
  fi
  local ratio=n/a
  if [[ -n $ceil ]]; then
    if [[ $better == higher ]]; then
      ratio=$(awk -v v="$v" -v c="$ceil" 'BEGIN { printf "%.2f of the ceiling", v / c }')
    else
      ratio=$(awk -v v="$v" -v c="$ceil" 'BEGIN { printf "%.2fx the ceiling latency", v / c }')
    fi
  fi
  local paired=""
  if [[ -n $pairs ]]; then
    FIG[paired_$name]=$(echo "$pairs" | median)
    paired="; paired median ${FIG[paired_$name]}"
  fi
  printf '  %-34s %s %s  (%s; ceiling %s%s)\n' "$name" "$v" "$unit" "$ratio" "$ceil" "$paired"
  FIG[uroce_$name]=$v
}
for op in write write_msg read send; do
  for size in 65536 1048576; do slot ${op}_bw_$size gbps gso higher; done
done
slot msg_rate_8 mpps gso_24B higher
slot lat_8 us udp_pingpong_8B lower
slot lat_8_p99 us udp_pingpong_8B_p99 lower
slot lat_4096 us udp_pingpong_4096B lower
slot write_lat_8 us udp_pingpong_8B lower
# ==== end of SLOTS ====

echo "## 4. Bandwidth against the highest GSO ceiling seen in this run (${FIG[gso]:-n/a} Gb/s)"
for op in write write_msg read send; do
  for size in 65536 1048576; do
    v=${FIG[uroce_${op}_bw_$size]:-}
    [[ -z $v || -z ${FIG[gso]:-} ]] && continue
    printf '  %-34s %s gbps  (%s of the ceiling; paired median %s)\n' "${op}_bw_$size" "$v" \
      "$(awk -v v="$v" -v c="${FIG[gso]}" 'BEGIN { printf "%.2f", v / c }')" \
      "${FIG[paired_${op}_bw_$size]:-n/a}"
  done
done

echo "## 5. The drop-in path: perftest on the drop-in libibverbs against uroce bench (bench/abi_path.sh)"
A=$A B=$B SECONDS_EACH=$SECS "$(dirname "$0")/abi_path.sh" "$BUILD" "$REPEAT" 2>&1 | sed 's/^/  /'

# 6. The fabric simulator against htsim on htsim's RoCE scenario (bench/htsim_compare.sh; htsim
#    only where HTSIM names htsim_roce or a csg-htsim checkout). Opt out with SIM=0.
if [[ ${SIM:-1} != 0 ]]; then
  echo "## 6. Fabric simulator on htsim's scenario (virtual ms per CPU second; ratio to htsim)"
  ROUNDS=${SIM_ROUNDS:-3} "$(dirname "$0")/htsim_compare.sh" "$BUILD" | sed 's/^/  /'
fi
