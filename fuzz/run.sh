#!/bin/sh
# fuzz/run.sh [SECONDS]: configures a clang build in build-fuzz (-DGOPT_FUZZ=ON, ASan+UBSan), builds
# the ONNX import fuzzer and runs it for SECONDS (default 60) on fuzz/corpus_onnx plus a working
# corpus in build-fuzz/fuzz_work. Crash, leak, timeout and OOM inputs are saved as
# fuzz/findings/crash-* etc.; the script exits non-zero when libFuzzer reports any.
# Reproduce one finding:  build-fuzz/fuzz/fuzz_onnx_import fuzz/findings/crash-XXXX
# Once fixed, keep it as fuzz/corpus_onnx/regress-NAME.onnx: ctest onnx_fuzz_regressions replays
# every regress-* file through the same entry point in every build (fuzz/replay_onnx.c).
set -eu
secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
CC=${CC:-clang} cmake -S "$root" -B "$build" -DGOPT_FUZZ=ON -DGOPT_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_onnx_import -j2
mkdir -p "$build/fuzz_work/corpus" "$root/fuzz/findings"
cd "$build/fuzz_work"
exec "$build/fuzz/fuzz_onnx_import" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 \
  -timeout=20 -print_final_stats=1 -artifact_prefix="$root/fuzz/findings/" \
  "$build/fuzz_work/corpus" "$root/fuzz/corpus_onnx"
