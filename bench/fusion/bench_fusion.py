#!/usr/bin/env python3
"""bench_fusion.py: measured time of host fusion decisions (issue 29, docs/BENCHMARKS.md).

For each corpus model: decisions from `gopt optimize --task fusion --cluster CLUSTER --method M`
for the rule sets (xla, tvm) and the learned method (default go), the `no_fusion` baseline's
decision (the executor's own plan, what `gopt run` runs without a file) and `--fusion auto`; each is
timed with `gopt run --time --threads 1` (the run the decision produces, default layouts).

How it measures on a shared, noisy host (every choice here is so that noise cannot decide):
  * Plans, not columns, are timed. Configurations whose groups are identical (equal letters in the
    "plans" column; `--fusion auto` with no group is the executor's plan) run the same steps, so
    each distinct plan is timed once per round and its columns share that time (ratio 1 by
    construction).
  * A/A: the learned plan is timed twice per round, as two independent calls. Their per-round
    ratio is the noise floor of this run (identical work measured twice), reported beside every
    comparison.
  * Rounds: each round times every distinct plan and the A/A copy once, in an order shuffled per
    round (seeded, --seed), each call `--warmup 2 --reps REPS`, its median CPU time per run (the
    running thread's CPU clock: time spent waiting for a core is not counted). REPS is at least --reps and
    enough for --min-ms of timed runs per call. All rounds are kept; none is dropped.
  * Paired ratios: for the learned plan L and every other distinct plan P, the per-round ratio
    t_L / t_P (both measured within the same round, so load drift between rounds cancels). The
    statement about L vs P is the median of those ratios with a distribution-free 95 % confidence
    interval of that median (order statistics of the binomial(n, 1/2)): "faster" when the whole
    interval is below 1, "slower" when it is above 1, "tie" when it holds 1 (L's time is not
    distinguishable from P's at this noise). The A/A ratio gets the same interval.
  * Per-configuration ms in the table: the median over rounds of the call medians (ROUNDS x REPS
    timed runs per plan).
Per model: L's ratio to the best other plan (the highest median ratio: the fastest other plan)
and a verdict: "slower" when any other plan is shown faster than L, else the best plan's verdict
("same": every configuration runs L's plan).

usage: bench_fusion.py GOPT [--models a,b] [--learned go] [--cluster host] [--rounds 15] [--reps 3]
                        [--min-ms 200] [--measure cpu|wall] [--rules xla,tvm] [--plans-only]
                        [--corpus DIR] [--seed 1] [--budget 1000]
"""
import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile

# Every gopt this runs uses one thread: keep Debian OpenBLAS from starting its worker, which spins
# for ~0.1 s at process start and takes the other core from whatever runs beside it
# (docs/BENCHMARKS.md, "Host fusion", seventh round).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

CORPUS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "densenet121", "efficientnet_b0", "inception_v3",
          "shufflenet_v2_x1_0", "vgg11", "lraspp_mobilenet_v3_large", "lstm_seq2seq", "bert_tiny",
          "gpt2_tiny", "wavenet", "swin_t"]


