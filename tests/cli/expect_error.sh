#!/usr/bin/env bash
# expect_error.sh REGEX CMD [ARGS...]: runs CMD and passes only if it exits non-zero without
# crashing (exit code 1..125, not a signal), prints exactly one line on stderr, that line matches
# the extended REGEX, and nothing is printed on stdout.
set -u
regex="$1"; shift
out=$(mktemp); errf=$(mktemp)
"$@" >"$out" 2>"$errf"
rc=$?
fail() { echo "FAIL: $*"; echo "--- command: $*"; echo "--- stderr:"; cat "$errf"; rm -f "$out" "$errf"; exit 1; }
[ "$rc" -ne 0 ] || fail "exit code 0 for: $*"
[ "$rc" -lt 126 ] || fail "exit code $rc (crash or signal)"
lines=$(grep -vc '^gopt: warning:' "$errf" || true)
[ "$lines" -eq 1 ] || fail "expected one error line on stderr, got $lines"
grep -v '^gopt: warning:' "$errf" | grep -Eq -- "$regex" || fail "stderr does not match /$regex/"
[ ! -s "$out" ] || fail "stdout is not empty"
echo "ok: exit $rc: $(grep -v '^gopt: warning:' "$errf")"
rm -f "$out" "$errf"
