#!/usr/bin/env bash
# The drop-in path against the native one (issue 16, goal 4): the same operation and size through
# `uroce bench` (one process per side, the NIC pumped inline on the benchmark's thread) and through
# Debian's perftest on the drop-in libibverbs (the application's thread plus the runtime's
# progress thread per side), interleaved round by round (alternating which goes first) so the
# host's minute-to-minute speed hits both alike. Prints medians and the median of the per-round
# ratios drop-in / native (latency: want <= 1.5; bandwidth: drop-in / native, want >= 0.9).
#
# Usage: bench/abi_path.sh [BUILD_DIR] [ROUNDS]   (default build/release, 5)
# Environment: A, B (addresses, default 127.0.0.1 / 127.0.0.2), SECONDS_EACH (bandwidth runs,
#   default 2), LAT_ITERS (perftest latency iterations, default 5000), CPUS (e.g. 0,1: every
#   process under `taskset -c CPUS`), PIN=1 (the server under `taskset -c 0`, the client under
#   `taskset -c 1`: each process's threads share one core, the drop-in's hardest case), FIGS
#   (default "send_lat write_lat read_lat write_bw read_bw send_bw"), PERFTEST_ENV (extra
#   VAR=value words for the perftest processes, e.g. UROCE_SPIN_US=20), STATS_DIR (keep each
#   run's counters there: the drop-in's UROCE_STATS files, the bench's --stats-file files, and
#   every process's CPU time from /usr/bin/time), BASE_PORT (default 19700; another value, and
#   other A and B, keep concurrent runs apart).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
ROUNDS=${2:-5}
A=${A:-127.0.0.1}
B=${B:-127.0.0.2}
SECS=${SECONDS_EACH:-2}
LAT_ITERS=${LAT_ITERS:-5000}
FIGS=${FIGS:-send_lat write_lat read_lat write_bw read_bw send_bw}
UROCE=$BUILD/tools/uroce
LIB=$(realpath "$BUILD/lib")
PORT=${BASE_PORT:-19700}  # TCP ports BASE_PORT+1, +2, ... (one per run)
pin=() server_pin=() client_pin=()
[[ -n ${CPUS:-} ]] && pin=(taskset -c "$CPUS")
if [[ ${PIN:-0} == 1 ]]; then
  [[ -z ${CPUS:-} ]] || { echo "CPUS and PIN=1 are exclusive"; exit 2; }
  server_pin=(taskset -c 0) client_pin=(taskset -c 1)
fi
read -r -a extra_env <<<"${PERFTEST_ENV:-}"
for tool in ib_send_lat ib_write_lat ib_read_lat ib_write_bw ib_read_bw ib_send_bw; do
  command -v $tool >/dev/null || { echo "perftest not installed (apt-get install perftest)"; exit 77; }
