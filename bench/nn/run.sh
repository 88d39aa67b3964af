#!/usr/bin/env bash
# run.sh: benchmarks gopt's NN engine against PyTorch on the same machine, inputs and threads.
# For each graph size, runs bench_nn (C) and bench_nn_torch.py (PyTorch) alternately for ROUNDS
# rounds (each a median over REPS forward+backward passes) and prints a markdown table with the
# median over rounds, the speed-up, achieved GFLOP/s and OpenBLAS's own sgemm GFLOP/s.
#
#   bench/nn/run.sh [BUILD_DIR] [NODES...]      (defaults: build, 10000 80000)
#   env: THREADS (default nproc), REPS (5), ROUNDS (3), FEAT (32)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
shift || true
NODES=("$@")
[ ${#NODES[@]} -eq 0 ] && NODES=(10000 80000)
THREADS="${THREADS:-$(nproc)}"
REPS="${REPS:-5}"
ROUNDS="${ROUNDS:-3}"
FEAT="${FEAT:-32}"
BIN="$BUILD/bench/bench_nn"
[ -x "$BIN" ] || { echo "run.sh: $BIN not built (cmake --build $BUILD --target bench_nn)" >&2; exit 1; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
LOG="$TMP/results.txt"
echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); threads=$THREADS reps=$REPS rounds=$ROUNDS" >&2
for n in "${NODES[@]}"; do
  for r in $(seq "$ROUNDS"); do
    "$BIN" --nodes "$n" --feat "$FEAT" --threads "$THREADS" --reps "$REPS" --dump "$TMP/g$n.bin" | tee -a "$LOG" >&2
    /usr/bin/python3 "$ROOT/bench/nn/bench_nn_torch.py" "$TMP/g$n.bin" --threads "$THREADS" --reps "$REPS" | tee -a "$LOG" >&2
  done
done
/usr/bin/python3 - "$LOG" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    if not line.startswith("RESULT"):
        continue
    kv = dict(p.split("=", 1) for p in line.split()[1:])
    impl = kv["impl"]
    if impl == "openblas_sgemm":
        rows.setdefault(("sgemm", kv["shape"]), []).append(float(kv["gflops"]))
    else:
        key = ("gopt" if impl == "gopt" else "torch", int(kv["nodes"]))
        rows.setdefault(key, []).append((float(kv["median_ms"]), float(kv["fwd_ms"]), float(kv.get("gflops", 0))))
print("| nodes | gopt fwd+bwd ms | PyTorch fwd+bwd ms | speed-up (torch/gopt) | gopt fwd ms | PyTorch fwd ms | gopt GFLOP/s |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for n in sorted({k[1] for k in rows if k[0] == "gopt"}):
    g, t = rows[("gopt", n)], rows.get(("torch", n), [(float("nan"),) * 3])
    gm, tm = statistics.median(x[0] for x in g), statistics.median(x[0] for x in t)
    print("| %d | %.1f | %.1f | %.2fx | %.1f | %.1f | %.1f |" % (n, gm, tm, tm / gm, statistics.median(x[1] for x in g),
          statistics.median(x[1] for x in t), statistics.median(x[2] for x in g)))
print()
print("| OpenBLAS sgemm shape (MxNxK) | GFLOP/s (median over runs) |")
print("| --- | ---: |")
for k, v in sorted(rows.items(), key=lambda kv: str(kv[0])):
    if k[0] == "sgemm":
        print("| %s | %.1f |" % (k[1], statistics.median(v)))
PY
