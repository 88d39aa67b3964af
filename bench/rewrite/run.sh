#!/usr/bin/env bash
# bench/rewrite/run.sh [BUDGET]: the rewrite tables of docs/REWRITE.md from one command: generates
# the rules (counts), then rewrites every corpus model and the zoo models with greedy.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target gopt_cli >/dev/null
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo
echo "### Rule generation"
echo
for k in 2 3; do
  /usr/bin/time -f "peak RSS %M KB" build/bin/gopt rules generate -o "/tmp/gopt-rules-$k.json" --max-ops "$k" 2>&1
done
echo
echo "### greedy (budget ${1:-100}), rules/rules.json"
echo
/usr/bin/python3 bench/rewrite/rewrite_bench.py build/bin/gopt "${1:-100}"
