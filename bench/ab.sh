#!/usr/bin/env bash
# Interleaved A/B of two `uroce` binaries on loopback, for "did this change move the figures?":
# WRITE 64 KiB bandwidth, 8 B SEND and 8 B WRITE message rate, 8 B SEND half round trip (median,
# and the 99th percentile from a run of its own);
# each round runs the same figures with both binaries, alternating which goes first, so the host's
# minute-to-minute speed hits both alike. Compare medians and per-round ratios, never one run.
#   bench/ab.sh OLD_UROCE NEW_UROCE [ROUNDS]
# Environment: A, B (addresses, default 127.0.0.1 / 127.0.0.2; pick others when another run or
#   test may use these), SECONDS_EACH (default 2),
#   PIN=1 (server on CPU 0, client on CPU 1: removes the bimodal latency of both landing on one).
set -uo pipefail
OLD=${1:?usage: $0 OLD_UROCE NEW_UROCE [ROUNDS]}
NEW=${2:?usage: $0 OLD_UROCE NEW_UROCE [ROUNDS]}
ROUNDS=${3:-6}
A=${A:-127.0.0.1}
B=${B:-127.0.0.2}
SECS=${SECONDS_EACH:-2}
PORT=19600
server_cpu=() client_cpu=()
if [[ ${PIN:-0} == 1 ]]; then server_cpu=(taskset -c 0) client_cpu=(taskset -c 1); fi

# fig BIN TEST MODE SIZE KEY: prints the figure from the client's JSON (nan if the run failed).
# Runs in a command substitution, so the port is taken from a counter file: a variable incremented
# in that subshell would be lost and every run would reuse one port.
port_file=$(mktemp)
trap 'rm -f "$port_file"' EXIT
echo "$PORT" >"$port_file"
fig() {
  local bin=$1 test=$2 mode=$3 size=$4 key=$5 json=""
  local PORT
  PORT=$(($(<"$port_file") + 1))
  echo "$PORT" >"$port_file"
  "${server_cpu[@]}" "$bin" bench --server --addr "$A" -p $PORT --accept-timeout 20 >/dev/null 2>&1 &
  local server=$!
  for ((try = 0; try < 50; try++)); do  # the server needs a moment to listen
    json=$("${client_cpu[@]}" "$bin" bench --client --addr "$B" --peer "$A" -p $PORT "$test" $mode \
      -s "$size" -D "$SECS" -m 4096 --no-verify --json - 2>/dev/null) && break
    json=""
    sleep 0.1
  done
  wait $server 2>/dev/null
  echo "$json" | /usr/bin/python3 -c \
    "import json, sys; print('%.3f' % json.load(sys.stdin)['results'][0]['$key'])" 2>/dev/null ||
    echo nan
}

for ((r = 1; r <= ROUNDS; r++)); do
  order="OLD NEW"
  ((r % 2)) || order="NEW OLD"
  for which in $order; do
    bin=${!which}
    echo "round=$r bin=$which write64k_gbps=$(fig "$bin" write '' 65536 bw_avg_gbps)" \
      "msgrate8_mpps=$(fig "$bin" send '' 8 msg_rate_mpps)" \
      "wmsgrate8_mpps=$(fig "$bin" write '' 8 msg_rate_mpps)" \
      "lat8_us=$(fig "$bin" send --lat 8 t_median_us)" \
      "lat8_p99_us=$(fig "$bin" send --lat 8 t_p99_us)"
  done
done | tee /dev/stderr | /usr/bin/python3 -c '
import sys, statistics as st
rows = [dict(kv.split("=") for kv in line.split()) for line in sys.stdin]
for key in ("write64k_gbps", "msgrate8_mpps", "wmsgrate8_mpps", "lat8_us", "lat8_p99_us"):
    def vals(which):
        return [float(r[key]) for r in rows if r["bin"] == which and r[key] != "nan"]
    old, new = vals("OLD"), vals("NEW")
    pairs = {}
    for r in rows:
        if r[key] != "nan":
            pairs.setdefault(r["round"], {})[r["bin"]] = float(r[key])
    ratios = [p["NEW"] / p["OLD"] for p in pairs.values() if "NEW" in p and "OLD" in p and p["OLD"]]
    if old and new and ratios:
        print("%-14s median old %.3f new %.3f  median of per-round new/old %.3f" %
              (key, st.median(old), st.median(new), st.median(ratios)))
'
