#!/usr/bin/env bash
# placement_curve.sh [GOPT] [OUT.md]: the placement policy's training curve. Trains placement.gpol
# exactly as `TASKS=placement tools/train_policies.sh` does (its defaults: 2000 iterations, seed 1),
# stopping every STEP iterations (default 250; `--stop-after`, then `--resume`, which continues
# bit for bit, so the last file equals the shipped one) and measuring each checkpoint with
# tools/placement_sets.py on the training pairs and the held-out pairs (geometric mean of zero-shot
# go / best baseline, pairs more than 1 % behind). Iteration 0 is the untrained policy (one
# iteration at learning rate 0 is not possible, so it is measured from a fresh `gopt train --iters
# 1 --lr 1e-30`: the same weights). Writes a markdown table to OUT.md (default stdout); held-out
# figures are reported, never used to pick a checkpoint. ~8 minutes on the 2-core machine.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="${1:-$here/build/bin/gopt}"
out="${2:-/dev/stdout}"
step="${STEP:-250}"
iters="${ITERS:-2000}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
measure() {  # measure ITER FILE: one table row
  local r
  r=$(/usr/bin/python3 "$here/tools/placement_sets.py" --gopt "$gopt" --policy "$2" train heldout | grep -E "^(train|heldout):")
  echo "| $1 | $(echo "$r" | sed -n 's/^train: .*geometric mean \([0-9.]*\), more than 1% behind on \([0-9]*\)/\1 | \2/p') |" \
       "$(echo "$r" | sed -n 's/^heldout: .*geometric mean \([0-9.]*\), more than 1% behind on \([0-9]*\)/\1 | \2/p') |"
}
{
  echo "| iteration | training pairs (69): go / best baseline | more than 1 % behind | held-out pairs (18) | more than 1 % behind |"
  echo "| --- | --- | --- | --- | --- |"
  ITERS=1 LR=1e-30 TASKS=placement "$here/tools/train_policies.sh" "$gopt" "$tmp/u" >/dev/null 2>&1
  measure 0 "$tmp/u/placement.gpol"
  extra=""
  for ((i = step; i <= iters; i += step)); do
    stop="--stop-after $i"
    [ "$i" -ge "$iters" ] && stop=""
    rc=0  # a run stopped by --stop-after exits 130, as after Ctrl-C
    ITERS=$iters EXTRA="$extra $stop" TASKS=placement "$here/tools/train_policies.sh" "$gopt" "$tmp/t" >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 130 ] || { echo "placement_curve: training to iteration $i failed ($rc)" >&2; exit 1; }
    measure "$i" "$tmp/t/placement.gpol"
    extra="--resume"
  done
} >"$out"
if [ "$out" != /dev/stdout ] && cmp -s "$tmp/t/placement.gpol" "$here/policies/placement.gpol"; then
  echo "placement_curve: the last checkpoint equals policies/placement.gpol" >&2
fi
