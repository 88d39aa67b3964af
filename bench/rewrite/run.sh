#!/usr/bin/env bash
# bench/rewrite/run.sh [BUDGET]: the rewrite tables of docs/REWRITE.md from one command: rewrites
# every corpus model and the zoo models with greedy (the shipped rules/rules.json). With
# RULEGEN=1 it first regenerates the rules at 2 and 3 ops for the counts (about 10 minutes).
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target gopt_cli >/dev/null
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo
echo "### Rule generation"
echo
for k in $([ "${RULEGEN:-0}" = 1 ] && echo 2 3); do
  /usr/bin/time -f "peak RSS %M KB" build/bin/gopt rules generate -o "/tmp/gopt-rules-$k.json" --max-ops "$k" 2>&1
done
echo
echo "### greedy (budget ${1:-100}), rules/rules.json"
echo
/usr/bin/python3 bench/rewrite/rewrite_bench.py build/bin/gopt "${1:-100}"
