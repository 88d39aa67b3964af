#!/usr/bin/env bash
# mpi_scaling.sh [GOPT] [REPS]: strong and weak scaling of `gopt train` and `gopt optimize`
# under mpirun on this machine (docs/SCALING.md): 1, 2 and 4 ranks (4 oversubscribed on 2 cores),
# REPS runs each (default 3), median seconds as the command reports them (rank 0, from the start
# of training / search to its end: no mpirun start-up, no model loading), median wall seconds of
# the whole mpirun and median CPU seconds of all its processes; prints a markdown table. Training: gnmt and transformer placement, 20
# iterations, strong = 16 samples in all, weak = 8 per rank. Search on gnmt placement: brkga in the
# default mode (--mpi-search eval: one search, batches shared), strong = 10000 evaluations in all,
# weak = 5000 per rank; anneal as islands (--mpi-search islands), strong. PARTS=search (or train)
# measures only that part (the other columns print "-").
set -euo pipefail
gopt="${1:-build/bin/gopt}"
reps="${2:-3}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GOPT_HISTORY=0
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
launch() { # P TIME... CMD...: CMD on P ranks (1: a plain process) under TIME (/usr/bin/time and its
  # 4 arguments, outside mpirun so that it counts every process)
  local p="$1"; shift
  if [ "$p" -eq 1 ]; then "$@"; else "${@:1:5}" mpirun -np "$p" --oversubscribe "${@:6}"; fi
}
timed() { # P CMD...: "reported / wall / cpu" median seconds of REPS runs (cpu: user + system of
  # every process of the run, mpirun and all ranks together: the work, whatever the machine's load)
  local p="$1"; shift
  : >"$d/rep"; : >"$d/wall"; : >"$d/cpu"
  for _ in $(seq "$reps"); do
    launch "$p" /usr/bin/time -f "%e %U %S" -o "$d/time" "$@" >"$d/out" 2>/dev/null
    awk '{print $1}' "$d/time" >>"$d/wall"
    awk '{print $2 + $3}' "$d/time" >>"$d/cpu"
    # train: "..., 14737 weights, 2.7 s"; optimize --json: "seconds": 7.5
    sed -n 's/.* weights, \([0-9.]*\) s$/\1/p; s/.*"seconds": \([0-9.e+-]*\).*/\1/p' "$d/out" >>"$d/rep"
  done
  printf '%.2f / %.2f / %.2f' "$(median <"$d/rep")" "$(median <"$d/wall")" "$(median <"$d/cpu")"
}
train=(train --task placement --cluster 4xV100-nvlink --graphs "gnmt:layers=4,steps=20;transformer:layers=4" --iters 20 --seed 1 --threads 1)
search=(optimize "gnmt:layers=4,steps=20" --task placement --cluster 4xV100-nvlink --start default --seed 1 --threads 1 --json)
parts="${PARTS:-train search}"
echo "| ranks | training strong (16 samples) | training weak (8 samples/rank) | brkga eval strong (10000 evals) | brkga eval weak (5000 evals/rank) | anneal islands strong (10000 evals) |"
echo "|---|---|---|---|---|---|"
for p in 1 2 4; do
  ts=- tw=- ss=- sw=- si=-
  if [[ "$parts" == *train* ]]; then
    ts=$(timed "$p" "$gopt" "${train[@]}" --samples 16 -o "$d/s.gpol")
    tw=$(timed "$p" "$gopt" "${train[@]}" --samples $((8 * p)) -o "$d/w.gpol")
  fi
  if [[ "$parts" == *search* ]]; then
    ss=$(timed "$p" "$gopt" "${search[@]}" --method brkga --budget 10000)
    sw=$(timed "$p" "$gopt" "${search[@]}" --method brkga --budget $((5000 * p)))
    si=$(timed "$p" "$gopt" "${search[@]}" --method anneal --mpi-search islands --budget 10000)
  fi
  echo "| $p$([ "$p" -eq 4 ] && echo ' (oversubscribed)') | $ts | $tw | $ss | $sw | $si |"
done
