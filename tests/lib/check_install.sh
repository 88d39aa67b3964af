#!/bin/sh
# check_install.sh BUILD GOPT_BIN SRC_DIR VERSION: installs the build tree into a temporary prefix
# (cmake --install), then builds tests/lib/pc_program.c against that prefix with nothing but
# `pkg-config --cflags --libs gopt` (shared library; then `--static` with libgopt.a) and checks
# that both programs print the project version and the node count `gopt info --json` reports
# for the same zoo model. Also checks the installed CLI's --version, man page, policies, rules,
# tools/ort/ort_run.js and the Python binding (importable from the prefix, loading the prefix's
# libgopt.so).
# A sanitizer build sets GOPT_TEST_CFLAGS (the external programs must link the same runtime) and
# GOPT_TEST_PY_PRELOAD (the ASan runtime, preloaded into the uninstrumented interpreter).
set -eu
xcflags=${GOPT_TEST_CFLAGS:-}
build=${1:?usage: check_install.sh BUILD GOPT_BIN SRC_DIR VERSION}
gopt=$2
src=$3
version=$4
model=inception_v3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gopt-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
pc=$(find "$tmp/prefix" -name gopt.pc) || true
[ -n "$pc" ] || fail "no gopt.pc under the install prefix"
export PKG_CONFIG_PATH="$(dirname "$pc")"
pkg-config --exists gopt || fail "pkg-config cannot use $pc"
[ "$(pkg-config --modversion gopt)" = "$version" ] || fail "gopt.pc version $(pkg-config --modversion gopt), not $version"
libdir=$(pkg-config --variable=libdir gopt)
case "$libdir" in "$tmp/prefix"/*) ;; *) fail "gopt.pc libdir '$libdir' is not under the prefix";; esac

want=$("$gopt" info "$model" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"])')
[ -n "$want" ] || fail "gopt info gave no node count"

# shared: only what pkg-config says, plus an rpath to the prefix's libdir so it runs uninstalled
# shellcheck disable=SC2046
# shellcheck disable=SC2086
cc -std=c11 $xcflags -o "$tmp/pc_shared" "$src/tests/lib/pc_program.c" $(pkg-config --cflags --libs gopt) \
  -Wl,-rpath,"$libdir" || fail "building against the shared library with pkg-config failed"
ldd "$tmp/pc_shared" | grep -q "$tmp/prefix/.*libgopt.so" || fail "pc_shared does not link the installed libgopt.so"
got=$("$tmp/pc_shared" "$model") || fail "pc_shared failed"
[ "$got" = "$version $want" ] || fail "pc_shared printed '$got', expected '$version $want'"

# static: pkg-config --static adds Requires.private/Libs.private; -lgopt is pointed at libgopt.a
# (a plain -lgopt would pick the .so when both are installed).
libs=$(pkg-config --static --libs gopt | sed 's/-lgopt\b/-l:libgopt.a/')
# shellcheck disable=SC2086
cc -std=c11 $xcflags -o "$tmp/pc_static" "$src/tests/lib/pc_program.c" $(pkg-config --cflags gopt) $libs ||
  fail "building against libgopt.a with pkg-config --static failed"
if ldd "$tmp/pc_static" | grep -q libgopt; then fail "pc_static still links libgopt.so"; fi
got=$("$tmp/pc_static" "$model") || fail "pc_static failed"
[ "$got" = "$version $want" ] || fail "pc_static printed '$got', expected '$version $want'"

# the installed CLI, man page, policies and Python binding
[ "$("$tmp/prefix/bin/gopt" --version)" = "gopt $version" ] || fail "installed gopt --version is not 'gopt $version'"
grep -q "gopt $version" "$tmp/prefix/share/man/man1/gopt.1" || fail "no man page of version $version installed"
if [ -d "$src/policies" ]; then
  ls "$tmp/prefix/share/gopt/policies/"*.gpol >/dev/null 2>&1 || fail "no policies installed"
fi
[ -f "$tmp/prefix/share/gopt/tools/ort/ort_run.js" ] || fail "tools/ort/ort_run.js not installed in share/gopt"
[ -f "$tmp/prefix/share/gopt/rules/rules.json" ] || fail "rules/rules.json not installed in share/gopt"
pydir=$(find "$tmp/prefix" -type d -name gopt -path '*python*' | head -1)
[ -n "$pydir" ] || fail "the Python binding is not installed"
env -u GOPT_LIB PYTHONPATH="$(dirname "$pydir")" ${GOPT_TEST_PY_PRELOAD:+LD_PRELOAD="$GOPT_TEST_PY_PRELOAD"} \
  ${GOPT_TEST_PY_PRELOAD:+ASAN_OPTIONS=detect_leaks=0} /usr/bin/python3 -c '
import sys, gopt
lib, prefix, want = gopt.library_path(), sys.argv[1], int(sys.argv[2])
assert lib.startswith(prefix), "binding loaded %s, not the installed library" % lib
n = gopt.load(sys.argv[3]).info()["nodes"]
assert n == want, (n, want)
assert gopt.__version__ == sys.argv[4], gopt.__version__
' "$tmp/prefix" "$want" "$model" "$version" || fail "the installed Python binding does not work"
echo "check_install: ok: $model has $want nodes (CLI, shared, static, Python from the prefix); version $version"
