"""onnx_torch_run.py: runs ONNX models on a PyTorch device (CPU or CUDA) through PyTorch's own
operators (tools/onnx_torch.py: an interpreter, each ONNX node one PyTorch call, covering the ops
gopt's rewrites produce: Conv with groups, MatMul/Gemm, Split, Concat, Reshape, pooling,
elementwise), so a model rewritten by `gopt rewrite` can be timed against its input on a real GPU.

  onnx_torch_run.py MODEL [REWRITTEN] [--device cpu|cuda|cuda:N] [--warmup 5] [--reps 20]
                    [--seed 0] [--batch N] [--graph [--inner 10]] [--save DIR] [--json]

With two models both run on the same random inputs (seeded): warm-ups, then `reps` runs of each,
interleaved (a b, then b a, ...) so a drift of the device's speed hits both alike; on CUDA each run
is synchronised. Prints the median times, the speed-up (MODEL's time / REWRITTEN's) and the
largest absolute output difference. --save DIR writes the inputs and the last model's outputs as
input_N.pb / output_N.pb (the ONNX backend test layout `gopt run MODEL --check DIR` reads).
Weights missing from a file (external data not present) are random, alike in both models only
by seed, so compare outputs of models that carry their weights.

--graph (CUDA only) captures each model's forward once in a CUDA graph and times replays of it
(CUDA events around --inner replays per timed run): the GPU's own time without the interpreter's
per-node Python dispatch, as the calibration's batch-1 figures are taken (docs/SIMULATOR.md). On
CUDA, TF32 is off and cuDNN's benchmark mode on, as in tools/gpu_profile.py. Nodes whose inputs
are all constants are folded once when a model is loaded, as inference runtimes do. compare() is the same
measurement for callers in Python (bench/rewrite/tensat_gpu_measure.py)."""
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
    """The model at path on device, constant subexpressions folded (as an inference runtime does:
    a rewrite that moves work onto weights, such as (x·W1)·W2 -> x·(W1·W2), is timed as deployed)."""
    torch.manual_seed(0)  # the same made-up weights for data-less initializers of both models
    return onnx_torch.OnnxModule(path, fold=True).to(device).eval()


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


def cuda_setup(device):
    """fp32 as the calibration measures it: TF32 off, cuDNN benchmark mode on."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True


def capture(mod, xs):
    """mod's forward on xs captured in a CUDA graph (after warm-up runs on a side stream, as
    PyTorch requires); returns (graph, outputs held by the graph)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(s):
        for _ in range(3):
            mod(*xs)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        ys = mod(*xs)
    torch.cuda.synchronize()
    return g, ys


def replay_once(g, inner):
    """Seconds per replay of g, the mean of inner back-to-back replays between CUDA events."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(inner):
        g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e-3 / inner


def compare(paths, device="cpu", warmup=5, reps=20, seed=0, batch=1, graph=False, inner=10):
    """Times the models at paths (one or two) on device, interleaved (a b, then b a); returns
    {"device", "models", "reps", "mode", "seconds": [median per model], "speedup",
    "max_abs_diff", "inputs", "outputs"} (the last two: the inputs and the last model's outputs).
    Raises RuntimeError / NotImplementedError / OSError / ValueError on a model it cannot run."""
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available to this PyTorch")
    if graph and device.type != "cuda":
        raise ValueError("--graph needs a CUDA device")
    cuda_setup(device)
    mods = [load(p, device) for p in paths]
    torch.manual_seed(seed)
    xs = tuple(x.to(device) for x in inputs(paths[0], batch))
    times = [[] for _ in mods]
    outs = [None] * len(mods)
    graphs = [capture(m, xs) for m in mods] if graph else None
    for i in range(warmup + reps):
        order = range(len(mods)) if i % 2 == 0 else reversed(range(len(mods)))
        for k in order:
            if graph:
                t, outs[k] = replay_once(graphs[k][0], inner), graphs[k][1]
            else:
                t, outs[k] = run_once(mods[k], xs, device)
            if i >= warmup:
                times[k].append(t)
    res = {"device": str(device), "models": list(paths), "reps": reps,
           "mode": f"cuda-graph replay x{inner}" if graph else "eager",
           "seconds": [statistics.median(t) for t in times], "inputs": xs, "outputs": outs[-1]}
    if len(mods) == 2:
        res["speedup"] = res["seconds"][0] / res["seconds"][1]
        res["max_abs_diff"] = max(float((x.float() - y.float()).abs().max()) if x.numel() else 0.0
                                  for x, y in zip(outs[0], outs[1]))
    return res


def save(res, where):
    """Writes res's inputs and outputs in the ONNX backend test layout under where."""
    os.makedirs(where, exist_ok=True)
    for k, x in enumerate(res["inputs"]):
        with open(os.path.join(where, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x.cpu().numpy()).SerializeToString())
    for k, y in enumerate(res["outputs"]):
        with open(os.path.join(where, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y.detach().cpu().numpy()).SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="MODEL [REWRITTEN]")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1, help="a symbolic leading input dim (default 1)")
    ap.add_argument("--graph", action="store_true", help="CUDA only: time CUDA-graph replays")
    ap.add_argument("--inner", type=int, default=10, help="replays per timed run with --graph")
    ap.add_argument("--save", default="")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if len(a.models) > 2:
        ap.error("at most two models: MODEL [REWRITTEN]")
    if a.reps < 1 or a.warmup < 0 or a.inner < 1:
        ap.error("--reps and --inner must be >= 1 and --warmup >= 0")
    try:
        res = compare(a.models, a.device, a.warmup, a.reps, a.seed, a.batch, a.graph, a.inner)
    except (RuntimeError, NotImplementedError, OSError, ValueError) as e:
        print(f"onnx_torch_run: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    if a.save:
        save(res, a.save)
    del res["inputs"], res["outputs"]
    if a.json:
        print(json.dumps(res))
    else:
        for p, s in zip(a.models, res["seconds"]):
            print(f"{p}: {s * 1e3:.3f} ms on {res['device']} ({res['mode']}, median of {a.reps})")
        if len(a.models) == 2:
            print(f"speed-up {res['speedup']:.3f}x, max |output difference| {res['max_abs_diff']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
