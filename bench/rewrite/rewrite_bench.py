"""rewrite_bench.py GOPT [BUDGET] [RULES4]: the tables of docs/REWRITE.md. Runs `gopt rewrite --json
--measure` with every method `gopt rewrite --list-methods` prints on Tensat's seven benchmark models
(with TASO's and Tensat's published figures beside them), on every corpus model and on more zoo
models; each row's output passes tools/onnx_check.py (onnx.checker full check) and was verified by
gopt's executor and ONNX Runtime before it was written. Columns: the simulated V100 step before
and after (the cost reduction), the search time, and the measured time on this CPU with gopt's
executor and with ONNX Runtime (one thread each since 27 Nov, 2 before; gopt: median of 11 interleaved runs, ONNX Runtime: of 3 rounds of 5; made-up weights
where the model has none). With RULES4 (a `gopt rules generate --max-ops 4 --only4` file) it adds
the ablation rules up to 3 ops (rules/rules.json) vs those plus RULES4's bounded 4-op rules
(greedy). One command: bench/rewrite/run.sh."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rw_run  # noqa: E402

GOPT = sys.argv[1]
BUDGET = sys.argv[2] if len(sys.argv) > 2 else "100"
RULES4 = sys.argv[3] if len(sys.argv) > 3 else ""

# Tensat's Table 1 (T4 GPU): TASO %, Tensat %, TASO search s, Tensat search s.
TENSAT = [
    ("BERT", "bert_tensat", (8.5, 9.2, 13.6, 1.4)),
    ("ResNeXt-50", "resnext50:tensat=1", (5.5, 8.8, 25.3, 0.7)),
    ("NasNet-A", "nasnet_a", (1.9, 7.3, 1226, 10.6)),
    ("NasRNN", "nasrnn", (45.4, 68.9, 177.3, 0.5)),
    ("Inception-v3", "inception_v3:tensat=1", (6.3, 10.0, 68.6, 5.1)),
    ("SqueezeNet", "squeezenet:tensat=1", (6.7, 24.5, 16.4, 0.3)),
    ("VGG-19", "vgg19:tensat=1", (8.9, 8.9, 8.9, 0.4)),
]
# Zoo models beyond Tensat's (torchvision layouts keep BatchNorm as separate ops); gnmt and rnnlm
# at batch 1 (gnmt's default batch 128 is 2.8 TFLOPs a step: minutes per run on this CPU).
ZOO = ["resnet50", "resnext50", "inception_v3", "squeezenet", "vgg19", "bert:layers=2",
       "transformer:layers=2", "gpt2", "wavenet", "gnmt:batch=1", "rnnlm:batch=1"]
# gnmt's 12,907 nodes make every candidate (copy, shape inference, simulation) cost ~10 ms, and
# rnnlm's greedy search alone ran ~300 s: their greedy and rl searches are bounded in wall time too
# (eqsat keeps its own 10 s default).
EXTRA = {"gnmt:batch=1": ["--seconds", "120"], "rnnlm:batch=1": ["--seconds", "120"]}


def extra(model, method):
    """The extra flags of model's runs with method."""
    return EXTRA.get(model, []) if method != "eqsat" else []


def methods():
    r = subprocess.run([GOPT, "rewrite", "--list-methods"], capture_output=True, text=True, check=True)
    return [m for m in r.stdout.split() if m]


def rewrite(model, method, rules=None):
    """Runs gopt rewrite; returns (json or None, error line, wall seconds)."""
    # --budget is greedy's dequeued graphs; other methods keep their own defaults
    cmd = [GOPT, "rewrite", model, "--measure", "--method", method]
    cmd += (["--budget", BUDGET] if method == "greedy" else []) + extra(model, method)
    if rules:
        cmd += ["--rules", rules]
    return rw_run.rewrite(cmd)


def merged_rules(rules4, path):
    """rules/rules.json plus the gen4_* rules of rules4, one rule per line, written to path."""
    with open("rules/rules.json") as f:
        base = json.load(f)
    with open(rules4) as f:
        extra = [r for r in json.load(f)["rules"] if r["name"].startswith("gen4_")]
    with open(path, "w") as f:
        f.write('{\n"generator": %s,\n"rules": [\n' % json.dumps(base.get("generator", {})))
        f.write(",\n".join(json.dumps(r, separators=(",", ":")) for r in base["rules"] + extra))
        f.write("\n]}\n")
    return len(base["rules"]), len(extra)


def ms(x):
    return f"{x * 1e3:.2f}" if x is not None else "n/a"


