#!/usr/bin/env python3
"""sim_fidelity.py: does `gopt simulate --cluster host` predict the executor's step, fused and
unfused? (issue 29; docs/BENCHMARKS.md "Host fusion").

One command, one table. Per corpus model: the host fusion decision of METHOD (`gopt optimize
--task fusion --cluster host`), then `gopt run --profile --steps STEPS --threads 1 --costdb DB`
without and with `--fusion` (per-op and per-fused-group medians into the model's cost database;
`--costdb` runs use plain layouts, so the post-op chains the executor runs are only the
decision's), then `gopt simulate --cluster CLUSTER --costdb DB` without and with the decision (a
measured device prices each op and each fused group from the database), against the measured
step in two ways: (1) "profile": the end-to-end median of the same `--profile` call (its
whole-run CPU time, 32 runs just before the steps are timed: the same load as the database's
times); (2) "time": `gopt run --time --layouts plain` in separate processes (CPU time per run: the
shared host's waits for a core are not counted; wall time beside it), unfused and fused
interleaved in ROUNDS rounds of REPS runs, the median of the round medians (ROUNDS 0: skipped).
On a loaded host (2) also measures how the load drifted between the profile and the timing. STEPS: context (default) times each step inside whole runs, so
the database holds what a step costs in the run (its cache state, the executor's allocation and
frees around it); isolated re-runs each step alone on warm inputs, as TASO does (steps then sum
to 75-90 % of the run). Each model gets a fresh database (DB: one file for all, reused).
Prints per model the predicted and measured ms and the error, and the median |error| of each column.

usage: sim_fidelity.py GOPT [--models a,b] [--method go] [--cluster host] [--reps 15] [--rounds 3]
                       [--steps context|isolated] [--db FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_fusion import CORPUS  # noqa: E402 (same folder)


def gopt(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip().splitlines()[-1]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gopt")
    ap.add_argument("--models", default=",".join(CORPUS))
    ap.add_argument("--method", default="go")
    ap.add_argument("--cluster", default="host")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", choices=["context", "isolated"], default="context")
    ap.add_argument("--db", default="")
    a = ap.parse_args()
    g = a.gopt
    errs = {(k, w): [] for k in ("unfused", "fused") for w in ("profile", "time")}
    print(f"cluster {a.cluster}, decisions: --method {a.method}, profile --steps {a.steps}; measured: CPU ms per "
          f"run, median of {a.rounds} rounds' medians of {a.reps}, 1 thread, --layouts plain (wall ms in brackets)\n")
    print("| model | unfused pred | meas (profile) | err % | meas (time) | err % | fused pred | meas (profile) | "
          "err % | meas (time) | err % | groups |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.models.split(","):
            db = a.db or os.path.join(tmp, m + ".costdb.json")
            model = os.path.join("corpus", m + ".onnx")
            f = os.path.join(tmp, m + ".json")
            gopt([g, "optimize", model, "--task", "fusion", "--cluster", "host", "--method", a.method,
                  "--no-history", "-o", f])
            ngroups = len(json.load(open(f)).get("fusion", []))
            # the shapes gopt run binds (batch 1), so the signatures match the cost database's
            nb = subprocess.run([g, "simulate", model, "--cluster", a.cluster, "--batch", "1"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True).stderr
            batch = [] if "no symbolic batch" in nb else ["--batch", "1"]
            row = []
            kinds = (("unfused", []), ("fused", ["--fusion", f]))
            pred, prof = {}, {}
            for kind, extra in kinds:
                p = json.loads(gopt([g, "run", model, "--profile", "--steps", a.steps, "--threads", "1", "--costdb", db,
                                     "--json"] + extra))
                prof[kind] = p["profile"]["seconds"]
                sim = json.loads(gopt([g, "simulate", model, "--cluster", a.cluster, "--costdb", db, "--json"] + batch
                                      + extra))
                pred[kind] = sim["step_time_s"]
            cpu = {k: [] for k, _ in kinds}
            wall = {k: [] for k, _ in kinds}
            for _ in range(a.rounds):
                for kind, extra in kinds:
                    t = json.loads(gopt([g, "run", model, "--time", "--threads", "1", "--layouts", "plain", "--warmup",
                                         "2", "--reps", str(a.reps), "--json"] + extra))["time"]
                    cpu[kind].append(t["cpu_seconds"])
                    wall[kind].append(t["seconds"])
            for kind, _ in kinds:
                e1 = (pred[kind] / prof[kind] - 1) * 100
                errs[(kind, "profile")].append(abs(e1))
                row += [f"{pred[kind] * 1e3:.3f}", f"{prof[kind] * 1e3:.3f}", f"{e1:+.1f}"]
                if a.rounds:
                    meas, w = statistics.median(cpu[kind]), statistics.median(wall[kind])
                    e2 = (pred[kind] / meas - 1) * 100
                    errs[(kind, "time")].append(abs(e2))
                    row += [f"{meas * 1e3:.3f} ({w * 1e3:.3f})", f"{e2:+.1f}"]
                else:
                    row += ["-", "-"]
            print(f"| {m} | {' | '.join(row)} | {ngroups} |", flush=True)
    for w in ("profile", "time"):
        if errs[("unfused", w)]:
            print(f"\nmedian |error| against the {w} measure: unfused "
                  f"{statistics.median(errs[('unfused', w)]):.1f} %, fused {statistics.median(errs[('fused', w)]):.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
