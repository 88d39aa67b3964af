#!/usr/bin/env bash
# eval_learned.sh [GOPT] [BUDGET]: the shipped GO policies on held-out graphs (docs/LEARNED.md's
# split: WaveNet, Transformer-XL, corpus wavenet/densenet121/efficientnet_b0/shufflenet_v2) against
# the task's baselines and search methods, via `gopt compare --json` (search budget BUDGET
# evaluations, default 200). Prints a markdown table: each method's objective relative to the best
# baseline (lower is better) and go's evaluations. FINETUNE=N adds go fine-tuning for N evaluations.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
budget="${2:-200}"
ft=()
[ -n "${FINETUNE:-}" ] && ft=(--finetune "$FINETUNE")
c="$here/corpus"
graphs=(wavenet transformer_xl "$c/wavenet.onnx" "$c/densenet121.onnx" "$c/efficientnet_b0.onnx" "$c/shufflenet_v2_x1_0.onnx")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| task | cluster | graph | go | best search (method) | go evals |"
echo "| --- | --- | --- | --- | --- | --- |"
for task in placement fusion schedule joint; do
  clusters="2xV100-nvlink 8xH100"
  [ "$task" = fusion ] && clusters="V100"
  for cl in $clusters; do
    for g in "${graphs[@]}"; do
      "$gopt" compare "$g" --task "$task" --cluster "$cl" --budget "$budget" --threads 2 --json \
        ${ft[@]+"${ft[@]}"} >"$tmp/c.json" 2>/dev/null || { echo "| $task | $cl | $(basename "$g") | failed | | |"; continue; }
      /usr/bin/python3 - "$tmp/c.json" "$task" "$cl" "$(basename "$g")" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); task, cl, g = sys.argv[2:5]
rs = c["results"]
fit = lambda r: (not r["feasible"], r["objective"])
base = min((r for r in rs if r["kind"] == "baseline"), key=fit)
srch = [r for r in rs if r["kind"] == "search"]
go = [r for r in rs if r["method"] == "go"]
bs = min(srch, key=fit) if srch else None
rel = lambda r: f'{r["objective"] / base["objective"]:.3f}' + ("" if r["feasible"] else "*")
print(f'| {task} | {cl} | {g} | {rel(go[0]) if go else "skipped"} | '
      f'{rel(bs) + " (" + bs["method"] + ")" if bs else "-"} | {go[0]["evaluations"] if go else "-"} |')
PY
    done
  done
done
