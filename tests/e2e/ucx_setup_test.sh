#!/usr/bin/env bash
# `uroce setup` on a scratch root: creates /dev/infiniband/uroce -> /dev/null (a character device
# UCX accepts), is idempotent, refuses a node that is not its own, --remove undoes it and is
# idempotent too, and a non-root user gets a clear message.
set -euo pipefail
UROCE=${1:?usage: $0 <uroce binary>}
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/uroce-setup.XXXXXX")
trap 'rm -rf "$ROOT"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
NODE=$ROOT/dev/infiniband/uroce
mkdir -p "$ROOT/dev"

"$UROCE" setup --root "$ROOT" >"$ROOT/out1" || fail "setup exited $?"
[[ $(readlink "$NODE") == /dev/null ]] || fail "node is not a link to /dev/null"
[[ -c $NODE && -r $NODE && -w $NODE ]] || fail "node is not a read/write character device"
grep -q "created" "$ROOT/out1" || fail "setup did not say what it created"
"$UROCE" setup --root "$ROOT" >"$ROOT/out2" || fail "second setup exited $?"
grep -q "already exists" "$ROOT/out2" || fail "second setup did not say it had nothing to do"

"$UROCE" setup --root "$ROOT" --remove >"$ROOT/out3" || fail "remove exited $?"
[[ ! -e $NODE && ! -L $NODE ]] || fail "node still there after --remove"
[[ ! -e $ROOT/dev/infiniband ]] || fail "empty /dev/infiniband left behind"
"$UROCE" setup --root "$ROOT" --remove >"$ROOT/out4" || fail "second remove exited $?"
grep -q "nothing to remove" "$ROOT/out4" || fail "second remove did not say so"

# Not ours: a regular file where the node goes is neither replaced nor removed.
mkdir -p "$ROOT/dev/infiniband" && echo x >"$NODE"
if "$UROCE" setup --root "$ROOT" 2>"$ROOT/err5"; then fail "setup replaced a foreign file"; fi
grep -q "not a link to /dev/null" "$ROOT/err5" || fail "no clear message for a foreign node"
if "$UROCE" setup --root "$ROOT" --remove 2>"$ROOT/err6"; then fail "remove took a foreign file"; fi
[[ -f $NODE ]] || fail "foreign file removed"
rm -rf "$ROOT/dev/infiniband"

# Not root: a clear message naming the command to run, exit 1.
if [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null; then
  chmod 755 "$ROOT"
  if setpriv --reuid=65534 --regid=65534 --clear-groups "$UROCE" setup --root "$ROOT" \
    2>"$ROOT/err7"; then
    fail "setup as nobody succeeded"
  fi
  grep -q "needs root.*sudo uroce setup" "$ROOT/err7" || { cat "$ROOT/err7" >&2; fail "no root message"; }
fi
echo "PASS"
