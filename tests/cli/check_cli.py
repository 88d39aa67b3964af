"""check_cli.py GOPT: the CLI's working paths on every zoo model: `gopt zoo --json` lists models
whose `gopt info --json` node count equals the count `gopt zoo --nodes` predicts, `--training`
adds backward and update ops, `gopt dot` output parses as a digraph with one box per node, and
`gopt convert` of a zoo model gives an ONNX file that python-onnx's checker accepts and that
gopt re-imports with the same node count, params and FLOPs."""
import json
import os
import re
import subprocess
import sys
import tempfile

import onnx

gopt = sys.argv[1]
passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL", msg)


def run(*args):
    p = subprocess.run([gopt, *args], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"gopt {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


models = json.loads(run("zoo", "--json"))
check(len(models) >= 10, f"zoo lists {len(models)} models")
with tempfile.TemporaryDirectory() as tmp:
    for m in models:
        name = m["name"]
        info = json.loads(run("info", name, "--json"))
        check(info["nodes"] == m["default_nodes"] == int(run("zoo", "--nodes", name)),
              f"{name}: info nodes {info['nodes']} vs zoo {m['default_nodes']}")
        check(info["flops"] > 0 and info["params"] > 0, f"{name}: flops/params missing")
        tr = json.loads(run("info", name, "--json", "--training"))
        check(tr["nodes"] > 2 * info["nodes"] * 0.9, f"{name}: training graph has {tr['nodes']} nodes")
        check(tr["flops"] > 2 * info["flops"], f"{name}: training FLOPs {tr['flops']} <= 2x forward")
        check(any(k.endswith("Update") for k in tr["ops"]), f"{name}: no optimizer update ops")
        dot = run("dot", name)
        boxes = len(re.findall(r"^  n\d+ \[label=", dot, re.M))
        check(dot.startswith("digraph") and dot.rstrip().endswith("}") and boxes == info["nodes"],
              f"{name}: dot has {boxes} node boxes for {info['nodes']} nodes")
        out = os.path.join(tmp, name + ".onnx")
        run("convert", name, "-o", out)
        back = json.loads(run("info", out, "--json"))  # before the checker, which rewrites the file
        model = onnx.load(out, load_external_data=False)
        # The zoo's weights have no data: the file references external data that does not exist
        # (as the structure-only corpus does). Give the checker empty stand-in files of the
        # referenced sizes; it checks references, not bytes.
        need = {}
        for t in model.graph.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                kv = {e.key: e.value for e in t.external_data}
                end = int(kv.get("offset", 0)) + int(kv.get("length", 0))
                need[kv["location"]] = max(need.get(kv["location"], 0), end)
        for loc, size in need.items():
            with open(os.path.join(tmp, loc), "wb") as fh:
                fh.truncate(size)
        try:
            onnx.checker.check_model(out, full_check=True)
            check(True, "")
        except Exception as e:  # noqa: BLE001
            check(False, f"{name}: onnx.checker: {str(e).splitlines()[0][:200]}")
        for k in ("nodes", "params", "ops"):
            check(back[k] == info[k], f"{name}: converted {k} {back[k]} != {info[k]}")
        check(abs(back["flops"] - info["flops"]) <= 1e-9 * info["flops"], f"{name}: converted flops differ")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
