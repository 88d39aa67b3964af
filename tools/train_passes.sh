#!/usr/bin/env bash
# tools/train_passes.sh [GOPT] [OUT]: trains the shipped pass-ordering policy (policies/passes.gpol,
# `gopt passes --order rl`) with PPO on the training split of tests/hlo/data: every module except
# the held-out projects and modules listed in bench/passes/heldout.txt (those, and gopt's own GPT-2,
# BERT and ResNet training steps, are what bench/passes/run.sh evaluates on). Seed 1, 2 threads;
# ITERS (default 120) iterations of 8 episodes of at most 32 passes, objective ops. About 10-15 minutes
# on the 2-core development machine under load.
set -euo pipefail
cd "$(dirname "$0")/.."
gopt=${1:-build/bin/gopt}
out=${2:-policies/passes.gpol}
heldout=$(grep -v '^#' bench/passes/heldout.txt | sed 's|^|tests/hlo/data/|' | paste -sd'|')
mapfile -t train < <(find tests/hlo/data -type f \( -name '*.txt' -o -name '*.hlo' \) | LC_ALL=C sort |
                     grep -v -E "^($heldout)")
echo "training on ${#train[@]} modules (held out: bench/passes/heldout.txt)" >&2
nice "$gopt" train --method passes "${train[@]}" -o "$out" --iters "${ITERS:-120}" --episodes 8 \
  --max-steps 32 --seed 1 --threads 2
