#!/usr/bin/env bash
# eval_learned.sh [GOPT] [SVGDIR]: the evaluation in docs/LEARNED.md, one command. For the shipped GO
# policies on held-out graphs (docs/LEARNED.md's split: zoo wavenet and transformer_xl at their
# default knobs, corpus wavenet, densenet121, efficientnet_b0 and shufflenet_v2_x1_0) and each task
# (placement on 2xV100-nvlink, 4xV100-nvlink and 8xH100, schedule and joint on 2xV100-nvlink and
# 8xH100, fusion on V100):
#   gopt compare --budget 1000 --json            zero-shot go vs every baseline and search at 1K;
#   gopt compare --budget 5000 --finetune 333    every search at 5K, and go fine-tuned for 333
#                --json --plot SVGDIR/T_C_G.svg  evaluations with its best-vs-evaluations curve.
# Prints the markdown tables (tools/eval_learned.py) to stdout; SVGs go to SVGDIR (default
# docs/learned). BUDGET1 / BUDGET2 / FINETUNE override 1000 / 5000 / 333; GRAPHS (space-separated)
# overrides the graphs; TASKS (space-separated, default all four) picks the tasks; JSONDIR keeps
# the compare JSON files there (the tables cover every task whose files are in it). 2-3 minutes on the 2-core machine at load 6-10 (42 graph x cluster pairs,
# 84 compare runs, 76 s measured); heavier load stretches it.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
svg="${2:-$here/docs/learned}"
b1="${BUDGET1:-1000}"
b2="${BUDGET2:-5000}"
ft="${FINETUNE:-333}"
c="$here/corpus"
graphs=(${GRAPHS:-wavenet transformer_xl $c/wavenet.onnx $c/densenet121.onnx $c/efficientnet_b0.onnx $c/shufflenet_v2_x1_0.onnx})
mkdir -p "$svg"
if [ -n "${JSONDIR:-}" ]; then tmp="$JSONDIR"; mkdir -p "$tmp"; else tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; fi
start=$(date +%s)
for task in ${TASKS:-placement joint schedule fusion}; do
  case "$task" in
    placement) clusters="2xV100-nvlink 4xV100-nvlink 8xH100" ;;
    joint|schedule) clusters="2xV100-nvlink 8xH100" ;;
    fusion) clusters="V100" ;;
  esac
  for cl in $clusters; do
    for g in "${graphs[@]}"; do
      name="$(basename "$g" .onnx)"
      [ "$g" != "$name" ] && [ -f "$g" ] && name="corpus_$name"
      id="${task}_${cl}_${name}"
      "$gopt" compare "$g" --task "$task" --cluster "$cl" --budget "$b1" --threads 2 --json \
        >"$tmp/$id.1k.json" 2>/dev/null || echo "eval_learned: $id: compare --budget $b1 failed" >&2
      "$gopt" compare "$g" --task "$task" --cluster "$cl" --budget "$b2" --threads 2 --json \
        --finetune "$ft" --plot "$svg/$id.svg" >"$tmp/$id.5k.json" 2>/dev/null \
        || echo "eval_learned: $id: compare --budget $b2 --finetune $ft failed" >&2
    done
  done
done
/usr/bin/python3 "$here/tools/eval_learned.py" "$tmp" "$b1" "$b2" "$ft" "$(basename "$svg")"
if ls "$tmp"/placement_*.1k.json >/dev/null 2>&1; then  # issue 26's placement table and targets
  echo
  /usr/bin/python3 "$here/tools/placement_targets.py" "$tmp"
fi
echo
echo "Run time: $(( $(date +%s) - start )) s."
