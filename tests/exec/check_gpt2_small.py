#!/usr/bin/python3
"""check_gpt2_small.py GOPT: the executor on a GPT-2-small-sized model (issue 22).

The zoo's GPT-2 small (`gpt2:seq=32`: 12 layers, d 768, 12 heads, vocabulary 50257, LM head tied
to the token embedding; 32 tokens, batch 1) is written with `gopt convert` into a temporary
folder and given random weights here (numpy, seed 0: 2-D weights uniform +-sqrt(3/fan_in), norm
scales in [0.5, 1.5), biases +-0.1), so ONNX Runtime can run the same file: about 470 MiB of
MatMul weights, beyond the 256 MiB cap on packed weight copies that made `--layouts auto` refuse
such models ("the post-op chain was not applied by the kernel"). Checks:
  - the model holds more than 256 MiB of constant MatMul weights (counted from the file);
  - `gopt run --layouts auto` runs it with its bias/residual chains absorbed (post_op_nodes > 0)
    and, where oneDNN packs MatMul weights on this CPU (AVX-512; its AVX2 MatMul reads them in
    place), with more than 256 MiB of packed weight copies (`packed_weights` in --json);
  - its logits equal `--layouts plain`'s (rtol 1e-4, atol 1e-5) and ONNX Runtime's on the same
    input (tools/ort/ort_run.js, rtol 1e-3, atol 1e-4).
One line per check; exit 1 on the first failure.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "ort"))
from ort_compare import run_ort  # noqa: E402
from cpu_flags import has_avx512  # noqa: E402

SEQ = 32
CAP = 256 << 20  # the removed cap on packed weight copies (bytes)


def fail(msg):
    print(f"check_gpt2_small: FAIL: {msg}")
    sys.exit(1)


T0 = time.time()


def note(msg):
    print(f"[{time.time() - T0:5.1f} s] {msg}", flush=True)


def close(name, got, want, rtol, atol):
    if got.shape != want.shape:
        fail(f"{name}: shape {got.shape} vs {want.shape}")
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bad = int(np.count_nonzero(diff > atol + rtol * np.abs(want.astype(np.float64))))
    note(f"{name}: max abs diff {diff.max():.3g}, {bad} of {got.size} beyond rtol {rtol} atol {atol}")
    if bad:
        fail(name)


def make_model(gopt, work):
    """model.onnx (+ model.onnx.data with random weights) in work, and the matmul weight bytes."""
    path = os.path.join(work, "model.onnx")
    p = subprocess.run([gopt, "convert", f"gpt2:seq={SEQ}", "-o", path], capture_output=True, text=True)
    if p.returncode:
        fail(f"gopt convert: {p.stderr.strip()}")
    m = onnx.load(path, load_external_data=False)
    rng = np.random.default_rng(0)
    with open(os.path.join(work, "model.onnx.data"), "wb") as f:
        for t in m.graph.initializer:
            ext = {e.key: e.value for e in t.external_data}
            if t.data_type != onnx.TensorProto.FLOAT or ext.get("location") != "model.onnx.data":
                fail(f"initializer '{t.name}' is not float external data")
            if len(t.dims) == 2:
                r = np.sqrt(3.0 / t.dims[1 if t.name == "wte.weight" else 0])
                a = rng.uniform(-r, r, tuple(t.dims))
            elif t.name.endswith(".weight"):
                a = rng.uniform(0.5, 1.5, tuple(t.dims))
            else:
                a = rng.uniform(-0.1, 0.1, tuple(t.dims))
            f.seek(int(ext.get("offset", 0)))
            f.write(a.astype(np.float32).tobytes())
    inits = {t.name: t for t in m.graph.initializer}
    consts = dict(inits)
    for n in m.graph.node:  # the tied LM head reads the token embedding through a Transpose
        if n.op_type == "Transpose" and n.input[0] in inits:
            consts[n.output[0]] = inits[n.input[0]]
    wb = sum(4 * int(np.prod(consts[n.input[1]].dims)) for n in m.graph.node
             if n.op_type == "MatMul" and n.input[1] in consts)
    return path, wb


def gopt_run(gopt, path, ids_file, work, layouts):
    out = os.path.join(work, "out_" + layouts)
    os.makedirs(out)
    p = subprocess.run([gopt, "run", path, "--inputs", ids_file, "--outputs", out, "--format", "npy",
                        "--layouts", layouts, "--json"], capture_output=True, text=True)
    if p.returncode:
        fail(f"gopt run --layouts {layouts}: {p.stderr.strip()}")
    return json.loads(p.stdout), np.load(os.path.join(out, "output_0.npy"))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_gpt2_small.py GOPT")
    gopt = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        path, wb = make_model(gopt, work)
        note(f"model: {wb / 2**20:.0f} MiB of constant MatMul weights")
        if wb <= CAP:
            fail("the model does not hold more than 256 MiB of MatMul weights")
        ids = np.random.default_rng(1).integers(0, 50257, (1, SEQ), dtype=np.int64)
        ids_file = os.path.join(work, "ids.npy")
        np.save(ids_file, ids)
        rep, auto = gopt_run(gopt, path, ids_file, work, "auto")
        pw, lay = rep["packed_weights"], rep["layouts"]
        note(f"auto: {pw['copies']} packed weight copies, {pw['bytes'] / 2**20:.0f} MiB, read by "
             f"{pw['readers']} primitives; {lay['post_op_nodes']} nodes run as matmul bias/post-ops")
        if lay["post_op_nodes"] <= 0:
            fail("auto absorbed no post-op")
        if not has_avx512():
            # oneDNN chooses the weights' layout per CPU: its AVX2 MatMul reads them plain, so
            # no copy is made and the cap's case cannot arise on such a CPU
            if pw["copies"] or pw["readers"]:
                fail("packed weight copies on a CPU without AVX-512")
            note("auto: oneDNN reads the MatMul weights in place on this CPU (no AVX-512)")
        elif pw["bytes"] <= CAP:
            fail("auto did not pack more than 256 MiB of weights")
        _, plain = gopt_run(gopt, path, ids_file, work, "plain")
        close("auto vs plain", auto, plain, 1e-4, 1e-5)
        ort, _ = run_ort(path, {"input_ids": ids}, work)
        close("auto vs ONNX Runtime", auto, ort["lm_head"], 1e-3, 1e-4)
    print("check_gpt2_small: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
