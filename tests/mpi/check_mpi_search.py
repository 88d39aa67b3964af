"""check_mpi_search.py GOPT MPIRUN [SEEDS]: island-model search under mpirun (docs/SCALING.md).
For the test models and every island method, `mpirun -np 2 gopt optimize` with a total budget B
must use exactly B evaluations (the budget is global) and never end worse than its start; on
gpt2:layers=2 the mean objective over the seeds of the 2-rank runs must be <= the 1-process mean
for every method. On gnmt:layers=2,steps=10 the comparison is printed, not asserted: there the
island model is within seed noise but not reliably ahead (docs/SCALING.md has the numbers)."""
import json
import os
import subprocess
import sys

GOPT, MPIRUN = sys.argv[1], sys.argv[2]
SEEDS = range(1, 1 + (int(sys.argv[3]) if len(sys.argv) > 3 else 3))
MODELS = ["gpt2:layers=2", "gnmt:layers=2,steps=10"]
ASSERTED = {"gpt2:layers=2"}
METHODS = ["random", "local", "anneal", "brkga"]
BUDGET = 400
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def run(model, method, seed, ranks):
    cmd = [GOPT, "optimize", model, "--task", "placement", "--cluster", "4xV100-nvlink", "--method", method,
           "--budget", str(BUDGET), "--start", "default", "--seed", str(seed), "--threads", "1", "--json"]
    if ranks > 1:
        cmd = [MPIRUN, "-np", str(ranks), "--oversubscribe"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout)


bad = 0
for model in MODELS:
    for method in METHODS:
        one, two = [], []
        for s in SEEDS:
            a, b = run(model, method, s, 1), run(model, method, s, 2)
            if b["evaluations"] != BUDGET:
                sys.exit(f"FAIL: {model} {method} seed {s}: 2 ranks used {b['evaluations']} evaluations, budget {BUDGET}")
            if b["objective"] > b["default_objective"]:
                sys.exit(f"FAIL: {model} {method} seed {s}: 2 ranks ended worse than the start")
            one.append(a["objective"])
            two.append(b["objective"])
        m1, m2 = sum(one) / len(one), sum(two) / len(two)
        ok = m2 <= m1 or model not in ASSERTED
        bad += not ok
        tag = ("ok  " if m2 <= m1 else "FAIL") if model in ASSERTED else "info"
        print(f"{tag} {model:24s} {method:7s} 1 rank {m1:.6g}  2 ranks {m2:.6g}  ({m2 / m1:.4f})")
sys.exit(1 if bad else 0)
