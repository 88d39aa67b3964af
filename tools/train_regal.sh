#!/usr/bin/env bash
# train_regal.sh [GOPT] [OUTDIR]: REGAL for the memory task (docs/LEARNED.md, "REGAL").
#   1. grid: the grid search that chose brkga-tuned's population and fractions: brkga-regal with
#      every --brkga P,E,M,B of the grid below at 5,000 evaluations (seed 1, --start best) on the
#      grid graphs (a subset of the training graphs); score = geometric mean over the graphs of the
#      peak memory relative to brkga-regal's defaults (100,0.2,0.1,0.7). Writes
#      docs/learned/regal_grid.tsv (best first, with the GPU cost model version that produced it).
#      src/search/search_brkga.c's TUNED_* hold the winner of the roofline-v1 grid
#      (docs/learned/regal_grid_roofline-v1.tsv), not necessarily this file's: docs/LEARNED.md, "REGAL".
#   2. train: `gopt train --method regal` on the training graphs into OUTDIR/memory_regal.gpol;
#      TASK=placement (schedule, joint, fusion) trains OUTDIR/placement_regal.gpol (...) instead
#      (`PHASES=train TASK=placement`: the grid is the memory task's), what `gopt compare --task
#      placement` runs as its regal row.
# Training graphs: zoo resnet50 (depth 18, 50), inception_v3, transformer, gpt2, rnnlm, amoebanet at
# small settings and the corpus models resnet18, vgg11, mobilenet_v2, squeezenet1_1, gpt2_tiny,
# lstm_seq2seq, all on 2xV100-nvlink. Held out (never trained or tuned on): the whole BERT, GNMT,
# DenseNet, EfficientNet, ShuffleNet and WaveNet families (zoo and corpus). PHASES (default
# "grid train": both, side by side), ITERS (default 300), SAMPLES (default 4), EVALS (default 500: evaluations per
# training run), THREADS (default 2) and SEED (default 1) override the settings.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
out="${2:-$here/policies}"
phases="${PHASES:-grid train}"
c="$here/corpus"
cl="2xV100-nvlink"
train="resnet50:depth=18;resnet50;inception_v3;transformer:layers=2,seq=32;gpt2:layers=2;rnnlm:steps=10"
train+=";amoebanet:cells=2;$c/resnet18.onnx;$c/vgg11.onnx;$c/mobilenet_v2.onnx;$c/squeezenet1_1.onnx"
train+=";$c/gpt2_tiny.onnx;$c/lstm_seq2seq.onnx"
grid_graphs="resnet50:depth=18 transformer:layers=2,seq=32 gpt2:layers=2 rnnlm:steps=10 $c/mobilenet_v2.onnx"
export GOPT_HISTORY=0 GOPT_PROGRESS=0
grid() {
  local tsv="$here/docs/learned/regal_grid.tsv" tmp="$here/docs/learned/regal_grid.tsv.tmp" start=$(date +%s)
  : > "$tmp"
  for p in 30 100 200; do for e in 0.1 0.25; do for m in 0.05 0.2; do for b in 0.6 0.8; do
    printf '%s,%s,%s,%s' "$p" "$e" "$m" "$b" >> "$tmp"
    for g in $grid_graphs; do
      o=$(nice "$gopt" optimize "$g" --task memory --cluster "$cl" --method brkga-regal --budget 5000 \
          --seed 1 --threads 2 --brkga "$p,$e,$m,$b" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["objective"])')
      printf '\t%s' "$o" >> "$tmp"
    done
    echo >> "$tmp"
  done; done; done; done
  local preset
  preset=$("$gopt" devices | sed -n 's/^ *cost model: measured-GPU \([^ ]*\).*/\1/p' | head -1)
  python3 - "$tmp" "$tsv" "$gopt" "$cl" "${preset:-unknown}" $grid_graphs <<'PY'
import json, math, subprocess, sys
tmp, tsv, gopt, cl, preset, graphs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
shown = ["corpus/" + g.split("/corpus/")[-1] if "/corpus/" in g else g for g in graphs]
rows = [l.rstrip("\n").split("\t") for l in open(tmp) if l.strip()]
ref = []
for g in graphs:  # brkga-regal's defaults, the same budget and seed
    o = subprocess.run(["nice", gopt, "optimize", g, "--task", "memory", "--cluster", cl, "--method", "brkga-regal",
                        "--budget", "5000", "--seed", "1", "--threads", "2", "--json"], check=True,
                       capture_output=True, text=True).stdout
    ref.append(json.loads(o)["objective"])
scored = []
for r in rows:
    v = [float(x) for x in r[1:]]
    scored.append((math.exp(sum(math.log(a / b) for a, b in zip(v, ref)) / len(v)), r[0], v))
scored.sort()
with open(tsv, "w") as f:
    f.write("# brkga-regal --brkga P,E,M,B at 5000 evaluations, seed 1, --start best, 2xV100-nvlink (cost model %s)\n" % preset)
    f.write("# score: geometric mean of peak memory / brkga-regal defaults (100,0.2,0.1,0.7); graphs: %s\n" % " ".join(shown))
    f.write("params\tscore\t" + "\t".join(shown) + "\n")
    f.write("defaults\t1.000000\t" + "\t".join("%.0f" % x for x in ref) + "\n")
    for s, p, v in scored:
        f.write("%s\t%.6f\t%s\n" % (p, s, "\t".join("%.0f" % x for x in v)))
print("grid: best %s (score %.4f)" % (scored[0][1], scored[0][0]))
PY
  rm -f "$tmp"
  echo "grid: $(( $(date +%s) - start )) s"
}

train() {
  local start=$(date +%s) task="${TASK:-memory}"
  mkdir -p "$out"
  nice "$gopt" train --method regal --task "$task" --cluster "$cl" --graphs "$train" -o "$out/${task}_regal.gpol" \
    --iters "${ITERS:-300}" --samples "${SAMPLES:-4}" --regal-evals "${EVALS:-500}" --threads "${THREADS:-2}" \
    --seed "${SEED:-1}"
  echo "train: $(( $(date +%s) - start )) s"
}

# the phases run side by side (each is niced; neither reads what the other writes)
pids=""
for phase in $phases; do
  case "$phase" in
    grid) grid & pids="$pids $!" ;;
    train) train & pids="$pids $!" ;;
    *) echo "train_regal.sh: unknown phase '$phase' (grid, train)" >&2; exit 2 ;;
  esac
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
exit $rc
