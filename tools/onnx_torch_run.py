"""onnx_torch_run.py: runs ONNX models on a PyTorch device (CPU or CUDA) through PyTorch's own
operators (tools/onnx_torch.py: an interpreter, each ONNX node one PyTorch call, covering the ops
gopt's rewrites produce: Conv with groups, MatMul/Gemm, Split, Concat, Reshape, pooling,
elementwise), so a model rewritten by `gopt rewrite` can be timed against its input on a real GPU.

  onnx_torch_run.py MODEL [REWRITTEN] [--device cpu|cuda|cuda:N] [--warmup 5] [--reps 20]
                    [--seed 0] [--batch N] [--save DIR] [--json]

With two models both run on the same random inputs (seeded): warm-ups, then `reps` runs of each,
interleaved (a b, then b a, ...) so a drift of the device's speed hits both alike; on CUDA each run
is synchronised. Prints the median times, the speed-up (MODEL's time / REWRITTEN's) and the
largest absolute output difference. --save DIR writes the inputs and the last model's outputs as
input_N.pb / output_N.pb (the ONNX backend test layout `gopt run MODEL --check DIR` reads).
Weights missing from a file (external data not present) are random, alike in both models only
by seed, so compare outputs of models that carry their weights."""
import argparse
import json
import os
import statistics
import sys
import time

import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_torch  # noqa: E402


def load(path, device):
    torch.manual_seed(0)  # the same made-up weights for data-less initializers of both models
    return onnx_torch.OnnxModule(path).to(device).eval()


def inputs(path, batch):
    """Random inputs of the graph's declared shapes (a symbolic leading dim: batch, others 1)."""
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    xs = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        dims = [d.dim_value if d.dim_value > 0 else (batch if k == 0 else 1) for k, d in enumerate(tt.shape.dim)]
        dt = onnx_torch.DT.get(tt.elem_type, torch.float32)
        xs.append(torch.randn(dims).to(dt) if dt.is_floating_point else torch.randint(0, 2, dims, dtype=dt))
    return tuple(xs)


def run_once(mod, xs, device):
    t0 = time.perf_counter()
    with torch.no_grad():
        ys = mod(*xs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0, ys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="MODEL [REWRITTEN]")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1, help="a symbolic leading input dim (default 1)")
    ap.add_argument("--save", default="")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if len(a.models) > 2:
        ap.error("at most two models: MODEL [REWRITTEN]")
    if a.reps < 1 or a.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    try:
        device = torch.device(a.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available to this PyTorch")
        mods = [load(p, device) for p in a.models]
    except (RuntimeError, NotImplementedError, OSError, ValueError) as e:
        print(f"onnx_torch_run: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    torch.manual_seed(a.seed)
    xs = tuple(x.to(device) for x in inputs(a.models[0], a.batch))
    times = [[] for _ in mods]
    outs = [None] * len(mods)
    for i in range(a.warmup + a.reps):
        order = range(len(mods)) if i % 2 == 0 else reversed(range(len(mods)))
        for k in order:
            t, outs[k] = run_once(mods[k], xs, device)
            if i >= a.warmup:
                times[k].append(t)
    res = {"device": str(device), "models": a.models, "reps": a.reps,
           "seconds": [statistics.median(t) for t in times]}
    if len(mods) == 2:
        res["speedup"] = res["seconds"][0] / res["seconds"][1]
        res["max_abs_diff"] = max(float((x.float() - y.float()).abs().max()) if x.numel() else 0.0
                                  for x, y in zip(outs[0], outs[1]))
    if a.save:
        os.makedirs(a.save, exist_ok=True)
        for k, x in enumerate(xs):
            with open(os.path.join(a.save, f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x.cpu().numpy()).SerializeToString())
        for k, y in enumerate(outs[-1]):
            with open(os.path.join(a.save, f"output_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(y.detach().cpu().numpy()).SerializeToString())
    if a.json:
        print(json.dumps(res))
    else:
        for p, s in zip(a.models, res["seconds"]):
            print(f"{p}: {s * 1e3:.3f} ms on {device} (median of {a.reps})")
        if len(mods) == 2:
            print(f"speed-up {res['speedup']:.3f}x, max |output difference| {res['max_abs_diff']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