def speed(j, before, after):
    b, a = j.get(before), j.get(after)
    if not b or not a:
        return "n/a"
    if not j["rules_applied"]:
        return f"{ms(b)} → {ms(a)} (unchanged)"
    return f"{ms(b)} → {ms(a)} ({b / a:.2f}x)"


def applied(j, limit=3):
    items = sorted(j["rules_applied"].items(), key=lambda kv: -kv[1])
    s = ", ".join(f"{k} ×{v}" for k, v in items[:limit])
    if len(items) > limit:
        s += f", +{len(items) - limit} more"
    return s or "none"


def reduction(j):
    return 100 * (1 - j["predicted_after_s"] / j["predicted_before_s"])


HEAD = ("| nodes before → after | rules applied | simulated V100 ms before → after | reduction | "
        "search s | gopt exec ms (speed-up) | ONNX Runtime ms (speed-up) | verified |")


def nodes(j):
    """Nodes of the input and of the search's result; a result measured slower than its input
    on gopt's executor is not written (the input is kept): said so."""
    after = j.get('candidate_nodes_after', j['nodes_after'])
    kept = ", input kept (measured slower)" if j.get('kept_input') and j.get('rules_applied') else ""
    return f"{j['nodes_before']} → {after}{kept}"


def row(j):
    return (f"{nodes(j)} | {applied(j)} | {ms(j['predicted_before_s'])} → "
            f"{ms(j['predicted_after_s'])} | {reduction(j):.1f}% | {j['search_seconds']:.2f} | "
            f"{speed(j, 'measured_before_s', 'measured_after_s')} | "
            f"{speed(j, 'ort_measured_before_s', 'ort_measured_after_s')} | "
            f"{'yes (' + j.get('verified_with', '') + ')' if j['verified'] else 'no'} |")


def main():
    """All tables; ONLY=ablation runs the 3-vs-4-op ablation alone (with RULES4)."""
    t_start = time.time()
    if os.environ.get("ONLY") != "ablation":
        main_tables()
    if RULES4:
        ablation()
    print(f"\nbench wall time: {time.time() - t_start:.0f} s")


def main_tables():
    ms_ = methods()
    print(f"methods (gopt rewrite --list-methods): {', '.join(ms_)}; greedy budget {BUDGET}\n")
    print("### Tensat's seven models\n")
    print("| model (zoo spec) | method | " + HEAD[2:] + " TASO / Tensat published reduction | "
          "TASO / Tensat published search s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    met = {m: 0 for m in ms_}
    for name, spec, pub in TENSAT:
        for m in ms_:
            j, err, _ = rewrite(spec, m)
            lead = f"| {name} (`{spec}`) | {m} | "
            tail = f" {pub[0]}% / {pub[1]}% | {pub[2]} / {pub[3]} |"
            if j is None:
                print(lead + f"failed: {err} | | | | | | | no |" + tail, flush=True)
                continue
            met[m] += reduction(j) >= pub[1]
            print(lead + row(j) + tail, flush=True)
    print()
    for m in ms_:
        print(f"- {m}: simulated reduction at least Tensat's on {met[m]} of 7 models (target: 5 of 7)")
    print("\n### Corpus and other zoo models\n")
    print("| model | method | " + HEAD[2:])
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in sorted(glob.glob("corpus/*.onnx")) + ZOO:
        name = os.path.basename(model).replace(".onnx", "")
        for m in ms_:
            j, err, _ = rewrite(model, m)
            if j is None:
                print(f"| {name} | {m} | failed: {err} | | | | | | | no |", flush=True)
            else:
                print(f"| {name} | {m} | " + row(j), flush=True)


def ablation():
    print("\n### Ablation: rules up to 3 ops vs up to 4 ops (greedy)\n")
    with tempfile.TemporaryDirectory() as d:
        both = os.path.join(d, "rules3+4.json")
        n3, n4 = merged_rules(RULES4, both)
        print(f"≤ 3 ops: rules/rules.json ({n3} rules); ≤ 4 ops: the same plus {n4} bounded "
              f"4-op rules of {RULES4}\n")
        print("| model | rules | " + HEAD[2:])
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, spec, _ in TENSAT:
            for label, rules in (("≤ 3 ops", None), ("≤ 4 ops", both)):
                j, err, _ = rewrite(spec, "greedy", rules)
                lead = f"| {name} | {label} | "
                print(lead + (row(j) if j else f"failed: {err} | | | | | | | no |"), flush=True)


if __name__ == "__main__":
    main()
