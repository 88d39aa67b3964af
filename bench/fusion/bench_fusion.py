#!/usr/bin/env python3
"""bench_fusion.py: measured time of host fusion decisions (issue 29, docs/BENCHMARKS.md).

For each corpus model: decisions from `gopt optimize --task fusion --cluster CLUSTER --method M`
for the rule sets (xla, tvm) and the learned/search methods (default go), then `gopt run --time
--threads 1` of no fusion, `--fusion auto` and each decision file. The configurations of a model
are interleaved in ROUNDS rounds, so load drift on a shared host hits them alike. Two measures:
  wall  the median of the round medians of `--time` (`--warmup 2 --reps REPS`);
  cpu   the median of the round medians of `--time`'s CPU time per run (the process's CPU
        clock around each run: with one thread, time spent waiting for a core on a loaded host
        is not counted).
ROUNDS x REPS timed runs per configuration and measure. Prints a markdown table: ms per
configuration, the learned method's gain over no fusion and its ratio to the best of the others
(<= 1.00: it is at least as fast as every other choice), for the chosen measure.

Plans are compared group by group: "none" is the executor's own plan (the `no_fusion` baseline's
decision, which lists the executor's post-op chains as groups), each method's file its groups;
the "plans" column gives each configuration a letter, equal letters meaning identical groups
(`--fusion auto` is its own plan, letter "a", unless it makes no group: then it is the executor's
plan, none's letter). "ratio vs differing" is the learned method's ratio
to the best configuration whose plan differs from its own (identical plans run the same steps,
so their measured difference is the host's noise); "-" when every plan is the learned one's.

usage: bench_fusion.py GOPT [--models a,b] [--learned go] [--cluster host] [--rounds 3] [--reps 5]
                        [--min-ms MS] [--measure cpu|wall] [--stat median|min] [--rules xla,tvm]
                        [--plans-only] [--corpus DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CORPUS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "densenet121", "efficientnet_b0", "inception_v3",
          "shufflenet_v2_x1_0", "vgg11", "lraspp_mobilenet_v3_large", "lstm_seq2seq", "bert_tiny",
          "gpt2_tiny", "wavenet", "swin_t"]


def time_run(gopt, model, extra, reps):
    """(median wall seconds, median CPU seconds) of reps timed runs."""
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gopt")
    ap.add_argument("--models", default=",".join(CORPUS))
    ap.add_argument("--learned", default="go")
    ap.add_argument("--cluster", default="host")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--measure", choices=["wall", "cpu"], default="cpu")
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="over the rounds' medians (min: the least disturbed round)")
    ap.add_argument("--rules", default="xla,tvm", help="rule-set columns ('' for none)")
    ap.add_argument("--plans-only", action="store_true", help="compare the plans, time nothing")
    ap.add_argument("--corpus", default="corpus", help="folder of MODEL.onnx files")
    ap.add_argument("--min-ms", type=float, default=0,
                    help="per call, at least this many ms of timed runs (more reps for small models)")
    a = ap.parse_args()
    learned = a.learned.split(",")
    methods = [r for r in a.rules.split(",") if r] + learned
    cols = ["none", "auto"] + methods
    print(f"measure: {a.measure}, {a.stat} of {a.rounds} rounds' medians of {a.reps} runs (at least {a.min_ms:g} ms "
          f"of runs per call), 1 thread\n")
    print(f"| model | {' | '.join(c + ' ms' for c in cols)} | {learned[0]} gain vs none | "
          f"{learned[0]} / best other | ratio vs differing | plans ({','.join(cols)}) |")
    print("|" + "---|" * (len(cols) + 5))
    misses = 0
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.models.split(","):
            model = os.path.join(a.corpus, m + ".onnx")
            extra = {"none": [], "auto": ["--fusion", "auto"]}
            for meth in methods:
                f = os.path.join(tmp, f"{m}.{meth}.json")
                p = subprocess.run([a.gopt, "optimize", model, "--task", "fusion", "--cluster", a.cluster,
                                    "--method", meth, "--budget", str(a.budget), "--threads", "1",
                                    "--no-history", "-o", f], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
                if p.returncode:
                    raise RuntimeError(f"{m} {meth}: {p.stderr.strip().splitlines()[-1]}")
                extra[meth] = ["--fusion", f]
            f = os.path.join(tmp, f"{m}.no_fusion.json")
            subprocess.run([a.gopt, "optimize", model, "--task", "fusion", "--cluster", a.cluster, "--method",
                            "no_fusion", "--no-history", "-o", f], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           check=True)
            plans = {c: plan_of(f if c == "none" else extra[c][1]) for c in cols if c != "auto"}
            letters = plan_letters(plans, cols, auto_groups(a.gopt, model))
            lcol = "".join(letters[c] for c in cols)
            if a.plans_only:
                print(f"| {m} | {' | '.join('-' for _ in cols)} | - | - | - | {lcol} |", flush=True)
                continue
            reps = a.reps
            if a.min_ms > 0:  # a short probe sizes the calls of this model
                reps = max(reps, int(a.min_ms / (time_run(a.gopt, model, [], 3)[1] * 1e3)) + 1)
            t = {c: [] for c in cols}
            for _ in range(a.rounds):
                for c in cols:
                    wall, cpu = time_run(a.gopt, model, extra[c], reps)
                    t[c].append(wall if a.measure == "wall" else cpu)
            med = {c: (statistics.median(v) if a.stat == "median" else min(v)) for c, v in t.items()}
            best_other = min(med[c] for c in cols if c != learned[0])
            ratio = med[learned[0]] / best_other
            diff = [med[c] for c in cols if letters[c] != letters[learned[0]]]
            rdiff = f"{med[learned[0]] / min(diff):.3f}" if diff else "-"
            gain = (med["none"] / med[learned[0]] - 1) * 100
            misses += bool(diff) and med[learned[0]] > min(diff)
            print(f"| {m} | {' | '.join(f'{med[c] * 1e3:.3f}' for c in cols)} | {gain:+.1f}% | {ratio:.3f} | "
                  f"{rdiff} | {lcol} |", flush=True)
    print(f"\n{learned[0]} slower than the best configuration with a different plan on {misses} model(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
