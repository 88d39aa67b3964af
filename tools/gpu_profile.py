#!/usr/bin/env python3
"""gpu_profile.py: measures a CUDA GPU with PyTorch and writes the GPU measurements file that
`gopt calibrate --gpu FILE --device NAME -o dev.json` fits gopt's GPU cost model to (the format of
../shared/gpu/h100_corpus.json; docs/SIMULATOR.md, "GPU cost model").

    python3 tools/gpu_profile.py -o my_gpu.json                      # the corpus architectures
    python3 tools/gpu_profile.py --onnx a.onnx b.onnx -o my_gpu.json  # your own ONNX models
    gopt calibrate --gpu my_gpu.json --device H100 --models corpus -o my_gpu_device.json
    gopt simulate corpus/resnet18.onnx --cluster my_gpu_device.json

What it measures (fp32, TF32 off, cuDNN benchmark mode), per model: a batch-1 forward captured in a
CUDA graph and replayed (infer_b1_graph_ms), batch-32 forward as the sum of its GPU kernels
(infer_b32_kernel_ms, profiler), as a CUDA-graph replay (infer_b32_graph_ms: differs from the
kernel sum where kernels overlap, e.g. cuDNN's grouped convolutions launch one GEMM per group group
on several streams) and as eager wall time (infer_b32_ms), the same under bf16
autocast (infer_b32_bf16_kernel_ms), one batch-32 SGD training step (train_b32_kernel_ms,
train_b32_ms); for the corpus architectures also every distinct leaf module alone at batch 1 and
32 (layers_b1 / layers_b32: fwd_gpu_ms, fwdbwd_gpu_ms by CUDA-graph replay); and the single-op
micro-benchmarks (micro). An ONNX model runs through a small ONNX-to-PyTorch interpreter (the ops
of typical CNN and transformer exports; weights missing from the file are random), so its
kernels are those PyTorch runs for each ONNX node; calibrate finds it as --models DIR/NAME.onnx.

--dry-run runs everything on the CPU with one repetition and wall-clock times: it checks the
script and writes a well-formed file marked "dry_run": true, which is not a measurement of a GPU.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--out", required=True, help="measurements file to write")
    p.add_argument("--arch", nargs="*", default=None,
                   help="corpus architectures to build with PyTorch (default: all of "
                        "tools/export_corpus.py's when no --onnx is given)")
    p.add_argument("--onnx", nargs="*", default=[], help="ONNX model files to measure")
    p.add_argument("--tv-layers", action="store_true",
                   help="also measure the per-layer rows of the --torchvision models (a calibration "
                        "set; leave it off for held-out sets, whose rows no fit may see)")
    p.add_argument("--torchvision", nargs="*", default=[], metavar="NAME[:SIZE]",
                   help="torchvision architectures to build by name (random weights; SIZE: the "
                        "square image side, default 224), e.g. the held-out set of "
                        "tools/gpu_heldout.py")
    p.add_argument("--conv-grid", action="store_true",
                   help="also measure a grid of dense, grouped and depthwise convolutions alone "
                        "(layer rows of a pseudo-model 'conv_grid', no whole-model times)")
    p.add_argument("--matmul-grid", action="store_true",
                   help="also measure batched matrix products beyond attention's shapes (few "
                        "batches, large K and N: merged weight stacks), as micro rows; alone, "
                        "with no model")
    p.add_argument("--batch", type=int, default=32, help="the large batch (default 32)")
    p.add_argument("--no-layers", action="store_true", help="skip the per-layer rows")
    p.add_argument("--no-micro", action="store_true", help="skip the micro-benchmarks")
    p.add_argument("--reps", type=int, default=20, help="calls per CUDA-graph replay (default 20)")
    p.add_argument("--dry-run", action="store_true",
                   help="CPU only, one repetition, wall-clock times: checks the script and the "
                        "file format; not a measurement")
    a = p.parse_args(argv)
    if a.batch < 1 or a.reps < 1:
        p.error("--batch and --reps must be >= 1")
    for f in a.onnx:
        if not os.path.isfile(f):
            p.error("--onnx %s: no such file" % f)
    return a


# ---- timing ----------------------------------------------------------------------------------

class Timer:
    """GPU time of a callable: CUDA-graph replay, eager CUDA events, profiler kernel sums; on the
    CPU (dry run) wall-clock time for all three."""

    def __init__(self, torch, dry, reps):
        self.torch, self.dry, self.reps = torch, dry, (1 if dry else reps)

    def _wall(self, fn):
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3

    def graph_ms(self, fn):
        if self.dry:
            return self._wall(fn)
        torch = self.torch
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(self.reps):
                fn()
        out = []
        for _ in range(7):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            torch.cuda.synchronize()
            out.append(a.elapsed_time(b) / self.reps)
        return statistics.median(out)

    def eager_ms(self, fn):
        if self.dry:
            return self._wall(fn)
        torch = self.torch
        for _ in range(3):
            fn()
        out = []
        for _ in range(10):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            out.append(a.elapsed_time(b))
        return statistics.median(out)

    def kernel_ms(self, fn):
        """Sum of the GPU kernels' durations of one call (mean of 3)."""
        if self.dry:
            return self._wall(fn)
        torch = self.torch
        fn()
        torch.cuda.synchronize()
        acts = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
        us = 0.0
        for e in prof.key_averages():
            us += getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0))
        return us / 3 / 1e3


