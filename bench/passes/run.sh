#!/usr/bin/env bash
# bench/passes/run.sh [BUDGET] | today [BUDGET]: the pass-ordering tables of docs/PASSES.md from one
# command (`today`: only today's XLA modules, tests/hlo/data/xla-2026*, no --verify): every
# order of `gopt passes` (XLA's CPU and GPU defaults, random, greedy, genetic, the shipped RL policy
# greedy and with a sampling budget) on the held-out real modules (bench/passes/heldout.txt) and on
# gopt's GPT-2, BERT and ResNet training steps exported to HLO; op-count reduction against the
# default order, simulated time, output verification, search time. Rewrites the table section of
# docs/PASSES.md (between the passes-bench markers) and prints it.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target gopt_cli >/dev/null
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${1:-}" = today ]; then  # only today's XLA modules (docs/PASSES.md, "Today's XLA modules")
  nice /usr/bin/python3 bench/passes/passes_bench.py --only xla-2026/,xla-2026b/ build/bin/gopt "$work" \
    "${2:-1000}" docs/PASSES.md
else
  nice /usr/bin/python3 bench/passes/passes_bench.py build/bin/gopt "$work" "${1:-1000}" docs/PASSES.md
fi
