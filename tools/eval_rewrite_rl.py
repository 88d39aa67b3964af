"""eval_rewrite_rl.py GOPT POLICY: the held-out table of docs/REWRITE.md "## rl": `gopt rewrite`
with --method rl (the policy, one greedy episode of at most 100 rewrites) and --method greedy
(budget 100) on graphs the policy never saw; per model the simulated V100 cost reduction of each,
the rewrites applied and the search time; every output verified (gopt's executor and ONNX
Runtime) by gopt rewrite itself. Run by tools/train_rewrite.sh."""
import glob
import json
import os
import subprocess
import sys
import tempfile

GOPT, POLICY = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELD_OUT = ["resnet50", "resnet50:depth=101", "bert:layers=2", "gpt2:layers=2", "transformer:layers=2",
            "amoebanet:cells=2"] + sorted(glob.glob(os.path.join(ROOT, "corpus", "*.onnx")))


def rewrite(model, method, out):
    extra = ["--policy", POLICY] if method == "rl" else ["--budget", "100"]
    r = subprocess.run([GOPT, "rewrite", model, "-o", out, "--json", "--method", method, *extra],
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
    return json.loads(r.stdout), None


def cell(j, err):
    if j is None:
        return f"failed: {err}", "", ""
    red = 100 * (1 - j["predicted_after_s"] / j["predicted_before_s"])
    n = sum(j["rules_applied"].values())
    ok = "yes" if j["verified"] else "no"
    return f"{red:.1f}% ({n} rewrites, verified {ok})", f"{j['search_seconds']:.2f}", red


def main():
    print("| held-out model | nodes | greedy: reduction | greedy s | rl: reduction | rl s | rl − greedy |")
    print("|---|---|---|---|---|---|---|")
    wins = ties = losses = 0
    with tempfile.TemporaryDirectory() as d:
        for m in HELD_OUT:
            g, ge = rewrite(m, "greedy", os.path.join(d, "g.onnx"))
            r, re_ = rewrite(m, "rl", os.path.join(d, "r.onnx"))
            gc, gs, gr = cell(g, ge)
            rc, rs, rr = cell(r, re_)
            diff = ""
            if g is not None and r is not None:
                dd = rr - gr
                diff = f"{dd:+.1f} pp"
                if dd > 0.05:
                    wins += 1
                elif dd < -0.05:
                    losses += 1
                else:
                    ties += 1
            name = os.path.basename(m).replace(".onnx", "")
            nodes = g["nodes_before"] if g else (r["nodes_before"] if r else "")
            print(f"| {name} | {nodes} | {gc} | {gs} | {rc} | {rs} | {diff} |", flush=True)
    print(f"\nrl better than greedy on {wins}, equal on {ties}, worse on {losses} held-out models")


if __name__ == "__main__":
    main()
