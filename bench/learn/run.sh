#!/usr/bin/env bash
# bench/learn/run.sh [BUILD_DIR]: the learned policy (go) at GO's scale: zero-shot greedy inference
# (one forward pass + one evaluation, --samples 0) with the shipped policies on the 80,000-node
# Inception-v3 graph and a 12,907-node GNMT, through `gopt optimize --method go`; prints a Markdown
# table of go's own seconds (from --json) and the process's peak RSS (model build included).
set -euo pipefail
cd "$(dirname "$0")/../.."
b="${1:-build}"
echo "| graph | nodes | task | go seconds (forward + 1 evaluation) | process peak RSS |"
echo "|---|---:|---|---:|---:|"
for spec in "inception_v3:repeat=309 placement 4xV100-nvlink" "inception_v3:repeat=309 joint 4xV100-nvlink" \
  "gnmt placement 8xV100-nvlink"; do
  read -r m t c <<<"$spec"
  out=$(mktemp)
  /usr/bin/time -v "$b/bin/gopt" optimize "$m" --task "$t" --cluster "$c" --method go --samples 0 --json \
    --no-history >"$out.json" 2>"$out"
  /usr/bin/python3 - "$out.json" "$out" "$m" "$t" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[2]).read()).group(1))
print(f"| `{sys.argv[3]}` | {j['nodes']:,} | {sys.argv[4]} | {j['seconds']:.2f} | {rss/1024:.0f} MB |")
PY
  rm -f "$out" "$out.json"
done
