#!/usr/bin/env python3
"""eval_localadv.py DIR BUDGET SEEDS GRAPH...: renders tools/eval_localadv.sh's results as the
markdown tables of docs/LEARNED.md "Local advantage": per held-out graph, each method's final
improvement over the default and the evaluations it needs to reach khop's final result (per seed,
the same seed's khop run), guided's share of khop's evaluations (the target: <= 50%), and the
model's Kendall tau (DIR/kendall.tsv)."""
import json
import statistics
import sys

METHODS = ["khop", "guided", "random", "local"]


def reach(curve, target):
    """First evaluation count whose best is <= target (None when never)."""
    for ev, best in curve:
        if best <= target * (1 + 1e-12):
            return ev
    return None


def fmt(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    if len(vals) == 1:
        return "%.0f" % vals[0]
    return "%.0f ± %.0f" % (statistics.mean(vals), statistics.stdev(vals))


def main():
    d, budget, seeds, graphs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    print("| graph | default (ms) | %s | guided / khop evaluations |" %
          " | ".join("%s: improvement %%, evals to khop's final (reached)" % m for m in METHODS))
    print("|---|---|%s---|" % ("---|" * len(METHODS)))
    ratios, met, half = [], 0, []
    for g in graphs:
        runs = {}
        for m in METHODS:
            for s in range(1, seeds + 1):
                try:
                    with open("%s/%s_%s_%d.json" % (d, g, m, s)) as f:
                        runs[(m, s)] = json.load(f)
                except (OSError, ValueError):
                    pass
        if not all((("khop", s) in runs) for s in range(1, seeds + 1)):
            print("| %s | (khop runs missing) |" % g)
            continue
        dflt = runs[("khop", 1)]["default_objective"]
        cells, need = [], {}
        for m in METHODS:
            imp, ev, hit = [], [], 0
            for s in range(1, seeds + 1):
                r = runs.get((m, s))
                if not r:
                    continue
                target = runs[("khop", s)]["objective"]
                imp.append(100 * (dflt - r["objective"]) / dflt)
                e = reach(r["curve"], target)
                if e is not None:
                    hit += 1
                    ev.append(e)
                else:
                    ev.append(None)
            need[m] = ev
            cells.append("%.2f, %s (%d/%d)" % (statistics.mean(imp) if imp else float("nan"), fmt(ev), hit, seeds))
        # guided's evaluations relative to khop's, per seed; not reached counts as the full budget
        rs = []
        for s in range(seeds):
            k = need["khop"][s] if s < len(need["khop"]) else None
            gd = need["guided"][s] if s < len(need["guided"]) else None
            if k:
                rs.append((gd if gd is not None else budget) / k)
        ratio = statistics.mean(rs) if rs else float("nan")
        # early efficiency: evaluations to half of khop's final improvement over the default
        hk, hg = [], []
        for s in range(1, seeds + 1):
            if ("guided", s) not in runs:
                continue
            target = dflt - 0.5 * (dflt - runs[("khop", s)]["objective"])
            hk.append(reach(runs[("khop", s)]["curve"], target))
            hg.append(reach(runs[("guided", s)]["curve"], target))
        half.append((g, hk, hg))
        ratios.append(ratio)
        met += ratio <= 0.5
        print("| %s | %.4f | %s | %.2f |" % (g, dflt * 1e3, " | ".join(cells), ratio))
    if ratios:
        gm = statistics.geometric_mean([r for r in ratios if r > 0]) if any(r > 0 for r in ratios) else float("nan")
        print()
        print("guided needs %.2f of khop's evaluations (geometric mean over %d graphs; unreached counts as the "
              "whole budget of %d); target <= 0.50 met on %d of %d graphs." % (gm, len(ratios), budget, met, len(ratios)))
    print()
    print("| graph | khop: evals to half of khop's final improvement | guided: same (reached) |")
    print("|---|---|---|")
    for g, hk, hg in half:
        print("| %s | %s | %s (%d/%d) |" % (g, fmt(hk), fmt(hg), sum(v is not None for v in hg), len(hg)))
    print()
    print("| held-out graph | records | Kendall tau (signed: what guided ranks by, as a gain from the current choice) | Kendall tau of abs (what guided ranked by until 29 Nov) |")
    print("|---|---|---|---|")
    try:
        with open("%s/kendall.tsv" % d) as f:
            rows = [ln.rstrip("\n").split("\t") for ln in f][1:]
        for r in rows:
            print("| %s | %s | %s | %s |" % (r[0], r[2], r[3], r[4]))
        ta = [float(r[4]) for r in rows]
        ts = [float(r[3]) for r in rows]
        print()
        if rows:
            print("mean Kendall tau %.3f (signed), %.3f (absolute) over %d held-out graphs." %
              (statistics.mean(ts), statistics.mean(ta), len(rows)))
    except OSError:
        print("(no Kendall results)")


if __name__ == "__main__":
    main()
