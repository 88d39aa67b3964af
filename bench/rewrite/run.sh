#!/usr/bin/env bash
# bench/rewrite/run.sh [BUDGET]: the rewrite tables of docs/REWRITE.md from one command: every
# method `gopt rewrite --list-methods` prints, on Tensat's seven models (published TASO/Tensat
# figures beside them), every corpus model and more zoo models (bench/rewrite/rewrite_bench.py).
# RULEGEN=1 first regenerates the rules at 2 and 3 ops for the counts and the bounded 4-op rules
# (--only4) for the 3-vs-4-op ablation (adds ~25 minutes on a quiet machine); RULES4=FILE uses an
# existing `gopt rules generate --max-ops 4 --only4` file instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target gopt_cli >/dev/null
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo
rules4="${RULES4:-}"
if [ "${RULEGEN:-0}" = 1 ]; then
  echo "### Rule generation"
  echo
  for k in 2 3; do
    /usr/bin/time -f "peak RSS %M KB, %e s" build/bin/gopt rules generate -o "/tmp/gopt-rules-$k.json" --max-ops "$k" 2>&1
  done
  /usr/bin/time -f "peak RSS %M KB, %e s" build/bin/gopt rules generate -o /tmp/gopt-rules-4.json --max-ops 4 --only4 2>&1
  rules4=/tmp/gopt-rules-4.json
  echo
fi
/usr/bin/python3 bench/rewrite/rewrite_bench.py build/bin/gopt "${1:-100}" "$rules4"
