#!/usr/bin/env python3
"""mpi_quality.py [GOPT] [SEEDS] [BUDGET]: search quality at the same total budget under mpirun
(docs/SCALING.md): for each model, task and method, the mean objective over SEEDS seeds (default 3)
of one process, of `mpirun -np 2 gopt optimize` in the default mode (--mpi-search eval: one search,
batches shared) and in island mode (--mpi-search islands), BUDGET evaluations in all (default 2000),
start `default`, one thread per rank. Prints a markdown table: the 2-rank means relative to one
process (< 1: 2 ranks better), how many seeds gave exactly the one-process result, and the median
seconds the search took (as reported by rank 0)."""
import json
import os
import statistics
import subprocess
import sys

GOPT = sys.argv[1] if len(sys.argv) > 1 else "build/bin/gopt"
SEEDS = range(1, 1 + (int(sys.argv[2]) if len(sys.argv) > 2 else 3))
BUDGET = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
MODELS = ["resnet50", "inception_v3", "gnmt:layers=4,steps=20", "bert:layers=2"]
TASKS = [("placement", "4xV100-nvlink"), ("memory", "V100")]
METHODS = ["brkga", "anneal", "local"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", GOPT_HISTORY="0",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")


def run(model, task, cluster, method, seed, ranks, mode="eval"):
    cmd = [GOPT, "optimize", model, "--task", task, "--cluster", cluster, "--method", method, "--budget",
           str(BUDGET), "--start", "default", "--seed", str(seed), "--threads", "1", "--json",
           "--mpi-search", mode]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks)] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600, check=True)
    r = json.loads(p.stdout)
    assert r["evaluations"] == BUDGET, (cmd, r["evaluations"])
    return r["objective"], r["seconds"]


print(f"| model | task | method | 1 process (mean) | 2 ranks eval / 1 | identical | 2 ranks islands / 1 "
      f"| seconds 1 / eval 2 / islands 2 |")
print("|---|---|---|---|---|---|---|---|")
for model in MODELS:
    for task, cluster in TASKS:
        for method in METHODS:
            one, ev, isl = [], [], []
            for s in SEEDS:
                one.append(run(model, task, cluster, method, s, 1))
                ev.append(run(model, task, cluster, method, s, 2))
                isl.append(run(model, task, cluster, method, s, 2, "islands"))
            m1 = statistics.mean(o for o, _ in one)
            me = statistics.mean(o for o, _ in ev)
            mi = statistics.mean(o for o, _ in isl)
            same = sum(a[0] == b[0] for a, b in zip(one, ev))
            t = [statistics.median(x for _, x in v) for v in (one, ev, isl)]
            unit = "ms" if task != "memory" else "MB"
            scale = 1e3 if task != "memory" else 1e-6
            print(f"| {model} | {task} | {method} | {m1 * scale:.4f} {unit} | {me / m1:.4f} | {same}/{len(one)} "
                  f"| {mi / m1:.4f} | {t[0]:.2f} / {t[1]:.2f} / {t[2]:.2f} |", flush=True)