done
[[ -x $UROCE && -e $LIB/libibverbs.so.1 ]] || { echo "build $UROCE and $LIB/libibverbs.so.1 first"; exit 1; }
# With STATS_DIR, each process's CPU seconds and context switches (voluntary: it slept;
# involuntary: it was preempted) go beside the counters.
TIME_FMT="user_s %U\nsys_s %S\nvoluntary_switches %w\ninvoluntary_switches %c"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# native FIG: the figure from `uroce bench` (nan if the run failed).
native() {
  local op=${1%_*} kind=${1#*_} mode="" size=65536 key=bw_avg_gbps json=""
  [[ $kind == lat ]] && mode=--lat size=8 key=t_median_us
  PORT=$((PORT + 1))
  local stats=() ts=() tc=()
  if [[ -n ${STATS_DIR:-} ]]; then
    mkdir -p "$STATS_DIR"
    stats=(--stats-file "$STATS_DIR/native.$1.r$r")
    ts=(/usr/bin/time -f "$TIME_FMT" -o "$STATS_DIR/native.$1.r$r.time.server")
    tc=(/usr/bin/time -f "$TIME_FMT" -o "$STATS_DIR/native.$1.r$r.time.client")
  fi
  "${pin[@]}" "${server_pin[@]}" "${ts[@]}" "$UROCE" bench --server --addr "$A" -p $PORT --accept-timeout 20 >/dev/null 2>&1 &
  local server=$!
  for ((try = 0; try < 50; try++)); do  # the server needs a moment to listen
    json=$("${pin[@]}" "${client_pin[@]}" "${tc[@]}" "$UROCE" bench --client --addr "$B" --peer "$A" -p $PORT "$op" $mode \
      -s $size -D "$SECS" -m 4096 --no-verify "${stats[@]}" --json - 2>/dev/null) && break
    json=""
    sleep 0.1
  done
  wait $server 2>/dev/null
  echo "$json" | /usr/bin/python3 -c \
    "import json, sys; print('%.3f' % json.load(sys.stdin)['results'][0]['$key'])" 2>/dev/null ||
    echo nan
}

# dropin FIG: the same through perftest on the drop-in library (lat: t_typical, perftest's median;
# bw: BW average in Gb/s).
dropin() {
  local tool=ib_$1 kind=${1#*_} args col
  if [[ $kind == lat ]]; then
    args=(-s 8 -n "$LAT_ITERS") col=5
  else
    args=(-s 65536 -D "$SECS" --report_gbits) col=4
  fi
  PORT=$((PORT + 1))
  local stats=() ts=() tc=()
  if [[ -n ${STATS_DIR:-} ]]; then
    mkdir -p "$STATS_DIR"
    stats=(UROCE_STATS="$STATS_DIR/dropin.$1.r$r")
    ts=(/usr/bin/time -f "$TIME_FMT" -o "$STATS_DIR/dropin.$1.r$r.time.server")
    tc=(/usr/bin/time -f "$TIME_FMT" -o "$STATS_DIR/dropin.$1.r$r.time.client")
  fi
  env LD_LIBRARY_PATH="$LIB" UROCE_DEVICES="uroce0=$A" "${stats[@]}" "${extra_env[@]}" \
    timeout -k 5 120 "${pin[@]}" "${server_pin[@]}" "${ts[@]}" $tool -x 0 -p $PORT "${args[@]}" >"$TMP/server" 2>&1 &
  local server=$! waited=0
  while ((waited < 100)) && ! ss -Hltn "sport = :$PORT" | grep -q .; do
    sleep 0.1
    waited=$((waited + 1))
  done
  env LD_LIBRARY_PATH="$LIB" UROCE_DEVICES="uroce0=$B" "${stats[@]}" "${extra_env[@]}" \
    timeout -k 5 120 "${pin[@]}" "${client_pin[@]}" "${tc[@]}" $tool -x 0 -p $PORT "${args[@]}" "$A" >"$TMP/client" 2>&1
  wait $server 2>/dev/null
  awk -v c=$col '/^ *[0-9]+ +[0-9]+ +[0-9.]+/ { v = $c } END { if (v != "") printf "%.3f\n", v; else print "nan" }' \
    "$TMP/client"
}

echo "# drop-in vs native: $(date -u +%FT%TZ), $(nproc) cores${CPUS:+, taskset -c $CPUS}${server_pin:+, PIN=1}," \
  "$ROUNDS rounds, ${PERFTEST_ENV:+$PERFTEST_ENV, }load: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
  for fig in $FIGS; do
    if ((r % 2)); then
      n=$(native $fig) d=$(dropin $fig)
    else
      d=$(dropin $fig) n=$(native $fig)
    fi
    echo "round=$r fig=$fig native=$n dropin=$d"
  done
done | tee "$TMP/rows" | sed 's/^/  /'
/usr/bin/python3 - "$TMP/rows" <<'EOF'
import sys, statistics as st
rows = [dict(kv.split("=") for kv in line.split()) for line in open(sys.argv[1])]
print("%-10s %12s %12s %14s  %s" % ("figure", "native", "drop-in", "drop-in/native", "goal"))
for fig in dict.fromkeys(r["fig"] for r in rows):
    mine = [r for r in rows if r["fig"] == fig]
    nat = [float(r["native"]) for r in mine if r["native"] != "nan"]
    dro = [float(r["dropin"]) for r in mine if r["dropin"] != "nan"]
    ratios = [float(r["dropin"]) / float(r["native"]) for r in mine
              if "nan" not in (r["native"], r["dropin"]) and float(r["native"])]
    unit = "us" if fig.endswith("lat") else "Gb/s"
    goal = "<= 1.5" if unit == "us" else ">= 0.9"
    fmt = lambda v: ("%.3f %s" % (st.median(v), unit)) if v else "n/a"
    print("%-10s %12s %12s %14s  %s" % (fig, fmt(nat), fmt(dro),
          ("%.2f" % st.median(ratios)) if ratios else "n/a", goal))
EOF
