#!/usr/bin/env bash
# bench/gpu/run_on_gpu.sh OUT [TENSAT_DIR]: what this project measures when a CUDA machine with
# PyTorch and JAX is lent (never CI). (1) tools/hlo/jax_programs.py: small JAX programs compiled by
# today's XLA with every module dumped as HLO text -> OUT/jax_dumps.tar.gz (the modules before and
# after XLA's GPU pipeline; the programs' source path replaced by jax_programs.py) and
# OUT/jax_programs.json. (2) bench/rewrite/tensat_gpu_measure.py measure: Tensat's seven models and
# their rewrites (made beforehand by its `prepare` step into TENSAT_DIR) timed on the GPU ->
# OUT/tensat_gpu.json. Each part runs under its own time limit; a failure of one does not stop
# the other.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: run_on_gpu.sh OUT [TENSAT_DIR]}
TENSAT_DIR=${2:-.devrun/tensat}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader || true
W=$(mktemp -d)
echo "== JAX programs"
PYTHONUNBUFFERED=1 timeout 200 "$PY" tools/hlo/jax_programs.py "$W/jax" || echo "jax_programs: exit $?"
if [ -d "$W/jax/dump" ]; then
  mkdir -p "$W/keep"
  find "$W/jax/dump" -maxdepth 1 \( -name '*before_optimizations.txt' -o -name '*after_optimizations.txt' \) \
    -exec cp {} "$W/keep/" \;
  sed -i "s#$PWD/tools/hlo/jax_programs.py#jax_programs.py#g" "$W/keep/"* 2>/dev/null
  tar -C "$W/keep" -czf "$OUT/jax_dumps.tar.gz" . && ls "$W/keep" | wc -l
  cp "$W/jax/programs.json" "$OUT/jax_programs.json" 2>/dev/null
fi
echo "== Tensat's seven"
if [ -f "$TENSAT_DIR/manifest.json" ]; then
  PYTHONUNBUFFERED=1 timeout 200 "$PY" bench/rewrite/tensat_gpu_measure.py measure "$TENSAT_DIR" \
    -o "$OUT/tensat_gpu.json" --device cuda --reps 30 || echo "tensat measure: exit $?"
else
  echo "no $TENSAT_DIR/manifest.json: run tensat_gpu_measure.py prepare first"
fi
rm -rf "$W"