# ---- models ----------------------------------------------------------------------------------

def corpus_models(names):
    """name -> (module constructor, inputs constructor taking a batch size)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import export_corpus  # builds the architectures exactly as the corpus export does
    out = {}
    for name in names if names else sorted(export_corpus.MODELS):
        if name not in export_corpus.MODELS:
            raise SystemExit("gpu_profile.py: --arch %s: unknown (corpus: %s)"
                             % (name, ", ".join(sorted(export_corpus.MODELS))))
        ctor, inputs_fn = export_corpus.MODELS[name][0], export_corpus.MODELS[name][1]

        def inputs(batch, f=inputs_fn):
            one = [t[:1] for t in f()]
            return tuple(t.repeat(batch, *([1] * (t.dim() - 1))) for t in one)
        out[name] = (ctor, inputs)
    return out


def torchvision_models(specs):
    """NAME[:SIZE] -> (module constructor, inputs constructor taking a batch size)."""
    import torch
    import torchvision
    out = {}
    for spec in specs:
        name, _, size = spec.partition(":")
        if not hasattr(torchvision.models, name):
            raise SystemExit("gpu_profile.py: --torchvision %s: torchvision %s has no such model"
                             % (name, torchvision.__version__))
        side = int(size) if size else 224
        kw = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
        out[name] = (lambda n=name, k=kw: getattr(torchvision.models, n)(weights=None, **k),
                     lambda b, s=side: (torch.randn(b, 3, s, s),))
    return out


def conv_grid_specs():
    """(Cin, Cout, kernel, stride, groups, spatial) of the --conv-grid convolutions: grouped 3x3
    at ResNeXt/RegNet widths and group widths 4-64, grouped 1x1, depthwise 3x3/5x5/7x7 (MobileNet,
    EfficientNet, ConvNeXt), and dense 1x1/3x3 at the same sizes as a reference."""
    stages = [(64, 56), (128, 56), (256, 28), (512, 14), (1024, 7)]
    specs = []
    for c, hw in stages:
        for gw in (4, 8, 16, 32, 64):
            if gw < c:
                specs.append((c, c, 3, 1, c // gw, hw))
        specs.append((c, c, 3, 2, c // 8 if c >= 16 else 1, hw))
        specs.append((c, c, 1, 1, 4, hw))
        specs.append((c, c, 3, 1, 1, hw))
        specs.append((c, c, 1, 1, 1, hw))
    for c, hw in [(32, 112), (96, 56), (192, 28), (384, 14), (768, 7)]:
        for k in (3, 5, 7):
            specs.append((c, c, k, 1, c, hw))
        specs.append((c, c, 3, 2, c, hw))
    return specs


def conv_grid_model():
    """A module whose forward runs every --conv-grid convolution once on its own random input
    (the batch taken from its one input), so that layer_rows() times each alone."""
    import torch

    class ConvGrid(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.specs = conv_grid_specs()
            self.convs = torch.nn.ModuleList(
                torch.nn.Conv2d(ci, co, k, stride=s, padding=k // 2, groups=g, bias=False)
                for ci, co, k, s, g, _ in self.specs)

        def forward(self, x):
            outs = []
            for (ci, _, _, _, _, hw), conv in zip(self.specs, self.convs):
                outs.append(conv(torch.randn(x.shape[0], ci, hw, hw, device=x.device)).mean())
            return torch.stack(outs).sum()
    return ConvGrid()


def onnx_models(torch, paths):
    import onnx_torch  # tools/onnx_torch.py: the small interpreter
    out = {}
    for p in paths:
        name = os.path.splitext(os.path.basename(p))[0]
        out[name] = (lambda p=p: onnx_torch.OnnxModule(p), lambda b, p=p: onnx_torch.example_inputs(p, b))
    return out


def to(xs, dev):
    return tuple(x.to(dev) for x in xs)


def floats(out):
    if isinstance(out, dict):
        out = tuple(out.values())
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return [o for o in out if hasattr(o, "is_floating_point") and o.is_floating_point()]


def whole_model(torch, T, ctor, inputs, batch, dev):
    """The whole-model figures of one model (None values are left out)."""
    r = {}
    torch.manual_seed(0)
    m = ctor().to(dev).eval()
    with torch.no_grad():
        x1, xb = to(inputs(1), dev), to(inputs(batch), dev)
        r["infer_b1_graph_ms"] = T.graph_ms(lambda: m(*x1))
        r["infer_b32_ms"] = T.eager_ms(lambda: m(*xb))
        r["infer_b32_graph_ms"] = T.graph_ms(lambda: m(*xb))
        r["infer_b32_kernel_ms"] = T.kernel_ms(lambda: m(*xb))
        if not T.dry:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                r["infer_b32_bf16_kernel_ms"] = T.kernel_ms(lambda: m(*xb))
    m.train()
    for mod in m.modules():  # dropout off, BatchNorm in training mode
        if isinstance(mod, torch.nn.Dropout):
            mod.eval()
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = sum(o.float().mean() for o in floats(m(*xb)))
        loss.backward()
        opt.step()
    r["train_b32_ms"] = T.eager_ms(step)
    r["train_b32_kernel_ms"] = T.kernel_ms(step)
    return r


def distinct_layers(torch, model, xs):
    """Leaf modules met in a forward pass, one entry per (type, extra_repr, input shapes)."""
    seen, hooks = {}, []

    def hook(mod, args, out):
        ins = [list(a.shape) if hasattr(a, "shape") else None for a in args]
        key = (type(mod).__name__, mod.extra_repr(), json.dumps(ins))
        if key in seen:
            seen[key]["count"] += 1
        else:
            o = out[0] if isinstance(out, tuple) else out
            seen[key] = {"layer": key[0], "attrs": key[1], "in": ins,
                         "out": list(o.shape) if hasattr(o, "shape") else None, "count": 1,
                         "_mod": mod, "_args": args}
    for mod in model.modules():
        if not list(mod.children()):
            hooks.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        model(*xs)
    for h in hooks:
        h.remove()
    return list(seen.values())


def layer_rows(torch, T, ctor, inputs, batch, dev):
    torch.manual_seed(0)
    m = ctor().to(dev).eval()
    rows = distinct_layers(torch, m, to(inputs(batch), dev))
    for r in rows:
        mod, args = r.pop("_mod"), r.pop("_args")
        args = tuple(a.detach().clone() if hasattr(a, "detach") else a for a in args)
        try:
            with torch.no_grad():
                r["fwd_ms"] = T.eager_ms(lambda: mod(*args))
                r["fwd_gpu_ms"] = T.graph_ms(lambda: mod(*args))
            gargs = tuple(a.requires_grad_(True) if hasattr(a, "is_floating_point") and a.is_floating_point()
                          else a for a in args)

            inplace = "inplace=True" in r["attrs"]

            def fb():  # an in-place module gets a non-leaf copy (in-place on a leaf is an error)
                ins = tuple(x * 1 if inplace and hasattr(x, "requires_grad") and x.requires_grad else x
                            for x in gargs)
                out = floats(mod(*ins))
                if out:
                    sum(o.sum() for o in out).backward()
            r["fwdbwd_ms"] = T.eager_ms(fb)
            r["fwdbwd_gpu_ms"] = T.graph_ms(fb)
        except Exception as e:  # e.g. cuDNN RNN backward in eval mode: recorded, not fatal
            r["error"] = repr(e)[:200]
    return rows


# ---- micro-benchmarks --------------------------------------------------------------------------

def timed_row(torch, T, entry, fn):
    """entry with the eager ("ms") and CUDA-graph replay ("gpu_ms") times of fn added."""
    with torch.no_grad():
        entry["ms"] = T.eager_ms(fn)
        entry["gpu_ms"] = T.graph_ms(fn)
    return entry


def micro_rows(torch, T, dev):
    F = torch.nn.functional
    rows = []

    def add(entry, fn):
        rows.append(timed_row(torch, T, entry, fn))
    top = 12 if T.dry else 26
    unary = {"Relu": torch.relu, "Sigmoid": torch.sigmoid, "Tanh": torch.tanh, "Gelu": F.gelu, "Exp": torch.exp}
    for e in range(10, top + 1, 2):
        n = 1 << e
        a, b = torch.randn(n, device=dev), torch.randn(n, device=dev)
        add({"op": "Add", "numel": n}, lambda: a + b)
        add({"op": "Mul", "numel": n}, lambda: a * b)
        for k, f in unary.items():
            add({"op": k, "numel": n}, lambda f=f: f(a))
    sizes = [32, 256, 2048] if T.dry else [32, 128, 512, 2048, 8192]
    for M in sizes:
        for N in sizes[:3]:
            for K in sizes[:3]:
                a, b = torch.randn(M, K, device=dev), torch.randn(K, N, device=dev)
                add({"op": "MatMul", "M": M, "N": N, "K": K}, lambda: a @ b)
    for B in [12, 96]:
        for S in [64, 128, 512]:
            for D in [32, 64]:
                q, k = torch.randn(B, S, D, device=dev), torch.randn(B, D, S, device=dev)
                add({"op": "BatchMatMul", "B": B, "M": S, "N": S, "K": D}, lambda: q @ k)
                s = torch.randn(B, S, S, device=dev)
                add({"op": "Softmax", "shape": [B, S, S]}, lambda: torch.softmax(s, -1))
    for R, C in [(128, 256), (4096, 768), (32768, 1024)]:
        x = torch.randn(R, C, device=dev)
        w, bb = torch.ones(C, device=dev), torch.zeros(C, device=dev)
        add({"op": "LayerNormalization", "shape": [R, C]}, lambda: F.layer_norm(x, (C,), w, bb))
        add({"op": "ReduceMean", "shape": [R, C], "axis": -1}, lambda: x.mean(-1))
        add({"op": "Transpose", "shape": [R, C], "perm": [1, 0]}, lambda: x.t().contiguous())
    for nb in [1, 32]:
        for c, hw in [(32, 7), (64, 56), (256, 28)]:
            x = torch.randn(nb, c, hw, hw, device=dev)
            rm, rv = torch.zeros(c, device=dev), torch.ones(c, device=dev)
            add({"op": "Concat", "shape": [nb, c, hw, hw], "inputs": 2, "axis": 1}, lambda: torch.cat([x, x], 1))
            add({"op": "BatchNormalization", "shape": [nb, c, hw, hw]},
                lambda: F.batch_norm(x, rm, rv, rv, rm, False))
            add({"op": "MaxPool", "shape": [nb, c, hw, hw], "kernel": 3, "stride": 2}, lambda: F.max_pool2d(x, 3, 2))
            add({"op": "GlobalAveragePool", "shape": [nb, c, hw, hw]}, lambda: F.adaptive_avg_pool2d(x, 1))
    for nb in [1, 32]:
        for h in [256, 1024] if not T.dry else [64]:
            for seq in [16, 64]:
                lstm = torch.nn.LSTM(h, h, batch_first=True).to(dev)
                x = torch.randn(nb, seq, h, device=dev)
                add({"op": "LSTM", "batch": nb, "hidden": h, "input": h, "seq": seq}, lambda: lstm(x))
    return rows


def matmul_grid_rows(torch, T, dev):
    """BatchMatMul micro rows [B,M,K]·[B,K,N] at the shapes a merged weight stack gives (few
    batches, K and N of a hidden size) and the plain MatMul of each batch alone beside it, which
    the attention-shaped rows of micro_rows never reach."""
    rows = []

    def add(entry, fn):
        rows.append(timed_row(torch, T, entry, fn))
    grid = [(2, 64, 256, 256)] if T.dry else [
        (B, M, N, K) for B in (2, 3, 4, 8) for M in (16, 64, 256, 1024) for N in (256, 1024, 4096)
        for K in (256, 1024)]
    done = set()
    for B, M, N, K in grid:
        a, b = torch.randn(B, M, K, device=dev), torch.randn(B, K, N, device=dev)
        add({"op": "BatchMatMul", "B": B, "M": M, "N": N, "K": K}, lambda: torch.bmm(a, b))
        if (M, N, K) not in done:
            done.add((M, N, K))
            x, y = a[0].contiguous(), b[0].contiguous()
            add({"op": "MatMul", "M": M, "N": N, "K": K}, lambda: x @ y)
    return rows


# ---- main ------------------------------------------------------------------------------------

def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def main(argv):
    a = parse_args(argv)
    import torch
    if not a.dry_run and not torch.cuda.is_available():
        sys.stderr.write("gpu_profile.py: no CUDA device (use --dry-run to check the script on the CPU)\n")
        return 1
    dev = "cpu" if a.dry_run else "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    T = Timer(torch, a.dry_run, a.reps)
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    models = {}
    if a.arch is not None or not (a.onnx or a.torchvision or a.matmul_grid):
        models.update(corpus_models(a.arch))
    tv = torchvision_models(a.torchvision)
    onnx = onnx_models(torch, a.onnx) if a.onnx else {}
    models.update(tv)
    if a.conv_grid:
        models["conv_grid"] = (conv_grid_model, lambda b: (torch.zeros(b, 1),))
    models.update(onnx)
    # layer rows: the corpus's PyTorch modules and the conv grid (and --torchvision models with --tv-layers)
    whole_only = (set() if a.tv_layers else set(tv)) | set(onnx)
    out = {"device": "cpu (dry run)" if a.dry_run else torch.cuda.get_device_name(0),
           "torch": torch.__version__, "precision": "fp32, TF32 off (bf16 autocast only where a key says bf16)",
           "method": "tools/gpu_profile.py (docs/SIMULATOR.md)", "dry_run": a.dry_run, "batch": a.batch,
           # an in-place module's fwdbwd_gpu_ms includes the x * 1 copy it runs on (layer_rows)
           "inplace_copy": True, "models": {}, "micro": []}
    for name, (ctor, inputs) in models.items():
        sys.stderr.write("gpu_profile.py: %s\n" % name)
        try:
            r = whole_model(torch, T, ctor, inputs, a.batch, dev) if name != "conv_grid" else {}
            if not a.no_layers and name not in whole_only:
                r["layers_b1"] = layer_rows(torch, T, ctor, inputs, 1, dev)
                r["layers_b32"] = layer_rows(torch, T, ctor, inputs, a.batch, dev)
        except Exception as e:  # one model failing (e.g. a CPU-only mask) does not stop the rest
            sys.stderr.write("gpu_profile.py: %s: %r (left out)\n" % (name, e))
            continue
        out["models"][name] = {k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))}
        write_json(a.out, out)  # after every model: a run cut short keeps what it measured
    if not a.no_micro:
        out["micro"] = micro_rows(torch, T, dev)
    if a.matmul_grid:
        out.setdefault("micro", []).extend(matmul_grid_rows(torch, T, dev))
    write_json(a.out, out)
    sys.stderr.write("gpu_profile.py: wrote %s (%d models, %d micro-benchmarks)\n"
                     % (a.out, len(out["models"]), len(out["micro"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
