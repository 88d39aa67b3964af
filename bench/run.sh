#!/usr/bin/env bash
# bench/run.sh: runs gopt's benchmarks (Release build in build/) and prints markdown tables for
# docs/BENCHMARKS.md. Usage: bench/run.sh [import|sim|nn|exec|fidelity|python|learn|install|all] (default all).
# bench/run.sh all > FILE && bench/splice_doc.py FILE puts one run into docs/BENCHMARKS.md.
# `install` (first run on a fresh Debian 12 chroot) needs root and the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh build tools
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
what="${1:-all}"
echo "Run of \`bench/run.sh $what\` at commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), started $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start."
echo
if [ "$what" = import ] || [ "$what" = all ]; then
  echo "### Import + shape inference (median of reps; peak RSS of the process)"
  echo
  echo "| model | nodes | gopt load | gopt infer | gopt peak RSS | IR bytes/node | python-onnx load | python-onnx infer | python-onnx peak RSS | speedup (load+infer) |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  largest=$(ls -S corpus/*.onnx | head -1)
  for m in "$largest" corpus/bert_tiny.onnx; do
    g=$(build/bench/bench_import "$m" 5)
    p=$(/usr/bin/python3 bench/import/onnx_peer.py "$m" 5)
    /usr/bin/python3 - "$g" "$p" <<'PY'
import json, sys
g, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
mb = lambda b: f"{b/2**20:.0f} MiB"
ms = lambda s: f"{s*1e3:.1f} ms"
print(f"| {g['model']} | {g['nodes']} | {ms(g['load_s'])} | {ms(g['infer_s'])} | {mb(g['peak_rss'])} | {g['ir_bytes_per_node']:.0f} | {ms(p['load_s'])} | {ms(p['infer_s'])} | {mb(p['peak_rss'])} | {(p['load_s']+p['infer_s'])/(g['load_s']+g['infer_s']):.1f}x |")
PY
  done
  for m in ${ZOO_SPECS:-"gnmt:steps=311" "inception_v3:repeat=309" "gnmt:steps=3876" "inception_v3:repeat=3861"}; do
    g=$(build/bench/bench_import "$m" 3)
    /usr/bin/python3 - "$g" <<'PY'
import json, sys
g = json.loads(sys.argv[1])
print(f"| zoo {g['model']} | {g['nodes']} | {g['load_s']*1e3:.0f} ms (build) | {g['infer_s']*1e3:.0f} ms | {g['peak_rss']/2**20:.0f} MiB | {g['ir_bytes_per_node']:.0f} | – | – | – | – |")
PY
  done
  echo
fi
if [ "$what" = sim ] || [ "$what" = all ]; then bench/sim/run.sh build; echo; fi
if [ "$what" = nn ] || [ "$what" = all ]; then
  echo "### Neural-network engine vs PyTorch (GraphSAGE + segment attention, forward + backward)"
  echo
  bench/nn/run.sh build 10000 80000
  echo
fi
if [ "$what" = exec ] || [ "$what" = all ]; then
  echo "### Executor vs PyTorch and ONNX Runtime (every corpus model)"
  echo
  GOPT=build/bin/gopt bench/exec/run.sh
  echo
fi
if [ "$what" = fidelity ] || [ "$what" = all ]; then
  echo "### Cost-model fidelity on this host (analytical, calibrated, held-out folds)"
  echo
  echo '\`\`\`text'
  bench/fidelity/run.sh build
  echo '\`\`\`'
  echo
fi
if [ "$what" = python ] || [ "$what" = all ]; then
  echo "### Python binding: gopt.Env evaluation paths (docs/PYTHON.md)"
  echo
  GOPT_LIB=build/libgopt.so /usr/bin/python3 bench/python/bench_env.py
  echo
fi
if [ "$what" = learn ] || [ "$what" = all ]; then
  echo "### Learned policy (go) at GO's scale: zero-shot inference with the shipped policies"
  echo
  bench/learn/run.sh build
  echo
fi
if [ "$what" = install ] || [ "$what" = all ]; then
  echo "### First run on a fresh Debian 12 (debootstrap minbase chroot)"
  echo
  if [ "$(id -u)" -eq 0 ]; then bench/install/fresh.sh; else echo "(skipped: needs root)"; fi
  echo
fi
