#!/usr/bin/env bash
# bench/sim/compare_outputs.sh: checks that two gopt binaries simulate identically: `gopt simulate
# --json` and `--trace` compared byte for byte over corpus and zoo models, clusters and decisions
# (default; round_robin, metis and m_etf placements; random schedule, joint and memory decisions on
# three multi-device clusters; random fusion decisions on V100). The decisions files are made once
# by the BEFORE binary. Run before committing a simulator optimisation (docs/BENCHMARKS.md, issue 24).
# Usage: bench/sim/compare_outputs.sh BEFORE_GOPT AFTER_GOPT [WORK_DIR]; exits 1 when a case differs.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: bench/sim/compare_outputs.sh BEFORE_GOPT AFTER_GOPT [WORK_DIR] (two executables)" >&2
  exit 2
fi
old="$1"
new="$2"
work="${3:-$(mktemp -d)}"
mkdir -p "$work/dec"
models="${MODELS:-corpus/resnet18.onnx corpus/inception_v3.onnx corpus/bert_tiny.onnx corpus/lstm_seq2seq.onnx corpus/swin_t.onnx corpus/densenet121.onnx gnmt:steps=20 inception_v3:repeat=3 transformer}"
opt() { # MODEL TASK CLUSTER METHOD SEED OUT
  local extra=()
  case "$4" in random) extra=(--budget 3 --seed "$5" --start default --threads 1) ;; esac
  "$old" optimize "$1" --task "$2" --cluster "$3" --method "$4" --no-history "${extra[@]}" -o "$6" \
    >/dev/null 2>&1 || echo "note: no decisions for $1 $2 $3 $4 (skipped)" >&2
}
ok=0
bad=0
run() { # MODEL CLUSTER [DECISIONS]
  local extra=() ra=0 rb=0
  [ -n "${3:-}" ] && extra=(--decisions "$3")
  rm -f "$work/t.json" "$work/a.json" "$work/b.json"
  "$old" simulate "$1" --cluster "$2" "${extra[@]}" --json --trace "$work/t.json" >"$work/a.out" 2>&1 || ra=$?
  [ -f "$work/t.json" ] && mv "$work/t.json" "$work/a.json"
  "$new" simulate "$1" --cluster "$2" "${extra[@]}" --json --trace "$work/t.json" >"$work/b.out" 2>&1 || rb=$?
  [ -f "$work/t.json" ] && mv "$work/t.json" "$work/b.json"
  if [ "$ra" = "$rb" ] && cmp -s "$work/a.out" "$work/b.out" &&
    { [ ! -f "$work/a.json" ] && [ ! -f "$work/b.json" ] || cmp -s "$work/a.json" "$work/b.json"; }; then
    ok=$((ok + 1))
  else
    bad=$((bad + 1))
    echo "differs: $1 --cluster $2 ${3:-}"
  fi
}
for m in $models; do
  b=$(basename "$m" .onnx | tr ':=,' '___')
  for cl in 4xV100-nvlink 2xV100-pcie 8xH100 V100; do run "$m" "$cl"; done
  for cl in 4xV100-nvlink 2xV100-pcie 8xH100; do
    for meth in round_robin metis m_etf; do
      f="$work/dec/$b.$cl.p_$meth.json"
      [ -f "$f" ] || opt "$m" placement "$cl" "$meth" 0 "$f"
      [ -f "$f" ] && run "$m" "$cl" "$f"
    done
    for t in schedule:1 joint:2 memory:3; do
      f="$work/dec/$b.$cl.${t%%:*}.json"
      [ -f "$f" ] || opt "$m" "${t%%:*}" "$cl" random "${t##*:}" "$f"
      [ -f "$f" ] && run "$m" "$cl" "$f"
    done
  done
  f="$work/dec/$b.V100.fusion.json"
  [ -f "$f" ] || opt "$m" fusion V100 random 4 "$f"
  [ -f "$f" ] && run "$m" V100 "$f"
done
echo "cases identical: $ok, different: $bad"
[ "$bad" = 0 ]
