#!/usr/bin/env bash
# check_exec_cli.sh GOPT: `gopt run` end to end on the committed op cases: outputs written (pb and
# npy) and checked back, a tampered expected output fails --check, a failing run leaves no output
# file, the first NaN is reported with its node, two op orders report their (different) peaks,
# fused and unfused runs agree, --profile fills and then reuses the cost database, and --time
# --paced answers each stdin line with one run's wall and CPU seconds.
set -u
G="$1"
D=tests/exec/data/ops
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# outputs in both formats, then checked as a test-data folder
for fmt in pb npy; do
  mkdir -p "$T/$fmt/test_data_set_0"
  cp $D/Conv/test_data_set_0/input_0.pb "$T/$fmt/test_data_set_0/"
  if "$G" run $D/Conv/model.onnx --inputs $D/Conv/test_data_set_0 --outputs "$T/$fmt/test_data_set_0" \
      --format $fmt >/dev/null 2>"$T/err" && [ -f "$T/$fmt/test_data_set_0/output_0.$fmt" ]; then
    "$G" run $D/Conv/model.onnx --check "$T/$fmt" >/dev/null 2>&1 && ok "outputs as $fmt" || fail "--check on our own $fmt outputs"
  else
    fail "--outputs --format $fmt: $(cat "$T/err")"
  fi
done
# our outputs equal the reference within tolerance: use the reference's outputs with our inputs
"$G" run $D/Conv/model.onnx --check $D/Conv >/dev/null 2>&1 || fail "Conv --check"

# a tampered expected output fails (exit 1, FAIL line)
mkdir -p "$T/bad/test_data_set_0"
cp $D/Relu/test_data_set_0/input_0.pb "$T/bad/test_data_set_0/input_0.pb"
cp $D/Sigmoid/test_data_set_0/output_0.pb "$T/bad/test_data_set_0/output_0.pb"
if "$G" run $D/Relu/model.onnx --check "$T/bad" >/dev/null 2>"$T/err"; then
  fail "tampered output passed --check"
else
  grep -q "beyond tolerance: FAIL" "$T/err" && grep -q "check FAILED" "$T/err" && ok "mismatch detected" \
    || fail "mismatch message: $(cat "$T/err")"
fi

# a run that fails writes nothing
mkdir -p "$T/none"
"$G" run $D/Relu/model.onnx --inputs $D/Where/test_data_set_0/input_1.pb --outputs "$T/none" >/dev/null 2>&1 \
  && fail "bad input accepted"
[ -z "$(ls -A "$T/none")" ] && ok "no partial output" || fail "files left after a failed run: $(ls -A "$T/none")"

# NaN: Sqrt of negative inputs is reported with the node, run still completes
"$G" run $D/Sqrt/model.onnx --inputs $D/Neg/test_data_set_0 >/dev/null 2>"$T/err" || fail "NaN run failed"
grep -q "node 'sqrt_0' (Sqrt) is the first op to produce NaN" "$T/err" && ok "NaN reported" \
  || fail "NaN message: $(cat "$T/err")"

# two orders, two peaks: order_a 6 units of 4000 bytes, order_b 7 (tests/exec/test_exec.c derives them)
pa=$("$G" run $D/branches/model.onnx --order $D/branches/order_a.json --json 2>/dev/null | grep '"peak_bytes"' | tr -dc 0-9)
pb=$("$G" run $D/branches/model.onnx --order $D/branches/order_b.json --json 2>/dev/null | grep '"peak_bytes"' | tr -dc 0-9)
[ "$pa" = 24000 ] && [ "$pb" = 28000 ] && ok "order peaks $pa / $pb" || fail "order peaks '$pa' '$pb' (want 24000 28000)"
"$G" run $D/branches/model.onnx --order $D/branches/order_b.json --check $D/branches >/dev/null 2>&1 \
  || fail "order_b changes the outputs"

# fused == reference, and auto fusion too
"$G" run $D/chain/model.onnx --fusion $D/chain/fusion.json --check $D/chain >/dev/null 2>&1 || fail "fused chain --check"
"$G" run $D/chain/model.onnx --fusion auto --check $D/chain >/dev/null 2>&1 || fail "auto-fused chain --check"
steps=$("$G" run $D/chain/model.onnx --fusion $D/chain/fusion.json --json 2>/dev/null | grep '"steps"' | tr -dc 0-9)
[ "$steps" = 2 ] && ok "fused chain runs in 2 steps" || fail "fused chain steps '$steps' (want 2)"

# profile: ops measured into the cost database, then all taken from it
"$G" run $D/chain/model.onnx --profile --json --warmup 1 --reps 3 --costdb "$T/costs.json" >"$T/p1" 2>/dev/null \
  || fail "--profile failed"
grep -q '"gopt-costdb"' "$T/costs.json" 2>/dev/null && ok "cost database written" || fail "no cost database"
m1=$(grep '"measured"' "$T/p1" | tr -dc 0-9)
"$G" run $D/chain/model.onnx --profile --json --warmup 1 --reps 3 --costdb "$T/costs.json" >"$T/p2" 2>/dev/null
m2=$(grep '"measured"' "$T/p2" | tr -dc 0-9)
[ "$m1" = 5 ] && [ "$m2" = 0 ] && ok "measured $m1 then $m2" || fail "measured '$m1' then '$m2' (want 5 then 0)"
grep -q '"cached": true' "$T/p2" || fail "second profile not from the cache"
# the same with the steps timed inside whole runs
"$G" run $D/chain/model.onnx --profile --steps context --json --warmup 1 --reps 3 --costdb "$T/ctx.json" >"$T/p3" \
  2>/dev/null || fail "--profile --steps context failed"
m3=$(grep '"measured"' "$T/p3" | tr -dc 0-9)
[ "$m3" = 5 ] && ok "in context: measured $m3" || fail "in context: measured '$m3' (want 5)"

# --time --paced: "ready", then one "WALL CPU" line per input line, then exit 0 at EOF
printf '\n\n\n' | "$G" run $D/chain/model.onnx --time --paced --warmup 1 --threads 1 >"$T/paced" 2>"$T/err" \
  || fail "--paced: $(cat "$T/err")"
if [ "$(head -1 "$T/paced")" = ready ] && [ "$(wc -l <"$T/paced")" = 4 ] &&
    [ "$(tail -n +2 "$T/paced" | grep -cE '^[0-9]+\.[0-9]{9} [0-9]+\.[0-9]{9}$')" = 3 ]; then
  ok "--paced: 3 runs for 3 lines"
else
  fail "--paced output: $(cat "$T/paced")"
fi
"$G" run $D/chain/model.onnx --paced >/dev/null 2>"$T/err" && fail "--paced without --time accepted"
grep -q -- "--paced needs --time" "$T/err" || fail "--paced without --time: $(cat "$T/err")"

echo "$fails failures"
[ "$fails" -eq 0 ]
