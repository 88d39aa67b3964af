#!/usr/bin/env bash
# bench/rewrite/sweep.sh [METHOD ...]: every rewrite method on every model of the rewrite
# benchmark must give a verified (executor + ONNX Runtime), checker-valid output or keep its input
# (bench/rewrite/sweep.py; exit 1 if a run fails). Needs .deps (tools/install-deps.sh test).
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target gopt_cli >/dev/null
exec /usr/bin/python3 bench/rewrite/sweep.py build/bin/gopt "$@"
