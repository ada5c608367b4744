# Shared by pyverbs_test.sh and pyverbs_rdmacm_test.sh (sourced, after abi_lib.sh): rdma-core's
# pyverbs test suite as Debian's python3-pyverbs ships it, gzipped in /usr/share/doc, unpacked into
# $ABI_TMP at run time (rdma-core's files are not part of uroce), and run with Debian's python.
PYVERBS_SUITE=/usr/share/doc/rdma-core/tests
PYVERBS_PYTHON=/usr/bin/python3

# pyverbs_require MODULE FILE...: skips the test (exit 77) unless MODULE imports and the suite has
# one of the FILEs.
pyverbs_require() {
  local module=$1 file found=0
  shift
  for file in "$@"; do [[ -e $PYVERBS_SUITE/$file ]] && found=1; done
  if [[ $found == 0 ]] || ! "$PYVERBS_PYTHON" -c "import $module" 2>/dev/null; then
    echo "SKIP: rdma-core's pyverbs tests not installed (Debian package python3-pyverbs)"
    exit 77
  fi
}

# pyverbs_unpack KEEP: the suite's files for which `KEEP NAME` (NAME without .gz) succeeds,
# gunzipped into $ABI_TMP/tests, whose path it prints.
pyverbs_unpack() {
  local keep=$1 file name unpacked="$ABI_TMP/tests"
  mkdir -p "$unpacked"
  for file in "$PYVERBS_SUITE"/*; do
    name=$(basename "$file" .gz)
    "$keep" "$name" || continue
    if [[ $file == *.gz ]]; then gzip -dc "$file" >"$unpacked/$name"; else cp "$file" "$unpacked/"; fi
  done
  echo "$unpacked"
}

# pyverbs_check_exit RC WHAT: fails the test with the run's log ($ABI_TMP/run.log) unless RC is 0.
pyverbs_check_exit() {
  if [[ $1 != 0 ]]; then
    cat "$ABI_TMP/run.log" >&2
    abi_fail "$2 exited $1"
  fi
}
