#!/usr/bin/env bash
# train_rewrite.sh [GOPT] [OUT]: trains the shipped rewrite agent (gopt rewrite --method rl,
# X-RLflow style) into OUT (default policies/rewrite.gpol) with `gopt train --method rewrite`, then
# prints the held-out comparison of docs/REWRITE.md "## rl" (tools/eval_rewrite_rl.py: rl against
# greedy on graphs never trained on). ITERS (default 40), EPISODES (8), STEPS (16), THREADS (2)
# and SEED (1) override the settings; EVAL=0 skips the comparison.
# Training set: zoo resnet50:depth=18, resnet50:depth=34, inception_v3, bert:layers=1,
# gpt2:layers=1, transformer:layers=1 (structure only, cost = simulated V100 step).
# Held out (never trained on): zoo resnet50 (depth 50), resnet50:depth=101, bert:layers=2,
# gpt2:layers=2, transformer:layers=2, amoebanet:cells=2 and every corpus model.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
out="${2:-$here/policies/rewrite.gpol}"
start=$(date +%s)
nice "$gopt" train --method rewrite resnet50:depth=18 resnet50:depth=34 inception_v3 bert:layers=1 \
  gpt2:layers=1 transformer:layers=1 -o "$out" --iters "${ITERS:-40}" --episodes "${EPISODES:-8}" \
  --steps "${STEPS:-16}" --threads "${THREADS:-2}" --seed "${SEED:-1}"
echo "training: $(( $(date +%s) - start )) s"
[ "${EVAL:-1}" = 0 ] || /usr/bin/python3 "$here/tools/eval_rewrite_rl.py" "$gopt" "$out"
