"""eqsat_bench.py GOPT [SECONDS]: `gopt rewrite --method eqsat` (Tensat: equality saturation, ILP
extraction) on the corpus models and zoo models; prints the markdown table of docs/REWRITE.md's
eqsat section: simulated V100 step before/after (the cost reduction), search seconds, the
e-graph's size and why saturation stopped, and which extraction was used (ILP or the greedy
fallback), with every output verified by gopt's executor and ONNX Runtime before it is written
and checked by onnx.checker (full check) after; "whole run s" is the wall clock of the whole
command (load, search, verification, write).
Run: python3 bench/rewrite/eqsat_bench.py build/bin/gopt [SECONDS] [MODEL...]"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
sys.path.insert(0, HERE)
import onnx_check  # noqa: E402
from rewrite_bench import TENSAT, ZOO  # noqa: E402  (the models of the Results tables)

GOPT = sys.argv[1]
SECONDS = sys.argv[2] if len(sys.argv) > 2 else "10"


def main():
    models = sys.argv[3:] or [t[1] for t in TENSAT] + sorted(glob.glob("corpus/*.onnx")) + ZOO
    print("| model | nodes before → after | rules used | simulated V100 step before → after | reduction | "
          "search s (wall) | search s (CPU) | iterations (stop) | e-nodes | extraction | verified | whole run s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for m in models:
            name = os.path.basename(m).replace(".onnx", "")
            out = os.path.join(d, "o.onnx")
            if os.path.exists(out):
                os.remove(out)
            t0 = time.time()
            try:
                r = subprocess.run([GOPT, "rewrite", m, "-o", out, "--json", "--method",
                                    "eqsat", "--seconds", SECONDS], capture_output=True, text=True, timeout=900)
            except subprocess.TimeoutExpired:
                print(f"| {name} | | not finished in 900 s (load, search, verification) | | | | | | | | no | |", flush=True)
                continue
            wall = time.time() - t0
            if r.returncode != 0:
                err = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
                print(f"| {name} | | failed: {err} | | | | | | | | no | {wall:.0f} |", flush=True)
                continue
            try:
                onnx_check.full_check(out)
            except Exception as ex:  # noqa: BLE001 (any checker failure is reported in the row)
                print(f"| {name} | | output fails onnx.checker: {str(ex).splitlines()[0][:200]} | | | | | | | | no | {wall:.0f} |",
                      flush=True)
                continue
            j = json.loads(r.stdout)
            used = ", ".join(f"{k} ×{v}" for k, v in sorted(j["rules_applied"].items())) or "none"
            pb, pa = j["predicted_before_s"], j["predicted_after_s"]
            note = j.get("search_note", "")
            it = re.search(r"(\d+) iterations \(stop: ([^)]*)\)", note)
            en = re.search(r"(\d+) e-nodes,", note)
            cpu = re.search(r"([0-9.]+) s CPU", note)
            ex = re.search(r"extraction: (ilp|greedy)(?: \(([a-z ,]*)[,)])?", note)
            how = (ex.group(1) + (f" ({ex.group(2)})" if ex.group(2) else "")) if ex else "?"
            if "input kept" in note:
                how += "; input kept"
            print(f"| {name} | {j['nodes_before']} → {j['nodes_after']} | {used} | {pb*1e3:.3f} → {pa*1e3:.3f} ms | "
                  f"{100*(1-pa/pb):.1f}% | {j['search_seconds']:.2f} | {cpu.group(1) if cpu else '?'} | {it.group(1)} ({it.group(2)}) | "
                  f"{en.group(1) if en else '?'} | {how} | {'yes' if j['verified'] else 'no'} | {wall:.0f} |", flush=True)


if __name__ == "__main__":
    main()
