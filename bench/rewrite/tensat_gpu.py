"""tensat_gpu.py GOPT [CLUSTER...]: the "Tensat's seven on the calibrated GPU presets" table of
docs/REWRITE.md. Runs `gopt rewrite --json` with greedy (budget 100), eqsat (default limits: 10
s) and rl (the shipped policy: its greedy episode and up to 64 sampled ones, <= 100 steps each, 10 s
in all) on Tensat's seven models (environment
METHODS: a comma-separated subset), costed on each cluster (default H100 and V100: the measured-GPU cost
model calibrated on a real H100, V100 extrapolated from it; docs/SIMULATOR.md), every output
verified by gopt's executor and ONNX Runtime before it was written and checked with
tools/onnx_check.py (onnx.checker full check) after. Prints one row per model, cluster and method
with Tensat's published reduction beside it (search seconds: wall clock, and for eqsat the search's
process CPU seconds from its note), then per cluster how many of the seven reach it.
One command: bench/rewrite/tensat_gpu.sh."""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rw_run  # noqa: E402

# Tensat's Table 1 (T4 GPU): Tensat's reduction in %.
TENSAT = [("BERT", "bert_tensat", 9.2), ("ResNeXt-50", "resnext50:tensat=1", 8.8),
          ("NasNet-A", "nasnet_a", 7.3), ("NasRNN", "nasrnn", 68.9),
          ("Inception-v3", "inception_v3:tensat=1", 10.0), ("SqueezeNet", "squeezenet:tensat=1", 24.5),
          ("VGG-19", "vgg19:tensat=1", 8.9)]
METHODS = [m for m in os.environ.get("METHODS", "greedy,eqsat,rl").split(",") if m]


def rewrite(gopt, model, method, cluster):
    cmd = [gopt, "rewrite", model, "--method", method, "--cluster", cluster]
    return rw_run.rewrite(cmd + (["--budget", "100"] if method == "greedy" else []))


def cpu_seconds(j):
    """The search's process CPU seconds where its note reports them (eqsat: "eqsat: N s CPU; ..."),
    else an empty cell."""
    m = re.match(r"eqsat: ([0-9.]+) s CPU", j.get("search_note", ""))
    return m.group(1) if m else ""


def main():
    gopt = sys.argv[1]
    clusters = sys.argv[2:] or ["H100", "V100"]
    print("| model | cluster | method | rules applied | simulated ms before → after | reduction | Tensat | "
          "≥ Tensat | search s | search CPU s | verified |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    reach = {(c, m): 0 for c in clusters for m in METHODS}
    red_of = {}
    best = {c: 0 for c in clusters}
    eq_slow = []
    for label, model, tensat in TENSAT:
        for c in clusters:
            hit = False
            for m in METHODS:
                j, err, wall = rewrite(gopt, model, m, c)
                if j is None:
                    print(f"| {label} | {c} | {m} | failed: {err} | | | {tensat}% | no | | | no |")
                    continue
                red = 100 * (1 - j["predicted_after_s"] / j["predicted_before_s"])
                red_of[(label, c, m)] = red
                ok = red >= tensat
                reach[(c, m)] += ok
                hit |= ok and m != "rl"
                if m == "eqsat" and j["search_seconds"] > 10:
                    eq_slow.append(f"{label} on {c}: {j['search_seconds']:.1f} s")
                ra = ", ".join(f"{k} ×{v}" for k, v in sorted(j["rules_applied"].items(),
                                                               key=lambda kv: -kv[1])[:4]) or "none"
                if len(j["rules_applied"]) > 4:
                    ra += f", +{len(j['rules_applied']) - 4} more"
                print(f"| {label} (`{model}`) | {c} | {m} | {ra} | {j['predicted_before_s'] * 1e3:.3f} → "
                      f"{j['predicted_after_s'] * 1e3:.3f} | {red:.1f}% | {tensat}% | {'yes' if ok else 'no'} | "
                      f"{j['search_seconds']:.2f} | {cpu_seconds(j)} | {j['verified_with'] if j['verified'] else 'no'} |")
                sys.stdout.flush()
            best[c] += hit
    print()
    for c in clusters:
        per = ", ".join(f"{m} {reach[(c, m)]} of 7" for m in METHODS)
        print(f"- {c}: reduction ≥ Tensat's on {per}; greedy or eqsat on {best[c]} of 7")
        if "rl" in METHODS and "greedy" in METHODS:
            ge = sum(1 for lb, _, _ in TENSAT if (lb, c, "rl") in red_of and (lb, c, "greedy") in red_of
                     and red_of[(lb, c, "rl")] >= red_of[(lb, c, "greedy")] - 1e-9)
            print(f"- {c}: rl ≥ greedy on {ge} of 7")
    print(f"- eqsat searches over 10 s: {', '.join(eq_slow) if eq_slow else 'none'}")


if __name__ == "__main__":
    main()
