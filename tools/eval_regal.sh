#!/usr/bin/env bash
# eval_regal.sh [GOPT] [POLICY]: REGAL's evaluation in docs/LEARNED.md ("REGAL"), one command.
# Held-out graphs only (families never trained or tuned on, tools/train_regal.sh). Every method at
# the same budget, 5,000 evaluations (BRKGA-5K's), its start's included (--start best: the best of
# the default and the task's baselines), seeds 1-3 (SEEDS overrides):
#   A. 2xV100-nvlink: regal (the policy, default policies/memory_regal.gpol), brkga-regal (the same
#      search with uniform keys: the policy's own contribution), brkga (BRKGA-5K), brkga-tuned,
#      local search, and metis+dfs (the closest to REGAL's graph partition + DFS);
#   B. one V100: the same searches and dp, the exact peak-memory optimum (graphs <= 40 nodes).
# Writes docs/learned/regal_eval.json and prints the tables (tools/eval_regal.py). The best known value
# per graph and BRKGA-5K's and REGAL's gaps to it: tools/headroom.sh (reads that file).
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
policy="${2:-$here/policies/memory_regal.gpol}"
seeds="${SEEDS:-1 2 3}"
c="$here/corpus"
export GOPT_HISTORY=0 GOPT_PROGRESS=0
out="$here/docs/learned/regal_eval.json"
tmp="$out.tmp"
echo "[" > "$tmp"
first=1
run() { # cluster methods model
  for s in $seeds; do
    [ $first = 1 ] || echo "," >> "$tmp"
    first=0
    nice "$gopt" compare "$3" --task memory --cluster "$1" --methods "$2" --budget 5000 --seed "$s" --threads 2 \
      --policy "$policy" --json | python3 -c 'import json, sys
d = json.load(sys.stdin)
for r in d["results"]:
    r.pop("curve", None)
json.dump(d, sys.stdout)' >> "$tmp"
  done
}
start=$(date +%s)
for m in "bert:layers=2" "gnmt:layers=2,steps=2" "wavenet:blocks=2,layers=4" "$c/bert_tiny.onnx" "$c/wavenet.onnx" \
         "$c/efficientnet_b0.onnx" "$c/shufflenet_v2_x1_0.onnx" "$c/densenet121.onnx"; do
  run 2xV100-nvlink regal,brkga-regal,brkga,brkga-tuned,local,metis+dfs "$m"
done
for m in "wavenet:blocks=1,layers=2" "wavenet:blocks=1,layers=3"; do
  run V100 regal,brkga-regal,brkga,brkga-tuned,local,dp "$m"
done
echo "]" >> "$tmp"
mv "$tmp" "$out"
echo "eval_regal: $(( $(date +%s) - start )) s" >&2
python3 "$here/tools/eval_regal.py" "$out"
