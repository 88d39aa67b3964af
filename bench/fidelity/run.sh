#!/usr/bin/env bash
# bench/fidelity/run.sh: how well the cost model predicts this host. Profiles every corpus model
# with the executor (1 thread; TASO's 8 warm-ups and median of 32 runs per op) into a cost
# database, then reports gopt fidelity (Kendall tau and median |% error| of per-op times, and
# predicted vs measured end-to-end step) before and after gopt calibrate fits the host model.
# Usage: bench/fidelity/run.sh [BUILD_DIR]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/../.."
b=${1:-build}
db=$b/fidelity_costdb.json
rm -f "$db"
for m in corpus/*.onnx; do
  "$b/bin/gopt" run "$m" --profile --threads 1 --costdb "$db" --json >/dev/null
done
echo "## fidelity, analytical host preset (before calibration)"
"$b/bin/gopt" fidelity corpus/*.onnx --costdb "$db"
"$b/bin/gopt" calibrate --costdb "$db" corpus/*.onnx -o "$b/host_calibrated.json"
echo "## fidelity, calibrated host"
"$b/bin/gopt" fidelity corpus/*.onnx --costdb "$db" --cluster "$b/host_calibrated.json"