def time_run(gopt, model, extra, reps):
    """(median wall seconds, median CPU seconds) of reps timed runs in one process."""
    p = subprocess.run([gopt, "run", model, "--time", "--threads", "1", "--warmup", "2", "--reps", str(reps),
                        "--json"] + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode:
        raise RuntimeError(f"{model} {' '.join(extra)}: {p.stderr.strip().splitlines()[-1]}")
    t = json.loads(p.stdout)["time"]
    return t["seconds"], t["cpu_seconds"]


def plan_of(path):
    """The groups of a decisions file as a set of frozensets of node names."""
    return frozenset(frozenset(g) for g in json.load(open(path)).get("fusion", []))


def auto_groups(gopt, model):
    """Number of groups `--fusion auto` makes on model (its stderr line)."""
    p = subprocess.run([gopt, "run", model, "--fusion", "auto", "--threads", "1"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, check=True)
    for line in p.stderr.splitlines():
        if "--fusion auto:" in line:
            return int(line.rsplit(":", 1)[1].split()[0])
    raise RuntimeError(f"{model}: no '--fusion auto: N groups' line")


def plan_letters(plans, cols, n_auto):
    """A letter per configuration: equal letters for identical plans ("a" for --fusion auto unless it
    makes no group, which is the executor's own plan)."""
    letters, seen = {}, {}
    for c in cols:
        if c == "auto" and n_auto:
            letters[c] = "a"
            continue
        key = plans["none" if c == "auto" else c]
        if key not in seen:
            seen[key] = "ABCDEFGHIJ"[len(seen)]
        letters[c] = seen[key]
    return letters


def median_ci(v, conf=0.95):
    """(median, lo, hi): the median of v and a distribution-free confidence interval for it, the
    order statistics v[k-1], v[n-k] (sorted) with the largest k such that P(k <= B <= n-k) >= conf,
    B ~ binomial(n, 1/2). With fewer than 6 values no such k exists: (median, min, max)."""
    s, n = sorted(v), len(v)
    med = statistics.median(s)
    best = 1
    for k in range(1, n // 2 + 1):
        cover = sum(math.comb(n, i) for i in range(k, n - k + 1)) / 2 ** n
        if cover >= conf:
            best = k
    return med, s[best - 1], s[n - best]


def verdict(lo, hi):
    return "faster" if hi < 1 else "slower" if lo > 1 else "tie"


def decide(gopt, model, m, methods, a, tmp):
    """The decision files of model: {config: extra run args}, plus the no_fusion plan's file."""
    extra = {"none": [], "auto": ["--fusion", "auto"]}
    for meth in methods:
        f = os.path.join(tmp, f"{m}.{meth}.json")
        p = subprocess.run([gopt, "optimize", model, "--task", "fusion", "--cluster", a.cluster, "--method", meth,
                            "--budget", str(a.budget), "--threads", "1", "--no-history", "-o", f],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode:
            raise RuntimeError(f"{m} {meth}: {p.stderr.strip().splitlines()[-1]}")
        extra[meth] = ["--fusion", f]
    f = os.path.join(tmp, f"{m}.no_fusion.json")
    subprocess.run([gopt, "optimize", model, "--task", "fusion", "--cluster", a.cluster, "--method", "no_fusion",
                    "--no-history", "-o", f], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    return extra, f


def measure(gopt, model, runs, reps, rounds, measure_kind, rng):
    """{run name: [per-round seconds]}: every run of `runs` ({name: extra args}) once per round, in
    an order shuffled per round."""
    t = {r: [] for r in runs}
    for _ in range(rounds):
        order = list(runs)
        rng.shuffle(order)
        for r in order:
            wall, cpu = time_run(gopt, model, runs[r], reps)
            t[r].append(wall if measure_kind == "wall" else cpu)
    return t


def bench_model(m, a, methods, learned, cols, tmp, rng):
    """One table row (a string) and the model's verdict ("slower" if another plan is shown faster)."""
    model = os.path.join(a.corpus, m + ".onnx")
    extra, nf = decide(a.gopt, model, m, methods, a, tmp)
    plans = {c: plan_of(nf if c == "none" else extra[c][1]) for c in cols if c != "auto"}
    letters = plan_letters(plans, cols, auto_groups(a.gopt, model))
    lcol = "".join(letters[c] for c in cols)
    if a.plans_only:
        return f"| {m} | {' | '.join('-' for _ in cols)} | - | - | - | - | {lcol} |", "-"
    runs = {}  # one run per distinct plan (its first column), plus the learned plan's A/A copy
    for c in cols:
        if letters[c] not in runs:
            runs[letters[c]] = extra[c]
    lp = letters[learned]
    runs["A/A"] = runs[lp]
    reps = a.reps
    if a.min_ms > 0:  # a short probe sizes the calls of this model
        reps = max(reps, int(a.min_ms / (time_run(a.gopt, model, [], 3)[1] * 1e3)) + 1)
    t = measure(a.gopt, model, runs, reps, a.rounds, a.measure, rng)
    ms = {c: statistics.median(t[letters[c]]) * 1e3 for c in cols}
    aa = median_ci([x / y for x, y in zip(t[lp], t["A/A"])])
    others = {p: median_ci([x / y for x, y in zip(t[lp], t[p])]) for p in runs if p not in (lp, "A/A")}
    if letters["none"] == lp:
        gain = "0 (same plan)"
    else:
        g = median_ci([y / x - 1 for x, y in zip(t[lp], t[letters["none"]])])
        gain = f"{g[0] * 100:+.1f}% [{g[1] * 100:+.1f}, {g[2] * 100:+.1f}]"
    if others:
        bp = max(others, key=lambda p: others[p][0])  # the fastest other plan
        r = others[bp]
        best = f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}] vs {bp}"
        worst = "slower" if any(verdict(v[1], v[2]) == "slower" for v in others.values()) else verdict(r[1], r[2])
    else:
        best, worst = "1 (every plan is the learned one)", "same"
    row = (f"| {m} | {' | '.join(f'{ms[c]:.3f}' for c in cols)} | {gain} | {best} | {worst} | "
           f"{aa[0]:.3f} [{aa[1]:.3f}, {aa[2]:.3f}] | {lcol} |")
    return row, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gopt")
    ap.add_argument("--models", default=",".join(CORPUS))
    ap.add_argument("--learned", default="go")
    ap.add_argument("--cluster", default="host")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--min-ms", type=float, default=200,
                    help="per call, at least this many ms of timed runs (more reps for small models)")
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--measure", choices=["wall", "cpu"], default="cpu")
    ap.add_argument("--rules", default="xla,tvm", help="rule-set columns ('' for none)")
    ap.add_argument("--plans-only", action="store_true", help="compare the plans, time nothing")
    ap.add_argument("--corpus", default="corpus", help="folder of MODEL.onnx files")
    ap.add_argument("--seed", type=int, default=1, help="shuffles the order of the runs in each round")
    a = ap.parse_args()
    if a.rounds < 1 or a.reps < 1:
        ap.error("--rounds and --reps must be >= 1")
    learned = a.learned
    methods = [r for r in a.rules.split(",") if r] + [learned]
    cols = ["none", "auto"] + methods
    rng = random.Random(a.seed)
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"measure: {a.measure} ms per run, 1 thread; {a.rounds} rounds, each distinct plan once per round in a "
          f"shuffled order (seed {a.seed}), >= {a.reps} runs and >= {a.min_ms:g} ms of runs per call; ratios are "
          f"per-round paired, median [95 % CI of the median]\n")
    print(f"| model | {' | '.join(c + ' ms' for c in cols)} | {learned} gain vs none | {learned} / best other plan | "
          f"verdict | A/A ({learned} / {learned}) | plans ({','.join(cols)}) |")
    print("|" + "---|" * (len(cols) + 6))
    verdicts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.models.split(","):
            row, verdicts[m] = bench_model(m, a, methods, learned, cols, tmp, rng)
            print(row, flush=True)
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.plans_only:
        return 0
    slower = [m for m, v in verdicts.items() if v == "slower"]
    print(f"\n{learned} shown slower than another plan (95 % CI of the paired ratio above 1) on {len(slower)} "
          f"model(s){': ' + ', '.join(slower) if slower else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
