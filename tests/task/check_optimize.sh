#!/usr/bin/env bash
# check_optimize.sh GOPT PYTHON: for every task, `gopt optimize ... -o F --json` followed by
# `gopt simulate ... --decisions F --json` must give the same step time (time tasks) or the same
# peak memory (memory task) as the objective optimize reported, for a baseline and a search
# method, on a zoo model and a corpus model. Then `gopt compare` runs on both models for every
# task with a small budget: every standard baseline and every applicable search method appears
# once, the improvement column matches the objectives, and --plot writes a parseable SVG.
set -euo pipefail
GOPT="$1"
PY="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cluster_of() {
  case "$1" in
    fusion) echo V100 ;;
    memory) echo 2xV100-nvlink ;;
    *) echo 4xV100-nvlink ;;
  esac
}
baseline_of() {
  case "$1" in
    placement) echo m_etf ;;
    fusion) echo tvm ;;
    schedule) echo critical_path ;;
    memory) echo metis+mem_greedy ;;
    joint) echo m_etf+tvm ;;
  esac
}

n=0
for model in inception_v3 corpus/squeezenet1_1.onnx; do
  for task in placement fusion schedule memory joint; do
    cl=$(cluster_of $task)
    for method in "$(baseline_of $task)" local; do
      "$GOPT" optimize "$model" --task $task --cluster $cl --method "$method" --budget 40 --seed 3 \
        --threads 2 -o "$tmp/d.json" --json >"$tmp/opt.json" 2>"$tmp/err"
      "$GOPT" simulate "$model" --cluster $cl --decisions "$tmp/d.json" --json >"$tmp/sim.json" 2>>"$tmp/err"
      "$PY" - "$tmp/opt.json" "$tmp/sim.json" "$task" "$model" "$method" <<'EOF'
import json, sys
o = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2]))
task, model, method = sys.argv[3:6]
peak = max(d["peak_mem_bytes"] for d in s["devices"])
assert o["step_time_s"] == s["step_time_s"], (task, model, method, o["step_time_s"], s["step_time_s"])
assert o["peak_mem_bytes"] == peak, (task, model, method, o["peak_mem_bytes"], peak)
assert o["feasible"] == s["feasible"]
want = peak if task == "memory" else s["step_time_s"]
if s["feasible"]:
    assert o["objective"] == want, (task, model, method, o["objective"], want)
assert o["repaired"] == 0 or method == "local", o
d, impr = o["default_objective"], o["improvement_pct"]
assert abs(impr - 100 * (d - o["objective"]) / d) < 1e-9
print(f"ok: optimize -> simulate: {model} {task} {method}: objective {o['objective']:.6g}, "
      f"{impr:+.2f}% vs default, {o['evaluations']} evaluations")
EOF
      n=$((n + 1))
    done
  done
done

for model in resnet50 corpus/squeezenet1_1.onnx; do
  for task in placement fusion schedule memory joint; do
    cl=$(cluster_of $task)
    "$GOPT" compare "$model" --task $task --cluster $cl --budget 30 --threads 2 --json \
      --plot "$tmp/p.svg" >"$tmp/cmp.json" 2>"$tmp/err"
    "$GOPT" compare "$model" --task $task --cluster $cl --budget 30 --threads 2 >"$tmp/cmp.txt" 2>"$tmp/err"
    "$PY" - "$tmp/cmp.json" "$tmp/p.svg" "$tmp/cmp.txt" "$task" "$model" <<'EOF'
import json, sys, xml.dom.minidom
c = json.load(open(sys.argv[1])); task, model = sys.argv[4:6]
names = [r["method"] for r in c["results"]]
assert len(names) == len(set(names)), names
kinds = {r["method"]: r["kind"] for r in c["results"]}
nb = sum(1 for k in kinds.values() if k == "baseline")
ns = sum(1 for k in kinds.values() if k == "search")
assert nb >= 3, names
assert ns + len(c["skipped"]) >= 5, (names, c["skipped"])
d = c["default_objective"]
for r in c["results"]:
    assert abs(r["improvement_pct"] - 100 * (d - r["objective"]) / d) < 1e-9
    if r["kind"] == "search":
        assert 1 <= r["evaluations"] <= 30 or r["optimal"], r
        assert r["objective"] <= d * (1 + 1e-12), r   # never worse than its start (the default)
    elif r["kind"] == "learned":   # go: greedy + samples (+ fine-tuning), each evaluated
        assert r["evaluations"] >= 1, r
    else:
        assert r["evaluations"] == 1, r
svg = xml.dom.minidom.parse(sys.argv[2])
nl = sum(1 for k in kinds.values() if k == "learned")
assert len(svg.getElementsByTagName("polyline")) == ns + nl
txt = open(sys.argv[3]).read()
for m in names:
    assert m in txt, m
print(f"ok: compare {model} {task}: {nb} baselines, {ns} search methods, {len(c['skipped'])} skipped")
EOF
  done
done
echo "check_optimize: $n optimize/simulate pairs and 10 comparisons passed"
