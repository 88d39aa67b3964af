#!/usr/bin/env bash
# bench/exec/run.sh: the executor benchmark. For every corpus model (weights and inputs from
# tools/make_testdata.py), gopt's end-to-end time next to ONNX Runtime's (npm onnxruntime-node,
# graph optimisations on) and PyTorch's eager CPU time for the same model, inputs and thread count,
# with gopt's --layouts plain (no layout pass, no conv post-ops) and both reorder counts beside.
# gopt and ONNX Runtime are timed INTERLEAVED by bench/exec/pair_time.py: one long-lived process
# per engine (`gopt run --time --paced`, auto and plain layouts, and tools/ort/ort_run.js --paced),
# each warmed up WARMUP times, then REPS rounds in which every engine does one timed run in turn
# (who goes first rotates). The table gives each engine's median wall time and, as the figure the
# targets are judged on, the median over the rounds of gopt / ONNX Runtime in the same round (a
# slow spell of this shared machine hits both runs of a round); the same ratio of the runs' CPU
# times beside it (it leaves out the time a run waited for a core; with 1 thread on an idle machine
# it equals the wall ratio). No run is dropped. PyTorch is timed after them, as a block (median of
# REPS after WARMUP). OPENBLAS_NUM_THREADS is set to THREADS like OMP_NUM_THREADS: otherwise
# OpenBLAS (pthread build) starts one thread per core at load, each spinning on sched_yield for
# ~0.1 s, over the first timed runs of a small model. Then fused vs
# unfused elementwise groups on a chain-heavy model and on wavenet / gpt2_tiny; then the pass rate
# of the ONNX backend node tests (tests/exec/node_tests.py); then the per-ISA kernel figures
# (bench/exec/bench_exec_isa.c under GOPT_ISA=baseline|avx2|avx512 beside PyTorch's eager time of
# the same ops: bench_exec_torch.py kernels / chain). Prints markdown for docs.
# Usage: bench/exec/run.sh [isa] (isa: only the per-ISA section).
# Environment: GOPT (default build/bin/gopt, built Release unless it exists), DATA (test data,
# default build/exec-testdata), THREADS (1), WARMUP (3), REPS (10 timed runs; 20 rounds for the
# interleaved gopt / ONNX Runtime figures: PAIRS), MODELS (all corpus models).
set -euo pipefail
cd "$(dirname "$0")/../.."
GOPT=${GOPT:-build/bin/gopt}
DATA=${DATA:-build/exec-testdata}
THREADS=${THREADS:-1}
WARMUP=${WARMUP:-3}
REPS=${REPS:-10}
PAIRS=${PAIRS:-20}
MODELS=${MODELS:-"resnet18 mobilenet_v2 squeezenet1_1 densenet121 efficientnet_b0 inception_v3 shufflenet_v2_x1_0 vgg11 lraspp_mobilenet_v3_large lstm_seq2seq bert_tiny gpt2_tiny wavenet swin_t"}
PY=/usr/bin/python3
if [ ! -x "$GOPT" ]; then
  tools/install-deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" >/dev/null
fi
ISA_BENCH=$(dirname "$GOPT")/../bench/bench_exec_isa
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
# Per-ISA kernel figures: the same ops and ew_chain under each instruction set, PyTorch beside them.
isa_section() {
  echo "### Per-ISA kernel figures (GOPT_ISA=baseline|avx2|avx512; median of $REPS, $THREADS thread(s); PyTorch eager on the same op and shape)"
  echo
  mkdir -p "$DATA"
  [ -f "$DATA/ew_chain/model.onnx" ] ||
    $PY bench/exec/bench_exec_torch.py --threads "$THREADS" --warmup 1 --reps 1 chain --out "$DATA/ew_chain" >/dev/null
  local tk tc g
  tk=$($PY bench/exec/bench_exec_torch.py --threads "$THREADS" --warmup "$WARMUP" --reps "$REPS" kernels)
  tc=$($PY bench/exec/bench_exec_torch.py --threads "$THREADS" --warmup "$WARMUP" --reps "$REPS" chain --out "$DATA/ew_chain")
  g=$("$ISA_BENCH" --threads "$THREADS" --warmup "$WARMUP" --reps "$REPS" --chain "$DATA/ew_chain")
  $PY - "$tk" "$tc" "$g" <<'PYEOF'
import json, sys
tk, tc, g = (json.loads(a) for a in sys.argv[1:4])
torch = dict(tk["seconds"], ew_chain_fused=tc["seconds"], ew_chain_unfused=tc["seconds"])
isas = [i for i in ("baseline", "avx2", "avx512") if g["isas"].get(i)]
skipped = [i for i in ("baseline", "avx2", "avx512") if not g["isas"].get(i)]
print("| kernel | " + " | ".join(isas) + " | PyTorch eager | best / baseline | best / PyTorch |")
print("|---|" + "---|" * (len(isas) + 3))
for k in g["isas"][isas[0]]:
    ts = [g["isas"][i][k] for i in isas]
    best = min(ts)
    cells = " | ".join(f"{t*1e3:.3f} ms" for t in ts)
    print(f"| {k} | {cells} | {torch[k]*1e3:.3f} ms | {best/ts[0]:.2f} | {best/torch[k]:.2f} |")
if skipped:
    print(f"\n(not run, this CPU lacks them: {', '.join(skipped)})")
PYEOF
}
machine_line() { echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc --all) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); threads $THREADS, $WARMUP warm-ups, median of $REPS${1:-}"; }
if [ "${1:-}" = isa ]; then
  machine_line
  echo
  isa_section
  exit 0
