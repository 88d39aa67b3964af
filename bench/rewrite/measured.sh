#!/usr/bin/env bash
# bench/rewrite/measured.sh [MODEL...]: the "Measured costs on this machine" table of docs/REWRITE.md
# from one command: every corpus model with its real weights (tools/make_testdata.py, as
# bench/exec/run.sh uses them) through `gopt rewrite --cluster host --costdb DB --measure` (greedy
# priced with measured op times, missing ops profiled on demand and cached in DB; a result measured
# slower than its input on gopt's executor is not written). Environment: GOPT (build/bin/gopt),
# DATA (build/exec-testdata), DB (build/rewrite-costdb.sqlite; delete it to profile from scratch).
set -euo pipefail
cd "$(dirname "$0")/../.."
GOPT=${GOPT:-build/bin/gopt}
DATA=${DATA:-build/exec-testdata}
DB=${DB:-build/rewrite-costdb.sqlite}
PY=/usr/bin/python3
if [ ! -x "$GOPT" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j2 --target gopt_cli >/dev/null
fi
$PY tools/make_testdata.py corpus --out "$DATA" >&2
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "load average at the start $(cut -d' ' -f1-3 /proc/loadavg); cost database $DB ($(date -u +%F))"
echo
t0=$(date +%s)
$PY bench/rewrite/measured_bench.py "$GOPT" "$DATA" "$DB" "$@"
echo
echo "bench wall time: $(( $(date +%s) - t0 )) s; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
