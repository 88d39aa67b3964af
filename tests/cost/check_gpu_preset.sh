#!/usr/bin/env bash
# check_gpu_preset.sh GOPT PYTHON: the shipped H100 preset is the calibration of the committed
# measurements: `gopt calibrate --gpu ../shared/gpu/h100_corpus.json` (with the grouped-convolution
# grid and the 13 extra architectures of tests/cost/data) written to a file predicts
# the same simulated steps as --cluster H100 (batch 1, 32, training), and V100 scales it. Exit 77
# (skipped) when the measurements are not there.
set -eu
gopt=$1; py=$2
data=../shared/gpu/h100_corpus.json
[ -f "$data" ] || { echo "skipped: $data not found"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$gopt" calibrate --gpu "$data" --gpu tests/cost/data/h100_grouped_conv.json --gpu tests/cost/data/h100_calib_extra.json \
    --models corpus --models tests/cost/data/calib --device H100 -o "$tmp/h100.json" > /dev/null
for spec in "corpus/resnet18.onnx" "corpus/resnet18.onnx --batch 32 --training" "corpus/bert_tiny.onnx --batch 32" \
            "corpus/mobilenet_v2.onnx --batch 32" "corpus/swin_t.onnx --batch 32 --training" "corpus/lstm_seq2seq.onnx"; do
  "$gopt" simulate $spec --cluster "$tmp/h100.json" --json > "$tmp/a.json" 2>/dev/null
  "$gopt" simulate $spec --cluster H100 --json > "$tmp/b.json" 2>/dev/null
  "$gopt" simulate $spec --cluster V100 --json > "$tmp/v.json" 2>/dev/null
  "$py" - "$tmp/a.json" "$tmp/b.json" "$tmp/v.json" "$spec" <<'PY'
import json, sys
a, b, v = (json.load(open(p))["step_time_s"] for p in sys.argv[1:4])
assert abs(a / b - 1) < 1e-6, ("the H100 preset is not the calibration of the data: rerun tools/gpu_preset.py", sys.argv[4], a, b)
assert v > 1.5 * b, ("V100 should be slower than H100", sys.argv[4], v, b)
print("ok", sys.argv[4], "H100 %.4f ms, V100 %.4f ms" % (b * 1e3, v * 1e3))
PY
done
