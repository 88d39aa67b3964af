#!/usr/bin/env bash
# train_fusion_host.sh [GOPT] [OUT]: trains the host fusion policy (policies/fusion_host.gpol,
# which `gopt optimize --task fusion --method go` prefers on a cpu cluster) with `gopt train` on the
# host target: its fusion legality is gopt's executor's (docs/TASKS.md "Fusion legality per
# target"), its costs the host preset's with the executor's post-op chains as fused groups. Same
# training set as tools/train_policies.sh (zoo models at several sizes and the corpus models it
# trains on; wavenet, Transformer-XL, densenet121, efficientnet_b0 and shufflenet_v2_x1_0 held
# out). ITERS (default 600), SAMPLES (8), THREADS (1: the shared 2-core host), SEED (1) and
# IMITATE (default 150: a warm start imitating each graph's best baseline) override the settings.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
out="${2:-$here/policies/fusion_host.gpol}"
c="$here/corpus"
graphs="resnet50:depth=18;resnet50;inception_v3;transformer:layers=2,seq=64;transformer;bert:layers=4"
graphs+=";gpt2:layers=2;gnmt:layers=2,steps=10;amoebanet:cells=2;rnnlm:steps=10"
graphs+=";$c/resnet18.onnx;$c/vgg11.onnx;$c/mobilenet_v2.onnx;$c/squeezenet1_1.onnx;$c/bert_tiny.onnx"
graphs+=";$c/gpt2_tiny.onnx;$c/lstm_seq2seq.onnx;$c/lraspp_mobilenet_v3_large.onnx"
start=$(date +%s)
"$gopt" train --task fusion --cluster host --graphs "$graphs" -o "$out" --iters "${ITERS:-600}" \
  --imitate "${IMITATE:-150}" --samples "${SAMPLES:-8}" --threads "${THREADS:-1}" --seed "${SEED:-1}" --no-history
echo "fusion (host): $(( $(date +%s) - start )) s"
