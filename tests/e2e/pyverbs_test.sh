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
suite=/usr/share/doc/rdma-core/tests
python=/usr/bin/python3
if [[ ! -e $suite/run_tests.py ]] || ! "$python" -c 'import pyverbs.device' 2>/dev/null; then
  echo "SKIP: rdma-core's pyverbs tests not installed (Debian package python3-pyverbs)"
  exit 77
fi

unpacked="$ABI_TMP/tests"
mkdir -p "$unpacked"
for file in "$suite"/*; do
  name=$(basename "$file" .gz)
  case $name in
  test_mlx5_* | test_efa* | test_cuda_dmabuf.py) continue ;;
  esac
  if [[ $file == *.gz ]]; then gzip -dc "$file" >"$unpacked/$name"; else cp "$file" "$unpacked/"; fi
done

# One device on its own loopback address; the suite's options name its port 1 and GID 0.
export UROCE_DEVICES=uroce0=127.0.24.1
export PYTHONDONTWRITEBYTECODE=1
timeout -k 5 300 "$python" "$here/pyverbs_run.py" "$unpacked" "$here/pyverbs_skips.txt" \
  --dev uroce0 --port 1 --gid 0 "$@" >"$ABI_TMP/run.log" 2>&1
rc=$?
if [[ $rc != 0 ]]; then
  cat "$ABI_TMP/run.log" >&2
  abi_fail "pyverbs suite exited $rc"
fi
grep '^pyverbs:' "$ABI_TMP/run.log"
echo PASS
