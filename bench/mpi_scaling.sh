#!/usr/bin/env bash
# mpi_scaling.sh [GOPT] [REPS]: strong and weak scaling of `gopt train` and `gopt optimize`
# under mpirun on this machine (docs/SCALING.md): 1, 2 and 4 ranks (4 oversubscribed on 2 cores),
# REPS runs each (default 3), median seconds as the command reports them (rank 0, from the start
# of training / search to its end: no mpirun start-up, no model loading) and median wall seconds of
# the whole mpirun; prints a markdown table. Training: gnmt and transformer placement, 20
# iterations, strong = 16 samples in all, weak = 8 per rank. Search: anneal on gnmt placement,
# strong = 10000 evaluations in all, weak = 5000 per rank.
set -euo pipefail
gopt="${1:-build/bin/gopt}"
reps="${2:-3}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GOPT_HISTORY=0
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
launch() { # P CMD...: CMD on P ranks (1: a plain process)
  local p="$1"; shift
  if [ "$p" -eq 1 ]; then "$@"; else mpirun -np "$p" --oversubscribe "$@"; fi
}
timed() { # P CMD...: "reported / wall" median seconds of REPS runs
  local p="$1"; shift
  : >"$d/rep"; : >"$d/wall"
  for _ in $(seq "$reps"); do
    local t0 t1
    t0=$(date +%s.%N); launch "$p" "$@" >"$d/out" 2>/dev/null; t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l >>"$d/wall"
    # train: "..., 14737 weights, 2.7 s"; optimize --json: "seconds": 7.5
    sed -n 's/.* weights, \([0-9.]*\) s$/\1/p; s/.*"seconds": \([0-9.e+-]*\).*/\1/p' "$d/out" >>"$d/rep"
  done
  printf '%.2f / %.2f' "$(median <"$d/rep")" "$(median <"$d/wall")"
}
train=(train --task placement --cluster 4xV100-nvlink --graphs "gnmt:layers=4,steps=20;transformer:layers=4" --iters 20 --seed 1 --threads 1)
search=(optimize "gnmt:layers=4,steps=20" --task placement --cluster 4xV100-nvlink --method anneal --start default --seed 1 --threads 1 --json)
echo "| ranks | training strong (16 samples) | training weak (8 samples/rank) | search strong (10000 evals) | search weak (5000 evals/rank) |"
echo "|---|---|---|---|---|"
for p in 1 2 4; do
  ts=$(timed "$p" "$gopt" "${train[@]}" --samples 16 -o "$d/s.gpol")
  tw=$(timed "$p" "$gopt" "${train[@]}" --samples $((8 * p)) -o "$d/w.gpol")
  ss=$(timed "$p" "$gopt" "${search[@]}" --budget 10000)
  sw=$(timed "$p" "$gopt" "${search[@]}" --budget $((5000 * p)))
  echo "| $p$([ "$p" -eq 4 ] && echo ' (oversubscribed)') | $ts | $tw | $ss | $sw |"
done
