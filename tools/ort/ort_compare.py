#!/usr/bin/python3
"""ONNX Runtime beside gopt's executor, on test-data folders (CASE/model.onnx, CASE/test_data_set_0
with input_N.pb), through tools/ort/ort_run.js (npm onnxruntime-node).

  ort_compare.py check GOPT CASE [CASE...] [--rtol 1e-3 --atol 1e-4]
      runs every CASE with `GOPT run --outputs` and with ONNX Runtime on the same input files and
      compares every output (numpy allclose: |gopt - ort| <= atol + rtol |ort|, NaN equals NaN;
      integer and bool outputs exactly). One line per output; exit 1 on any mismatch. ONNX
      Runtime is an oracle independent of both gopt and PyTorch.
  ort_compare.py time CASE [--threads 1 --reps 10]
      prints {"seconds": median of REPS ONNX Runtime runs after one warm-up} for CASE's inputs.
Any error: one line on stderr naming the case, exit 1.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(ROOT, "tools", "ort", "ort_run.js")
NP2ORT = {np.float32: "float32", np.float64: "float64", np.int8: "int8", np.uint8: "uint8",
          np.int16: "int16", np.uint16: "uint16", np.int32: "int32", np.int64: "int64",
          np.bool_: "bool"}
ORT2NP = {v: k for k, v in NP2ORT.items()}


def fail(msg):
    sys.exit(f"ort_compare: {msg}")


def case_inputs(case):
    """(model path, {input name: array}) for CASE (input_N.pb in the graph's input order)."""
    model = os.path.join(case, "model.onnx")
    m = onnx.load(model, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    sets = sorted(glob.glob(os.path.join(case, "test_data_set_*")))
    if not sets:
        fail(f"{case}: no test_data_set_* folder")
    arrs = {}
    for k, name in enumerate(names):
        f = os.path.join(sets[0], f"input_{k}.pb")
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        arrs[name] = numpy_helper.to_array(t)
    return model, arrs


def write_inputs(model, arrs, work):
    """Writes arrs as ort_run.js's IN.json (returned) and one raw file per input, in WORK."""
    spec = {"inputs": {}}
    for i, (name, a) in enumerate(arrs.items()):
        typ = NP2ORT.get(a.dtype.type)
        if typ is None:
            fail(f"{model}: input '{name}' has dtype {a.dtype}, which ort_run.js does not take")
        f = os.path.join(work, f"in_{i}.bin")
        np.ascontiguousarray(a).tofile(f)
        spec["inputs"][name] = {"type": typ, "dims": list(a.shape), "file": f}
    inp = os.path.join(work, "in.json")
    with open(inp, "w") as fh:
        json.dump(spec, fh)
    return inp


def run_ort(model, arrs, work, threads=1, reps=0):
    inp = write_inputs(model, arrs, work)
    out = os.path.join(work, "ort_out")
    cmd = ["node", RUN, model, inp, out, "--threads", str(threads)] + (["--time", str(reps)] if reps else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        fail(f"{model}: ONNX Runtime: {p.stderr.strip()}")
    with open(os.path.join(out, "outputs.json")) as fh:
        res = json.load(fh)
    outs = {}
    for name, t in res["outputs"].items():
        a = np.fromfile(os.path.join(out, t["file"]), dtype=ORT2NP[t["type"]])
        outs[name] = a.reshape(t["dims"])
    return outs, res.get("seconds")


def run_gopt(gopt, model, arrs, work):
    m = onnx.load(model, load_external_data=False)
    files = []
    for i, a in enumerate(arrs.values()):
        f = os.path.join(work, f"g_in_{i}.npy")
        np.save(f, a)
        files.append(f)
    out = os.path.join(work, "gopt_out")
    os.makedirs(out, exist_ok=True)
    cmd = [gopt, "run", model, "--outputs", out, "--format", "npy", "--threads", "1"]
    if files:
        cmd += ["--inputs", ",".join(files)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        fail(f"{model}: gopt run: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    return {o.name: np.load(os.path.join(out, f"output_{k}.npy")) for k, o in enumerate(m.graph.output)}


def compare(name, got, want, rtol, atol):
    if got.shape != want.shape:
        print(f"  {name}: shape {list(got.shape)} vs ONNX Runtime {list(want.shape)}: FAIL")
        return False
    if got.dtype.kind in "iub" or want.dtype.kind in "iub":
        bad = int(np.count_nonzero(got.astype(np.int64) != want.astype(np.int64)))
        print(f"  {name}: {bad} of {got.size} integer elements differ: {'FAIL' if bad else 'ok'}")
        return bad == 0
    g, w = got.astype(np.float64), want.astype(np.float64)
    close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    diff = np.abs(g - w)
    fin = np.isfinite(diff)
    mx = float(diff[fin].max()) if fin.any() else 0.0
    bad = int(close.size - np.count_nonzero(close))
    print(f"  {name}: max abs diff {mx:.3g}, {bad} of {g.size} beyond tolerance: {'FAIL' if bad else 'ok'}")
    return bad == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("gopt")
    c.add_argument("cases", nargs="+")
    c.add_argument("--rtol", type=float, default=1e-3)
    c.add_argument("--atol", type=float, default=1e-4)
    t = sub.add_parser("time")
    t.add_argument("case")
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    if a.cmd == "time":
        model, arrs = case_inputs(a.case)
        with tempfile.TemporaryDirectory() as work:
            _, sec = run_ort(model, arrs, work, a.threads, max(1, a.reps))
        print(json.dumps({"seconds": sec}))
        return 0
    ok = True
    for case in a.cases:
        model, arrs = case_inputs(case)
        print(f"{os.path.basename(os.path.normpath(case))}: gopt vs ONNX Runtime")
        with tempfile.TemporaryDirectory() as work:
            want, _ = run_ort(model, arrs, work)
            got = run_gopt(a.gopt, model, arrs, work)
            for name, w in want.items():
                if name not in got:
                    print(f"  {name}: missing in gopt's outputs: FAIL")
                    ok = False
                    continue
                ok &= compare(name, got[name], w, a.rtol, a.atol)
    print("all outputs match ONNX Runtime" if ok else "MISMATCH against ONNX Runtime")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
