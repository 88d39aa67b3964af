#!/bin/sh
# check_shipped.sh GOPT_BIN SRC_DIR: a gopt binary away from the source tree (as an out-of-tree
# build, `cmake -S gopt -B /elsewhere`, leaves it: a copy in TMP/a/b/bin, run from TMP, so
# nothing next to it or above it holds policies/, rules/ or tools/) still finds the shipped files
# in the source tree it was configured from (src/util/shipped.c): `optimize --method go` uses
# SRC/policies/placement.gpol, `rewrite` reads SRC/rules/rules.json and verifies with ONNX Runtime
# through SRC/tools/ort/ort_run.js. The environment overrides are unset for the check. The rewrite
# runs on the zoo's NasRNN, which the default cluster rewrites (a graph left unchanged is not
# verified, so ONNX Runtime would not run).
set -eu
gopt=${1:?usage: check_shipped.sh GOPT_BIN SRC_DIR}
src=$(cd "${2:?usage: check_shipped.sh GOPT_BIN SRC_DIR}" && pwd -P)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gopt-shipped.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_shipped: $*" >&2; exit 1; }
mkdir -p "$tmp/a/b/bin"
cp "$gopt" "$tmp/a/b/bin/gopt"
cd "$tmp"
unset GOPT_POLICY_DIR GOPT_RULES GOPT_SOURCE_DIR
./a/b/bin/gopt optimize gpt2:layers=1 --task placement --cluster V100 --method go --samples 1 --json >opt.json ||
  fail "optimize --method go without a policy next to the binary"
./a/b/bin/gopt rewrite nasrnn -o out.onnx --verify ort --measure \
  --budget 5 --json >rw.json 2>rw.err || { cat rw.err >&2; fail "rewrite --verify ort"; }
/usr/bin/python3 - "$src" opt.json rw.json <<'PY' || exit 1
import json, sys
src, o, r = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
assert o["policy"] == f"{src}/policies/placement.gpol", o["policy"]
assert r["rules"] == f"{src}/rules/rules.json", r["rules"]
assert r["verified"] and r["verified_with"] == "ort", (r["verified"], r["verified_with"])
assert r["ort_measured_before_s"] is not None and r["ort_measured_after_s"] is not None, "ONNX Runtime did not run"
print(f"check_shipped: ok: {o['policy']}, {r['rules']} and ONNX Runtime through {src}/tools/ort/ort_run.js")
PY
