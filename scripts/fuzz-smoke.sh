#!/usr/bin/env bash
# A short, bounded libFuzzer run of the wire parsers (tests/fuzz/wire_parse_fuzz.cpp), seeded
# with the known-answer packets in tests/vectors/, then of the CM MAD codec
# (tests/fuzz/mad_parse_fuzz.cpp), seeded with a MAD of each CM attribute. The packet parsers get
# two thirds of the time, the MAD codec one third. Builds with clang-14 in its own build dir.
# Usage: scripts/fuzz-smoke.sh [seconds]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
mad_seconds=$((seconds / 3 > 0 ? seconds / 3 : 1))
wire_seconds=$((seconds - mad_seconds > 0 ? seconds - mad_seconds : 1))
dir=${UROCE_FUZZ_DIR:-build/fuzz}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUROCE_WERROR=ON \
  -DUROCE_FUZZ=ON -DUROCE_BENCH=OFF \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
ninja -C "$dir" -j "$(nproc)" uroce_wire_fuzz uroce_mad_fuzz

# Seeds: each vector's bytes, once as is (mode byte 0) and once with the ICRC recomputed by the
# target (mode byte 1), so mutations get past the ICRC check too.
corpus=$dir/wire_corpus
rm -rf "$corpus" && mkdir -p "$corpus"
python3 - "$corpus" tests/vectors/*.txt <<'PY'
import sys
out, files = sys.argv[1], sys.argv[2:]
n = 0
for f in files:
    for line in open(f):
        if line.startswith("bytes "):
            data = bytes.fromhex(line.split()[1])
            for mode in (0, 1):
                open(f"{out}/seed{n:03d}_{mode}", "wb").write(bytes([mode]) + data)
            n += 1
print(f"fuzz-smoke: {2 * n} seeds from {len(files)} vector file(s)")
PY
# Crashes land in $dir/fuzz-artifacts/; the run fails on the first one.
mkdir -p "$dir/fuzz-artifacts"
"$dir/tests/fuzz/uroce_wire_fuzz" -max_total_time="$wire_seconds" -max_len=4096 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/fuzz-artifacts/" \
  "$corpus" 2>&1 | tail -n 25

# The MAD codec: a valid CM MAD header for each attribute ID (REQ .. SIDR_REP) and zeros after.
mad_corpus=$dir/mad_corpus
rm -rf "$mad_corpus" && mkdir -p "$mad_corpus"
python3 - "$mad_corpus" <<'PY'
import sys
for attr in range(0x10, 0x19):
    mad = bytes([1, 7, 2, 3, 0, 0, 0, 0]) + bytes(8) + attr.to_bytes(2, "big") + bytes(238)
    open(f"{sys.argv[1]}/attr{attr:02x}", "wb").write(mad)
PY
"$dir/tests/fuzz/uroce_mad_fuzz" -max_total_time="$mad_seconds" -max_len=512 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/fuzz-artifacts/" \
  "$mad_corpus" 2>&1 | tail -n 25
