#!/usr/bin/env bash
# bench/exec/run.sh: the executor benchmark. For every corpus model (weights and inputs from
# tools/make_testdata.py), `gopt run --time` end to end next to PyTorch's eager CPU time and ONNX
# Runtime's (npm onnxruntime-node through tools/ort/ort_compare.py, graph optimisations on) for the
# same model, inputs and thread count, measured one after the other in the same run (medians of
# REPS after WARMUP; the ratios gopt/PyTorch and gopt/ONNX Runtime are the figures), with gopt's
# --layouts plain (no layout pass, no conv post-ops) and both reorder counts beside; then fused vs
# unfused elementwise groups on a chain-heavy model and on wavenet / gpt2_tiny; then the pass rate
# of the ONNX backend node tests (tests/exec/node_tests.py); then the per-ISA kernel figures
# (bench/exec/bench_exec_isa.c under GOPT_ISA=baseline|avx2|avx512 beside PyTorch's eager time of
# the same ops: bench_exec_torch.py kernels / chain). Prints markdown for docs.
# Usage: bench/exec/run.sh [isa] (isa: only the per-ISA section).
# Environment: GOPT (default build/bin/gopt, built Release unless it exists), DATA (test data,
# default build/exec-testdata), THREADS (1), WARMUP (3), REPS (10), MODELS (all corpus models).
set -euo pipefail
cd "$(dirname "$0")/../.."
GOPT=${GOPT:-build/bin/gopt}
DATA=${DATA:-build/exec-testdata}
THREADS=${THREADS:-1}
WARMUP=${WARMUP:-3}
REPS=${REPS:-10}
MODELS=${MODELS:-"resnet18 mobilenet_v2 squeezenet1_1 densenet121 efficientnet_b0 inception_v3 shufflenet_v2_x1_0 vgg11 lraspp_mobilenet_v3_large lstm_seq2seq bert_tiny gpt2_tiny wavenet swin_t"}
PY=/usr/bin/python3
if [ ! -x "$GOPT" ]; then
  tools/install-deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" >/dev/null
fi
ISA_BENCH=$(dirname "$GOPT")/../bench/bench_exec_isa
export OMP_NUM_THREADS=$THREADS
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
machine_line() { echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc --all) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); threads $THREADS, $WARMUP warm-ups, median of $REPS"; }
if [ "${1:-}" = isa ]; then
  machine_line
  echo
  isa_section
  exit 0
fi
$PY tools/make_testdata.py corpus --out "$DATA" >&2
machine_line
echo
[ -f .deps/node/node_modules/onnxruntime-node/package.json ] || tools/install-deps.sh test >&2
echo "| model | gopt run | gopt --layouts plain | PyTorch eager | ONNX Runtime | gopt / PyTorch | gopt / ONNX Runtime | reorders per run (plain → auto) | peak live activations (gopt) |"
echo "|---|---|---|---|---|---|---|---|---|"
gtime() { "$GOPT" run "$1" "${@:2}" --time --json --threads "$THREADS" --warmup "$WARMUP" --reps "$REPS" 2>/dev/null |
  $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["time"]["seconds"], d.get("peak_bytes", 0), d["layouts"]["reorders"], d["layouts"]["reorders_plain"])'; }
for m in $MODELS; do
  d=$DATA/$m
  read -r gp _ _ _ < <(gtime "$d/model.onnx" --inputs "$d" --layouts plain)
  read -r g peak ra rp < <(gtime "$d/model.onnx" --inputs "$d")
  t=$($PY bench/exec/bench_exec_torch.py --threads "$THREADS" --warmup "$WARMUP" --reps "$REPS" time "$m" "$d" |
      $PY -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
  o=$($PY tools/ort/ort_compare.py time "$d" --threads "$THREADS" --reps "$REPS" |
      $PY -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
  $PY -c "g,gp,t,o,p=$g,$gp,$t,$o,$peak; print(f'| $m | {g*1e3:.2f} ms | {gp*1e3:.2f} ms | {t*1e3:.2f} ms | {o*1e3:.2f} ms | {g/t:.2f} | {g/o:.2f} | $rp → $ra | {p/2**20:.1f} MiB |')"
done
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
