#!/usr/bin/env bash
# check_gpu_profile.sh GOPT PYTHON: tools/gpu_profile.py without a GPU: --help, argument checks
# (one error, non-zero exit), and a CPU --dry-run (a small corpus architecture with its layer rows,
# an ONNX model through tools/onnx_torch.py, the micro-benchmarks) whose file is well formed and
# loads into gopt calibrate --gpu.
set -eu
gopt=$1; py=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$py" tools/gpu_profile.py --help | grep -q -- "--dry-run"
if "$py" tools/gpu_profile.py -o "$tmp/x.json" --onnx "$tmp/none.onnx" 2> "$tmp/err"; then echo "FAIL: missing --onnx file accepted"; exit 1; fi
grep -q "none.onnx: no such file" "$tmp/err"
if "$py" tools/gpu_profile.py -o "$tmp/x.json" --batch 0 2> "$tmp/err"; then echo "FAIL: --batch 0 accepted"; exit 1; fi
"$py" tools/gpu_profile.py --dry-run --arch wavenet --onnx corpus/squeezenet1_1.onnx --batch 2 -o "$tmp/m.json" 2> "$tmp/log"
"$py" - "$tmp/m.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dry_run"] is True and d["batch"] == 2, d.get("dry_run")
assert set(d["models"]) == {"wavenet", "squeezenet1_1"}, list(d["models"])
for name, m in d["models"].items():
    for k in ("infer_b1_graph_ms", "infer_b32_kernel_ms", "train_b32_kernel_ms"):
        assert m[k] > 0, (name, k)
rows = d["models"]["wavenet"]["layers_b32"]
assert rows and all(r["fwd_gpu_ms"] > 0 and r["count"] >= 1 and r["in"] for r in rows), rows[:2]
assert "layers_b1" not in d["models"]["squeezenet1_1"]  # ONNX models: whole-model rows only
ops = {r["op"] for r in d["micro"]}
assert {"Add", "MatMul", "BatchMatMul", "Softmax", "LSTM", "MaxPool"} <= ops, ops
print("ok", len(rows), "layer rows,", len(d["micro"]), "micro")
PY
"$gopt" calibrate --gpu "$tmp/m.json" --models corpus -o "$tmp/dev.json" | head -1 | grep -q "calibrated H100 from"
"$gopt" simulate corpus/squeezenet1_1.onnx --cluster "$tmp/dev.json" > /dev/null 2>&1
echo ok
