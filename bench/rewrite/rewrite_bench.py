"""rewrite_bench.py GOPT [BUDGET]: `gopt rewrite --method greedy` on the corpus models and zoo
models; prints the markdown table of docs/REWRITE.md: rules applied, simulated step time on a
V100 before/after (the cost reduction), search time, and the executor's measured time on this CPU
before/after (made-up weights where the model has none; median of 5 runs after 1 warm-up), with
the output verified by gopt's executor and ONNX Runtime. One command: bench/rewrite/run.sh."""
import glob
import json
import os
import subprocess
import sys
import tempfile

GOPT = sys.argv[1]
BUDGET = sys.argv[2] if len(sys.argv) > 2 else "100"
ZOO = ["resnet50", "inception_v3", "bert:layers=2", "transformer:layers=2", "gpt2", "wavenet", "gnmt",
       "rnnlm"]


def main():
    models = sorted(glob.glob("corpus/*.onnx")) + ZOO
    print(f"| model | nodes before → after | rules applied | simulated V100 step before → after | reduction | search s | CPU measured before → after | speed-up | verified |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for m in models:
            r = subprocess.run([GOPT, "rewrite", m, "-o", os.path.join(d, "o.onnx"), "--json", "--measure",
                                "--budget", BUDGET], capture_output=True, text=True)
            name = os.path.basename(m).replace(".onnx", "")
            if r.returncode != 0:
                err = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
                print(f"| {name} | | failed: {err} | | | | | | no |")
                continue
            j = json.loads(r.stdout)
            applied = ", ".join(f"{k} ×{v}" for k, v in sorted(j["rules_applied"].items())) or "none"
            pb, pa = j["predicted_before_s"], j["predicted_after_s"]
            mb, ma = j.get("measured_before_s"), j.get("measured_after_s")
            meas = f"{mb*1e3:.2f} → {ma*1e3:.2f} ms" if mb and ma else "n/a"
            sp = f"{mb/ma:.2f}x" if mb and ma else "n/a"
            if not j["rules_applied"]:
                sp = "unchanged"
            print(f"| {name} | {j['nodes_before']} → {j['nodes_after']} | {applied} | {pb*1e3:.3f} → {pa*1e3:.3f} ms | "
                  f"{100*(1-pa/pb):.1f}% | {j['search_seconds']:.2f} | {meas} | {sp} | {'yes' if j['verified'] else 'no'} |",
                  flush=True)


if __name__ == "__main__":
    main()
