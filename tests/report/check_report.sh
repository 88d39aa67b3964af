#!/bin/sh
# check_report.sh GOPT OUTDIR: builds a measured-cost database for a small ResNet (gopt run
# --profile into SQLite), writes `gopt report` with it, checks the page in headless Chromium
# (check_report.js; screenshot OUTDIR/report.png), and that a large graph (Inception-v3) is drawn
# collapsed by scope and a report without --costdb still has every section.
set -eu
G="$1"
OUT="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"
rm -f "$OUT/costdb.sqlite"
M="resnet50:depth=18,image=64"
"$G" run "$M" --profile --warmup 1 --reps 3 --threads 1 --costdb "$OUT/costdb.sqlite" >/dev/null 2>&1
"$G" report "$M" --task placement --cluster 2xV100-pcie --methods round_robin,metis,local,anneal --budget 300 \
  --costdb "$OUT/costdb.sqlite" --no-history -o "$OUT/report.html"
node "$HERE/check_report.js" "$OUT/report.html" "$OUT/report.png"
# large graph: collapsed by scope; no cost database: the fidelity section says so
"$G" report inception_v3 --task placement --cluster 2xV100 --methods metis,local --budget 50 --graph-nodes 200 \
  --no-history -o "$OUT/report_large.html" >/dev/null
grep -q "collapsed by scope into" "$OUT/report_large.html" || { echo "FAIL: large graph not collapsed"; exit 1; }
grep -q "No measured cost database given" "$OUT/report_large.html" || { echo "FAIL: fidelity note"; exit 1; }
for s in summary methods timeline memory graph convergence fidelity; do
  grep -q "<section id=\"$s\">" "$OUT/report_large.html" || { echo "FAIL: section $s"; exit 1; }
done
echo ok
