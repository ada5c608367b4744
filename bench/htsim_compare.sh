#!/usr/bin/env bash
# htsim_compare.sh: uroce's fabric simulator against htsim (csg-htsim, htsim_roce) on htsim's RoCE
# scenario (bench/htsim_scenario.cpp; docs/performance.md "The simulator against htsim"), run
# interleaved on this machine, each pinned to one core: simulated time per second of CPU time (and
# of wall time) and their ratio, peak RSS, and the flows each has completed by the end. CPU time,
# because on a loaded machine wall time mostly measures the other processes; both include setup.
#
#   bench/htsim_compare.sh [BUILD_DIR]      # default build/release
#
# Environment:
#   HTSIM        path to htsim_roce, or to a csg-htsim checkout to build it in (sim/, then
#                sim/datacenter: make; about a minute). Unset or missing: uroce runs alone.
#   ROUNDS       interleaved rounds (default 3; the best of each side is reported)
#   END_US       simulated span in microseconds (default 5000)
#   K            fat-tree k (default 8: 128 hosts); htsim gets -nodes k^3/4
#   SEED         the flows' seed (default 1)
#   CPU          the core both are pinned to (default 1)
set -euo pipefail
BUILD=${1:-build/release}
ROUNDS=${ROUNDS:-3}
END_US=${END_US:-5000}
K=${K:-8}
SEED=${SEED:-1}
CPU=${CPU:-1}
NODES=$((K * K * K / 4))
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

URO="$BUILD/bench/htsim_scenario"
if [[ ! -x "$URO" ]]; then
  ninja -C "$BUILD" htsim_scenario >/dev/null
fi

# htsim: a binary, or a checkout to build it in.
HT=""
if [[ -n "${HTSIM:-}" ]]; then
  if [[ -x "$HTSIM" && ! -d "$HTSIM" ]]; then
    HT="$HTSIM"
  elif [[ -d "$HTSIM/sim/datacenter" ]]; then
    if [[ ! -x "$HTSIM/sim/datacenter/htsim_roce" ]]; then
      echo "building htsim_roce in $HTSIM/sim ..." >&2
      make -C "$HTSIM/sim" -j2 libhtsim.a >/dev/null 2>&1 &&
        make -C "$HTSIM/sim/datacenter" htsim_roce >/dev/null 2>&1 || true
    fi
    [[ -x "$HTSIM/sim/datacenter/htsim_roce" ]] && HT="$HTSIM/sim/datacenter/htsim_roce"
  fi
fi
[[ -z "$HT" ]] && echo "htsim: not found (set HTSIM to htsim_roce or a csg-htsim checkout); uroce alone"

# The flows, once, as htsim's connection matrix (the same ones uroce runs).
"$URO" --k "$K" --seed "$SEED" --end-us 1 --tm "$WORK/scenario.cm" >/dev/null || true

# Wall seconds, CPU seconds and peak RSS (KiB) of one command, pinned to one core.
measure() {
  local out=$1
  shift
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" taskset -c "$CPU" "$@" >"$out" 2>&1 || true
  tail -1 "$WORK/time" | awk '{printf "%s %.2f %s\n", $1, $2 + $3, $4}'
}
rate() { awk -v e="$END_US" -v t="$1" 'BEGIN{printf "%.3f", (t > 0) ? e / 1000 / t : 0}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", (b > 0) ? a / b : 0}'; }
better() { awk -v a="$1" -v b="$2" 'BEGIN{exit !(b == "" || a > b)}'; }

best_u=""
best_h=""
ratios=()  # each round's, for their median: the rounds run back to back, so the pair is fair
for round in $(seq 1 "$ROUNDS"); do
  read -r uw uc ur < <(measure "$WORK/uroce.out" "$URO" --k "$K" --seed "$SEED" --end-us "$END_US")
  us=$(rate "$uc")
  line="round $round: uroce $us ms/cpu-s ($(rate "$uw") ms/wall-s, cpu ${uc} s, rss $((ur / 1024)) MiB)"
  if better "$us" "$best_u"; then best_u=$us; fi
  if [[ -n "$HT" ]]; then
    read -r hw hc hr < <(cd "$WORK" && measure "$WORK/htsim.out" "$HT" -nodes "$NODES" -tiers 3 \
      -hop_latency 1 -switch_latency 0 -tm "$WORK/scenario.cm" -end "$END_US" -strat ecmp_host \
      -paths 1 -queue_type lossless_input -pfc_thresholds 12 15 -mtu 4096 -q 1000 \
      -linkspeed 100000 -o "$WORK/htsim.log")
    hs=$(rate "$hc")
    line="$line; htsim $hs ms/cpu-s ($(rate "$hw") ms/wall-s, cpu ${hc} s, rss $((hr / 1024)) MiB); ratio $(ratio "$us" "$hs")"
    if better "$hs" "$best_h"; then best_h=$hs; fi
    ratios+=("$(ratio "$us" "$hs")")
  fi
  echo "$line"
done

echo "--- uroce (last round) ---"
grep -E '^(scenario|simulated|peak_rss|incast|background|fabric|device|pools)' "$WORK/uroce.out"
if [[ -n "$HT" ]]; then
  echo "--- htsim (last round) ---"
  # htsim prints "Flow Roce_<src>_<dst> <id> finished at <us> total bytes <n>"; host 0 is the
  # incast's receiver.
  fct() {
    awk -v want="$1" '/finished at/ {split($2, p, "_"); if ((p[3] == 0) == want) print $6}' "$WORK/htsim.out" |
      sort -n | awk -v name="$2" '{a[NR] = $1} END {
        p90 = int(NR * 0.9) + 1
        if (p90 > NR) p90 = NR
        if (NR) printf "%s fct us: min=%.1f p50=%.1f p90=%.1f max=%.1f\n", name, a[1], a[int(NR * 0.5) + 1], a[p90], a[NR] }'
  }
  inc=$(awk '/finished at/ {split($2, p, "_"); if (p[3] == 0) n++} END {print n + 0}' "$WORK/htsim.out")
  bg=$(awk '/finished at/ {split($2, p, "_"); if (p[3] != 0) n++} END {print n + 0}' "$WORK/htsim.out")
  echo "incast done=$inc/64; background done=$bg/$((NODES - 65))"
  fct 1 incast
  fct 0 background
  median=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR] = $1} END {
    printf "%.2f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  echo "best: uroce $best_u ms/cpu-s, htsim $best_h ms/cpu-s, ratio $(ratio "$best_u" "$best_h");" \
    "median of the rounds' ratios $median"
else
  echo "best: uroce $best_u ms/cpu-s"
fi
