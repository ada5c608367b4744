#!/usr/bin/env bash
# Open MPI (pml ucx) or MPICH (ch4:ucx) runs tests/e2e/mpi_pingpong.c between two ranks, each on
# its own uroce device, with UCX allowed only verbs transports: rc_verbs (with ud_verbs for
# wire-up) and then ud_verbs alone, plus `self` within a rank. Every byte is checked both ways
# (8 B to 4 MiB), and uroce's counters (UROCE_STATS) must show that each rank received at least
# all the payload over its device. "loopback" puts the ranks on 127.0.45.x (e2e.bench_loopback has
# 127.0.41.x; ctest runs them side by side); "netns" in two
# network namespaces joined by a veth pair (198.18.41.0/30).
set -uo pipefail
HERE=$(dirname "$0")
usage="usage: $0 <lib dir> <uroce binary> openmpi|mpich loopback|netns"
source "$HERE/abi_lib.sh" "${1:?$usage}"
source "$HERE/ucx_lib.sh"
UROCE=${2:?$usage}
MPI=${3:?$usage}
WHERE=${4:?$usage}
case $MPI in
  openmpi) abi_require mpicc.openmpi mpirun.openmpi ;;
  mpich) abi_require mpicc.mpich mpiexec.mpich ;;
  *) abi_fail "$usage" ;;
esac
ucx_require_node "$UROCE"
"mpicc.$MPI" -O2 -Wall -Werror -o "$ABI_TMP/pingpong" "$HERE/mpi_pingpong.c" ||
  abi_fail "mpicc.$MPI failed"

ITERS=2
# Bytes each rank receives: ITERS messages of 8 B, 16 B and every power of four to 4 MiB.
payload=0
for ((size = 8; size <= 4194304; size = size < 16 ? 16 : size * 4)); do
  payload=$((payload + ITERS * size))
done

A=127.0.45.1 B=127.0.45.2 WRAP_A=() WRAP_B=()
if [[ $WHERE == netns ]]; then
  fail() { abi_fail "$@"; }
  cleanup_bench() { abi_cleanup; }
  source "$HERE/netns_lib.sh"
  A=198.18.41.1 B=198.18.41.2
  make_netns_pair mpi "$A" "$B"
  WRAP_A=(ip netns exec "$NS_A") WRAP_B=(ip netns exec "$NS_B")
elif [[ $WHERE != loopback ]]; then
  abi_fail "$usage"
fi

run_mpi() {
  local out=$1
  local prog=("$ABI_TMP/pingpong" --iters "$ITERS")
  if [[ $MPI == openmpi ]]; then
    local launcher=(mpirun.openmpi --allow-run-as-root --mca pml ucx)
    if [[ $WHERE == netns ]]; then
      # Open MPI's ranks reach the launcher's PMIx server over TCP: start it in the first
      # namespace and let it accept the other namespace's rank over the veth.
      export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=ma$$  # NS_A's veth
      launcher=(ip netns exec "$NS_A" "${launcher[@]}")
      WRAP_A=()
    fi
    timeout -k 5 120 "${launcher[@]}" \
      -np 1 -x UROCE_DEVICES=uroce0=$A "${WRAP_A[@]}" "${prog[@]}" : \
      -np 1 -x UROCE_DEVICES=uroce0=$B "${WRAP_B[@]}" "${prog[@]}" >"$out" 2>&1
  else
    timeout -k 5 120 mpiexec.mpich \
      -n 1 -env UROCE_DEVICES uroce0=$A "${WRAP_A[@]}" "${prog[@]}" : \
      -n 1 -env UROCE_DEVICES uroce0=$B "${WRAP_B[@]}" "${prog[@]}" >"$out" 2>&1
  fi
}

export UCX_NET_DEVICES=uroce0:1
for tls in rc_verbs,ud_verbs:aux,self ud_verbs,self; do
  name=${tls%%,*}
  out=$ABI_TMP/$name.out
  rm -f "$ABI_TMP/$name.stats"
  rc=0
  UCX_TLS=$tls UROCE_STATS=$ABI_TMP/$name.stats run_mpi "$out" || rc=$?
  [[ $rc == 0 ]] || { cat "$out" >&2; abi_fail "$MPI $WHERE $tls: exit $rc"; }
  ucx_check_clean "$out"
  for rank in 0 1; do
    grep -q "^rank $rank: $payload bytes received and verified" "$out" ||
      { cat "$out" >&2; abi_fail "$MPI $WHERE $tls: rank $rank did not verify $payload bytes"; }
  done
  ucx_check_counters "$ABI_TMP/$name.stats" "$payload" both
  echo "$MPI $WHERE UCX_TLS=$tls: $payload bytes verified each way; uroce link_rx_bytes:" \
    $(awk '/link_rx_bytes/ { print $2 }' "$ABI_TMP/$name.stats")
done
echo "PASS"
