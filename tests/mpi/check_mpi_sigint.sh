#!/usr/bin/env bash
# check_mpi_sigint.sh GOPT MPIRUN: Ctrl-C on `mpirun` (SIGINT to the mpirun process, which passes
# it to the ranks as SIGTERM) returns the best so far (docs/SCALING.md): a distributed search
# prints its best result marked interrupted, no worse than its start, `compare --mpi-search eval`
# stops every rank before the next method and prints the rows so far, and a distributed training
# run stops at an iteration boundary, writes its policy and says so; `--resume` under mpirun then
# continues from that file. mpirun exits non-zero after a signal (Open MPI's rule), so only the
# output is checked, not the status.
. "$(dirname "$0")/mpi_common.sh"
export GOPT_PROGRESS=1 # a plain progress line every 2 s (stderr is not a terminal)

# (the runs to interrupt start mpirun itself, not through mp: $! must be mpirun's pid)
# wait_for FILE PATTERN PID: until PATTERN appears in FILE (at most 120 s) while PID lives
wait_for() {
  for _ in $(seq 1 1200); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# search: an unreachable budget; interrupted after its first progress line
"$mpirun" -np 2 --oversubscribe "$gopt" optimize gnmt:layers=2,steps=10 --task placement \
  --cluster 4xV100-nvlink --method brkga --budget 100000000 --start default --seed 1 --threads 1 \
  --json >"$d/s.json" 2>"$d/s.err" &
pid=$!
wait_for "$d/s.err" "evals" $pid || { cat "$d/s.err"; fail "search: no progress line"; }
kill -INT $pid
wait $pid
/usr/bin/python3 - "$d/s.json" <<'PY' || { cat "$d/s.err"; fail "search: best so far after SIGINT"; }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["interrupted"] is True, r
assert r["objective"] <= r["default_objective"], r
assert 0 < r["evaluations"] < 100000000, r
print(f"ok: search interrupted after {r['evaluations']} evaluations, best {r['objective']:.6g} "
      f"(start {r['default_objective']:.6g})")
PY

# compare --mpi-search eval (every rank runs every method): the ranks agree before each method
# whether to stop, so the job ends (no rank left waiting in the next method's exchange) and rank 0
# prints the rows so far, the interrupted search marked
"$mpirun" -np 2 --oversubscribe "$gopt" compare gnmt:layers=2,steps=10 --task placement \
  --cluster 4xV100-nvlink --methods metis,random,brkga --budget 100000000 --start default --seed 1 \
  --threads 1 --json --mpi-search eval >"$d/c.json" 2>"$d/c.err" &
pid=$!
wait_for "$d/c.err" "evals" $pid || { cat "$d/c.err"; fail "compare: no progress line"; }
kill -INT $pid
wait $pid
/usr/bin/python3 - "$d/c.json" <<'PY' || { cat "$d/c.err"; fail "compare --mpi-search eval: rows so far after SIGINT"; }
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
assert [r["method"] for r in rows] == ["metis", "random"], rows
assert rows[1]["interrupted"] is True and rows[1]["evaluations"] < 100000000, rows
print(f"ok: compare --mpi-search eval interrupted in random after {rows[1]['evaluations']} evaluations")
PY

# training: many iterations; interrupted after its first progress line
args=(--task placement --cluster 4xV100-nvlink --graphs "gpt2:layers=1" --seed 3 --threads 1 --samples 8)
"$mpirun" -np 2 --oversubscribe "$gopt" train "${args[@]}" --iters 100000 -o "$d/p.gpol" \
  >"$d/t.out" 2>"$d/t.err" &
pid=$!
wait_for "$d/t.err" "iter" $pid || { cat "$d/t.err"; fail "train: no progress line"; }
kill -INT $pid
wait $pid
line=$(grep "interrupted at iteration" "$d/t.err") || { cat "$d/t.err"; fail "train: no interruption line"; }
[ -s "$d/p.gpol" ] || fail "train: no policy written after SIGINT"
it=$(echo "$line" | sed -E 's/.*interrupted at iteration ([0-9]+) of.*/\1/')
echo "ok: training interrupted at iteration $it, policy written"
mp 2 "$gopt" train "${args[@]}" --iters 100000 -o "$d/p.gpol" --resume \
  --stop-after $((it + 1)) >/dev/null 2>"$d/r.err"
grep -q "interrupted at iteration $((it + 1)) of" "$d/r.err" || { cat "$d/r.err"; fail "resume after SIGINT"; }
echo "ok: resumed under mpirun from iteration $it"
