#!/usr/bin/env python3
"""sim_fidelity.py: does `gopt simulate --cluster host` predict the executor's step, fused and
unfused? (issue 29; docs/BENCHMARKS.md "Host fusion").

One command, one table. Per corpus model: the host fusion decision of METHOD (`gopt optimize
--task fusion --cluster host`), then `gopt run --profile --threads 1 --costdb DB` without and with
`--fusion` (per-op and per-fused-group medians into the cost database; `--costdb` runs use plain
layouts, so the post-op chains the executor runs are only the decision's), then `gopt simulate
--cluster CLUSTER --costdb DB` without and with the decision (a measured device prices each op and
each fused group from the database), against the measured step: `gopt run --time --layouts plain`
(CPU time per run, median of REPS: the shared host's load is not counted; wall time beside it).
Prints per model the predicted and measured ms and the error, and the median |error| of each column.

usage: sim_fidelity.py GOPT [--models a,b] [--method go] [--cluster host] [--reps 15] [--db FILE]
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
    ap.add_argument("--db", default="")
    a = ap.parse_args()
    g = a.gopt
    errs = {"unfused": [], "fused": []}
    print(f"cluster {a.cluster}, decisions: --method {a.method}; measured: CPU ms per run, median of {a.reps}, "
          f"1 thread, --layouts plain (wall ms in brackets)\n")
    print("| model | unfused pred | unfused meas | err % | fused pred | fused meas | err % | groups |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        db = a.db or os.path.join(tmp, "costdb.json")
        for m in a.models.split(","):
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
            for kind, extra in (("unfused", []), ("fused", ["--fusion", f])):
                gopt([g, "run", model, "--profile", "--threads", "1", "--costdb", db] + extra)
                sim = json.loads(gopt([g, "simulate", model, "--cluster", a.cluster, "--costdb", db, "--json"] + batch
                                      + extra))
                t = json.loads(gopt([g, "run", model, "--time", "--threads", "1", "--layouts", "plain", "--warmup", "2",
                                     "--reps", str(a.reps), "--json"] + extra))["time"]
                pred, meas = sim["step_time_s"], t["cpu_seconds"]
                err = (pred / meas - 1) * 100
                errs[kind].append(abs(err))
                row += [f"{pred * 1e3:.3f}", f"{meas * 1e3:.3f} ({t['seconds'] * 1e3:.3f})", f"{err:+.1f}"]
            print(f"| {m} | {' | '.join(row)} | {ngroups} |", flush=True)
    print(f"\nmedian |error|: unfused {statistics.median(errs['unfused']):.1f} %, "
          f"fused {statistics.median(errs['fused']):.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
