"""sweep.py GOPT [METHOD ...]: `gopt rewrite` with each method (default: every one
`--list-methods` prints) on every model the rewrite benchmark uses (Tensat's seven, every
corpus model, the other zoo models: bench/rewrite/rewrite_bench.py's lists, with its flags but
without --measure). Each run must exit 0 with "verified": true (gopt's executor and ONNX Runtime,
or "unchanged" when the input is kept), and its output must pass onnx.checker's full check and
strict shape inference. One line per run (model, method, outcome, search seconds, what was
applied or why the input was kept); exit 1 if any run fails. Run by bench/rewrite/sweep.sh."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import onnx_check  # noqa: E402

GOPT = sys.argv[1]
sys.argv = [sys.argv[0], GOPT] + sys.argv[2:]  # rewrite_bench reads GOPT from argv[1]
sys.path.insert(0, HERE)
import rewrite_bench as rb  # noqa: E402


def one(model, method, d):
    """Runs one rewrite; returns (ok, line)."""
    out = os.path.join(d, "o.onnx")
    if os.path.exists(out):
        os.remove(out)
    cmd = [GOPT, "rewrite", model, "-o", out, "--json", "--method", method]
    cmd += (["--budget", rb.BUDGET] if method == "greedy" else []) + rb.extra(model, method)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        return False, f"FAIL exit {r.returncode} ({wall:.1f} s): {lines[-1] if lines else ''}"
    try:
        j = json.loads(r.stdout)
    except json.JSONDecodeError:
        return False, f"FAIL bad JSON: {r.stdout[:200]!r}"
    if j.get("verified") is not True:
        return False, f"FAIL not verified: {j.get('verified_with')}"
    try:
        onnx_check.full_check(out)
    except Exception as e:  # noqa: BLE001 - reported in the line
        return False, f"FAIL onnx.checker: {str(e).splitlines()[0]}"
    red = 100 * (1 - j["predicted_after_s"] / j["predicted_before_s"]) if j["predicted_before_s"] else 0
    note = j.get("search_note", "")
    why = note[note.find("extraction:"):][:90] if method == "eqsat" else ""
    what = ", ".join(f"{k} x{v}" for k, v in sorted(j["rules_applied"].items())) or "input kept"
    return True, (f"ok {j['verified_with']}, -{red:.1f}%, search {j['search_seconds']:.2f} s "
                  f"(wall {wall:.1f} s): {what[:120]}{'; ' + why if why else ''}")


def main():
    methods = sys.argv[2:] or rb.methods()
    models = [spec for _, spec, _ in rb.TENSAT] + sorted(glob.glob("corpus/*.onnx")) + rb.ZOO
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for model in models:
            for m in methods:
                ok, line = one(model, m, d)
                bad += not ok
                print(f"{model} | {m} | {line}", flush=True)
    print(f"sweep: {len(models) * len(methods) - bad} of {len(models) * len(methods)} runs verified and checker-valid")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
