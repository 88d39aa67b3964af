#!/usr/bin/env bash
# bench/rewrite/tensat_gpu.sh [CLUSTER...]: the "Tensat's seven on the calibrated GPU presets" table of
# docs/REWRITE.md from one command (bench/rewrite/tensat_gpu.py): greedy and eqsat on Tensat's seven
# models costed on the measured-GPU presets (default H100 and V100), every output verified by gopt's
# executor and ONNX Runtime and checked with onnx.checker.
set -euo pipefail
cd "$(dirname "$0")/../.."
GOPT=${GOPT:-build/bin/gopt}
if [ ! -x "$GOPT" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j2 --target gopt_cli >/dev/null
fi
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u '+%F %H:%M') UTC)"
"$GOPT" devices | grep -E "cost model: measured-GPU" | sort -u | sed 's/^ */GPU preset: /'
echo
/usr/bin/python3 bench/rewrite/tensat_gpu.py "$GOPT" "$@"
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u '+%F %H:%M') UTC)"
