#!/usr/bin/env python3
"""eval_regal.py RESULTS.json: renders tools/eval_regal.sh's runs (a list of `gopt compare --json`
objects) as the markdown tables of docs/LEARNED.md "REGAL": per graph and method the mean and
standard deviation over seeds of the peak memory, REGAL's improvement over BRKGA-5K (brkga) and
over brkga-regal (uniform keys) per graph and on average, and the gap to the exact optimum (dp)
where it solved."""
import json
import statistics as st
import sys
from collections import OrderedDict


def main():
    runs = json.load(open(sys.argv[1]))
    by = OrderedDict()  # (cluster, model) -> method -> [objective]
    for r in runs:
        key = (r["cluster"], r["model"].split("/")[-1])
        d = by.setdefault(key, OrderedDict())
        for x in r["results"]:
            d.setdefault(x["method"], []).append((x["objective"], x.get("optimal", False), x["evaluations"]))
    for cl in OrderedDict((k[0], 1) for k in by):
        keys = [k for k in by if k[0] == cl]
        methods = list(by[keys[0]].keys())
        print("\n**%s** (peak memory MB, mean ± sd over %d seeds; %s)\n" % (
            cl, len(by[keys[0]][methods[0]]), "evaluations: 5,000 per search, start included"))
        print("| graph | " + " | ".join(methods) + " | REGAL vs BRKGA-5K | REGAL vs brkga-regal |" +
              (" REGAL gap to optimum |" if "dp" in methods else ""))
        print("|---" * (len(methods) + 3 + ("dp" in methods)) + "|")
        imps, own, gaps = [], [], []
        for k in keys:
            d = by[k]
            cells = []
            for m in methods:
                v = [o / 1e6 for o, _, _ in d[m]]
                cells.append("%.3f ± %.3f" % (st.mean(v), st.pstdev(v)) if len(v) > 1 else "%.3f" % v[0])
            reg = st.mean(o for o, _, _ in d["regal"])
            bk = st.mean(o for o, _, _ in d["brkga"])
            imp = 100 * (bk - reg) / bk
            imps.append(imp)
            un = st.mean(o for o, _, _ in d["brkga-regal"])
            own.append(100 * (un - reg) / un)
            row = "| %s | %s | %+.2f%% | %+.2f%% |" % (k[1], " | ".join(cells), imp, own[-1])
            if "dp" in d:
                opt = [o for o, ok, _ in d["dp"] if ok]
                if opt:
                    gap = 100 * (reg - min(opt)) / min(opt)
                    gaps.append(gap)
                    row += " %+.2f%% |" % gap
                else:
                    row += " (dp unsolved) |"
            print(row)
        print("\nREGAL vs BRKGA-5K on %s, averaged over the graphs: **%+.2f%%** lower peak memory (target >= 3.56%%);"
              " vs the same search with uniform keys (brkga-regal): %+.2f%%" % (cl, st.mean(imps), st.mean(own)))
        if gaps:
            print("REGAL above the exact optimum, mean over solved graphs: **%+.2f%%** (target <= 0.5%%), worst %+.2f%%" % (
                st.mean(gaps), max(gaps)))


if __name__ == "__main__":
    main()
