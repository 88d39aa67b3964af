#!/usr/bin/python3
"""bench_env.py [MODEL...]: what the Python binding costs per evaluation of gopt.Env, as medians
of repeated runs, printed as a markdown table for docs/PYTHON.md. The reference in the same run
is env.evaluate_batch on one thread (the library's own evaluation speed, no Python per row);
the other columns are the same work through the per-call Python paths: env.evaluate (one ctypes
call per vector), a graph-mode episode (reset + step: two evaluations), and a node-mode step (one
incremental evaluation), plus evaluate_batch on all threads."""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gopt  # noqa: E402

REPS = 5


def med(fn, n):
    """Median seconds per item of fn() doing n items, over REPS runs."""
    ts = []
    for _ in range(REPS):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) / n)
    return statistics.median(ts)


def bench(model, cluster="2xV100", rows=1024):
    env1 = gopt.Env(model, "placement", cluster, seed=0, threads=1)
    envn = gopt.Env(model, "placement", cluster, seed=0)
    xs = np.stack([env1.action_space.sample() for _ in range(rows)])
    b1 = med(lambda: env1.evaluate_batch(xs), rows)
    bn = med(lambda: envn.evaluate_batch(xs), rows)
    k = rows // 4
    ev = med(lambda: [env1.evaluate(x) for x in xs[:k]], k)

    def episodes():
        for x in xs[:k]:
            env1.reset()
            env1.step(x)
    ep = med(episodes, k)
    node = gopt.Env(model, "placement", cluster, mode="node", seed=0)

    def node_episode():
        node.reset()
        for a in xs[0].tolist():
            node.step(a)
    ns = med(node_episode, node.nvars)
    us = lambda s: "%.1f us" % (s * 1e6)
    print("| %s | %d | %s | %s (%.1fx) | %s (%.1fx) | %s (%.1fx) | %s (%.1fx) |" % (
        model, env1.nvars, us(b1), us(bn), bn / b1, us(ev), ev / b1, us(ep), ep / b1, us(ns), ns / b1))


def main():
    models = sys.argv[1:] or ["resnet50", "inception_v3", "transformer"]
    print("Per evaluation, placement on 2xV100, median of %d runs; ratios against evaluate_batch on one "
          "thread." % REPS)
    print()
    print("| model | nodes | evaluate_batch, 1 thread | evaluate_batch, all threads | env.evaluate | "
          "graph-mode reset+step | node-mode step |")
    print("|---|---|---|---|---|---|---|")
    for m in models:
        bench(m)


if __name__ == "__main__":
    main()
