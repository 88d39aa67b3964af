#!/usr/bin/env bash
# bench/fidelity/run.sh: how well the cost model predicts this host. Profiles every corpus model
# with the executor (1 thread; TASO's 8 warm-ups and median of 32 runs per op) into a cost
# database, then reports gopt fidelity (Kendall tau and median |% error| of per-op times, and
# predicted vs measured end-to-end step) before and after gopt calibrate fits the host model
# (all models), writes the fitted samples as CSV for analysis, and runs the held-out check
# (bench/fidelity/holdout.sh: calibrate on 2/3 of the models, fidelity on the other third).
# Usage: bench/fidelity/run.sh [BUILD_DIR] [--reuse]   (default build/; --reuse keeps an existing
# database instead of profiling again)
set -euo pipefail
cd "$(dirname "$0")/../.."
b=${1:-build}
db=$b/fidelity_costdb.json
if [ "${2:-}" != "--reuse" ] || [ ! -f "$db" ]; then
  rm -f "$db"
  for m in corpus/*.onnx; do
    "$b/bin/gopt" run "$m" --profile --threads 1 --costdb "$db" --json >/dev/null
  done
fi
echo "## fidelity, analytical host preset (before calibration)"
"$b/bin/gopt" fidelity corpus/*.onnx --costdb "$db"
"$b/bin/gopt" calibrate --costdb "$db" corpus/*.onnx -o "$b/host_calibrated.json" \
  --samples "$b/fidelity_samples.csv"
echo "## fidelity, calibrated host"
"$b/bin/gopt" fidelity corpus/*.onnx --costdb "$db" --cluster "$b/host_calibrated.json"
echo "## held out"
bench/fidelity/holdout.sh "$b"
