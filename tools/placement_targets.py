#!/usr/bin/env python3
"""placement_targets.py DIR [DIR...]: issue 26's placement figures from `gopt compare --json` files
(tools/eval_learned.sh's JSONDIR, or tools/eval_learned_go.sh's OUTDIR): per held-out pair the
zero-shot go ratio to the best baseline, the search headroom at 1K (best search method at the 1K
budget over the best baseline), the share of it go captures, whether go ties `single` (one device),
go's improvement over expert / metis / m_etf zero-shot and fine-tuned (the 5K file's go row), and
whether fine-tuned go reaches BRKGA-5K. Prints a markdown table and the summary lines."""
import glob
import json
import math
import os
import sys

BASELINES = ("single", "round_robin", "metis", "expert", "m_etf")


def rows(path):
    with open(path) as f:
        d = json.load(f)
    return d, {r["method"]: r for r in d["results"]}


def obj(r):
    return r["objective"] if r and r.get("feasible", True) else math.inf


def main():
    pairs = []
    for d in sys.argv[1:]:
        pairs += sorted(glob.glob(os.path.join(d, "placement_*.1k.json")))
    print("| pair | go / best baseline | best search 1K / best baseline | headroom captured | go on one device (ties single) | vs expert | vs metis | vs m_etf | fine-tuned vs expert / metis / m_etf | fine-tuned reaches BRKGA-5K |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    worst, caps, reached, n5, imp = 1.0, [], 0, 0, {"expert": [], "metis": [], "m_etf": [], "ft_expert": [], "ft_metis": [], "ft_m_etf": []}
    ratios = []
    for p in pairs:
        d, m = rows(p)
        bb = min(obj(m.get(b)) for b in BASELINES)
        go = obj(m.get("go"))
        search = min([obj(r) for r in m.values() if r.get("kind") == "search"] + [bb])
        ratio = go / bb
        ratios.append(ratio)
        worst = max(worst, ratio)
        head = (bb - search) / bb
        cap = "-" if head <= 1e-12 else "%.0f%%" % (100 * (bb - go) / (bb - search))
        if head > 1e-12:
            caps.append((bb - go) / (bb - search))
        one = abs(go - obj(m.get("single"))) <= 1e-12 * max(go, 1e-30)
        vs = {b: (obj(m.get(b)) - go) / obj(m.get(b)) for b in ("expert", "metis", "m_etf")}
        for b in vs:
            imp[b].append(vs[b])
        ft, reach = "-", "-"
        p5 = p.replace(".1k.json", ".5k.json")
        if os.path.exists(p5):
            _, m5 = rows(p5)
            gf = obj(m5.get("go"))
            fv = {b: (obj(m5.get(b)) - gf) / obj(m5.get(b)) for b in ("expert", "metis", "m_etf")}
            for b in fv:
                imp["ft_" + b].append(fv[b])
            ft = " / ".join("%+.1f%%" % (100 * fv[b]) for b in ("expert", "metis", "m_etf"))
            br = obj(m5.get("brkga"))
            n5 += 1
            ok = gf <= br * (1 + 1e-12)
            reached += ok
            reach = "yes" if ok else "no (%.3f vs %.3f)" % (gf / bb, br / bb)
        name = os.path.basename(p)[len("placement_"):-len(".1k.json")]
        print("| %s | %.3f | %.3f | %s | %s | %+.1f%% | %+.1f%% | %+.1f%% | %s | %s |" % (
            name, ratio, search / bb, cap, "yes" if one else "no", 100 * vs["expert"], 100 * vs["metis"],
            100 * vs["m_etf"], ft, reach))
    n = len(ratios)
    if not n:
        return
    gm = math.exp(sum(math.log(r) for r in ratios) / n)
    print()
    print("pairs %d; zero-shot go / best baseline: geometric mean %.3f, worst %.3f, more than 1%% worse on %d" % (
        n, gm, worst, sum(r > 1.01 for r in ratios)))
    if caps:
        print("headroom captured (mean over the %d pairs with headroom): %.0f%%" % (len(caps), 100 * sum(caps) / len(caps)))
    mean = lambda v: 100 * sum(v) / len(v) if v else float("nan")
    print("mean improvement zero-shot: expert %+.1f%%, metis %+.1f%%, m_etf %+.1f%%" % (
        mean(imp["expert"]), mean(imp["metis"]), mean(imp["m_etf"])))
    if n5:
        print("fine-tuned: reaches BRKGA-5K on %d of %d; mean improvement expert %+.1f%%, metis %+.1f%%, m_etf %+.1f%%" % (
            reached, n5, mean(imp["ft_expert"]), mean(imp["ft_metis"]), mean(imp["ft_m_etf"])))


if __name__ == "__main__":
    main()
