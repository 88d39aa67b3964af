#!/usr/bin/env bash
# train_policies.sh [GOPT] [OUTDIR]: trains the shipped GO policies, one per task (placement,
# fusion, schedule, joint), into OUTDIR (default policies/) with `gopt train`.
# Training set: zoo models at many knob settings plus corpus models, on 2-, 4- and 8-device
# clusters of several presets. Held out for evaluation (never trained on): every WaveNet and
# Transformer-XL (zoo and corpus) and the corpus models densenet121, efficientnet_b0 and
# shufflenet_v2_x1_0. ITERS (default 1000), SAMPLES (default 8), THREADS (default 2) and SEED
# (default 1) override the settings; IMITATE (default 0) of the ITERS iterations are the imitation
# warm start (cross-entropy to each graph's best baseline) before PPO; TASKS (default all four)
# picks the tasks. A new placement policy has the segment-level device head (docs/LEARNED.md
# "Segment-level placement"). docs/LEARNED.md records the run that produced policies/.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
out="${2:-$here/policies}"
iters="${ITERS:-1000}"
samples="${SAMPLES:-8}"
threads="${THREADS:-2}"
seed="${SEED:-1}"
imitate="${IMITATE:-0}"
tasks="${TASKS:-placement fusion schedule joint}"
mkdir -p "$out"
c="$here/corpus"
graphs="resnet50:depth=18;resnet50;resnet50:depth=101,batch=8;inception_v3;inception_v3:batch=16"
graphs+=";transformer:layers=2,seq=64;transformer;bert:layers=4;bert:layers=12,seq=256"
graphs+=";gpt2:layers=2;gpt2:layers=6,seq=512;gnmt:layers=2,steps=10;gnmt:layers=4,steps=20"
graphs+=";amoebanet:cells=2;rnnlm:steps=10;rnnlm:layers=3,steps=20"
graphs+=";$c/resnet18.onnx;$c/vgg11.onnx;$c/mobilenet_v2.onnx;$c/squeezenet1_1.onnx;$c/bert_tiny.onnx"
graphs+=";$c/gpt2_tiny.onnx;$c/lstm_seq2seq.onnx;$c/lraspp_mobilenet_v3_large.onnx"
multi="2xV100-nvlink,4xV100-pcie,4xTPUv3,8xA100,8xH100"
for task in $tasks; do
  clusters="$multi"
  [ "$task" = fusion ] && clusters="V100,A100,TPUv3"   # fusion is decided for one device
  start=$(date +%s)
  "$gopt" train --task "$task" --cluster "$clusters" --graphs "$graphs" -o "$out/$task.gpol" \
    --iters "$iters" --imitate "$imitate" --samples "$samples" --threads "$threads" --seed "$seed"
  echo "$task: $(( $(date +%s) - start )) s"
done
