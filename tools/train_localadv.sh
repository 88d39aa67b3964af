#!/usr/bin/env bash
# train_localadv.sh [GOPT] [OUT]: trains the shipped local advantage model (default
# policies/fusion_localadv.gpol) for the guided search, as docs/LEARNED.md "Local advantage"
# records. Data: `gopt collect` (Gibbs sampling, tau 0.25, SAMPLES evaluations per graph, default
# 3000) on small zoo graphs (few layers) on V100; then `gopt train --method localadv` (ITERS
# minibatch steps, default 1000, batch 16). Held out (never collected or trained on): the deep
# zoo models transformer, bert, gpt2, resnet50, inception_v3 at their default sizes and the whole
# wavenet and transformer_xl families (the paper's small-to-large distribution shift). SEED
# (default 1) seeds both steps; DATA keeps the dataset at that path. TASK=placement (with CLUSTER,
# default 4xV100-nvlink) trains the placement model, default policies/placement_localadv.gpol, on the
# same graphs: what `gopt compare --task placement` runs as its guided row.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
task="${TASK:-fusion}"
cluster="${CLUSTER:-V100}"
[ "$task" = placement ] && cluster="${CLUSTER:-4xV100-nvlink}"
out="${2:-$here/policies/${task}_localadv.gpol}"
samples="${SAMPLES:-3000}"
iters="${ITERS:-1000}"
seed="${SEED:-1}"
train=("transformer:layers=1,seq=64" "transformer:layers=2,seq=64" "bert:layers=1" "bert:layers=2"
       "gpt2:layers=1" "gpt2:layers=2" "resnet50:depth=18" "resnet50:depth=34" "rnnlm:steps=5")
if [ -n "${DATA:-}" ]; then data="$DATA"; else
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; data="$tmp/train.bin"; fi
start=$(date +%s)
"$gopt" collect "${train[@]}" --task "$task" --cluster "$cluster" --samples "$samples" --seed "$seed" -o "$data"
"$gopt" train --method localadv --data "$data" --iters "$iters" --seed "$seed" --threads 2 -o "$out"
echo "train_localadv: $(( $(date +%s) - start )) s"
