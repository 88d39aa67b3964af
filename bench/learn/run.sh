#!/usr/bin/env bash
# bench/learn/run.sh [BUILD_DIR]: the learned policy (go) at GO's scale: zero-shot greedy inference
# (one forward pass + one evaluation, --samples 0) with the shipped policies on the 80,000-node
# Inception-v3 graph and a 12,907-node GNMT, and placement's default zero-shot run (--samples 16: 17
# decisions over the policy's clusters and single nodes, and their evaluations), through `gopt
# optimize --method go`; prints a Markdown table of go's own seconds (from --json) and the
# process's peak RSS (model build included).
set -euo pipefail
cd "$(dirname "$0")/../.."
b="${1:-build}"
echo "| graph | nodes | task | --samples | go seconds (forward, decisions, evaluations) | process peak RSS |"
echo "|---|---:|---|---:|---:|---:|"
for spec in "inception_v3:repeat=309 placement 4xV100-nvlink 0" "inception_v3:repeat=309 joint 4xV100-nvlink 0" \
  "gnmt placement 8xV100-nvlink 0" "inception_v3:repeat=309 placement 4xV100-nvlink 16" "gnmt placement 8xV100-nvlink 16"; do
  read -r m t c k <<<"$spec"
  out=$(mktemp)
  /usr/bin/time -v "$b/bin/gopt" optimize "$m" --task "$t" --cluster "$c" --method go --samples "$k" --json \
    --no-history >"$out.json" 2>"$out"
  /usr/bin/python3 - "$out.json" "$out" "$m" "$t" "$k" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[2]).read()).group(1))
print(f"| `{sys.argv[3]}` | {j['nodes']:,} | {sys.argv[4]} | {sys.argv[5]} | {j['seconds']:.2f} | {rss/1024:.0f} MB |")
PY
  rm -f "$out" "$out.json"
done
