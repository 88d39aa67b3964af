#!/bin/sh
# fuzz/run.sh [SECONDS]: configures a clang build in build-fuzz (-DGOPT_FUZZ=ON, ASan+UBSan), builds
# the importer fuzzers (ONNX, HLO text, the SQLite loaders of the cost database and the run
# history, the GPU measurements, the policy files) and runs them one after the other for SECONDS in
# all (default 60; ONNX 2/5, HLO 2/5, SQLite the rest; the GPU measurements and the policy files a
# few seconds each on top) on fuzz/corpus_* plus working corpora in build-fuzz/fuzz_work. Crash,
# leak, timeout and OOM inputs
# are saved as fuzz/findings/crash-* etc.; the script exits non-zero when libFuzzer reports any.
# Reproduce one finding:  build-fuzz/fuzz/fuzz_onnx_import fuzz/findings/crash-XXXX (or
# fuzz_hlo_import, fuzz_sqlite_load, fuzz_gpu_measure, fuzz_policy_load). Once fixed, keep it as
# fuzz/corpus_onnx/regress-NAME.onnx, fuzz/corpus_hlo/regress-NAME.hlo,
# fuzz/corpus_sqlite/regress-NAME.sqlite, fuzz/corpus_gpu/regress-NAME.json or
# fuzz/corpus_policy/regress-NAME.bin: ctest onnx_fuzz_regressions / hlo_fuzz_regressions /
# sqlite_fuzz_regressions / gpu_fuzz_seed_corpus / policy_fuzz_seed_corpus replay them through the
# same entry point in every build (fuzz/replay_onnx.c is the driver).
set -eu
secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
CC=${CC:-clang} cmake -S "$root" -B "$build" -DGOPT_FUZZ=ON -DGOPT_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_onnx_import fuzz_hlo_import fuzz_sqlite_load fuzz_gpu_measure fuzz_policy_load -j2
mkdir -p "$build/fuzz_work/corpus" "$build/fuzz_work/corpus_hlo" "$build/fuzz_work/corpus_sqlite" \
  "$build/fuzz_work/corpus_gpu" "$build/fuzz_work/corpus_policy" \
  "$root/fuzz/findings"
cd "$build/fuzz_work"
onnx_secs=$((secs * 2 / 5))
hlo_secs=$((secs * 2 / 5))
sqlite_secs=$((secs - onnx_secs - hlo_secs))
# -max_total_time=0 would mean no limit: every fuzzer gets at least a second
[ "$onnx_secs" -ge 1 ] || onnx_secs=1
[ "$hlo_secs" -ge 1 ] || hlo_secs=1
[ "$sqlite_secs" -ge 1 ] || sqlite_secs=1
rc=0
"$build/fuzz/fuzz_onnx_import" -max_total_time="$onnx_secs" -rss_limit_mb=2048 -max_len=65536 \
  -timeout=20 -print_final_stats=1 -artifact_prefix="$root/fuzz/findings/" \
  "$build/fuzz_work/corpus" "$root/fuzz/corpus_onnx" || rc=$?
"$build/fuzz/fuzz_hlo_import" -max_total_time="$hlo_secs" -rss_limit_mb=2048 -max_len=65536 \
  -timeout=20 -print_final_stats=1 -artifact_prefix="$root/fuzz/findings/hlo-" \
  "$build/fuzz_work/corpus_hlo" "$root/fuzz/corpus_hlo" || rc=$?
"$build/fuzz/fuzz_sqlite_load" -max_total_time="$sqlite_secs" -rss_limit_mb=2048 -max_len=65536 \
  -timeout=20 -print_final_stats=1 -artifact_prefix="$root/fuzz/findings/sqlite-" \
  "$build/fuzz_work/corpus_sqlite" "$root/fuzz/corpus_sqlite" || rc=$?
# the GPU measurements loader (gopt calibrate --gpu): a few seconds on top of SECONDS
"$build/fuzz/fuzz_gpu_measure" -max_total_time="$((sqlite_secs / 2 + 1))" -rss_limit_mb=2048 -max_len=65536 \
  -timeout=20 -print_final_stats=1 -artifact_prefix="$root/fuzz/findings/gpu-" \
  "$build/fuzz_work/corpus_gpu" "$root/fuzz/corpus_gpu" || rc=$?
# the policy file loader (--policy P.gpol): as long again, from the shipped policies whole (framed
# and raw, make_policy_seeds.py) and the committed metadata seeds
/usr/bin/python3 "$root/fuzz/make_policy_seeds.py" "$build/fuzz_work/seed_policy"
"$build/fuzz/fuzz_policy_load" -max_total_time="$((sqlite_secs / 2 + 1))" -rss_limit_mb=2048 -max_len=524288 \
  -timeout=20 -print_final_stats=1 -artifact_prefix="$root/fuzz/findings/policy-" \
  "$build/fuzz_work/corpus_policy" "$build/fuzz_work/seed_policy" "$root/fuzz/corpus_policy" || rc=$?
exit $rc
