#!/usr/bin/env python3
"""sim_fidelity.py: does `gopt simulate --cluster host` predict the run a host fusion decision
produces, fused and unfused? (issue 29; docs/BENCHMARKS.md "Host fusion").

One command, one table. Per corpus model, two decisions: "unfused" is the `no_fusion` baseline's
(the executor's own plan: its post-op chains and pairings as groups, exactly what `gopt run` runs
without a file), "fused" METHOD's (`gopt optimize --task fusion --cluster host`). ROUNDS rounds,
each of:
  1. calibrate: a fresh cost database from `gopt run --fusion F --profile --steps context --layouts
     auto --threads 1 --warmup 2 --reps REPS --costdb DB` for both decisions: every step of that
     very run (the layout pass's oneDNN layouts, reorders inside the steps) timed inside whole
     runs with the CPU clock (entries of steps that read or write a oneDNN layout are tagged; the
     simulator looks those up first, gopt_costdb_get_run);
  2. predict: `gopt simulate --cluster CLUSTER --costdb DB --fusion F`;
  3. measure: `gopt run --fusion F --time --threads 1 --warmup 2 --reps REPS` (the decision's run:
     same layouts, same threads), the median CPU time per run.
Per model and decision: the medians over the rounds of the prediction and of the measurement, and
the median of the rounds' errors (prediction / measurement - 1, each round's prediction against
the same round's measurement, so load drift between rounds cancels) with its range. Last line:
the median over the models of |error|, unfused and fused. CPU time, because with one thread on a
loaded host the wall time counts waits for a core (the profile uses the same clock); wall ms in
brackets. All rounds are kept.

Why not `--layouts plain` (the earlier version of this check): a `--costdb` profile defaults to
plain layouts, and `run --time --layouts plain` agreed with it, but `gopt run --fusion F` runs the
layout pass, which is about twice as fast on the CNNs (mobilenet_v2: 19-22 ms plain, 8.5-10.6 ms
default, CPU time, same plan), so both of those measured a run no decision produces.

usage: sim_fidelity.py GOPT [--models a,b] [--method go] [--cluster host] [--reps 10] [--rounds 3]
                       [--corpus DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_fusion import CORPUS  # noqa: E402 (same folder)

# Every gopt this runs uses one thread: keep Debian OpenBLAS from starting its worker, which spins
# for ~0.1 s at process start and takes the other core from whatever runs beside it
# (docs/BENCHMARKS.md, "Host fusion", seventh round).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def gopt(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip().splitlines()[-1]}")
    return p.stdout


def one_round(g, model, files, batch, a, db):
    """One round: a fresh database from profiling both decisions, the simulator's step for each
    from it, then each decision's run timed; ({kind: predicted s}, {kind: (cpu s, wall s)})."""
    if os.path.exists(db):
        os.remove(db)
    prof = ["--profile", "--steps", "context", "--layouts", "auto", "--threads", "1", "--warmup", "2", "--reps",
            str(a.reps), "--costdb", db, "--json"]
    for f in files.values():
        gopt([g, "run", model, "--fusion", f] + prof)
    pred, meas = {}, {}
    for kind, f in files.items():  # after both profiles: a step both runs share is priced alike
        sim = json.loads(gopt([g, "simulate", model, "--cluster", a.cluster, "--costdb", db, "--fusion", f, "--json"]
                              + batch))
        pred[kind] = sim["step_time_s"]
    for kind, f in files.items():
        t = json.loads(gopt([g, "run", model, "--fusion", f, "--time", "--threads", "1", "--warmup", "2", "--reps",
                             str(a.reps), "--json"]))["time"]
        meas[kind] = (t["cpu_seconds"], t["seconds"])
    return pred, meas


def model_row(g, m, a, tmp, errs):
    """Calibrates, predicts and measures model m in a.rounds rounds; its table row (adds to errs)."""
    db = os.path.join(tmp, m + ".costdb.json")
    model = os.path.join(a.corpus, m + ".onnx")
    files = {}
    for kind, meth in (("unfused", "no_fusion"), ("fused", a.method)):
        files[kind] = os.path.join(tmp, f"{m}.{kind}.json")
        gopt([g, "optimize", model, "--task", "fusion", "--cluster", "host", "--method", meth, "--no-history", "-o",
              files[kind]])
    ngroups = {k: len(json.load(open(f)).get("fusion", [])) for k, f in files.items()}
    # the shapes gopt run binds (batch 1), so the signatures match the cost database's
    nb = subprocess.run([g, "simulate", model, "--cluster", a.cluster, "--batch", "1"], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True).stderr
    batch = [] if "no symbolic batch" in nb else ["--batch", "1"]
    rounds = [one_round(g, model, files, batch, a, db) for _ in range(a.rounds)]
    row = []
    for kind in files:
        pred = statistics.median(p[kind] for p, _ in rounds)
        cpu = statistics.median(t[kind][0] for _, t in rounds)
        wall = statistics.median(t[kind][1] for _, t in rounds)
        e = [(p[kind] / t[kind][0] - 1) * 100 for p, t in rounds]
        err = statistics.median(e)
        errs[kind].append(abs(err))
        row += [f"{pred * 1e3:.3f}", f"{cpu * 1e3:.3f} ({wall * 1e3:.3f})", f"{err:+.1f} [{min(e):+.0f}, {max(e):+.0f}]"]
    return f"| {m} | {' | '.join(row)} | {ngroups['unfused']} / {ngroups['fused']} |"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gopt")
    ap.add_argument("--models", default=",".join(CORPUS))
    ap.add_argument("--method", default="go")
    ap.add_argument("--cluster", default="host")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpus", default="corpus", help="folder of MODEL.onnx files")
    a = ap.parse_args()
    if a.rounds < 1 or a.reps < 1:
        ap.error("--rounds and --reps must be >= 1")
    errs = {"unfused": [], "fused": []}
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"cluster {a.cluster}; unfused: the no_fusion decision (executor's plan), fused: --method {a.method}; "
          f"{a.rounds} rounds of: calibrate (`run --fusion F --profile --steps context --layouts auto --threads 1 "
          f"--warmup 2 --reps {a.reps} --costdb` into a fresh database), predict (`simulate --costdb`), measure "
          f"(`run --fusion F --time --threads 1 --warmup 2 --reps {a.reps}`, CPU ms per run); pred and meas: "
          f"medians over the rounds (wall ms in brackets), err: the median of the rounds' errors [min, max]\n")
    print("| model | unfused pred | unfused meas | err % | fused pred | fused meas | err % | groups (unfused / fused) |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.models.split(","):
            print(model_row(a.gopt, m, a, tmp, errs), flush=True)
    print(f"\nmedian |error|: unfused {statistics.median(errs['unfused']):.1f} %, "
          f"fused {statistics.median(errs['fused']):.1f} %")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