fi
$PY tools/make_testdata.py corpus --out "$DATA" >&2
machine_line "; gopt and ONNX Runtime interleaved, $PAIRS rounds"
echo
[ -f .deps/node/node_modules/onnxruntime-node/package.json ] || tools/install-deps.sh test >&2
echo "| model | gopt run | gopt --layouts plain | ONNX Runtime | PyTorch eager | gopt / ONNX Runtime (median of per-round ratios) | same, CPU time | gopt / PyTorch | reorders per run (plain → auto) | peak live activations (gopt) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
gtime() { "$GOPT" run "$1" "${@:2}" --time --json --threads "$THREADS" --warmup "$WARMUP" --reps "$REPS" 2>/dev/null |
  $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["time"]["seconds"], d.get("peak_bytes", 0), d["layouts"]["reorders"], d["layouts"]["reorders_plain"])'; }
ratios=()
for m in $MODELS; do
  d=$DATA/$m
  read -r peak ra rp < <("$GOPT" run "$d/model.onnx" --inputs "$d" --json --threads "$THREADS" 2>/dev/null |
    $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["peak_bytes"], d["layouts"]["reorders"], d["layouts"]["reorders_plain"])')
  pt=$($PY bench/exec/pair_time.py "$GOPT" "$d" --threads "$THREADS" --warmup "$WARMUP" --reps "$PAIRS" \
       --gopt-args "" --gopt-args "--layouts plain")
  t=$($PY bench/exec/bench_exec_torch.py --threads "$THREADS" --warmup "$WARMUP" --reps "$REPS" time "$m" "$d" |
      $PY -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
  row=$($PY -c "
import json
d, t, p = json.loads('$pt'), $t, $peak
(g, gp), o, (r, _), (rc, _) = d['gopt'], d['ort'], d['ratio'], d['ratio_cpu']
print(f'| $m | {g*1e3:.2f} ms | {gp*1e3:.2f} ms | {o*1e3:.2f} ms | {t*1e3:.2f} ms | {r:.2f} | {rc:.2f} | {g/t:.2f} | $rp → $ra | {p/2**20:.1f} MiB |', f'{r}:{rc}')")
  echo "${row% *}"
  ratios+=("${row##* }")
done
$PY -c "
import math, sys
for k, what in ((0, 'wall'), (1, 'CPU time')):
    r = [float(v.split(':')[k]) for v in sys.argv[1:]]
    g = math.exp(sum(map(math.log, r)) / len(r))
    print(f'\ngeometric mean of gopt / ONNX Runtime ({what}): {g:.2f}; highest: {max(r):.2f}')" "${ratios[@]}"
echo
echo "### Fused vs unfused elementwise groups (--fusion auto: every chain of elementwise ops as one loop)"
echo
echo "| model | groups | unfused | fused | speedup | PyTorch eager |"
echo "|---|---|---|---|---|---|"
ct=$($PY bench/exec/bench_exec_torch.py --threads "$THREADS" --warmup "$WARMUP" --reps "$REPS" chain --out "$DATA/ew_chain" |
     $PY -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
for m in ew_chain wavenet gpt2_tiny; do
  d=$DATA/$m
  "$GOPT" run "$d/model.onnx" --check "$d" --fusion auto >/dev/null 2>&1 || { echo "fused $m does not match its reference" >&2; exit 1; }
  read -r u _ < <(gtime "$d/model.onnx" --inputs "$d")
  read -r f _ < <(gtime "$d/model.onnx" --inputs "$d" --fusion auto)
  ng=$("$GOPT" run "$d/model.onnx" --inputs "$d" --fusion auto --json 2>/dev/null | $PY -c 'import json,sys; print(json.load(sys.stdin)["fusion_groups"])')
  tt=-
  [ "$m" = ew_chain ] && tt=$($PY -c "print(f'{$ct*1e3:.2f} ms')")
  $PY -c "u,f=$u,$f; print(f'| $m | $ng | {u*1e3:.2f} ms | {f*1e3:.2f} ms | {u/f:.2f}x | $tt |')"
done
echo
echo "### ONNX backend node tests (onnx v1.22.0 from ../shared, \`gopt run --check\` on each; exclusions with reasons in tests/exec/node_excluded.txt)"
echo
$PY tests/exec/node_tests.py extract "${NODE_ARCHIVE:-../shared/onnx-node-tests-v1.22.0.tar.gz}" "$DATA/onnx-node-tests" >/dev/null
$PY tests/exec/node_tests.py run "$GOPT" "$DATA/onnx-node-tests" tests/exec/node_excluded.txt --jobs "$(nproc)" | tail -1 || true
echo
isa_section
