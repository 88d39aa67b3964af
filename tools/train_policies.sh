#!/usr/bin/env bash
# train_policies.sh [GOPT] [OUTDIR]: trains the shipped GO policies, one per task (placement,
# fusion, schedule, joint), into OUTDIR (default policies/) with `gopt train`.
# Training set: zoo models at many knob settings plus corpus models, on 2-, 4- and 8-device
# clusters of several presets; placement also on training steps (below). Held out for evaluation
# (never trained on): every WaveNet and Transformer-XL (zoo and corpus) and the corpus models
# densenet121, efficientnet_b0 and shufflenet_v2_x1_0. ITERS (default 1000; placement 2000),
# SAMPLES (default 8; placement 16), LR (Adam's learning rate: gopt train's 3e-3; placement 1e-3),
# COARSE (placement: gopt train --coarse, the share of a training step's PPO batches at go's
# coarsest level; default 0, docs/LEARNED.md "Training at the coarsest level"),
# THREADS (default 2) and SEED (default 1) override the settings; IMITATE (default 0) of the ITERS
# iterations are the imitation warm start (cross-entropy to each graph's best baseline) before PPO;
# TASKS (default all four) picks the tasks; EXTRA adds arguments to every `gopt train` (e.g.
# "--stop-after 250", or "--resume --stop-after 500": tools/placement_curve.sh). A new placement policy has the segment-level device head
# with the clusters' list-schedule features (docs/LEARNED.md "Segment-level placement").
# docs/LEARNED.md records the run that produced policies/.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
out="${2:-$here/policies}"
iters="${ITERS:-}"
samples="${SAMPLES:-}"
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
# Placement also trains on training steps (SPEC@training), at large batches and on models that do not
# fit one device (GPT-2 medium and BERT-large training steps on V100s: memory-forced splits), and on
# 4xV100-nvlink besides the slow 4xV100-pcie links (docs/LEARNED.md "Training distribution").
place="resnet50:batch=32@training;inception_v3:batch=32@training;transformer:batch=16@training"
place+=";gpt2:seq=1024,batch=4@training;$c/vgg11.onnx@training;gnmt:layers=4,steps=10,batch=256@training"
place+=";bert:layers=24,hidden=1024,heads=16,intermediate=4096,batch=8@training;$c/resnet18.onnx@training"
place+=";gpt2:layers=24,d_model=1024,heads=16,seq=1024,batch=8@training"
place+=";bert:layers=24,hidden=1024,heads=16,intermediate=4096,batch=32,seq=512@training"
for task in $tasks; do
  clusters="$multi"
  set_graphs="$graphs"
  [ "$task" = placement ] && clusters="$multi,4xV100-nvlink" && set_graphs="$graphs;$place"
  [ "$task" = fusion ] && clusters="V100,A100,TPUv3"   # fusion is decided for one device
  it="${iters:-1000}" k="${samples:-8}" lr=()
  [ -n "${LR:-}" ] && lr=(--lr "$LR")
  if [ "$task" = placement ]; then  # 256 cluster decisions: more samples per batch, a smaller step
    it="${iters:-2000}" k="${samples:-16}"
    lr=(--lr "${LR:-1e-3}" --coarse "${COARSE:-0}")
  fi
  start=$(date +%s)
  "$gopt" train --task "$task" --cluster "$clusters" --graphs "$set_graphs" -o "$out/$task.gpol" \
    --iters "$it" --imitate "$imitate" --samples "$k" --threads "$threads" --seed "$seed" "${lr[@]}" ${EXTRA:-}
  echo "$task: $(( $(date +%s) - start )) s"
done
