#!/usr/bin/env bash
# eval_localadv.sh [GOPT] [MODEL] [SVGDIR]: the local advantage evaluation in docs/LEARNED.md
# ("Local advantage"), one command. On the held-out fusion graphs (V100; tools/train_localadv.sh's
# split: transformer, bert, gpt2, resnet50, inception_v3 at their default sizes, wavenet,
# transformer_xl), for SEEDS seeds (default 3): guided (MODEL, default
# policies/fusion_localadv.gpol), khop, random and local, all from the default decisions with
# BUDGET evaluations (default 2000), `gopt optimize --json` (curves); the evaluations each needs to
# reach khop's final result of the same seed; best-vs-evaluations SVGs (seed 1) into SVGDIR
# (default docs/learned/localadv_*.svg); and the model's held-out Kendall tau on a dataset that
# `gopt collect` gathers on the same graphs (HELD_SAMPLES evaluations each, default 1000, seed 101).
# Prints the markdown tables (tools/eval_localadv.py). ALPHA / HOPS set guided's and khop's
# --alpha / --hops; GRAPHS (space-separated) overrides the graphs; JSONDIR keeps the JSON files.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
model="${2:-$here/policies/fusion_localadv.gpol}"
svg="${3:-$here/docs/learned}"
budget="${BUDGET:-2000}"
seeds="${SEEDS:-3}"
graphs=(${GRAPHS:-transformer bert gpt2 resnet50 inception_v3 wavenet transformer_xl})
extra=()
[ -n "${ALPHA:-}" ] && extra+=(--alpha "$ALPHA")
[ -n "${HOPS:-}" ] && extra+=(--hops "$HOPS")
mkdir -p "$svg"
if [ -n "${JSONDIR:-}" ]; then tmp="$JSONDIR"; mkdir -p "$tmp"; else tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; fi
start=$(date +%s)
for g in "${graphs[@]}"; do
  for s in $(seq 1 "$seeds"); do
    for m in khop guided random local; do
      "$gopt" optimize "$g" --task fusion --cluster V100 --method "$m" --start default --budget "$budget" \
        --seed "$s" --policy "$model" --threads 2 --json --no-history "${extra[@]}" \
        >"$tmp/${g}_${m}_$s.json" 2>/dev/null || echo "eval_localadv: $g $m seed $s failed" >&2
    done
  done
  "$gopt" compare "$g" --task fusion --cluster V100 --methods khop,guided,random,local,xla --start default \
    --budget "$budget" --seed 1 --policy "$model" --threads 2 --no-history --plot "$svg/localadv_$g.svg" \
    "${extra[@]}" >/dev/null 2>&1 || echo "eval_localadv: $g: compare --plot failed" >&2
done
"$gopt" collect "${graphs[@]}" --task fusion --cluster V100 --samples "${HELD_SAMPLES:-1000}" --seed 101 \
  -o "$tmp/heldout.bin" >/dev/null
"$gopt" train --method localadv --data "$tmp/heldout.bin" --evaluate "$model" >"$tmp/kendall.tsv"
python3 "$here/tools/eval_localadv.py" "$tmp" "$budget" "$seeds" "${graphs[@]}"
echo "eval_localadv: $(( $(date +%s) - start )) s" >&2
