#!/usr/bin/env bash
# headroom.sh [GOPT] [EVAL_JSON]: the memory task's headroom on REGAL's held-out graphs (issue 23,
# "headroom first"; docs/LEARNED.md "REGAL's headroom"). For every (cluster, graph) of EVAL_JSON
# (default docs/learned/regal_eval.json, tools/eval_regal.sh's runs, so the graphs are exactly its
# held-out set): BRKGA and k-hop with 20x BRKGA-5K's budget (FACTOR, default 20: 100,000
# evaluations, start included, --start best; BUDGET overrides), seeds 1-3 (SEEDS), seed-major so that an
# interrupted run still covers every graph; on one-device clusters also dp (the exact optimum where
# it solves), and REGAL with 1,000 evaluations (issue 23's second target: does REGAL reach BRKGA-5K's
# result with a fifth of its budget?). Writes docs/learned/regal_headroom.json (OUT overrides) (a list of `gopt optimize --json` objects
# without curves) and prints the table (tools/headroom.py): the best known value per graph (the
# best of these runs and of every run in EVAL_JSON) and BRKGA-5K's and REGAL's gaps to it.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
eval_json="${2:-$here/docs/learned/regal_eval.json}"
seeds="${SEEDS:-1 2 3}"
budget="${BUDGET:-$(( ${FACTOR:-20} * 5000 ))}"
export GOPT_HISTORY=0 GOPT_PROGRESS=0
out="${OUT:-$here/docs/learned/regal_headroom.json}"
tmp="$out.tmp"
pairs=$(python3 -c 'import json, sys
seen = []
for r in json.load(open(sys.argv[1])):  # corpus models: the copy in this checkout
    m = r["model"]
    k = r["cluster"] + "\t" + (sys.argv[2] + "/corpus/" + m.split("/corpus/")[-1] if "/corpus/" in m else m)
    if k not in seen:
        seen.append(k)
print("\n".join(seen))' "$eval_json" "$here")
strip='import json, sys
d = json.load(sys.stdin)
d.pop("curve", None)
print(json.dumps(d))'
: > "$tmp"
start=$(date +%s)
for s in $seeds; do
  while IFS=$'\t' read -r cl m; do
    methods="brkga khop"
    [ "$s" = "$(echo $seeds | cut -d' ' -f1)" ] && [ "${cl#*x}" = "$cl" ] && methods="$methods dp"
    for meth in $methods regal; do
      b=$budget
      [ "$meth" = regal ] && b=1000
      nice "$gopt" optimize "$m" --task memory --cluster "$cl" --method "$meth" --budget "$b" --seed "$s" \
        --threads 2 --json 2>/dev/null | python3 -c "$strip" >> "$tmp" \
        || echo "headroom: $m $cl $meth seed $s failed" >&2
    done
  done <<< "$pairs"
  echo "headroom: seed $s done, $(( $(date +%s) - start )) s" >&2
done
python3 -c 'import json, sys
json.dump([json.loads(l) for l in open(sys.argv[1]) if l.strip()], open(sys.argv[2], "w"), indent=0)' "$tmp" "$out.tmp2"
mv "$out.tmp2" "$out"
rm -f "$tmp"
python3 "$here/tools/headroom.py" "$eval_json" "$out"
