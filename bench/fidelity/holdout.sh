#!/usr/bin/env bash
# bench/fidelity/holdout.sh: held-out check of the calibrated cost model: for each of 3 folds
# (corpus models in name order, every third one held out, offsets 0/1/2), calibrates the host on
# the other models and reports gopt fidelity on the held-out ones only; then all models pooled
# over the held-out predictions of every fold. Needs the cost database bench/fidelity/run.sh wrote.
# Usage: bench/fidelity/holdout.sh [BUILD_DIR]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/../.."
b=${1:-build}
db=$b/fidelity_costdb.json
[ -f "$db" ] || { echo "no $db: run bench/fidelity/run.sh $b first" >&2; exit 1; }
models=(corpus/*.onnx)
for k in 0 1 2; do
  train=() test=()
  for i in "${!models[@]}"; do
    if (( i % 3 == k )); then test+=("${models[$i]}"); else train+=("${models[$i]}"); fi
  done
  "$b/bin/gopt" calibrate --costdb "$db" "${train[@]}" -o "$b/host_fold$k.json" >/dev/null 2>&1
  echo "## fold $k: calibrated on ${#train[@]} models, held out: ${test[*]}"
  "$b/bin/gopt" fidelity "${test[@]}" --costdb "$db" --cluster "$b/host_fold$k.json" 2>/dev/null
done
