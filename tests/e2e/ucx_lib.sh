# Shared by the ucx_* and mpi_* end-to-end scripts (sourced after abi_lib.sh, not run): the
# /dev/infiniband node UCX needs, and the check that data crossed uroce (its counters).

# UCX lists a verbs device only if its /dev/infiniband node exists (`uroce setup`). As root the
# test makes it (the command is idempotent and the node stays: other tests may be using it);
# otherwise it skips.
ucx_require_node() {
  local uroce=$1
  [[ -c /dev/infiniband/uroce ]] && return 0
  [[ $(id -u) -eq 0 ]] || { echo "SKIP: /dev/infiniband/uroce missing; run 'sudo uroce setup'"; exit 77; }
  "$uroce" setup >"$ABI_TMP/setup.out" 2>&1 || { cat "$ABI_TMP/setup.out" >&2; abi_fail "uroce setup"; }
}

# UCX prints its errors and warnings as "UCX  ERROR" / "UCX  WARN" lines.
ucx_check_clean() {
  local file
  for file in "$@"; do
    if grep -Eq 'UCX +(ERROR|WARN)|MISMATCH|Segmentation|Abort' "$file"; then
      echo "---- $file" >&2
      cat "$file" >&2
      abi_fail "UCX error or warning in $(basename "$file")"
    fi
  done
}

# ucx_check_counters STATS_FILE MIN_BYTES [both]: exactly two processes wrote UROCE_STATS (one per
# rank or side), both received packets on their uroce device, and one of them (both, with
# "both": a ping-pong) received at least MIN_BYTES there: the payload crossed uroce, not shared
# memory or TCP.
ucx_check_counters() {
  local file=$1 min=$2 mode=${3:-one}
  [[ -s $file ]] || abi_fail "no UROCE_STATS output in $file"
  awk -v min="$min" -v mode="$mode" '
    $1 ~ /\.link_rx_bytes$/ { n++; if ($2 + 0 == 0) zero = 1; if ($2 + 0 >= min + 0) big++ }
    END {
      if (n != 2) { print "expected 2 uroce devices, got " n; exit 1 }
      if (zero) { print "a device received nothing"; exit 1 }
      if (big < (mode == "both" ? 2 : 1)) { print "fewer than " min " bytes received"; exit 1 }
    }' "$file" >&2 || { cat "$file" >&2; abi_fail "uroce counters in $(basename "$file")"; }
}

# ucx_free_port BASE: the first TCP port from BASE up that no socket uses, TIME-WAIT included
# (ucx_perftest's server binds without SO_REUSEADDR, so a port a previous run just closed fails).
ucx_free_port() {
  local port=$1
  while ((port < $1 + 100)); do
    [[ -z $(ss -Htan "( sport = :$port or dport = :$port )" 2>/dev/null) ]] && { echo "$port"; return; }
    port=$((port + 1))
  done
  abi_fail "no free TCP port in $1..$(($1 + 99))"
}
