#!/usr/bin/env bash
# Interleaved A/B of the CPU two `uroce` binaries spend per unit of work: user+system seconds of
# the bench server and client together (wait4's rusage, via /usr/bin/time) for a fixed number of
# operations, so the figure does not depend on how fast the shared host runs this minute (it does
# depend on cache and frequency effects; compare medians of per-round ratios).
#   bench/cpu_ab.sh OLD_UROCE NEW_UROCE [ROUNDS]
# Figures: cpu_s_per_gb (64 KiB WRITEs, GB = 1e9 payload bytes) and cpu_s_per_mmsg (8 B WRITEs,
# CPU seconds per million messages; each is one request packet, ACKs coalesced by the responder).
# Environment: A, B (addresses, default 127.0.0.1 / 127.0.0.2), BIG_N (64 KiB WRITEs, default
# 100000), SMALL_N (8 B WRITEs, default 3000000), PIN=1 (server on CPU 0, client on CPU 1).
set -uo pipefail
# shellcheck disable=SC2034 # read through ${!which}
OLD=${1:?usage: $0 OLD_UROCE NEW_UROCE [ROUNDS]}
# shellcheck disable=SC2034
NEW=${2:?usage: $0 OLD_UROCE NEW_UROCE [ROUNDS]}
ROUNDS=${3:-5}
A=${A:-127.0.0.1}
B=${B:-127.0.0.2}
BIG_N=${BIG_N:-100000}
SMALL_N=${SMALL_N:-3000000}
PORT=19700
server_cpu=() client_cpu=()
if [[ ${PIN:-0} == 1 ]]; then server_cpu=(taskset -c 0) client_cpu=(taskset -c 1); fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# cpu BIN SIZE N: CPU seconds (server + client) for N WRITEs of SIZE bytes; nan if the run failed.
cpu() {
  local bin=$1 size=$2 n=$3 ok=""
  PORT=$((PORT + 1))
  rm -f "$tmp"/s "$tmp"/c
  "${server_cpu[@]}" /usr/bin/time -f "%U %S" -o "$tmp/s" "$bin" bench --server --addr "$A" \
    -p $PORT --accept-timeout 20 >/dev/null 2>&1 &
  local server=$!
  for ((try = 0; try < 50; try++)); do # the server needs a moment to listen
    if "${client_cpu[@]}" /usr/bin/time -f "%U %S" -o "$tmp/c" "$bin" bench --client --addr "$B" \
      --peer "$A" -p $PORT write -s "$size" -n "$n" -m 4096 --no-verify >/dev/null 2>&1; then
      ok=1
      break
    fi
    sleep 0.1
  done
  wait $server 2>/dev/null
  if [[ -z $ok ]]; then
    echo nan
    return
  fi
  cat "$tmp/s" "$tmp/c" | awk '{t += $1 + $2} END {printf "%.3f", t}'
}

for ((r = 1; r <= ROUNDS; r++)); do
  order="OLD NEW"
  ((r % 2)) || order="NEW OLD"
  for which in $order; do
    bin=${!which}
    big=$(cpu "$bin" 65536 "$BIG_N")
    small=$(cpu "$bin" 8 "$SMALL_N")
    echo "round=$r bin=$which" \
      "cpu_s_per_gb=$(awk -v t="$big" -v n="$BIG_N" 'BEGIN {printf "%.4f", t / (n * 65536 / 1e9)}')" \
      "cpu_s_per_mmsg=$(awk -v t="$small" -v n="$SMALL_N" 'BEGIN {printf "%.4f", t / (n / 1e6)}')"
  done
done | tee /dev/stderr | /usr/bin/python3 -c '
import sys, statistics as st
rows = [dict(kv.split("=") for kv in line.split()) for line in sys.stdin]
for key in ("cpu_s_per_gb", "cpu_s_per_mmsg"):
    pairs = {}
    for r in rows:
        if r[key] != "nan":
            pairs.setdefault(r["round"], {})[r["bin"]] = float(r[key])
    old = [p["OLD"] for p in pairs.values() if "OLD" in p]
    new = [p["NEW"] for p in pairs.values() if "NEW" in p]
    ratios = [p["NEW"] / p["OLD"] for p in pairs.values() if "NEW" in p and "OLD" in p and p["OLD"]]
    if old and new and ratios:
        print("%-15s median old %.4f new %.4f  median of per-round new/old %.3f (%d rounds)" %
              (key, st.median(old), st.median(new), st.median(ratios), len(ratios)))
'
