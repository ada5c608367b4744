#!/usr/bin/env bash
# rdma-core's own pyverbs test suite (Debian's python3-pyverbs, unmodified) against the drop-in
# libibverbs. Usage: pyverbs_test.sh <folder with libibverbs.so.1> [--write-skips FILE]
#
# The suite ships gzipped in /usr/share/doc/rdma-core/tests; it is unpacked into a temporary
# folder at run time (rdma-core's files are not part of uroce). Every vendor-neutral module runs;
# test_mlx5_*, test_efa* (Mellanox / EFA direct verbs, through the stand-ins they would only
# skip) and test_cuda_dmabuf (needs a CUDA GPU and cuda-python) are not unpacked. The run fails
# on any failure or error, and unless each skip is listed with its reason in pyverbs_skips.txt
# (each one a feature docs/ibverbs.md lists as absent) and each listed test skips.
# --write-skips FILE writes the skips seen, in that file's format, to refresh it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/abi_lib.sh" "$1"
shift
source "$here/pyverbs_lib.sh"
pyverbs_require pyverbs.device run_tests.py

vendor_neutral() {
  case $1 in
  test_mlx5_* | test_efa* | test_cuda_dmabuf.py) return 1 ;;
  esac
}
unpacked=$(pyverbs_unpack vendor_neutral)

# One device on its own loopback address; the suite's options name its port 1 and GID 0.
export UROCE_DEVICES=uroce0=127.0.24.1
export PYTHONDONTWRITEBYTECODE=1
timeout -k 5 300 "$PYVERBS_PYTHON" "$here/pyverbs_run.py" "$unpacked" "$here/pyverbs_skips.txt" \
  --dev uroce0 --port 1 --gid 0 "$@" >"$ABI_TMP/run.log" 2>&1
pyverbs_check_exit $? "pyverbs suite"
grep '^pyverbs:' "$ABI_TMP/run.log"
echo PASS
