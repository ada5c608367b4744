#!/usr/bin/env bash
# The middleware over uroce against the same middleware over UCX's tcp transport, interleaved:
# each round runs every figure once over uroce (UCX_TLS=rc_verbs with ud_verbs for wire-up, on
# two uroce devices) and once over tcp (UCX_TLS=tcp on lo), alternating which goes first, so the
# host's minute-to-minute speed hits both alike. Prints medians per transport and the median of
# the per-round ratios (uroce / tcp; above 1 is better for bandwidth, worse for latency).
#   bench/middleware.sh [BUILD_DIR] [ROUNDS]      (default build/release, 3)
# Figures: ucx_perftest ucp_put_bw and ucp_am_bw at 64 KiB (MB/s), ucp_put_lat at 8 B (us, UCX's
# half round trip), and tests/e2e/mpi_pingpong.c under Open MPI (pml ucx) at 8 B (half round
# trip, us) and 1 MiB (MB/s). Needs /dev/infiniband/uroce (`sudo uroce setup`).
set -uo pipefail
BUILD=${1:-build/release}
ROUNDS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$(cd "$BUILD/lib" && pwd) || exit 1
A=${A:-127.0.0.1}
B=${B:-127.0.0.2}
ITERS=${ITERS:-2000}
[[ -c /dev/infiniband/uroce ]] || { echo "run 'sudo $BUILD/tools/uroce setup' first" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mpicc.openmpi -O2 -o "$TMP/pingpong" "$HERE/../tests/e2e/mpi_pingpong.c" || exit 1
PORT=19700

tls_env() {  # the environment of one transport
  if [[ $1 == uroce ]]; then
    echo "LD_LIBRARY_PATH=$LIB UCX_TLS=rc_verbs,ud_verbs:aux,self UCX_NET_DEVICES=uroce0:1"
  else
    echo "UCX_TLS=tcp,self UCX_NET_DEVICES=lo"
  fi
}

# perf TRANSPORT TEST SIZE COLUMN: one ucx_perftest run, prints a column of its Final line.
perf() {
  local tr=$1 test=$2 size=$3 col=$4 out
  PORT=$((PORT + 1))
  env $(tls_env "$tr") UROCE_DEVICES=uroce0=$A timeout 60 ucx_perftest -p $PORT >/dev/null 2>&1 &
  local server=$!
  sleep 0.3
  out=$(env $(tls_env "$tr") UROCE_DEVICES=uroce0=$B timeout 60 ucx_perftest "$A" -p $PORT \
    -t "$test" -s "$size" -n "$ITERS" 2>&1 | awk -v c="$col" '/^Final:/ { print $c }')
  wait $server
  echo "${out:-nan}"
}

# mpi TRANSPORT SIZE COLUMN: the ping-pong's --bench line for SIZE (2: latency us, 3: MB/s).
mpi() {
  local tr=$1 size=$2 col=$3
  env $(tls_env "$tr") timeout 120 mpirun.openmpi --allow-run-as-root --mca pml ucx \
    --mca pml_ucx_tls any --mca pml_ucx_devices any \
    -np 1 -x UROCE_DEVICES=uroce0=$A "$TMP/pingpong" --bench --iters 200 --max 1048576 : \
    -np 1 -x UROCE_DEVICES=uroce0=$B "$TMP/pingpong" --bench --iters 200 --max 1048576 2>/dev/null |
    awk -v s="$size" -v c="$col" '$1 == s { print $c; found = 1 } END { if (!found) print "nan" }'
}

figures=("ucp_put_bw 64KiB MB/s|perf ucp_put_bw 65536 6" "ucp_am_bw 64KiB MB/s|perf ucp_am_bw 65536 6"
  "ucp_put_lat 8B us|perf ucp_put_lat 8 4" "MPI pingpong 8B us|mpi 8 2"
  "MPI pingpong 1MiB MB/s|mpi 1048576 3")
declare -A vals
for ((r = 0; r < ROUNDS; r++)); do
  order=(uroce tcp)
  ((r % 2)) && order=(tcp uroce)
  for f in "${figures[@]}"; do
    cmd=${f#*|}
    for tr in "${order[@]}"; do
      read -r fn a1 a2 a3 <<<"$cmd"
      vals["$f|$tr|$r"]=$($fn "$tr" $a1 $a2 $a3)
    done
  done
  echo "round $((r + 1))/$ROUNDS done" >&2
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf "%-24s %12s %12s %14s\n" "figure" "uroce" "tcp" "uroce/tcp"
for f in "${figures[@]}"; do
  name=${f%%|*}
  u=$(for ((r = 0; r < ROUNDS; r++)); do echo "${vals["$f|uroce|$r"]}"; done | median)
  t=$(for ((r = 0; r < ROUNDS; r++)); do echo "${vals["$f|tcp|$r"]}"; done | median)
  ratio=$(for ((r = 0; r < ROUNDS; r++)); do
    awk -v a="${vals["$f|uroce|$r"]}" -v b="${vals["$f|tcp|$r"]}" 'BEGIN { if (b + 0 > 0) printf "%.3f\n", a / b }'
  done | median)
  printf "%-24s %12s %12s %14s\n" "$name" "$u" "$t" "$ratio"
done
