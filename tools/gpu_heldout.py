#!/usr/bin/env python3
"""gpu_heldout.py: checks the GPU presets against real measurements of architectures that the
calibration never saw (docs/SIMULATOR.md, "Held-out architectures on a real H100").

    python3 tools/gpu_heldout.py export DIR          # weight-less ONNX of the held-out set
    python3 tools/gpu_heldout.py export DIR --set calib  # ... of the extra calibration set
    python3 tools/gpu_heldout.py check MEAS.json DIR [--gopt build/bin/gopt] [--cluster H100] [--strict]
    python3 tools/gpu_heldout.py grouped GRID.json OUT.json   # the grid's grouped convolutions

The held-out set (HELDOUT below) is torchvision architectures that are not in the corpus, so none
of their rows is in ../shared/gpu/h100_corpus.json: tools/gpu_profile.py --torchvision NAME...
measures them on a GPU (tests/cost/data/h100_heldout.json is such a run on an H100), `export`
writes them as ONNX exactly as the corpus is exported (torch.onnx, eval, constant folding, a
symbolic batch; the weights are left out: their values do not change a simulated time), and `check` runs
`gopt simulate DIR/NAME.onnx --cluster C` at batch 1, batch 32 and batch-32 training for every
model in MEAS.json that DIR has, and prints per model measured / predicted and, per column, the
median |error|, Kendall's tau and the geometric mean of predicted / measured (the figures of
docs/SIMULATOR.md's leave-one-out table). --json FILE also writes them as JSON. `grouped` keeps,
of a `gpu_profile.py --conv-grid` file, only the conv_grid rows of grouped convolutions (1 < groups
< channels): the kind the corpus never measured, added to the shipped H100 fit. `export --set
calib` writes the extra calibration set instead (CALIB below: tests/cost/data/h100_calib_extra.json,
torchvision architectures in neither the corpus nor the held-out or sealed sets, whose whole-model
rows `gopt calibrate --gpu ... --models corpus --models DIR` fits)."""
import argparse
import json
import math
import os
import subprocess
import sys
import statistics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> square image side; none of these architectures is in corpus/ (tools/export_corpus.py)
HELDOUT = {
    "resnet50": 224, "resnext50_32x4d": 224, "wide_resnet50_2": 224, "regnet_y_800mf": 224,
    "mnasnet1_0": 224, "mobilenet_v3_large": 224, "convnext_tiny": 224, "vit_b_16": 224,
    "googlenet": 224, "efficientnet_b3": 300,
    # the sealed set (tests/cost/data/h100_sealed.json): measured at the same time, for a check
    # after later changes to the cost model; swin_s and shufflenet_v2_x2_0 are larger members of
    # corpus families
    "regnet_x_1_6gf": 224, "resnext101_32x8d": 224, "densenet169": 224, "efficientnet_v2_s": 384,
    "swin_s": 224, "alexnet": 224, "vgg16": 224, "mobilenet_v3_small": 224, "convnext_small": 224,
    "vit_b_32": 224, "mnasnet0_5": 224, "shufflenet_v2_x2_0": 224, "squeezenet1_0": 224,
    "regnet_y_3_2gf": 224, "resnet34": 224,
}
# the extra calibration set (tests/cost/data/h100_calib_extra.json, exported into
# tests/cost/data/calib): name -> square image side; disjoint from the corpus and from HELDOUT
CALIB = {
    "regnet_x_400mf": 224, "regnet_y_400mf": 224, "mnasnet1_3": 224, "efficientnet_b1": 240,
    "resnet101": 224, "shufflenet_v2_x1_5": 224, "mnasnet0_75": 224, "regnet_y_1_6gf": 224,
    "vgg13": 224, "densenet201": 224, "swin_v2_t": 224, "wide_resnet101_2": 224,
    "resnext101_64x4d": 224,
}
assert not set(CALIB) & set(HELDOUT)
# column -> (measurement key, gopt simulate flags). A kernel sum above the same step's eager wall
# time (infer_b32_ms / train_b32_ms, which includes every launch gap) counts kernels that ran at
# the same time (cuDNN's grouped convolutions: one GEMM per group on several streams): it is not
# the GPU's time, and check() leaves such a row out of the kernel-sum columns and names it.
WALL = {"infer_b32_kernel_ms": "infer_b32_ms", "train_b32_kernel_ms": "train_b32_ms"}
COLUMNS = [
    ("batch-1 inference", "infer_b1_graph_ms", []),
    ("batch-32 inference", "infer_b32_kernel_ms", ["--batch", "32"]),
    ("batch-32 inference (graph replay)", "infer_b32_graph_ms", ["--batch", "32"]),
    ("batch-32 training", "train_b32_kernel_ms", ["--batch", "32", "--training"]),
]


def export(outdir, names):
    import io
    import warnings
    import onnx
    import torch
    import torchvision
    os.makedirs(outdir, exist_ok=True)
    # swin_v2_t zeroes the key third of a clone of its qkv bias (`qkv_bias[l:2l].zero_()`), which
    # opset 14 has no symbolic for: x * 0 is the same tensor, and constant folding removes it
    torch.onnx.register_custom_op_symbolic(
        "aten::zero", lambda g, x: g.op("Mul", x, g.op("Constant", value_t=torch.tensor(0.0))), 14)
    for name, side in sorted(names.items()):
        kw = {"aux_logits": False, "init_weights": False} if name == "googlenet" else {}
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None, **kw).eval()
        buf = io.BytesIO()
        # not under no_grad: there, nn.MultiheadAttention takes its fused fast path, which
        # torch.onnx cannot export (vit_b_16)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (torch.randn(1, 3, side, side),), buf, opset_version=14,
                              input_names=["input"], output_names=["logits"], do_constant_folding=True,
                              dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                              training=torch.onnx.TrainingMode.EVAL)
        proto = onnx.load_from_string(buf.getvalue())
        proto.graph.name = name
        for node in proto.graph.node:
            node.doc_string = ""
        for t in proto.graph.initializer:  # shapes only: a weight of >= 1 KiB loses its values
            if len(t.raw_data) >= 1024:
                t.ClearField("raw_data")
                t.data_location = onnx.TensorProto.EXTERNAL
                e = t.external_data.add()
                e.key, e.value = "location", name + ".onnx.data"
        path = os.path.join(outdir, name + ".onnx")
        with open(path + ".tmp", "wb") as f:
            f.write(proto.SerializeToString())
        os.replace(path + ".tmp", path)
        sys.stderr.write("gpu_heldout.py: wrote %s (%d nodes)\n" % (path, len(proto.graph.node)))


def kendall_tau(xs, ys):
    n, s = len(xs), 0
    for i in range(n):
        for j in range(i + 1, n):
            s += (1 if (xs[i] - xs[j]) * (ys[i] - ys[j]) > 0 else -1 if (xs[i] - xs[j]) * (ys[i] - ys[j]) < 0 else 0)
    return s / (n * (n - 1) / 2) if n > 1 else float("nan")


def simulate(gopt, path, cluster, flags):
    r = subprocess.run([gopt, "simulate", path, "--cluster", cluster, "--json"] + flags,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("gpu_heldout.py: %s: gopt simulate failed: %s" % (path, r.stderr.strip()))
    return json.loads(r.stdout)["step_time_s"] * 1e3


def check(a):
    try:
        meas = json.load(open(a.measurements))["models"]
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit("gpu_heldout.py: %s: not a GPU measurements file (%s)" % (a.measurements, e))
    names = [n for n in sorted(meas) if os.path.isfile(os.path.join(a.dir, n + ".onnx"))]
    if not names:
        raise SystemExit("gpu_heldout.py: %s: none of the measured models is in %s" % (a.measurements, a.dir))
    rows, summary = {n: {} for n in names}, {}
    for col, key, flags in COLUMNS:
        m, p = [], []
        for n in names:
            if key not in meas[n]:
                continue
            wall = meas[n].get(WALL.get(key, ""), 0)
            fsum, freplay = meas[n].get("infer_b32_kernel_ms", 0), meas[n].get("infer_b32_graph_ms", 0)
            if (wall and meas[n][key] > 1.05 * wall) or (a.strict and key == "train_b32_kernel_ms" and
                                                          freplay and fsum > 1.1 * freplay):
                rows[n][col] = (meas[n][key], None)
                continue
            pred = simulate(a.gopt, os.path.join(a.dir, n + ".onnx"), a.cluster, flags)
            rows[n][col] = (meas[n][key], pred)
            m.append(meas[n][key])
            p.append(pred)
        if not m:
            continue
        errs = [abs(y / x - 1) for x, y in zip(m, p)]
        summary[col] = {"models": len(m), "median_abs_error": statistics.median(errs),
                        "kendall_tau": kendall_tau(m, p),
                        "geomean_pred_over_meas": math.exp(sum(math.log(y / x) for x, y in zip(m, p)) / len(m))}
    print("| column | models | median \\|error\\| | Kendall τ | geomean predicted / measured |")
    print("|---|---|---|---|---|")
    for col, s in summary.items():
        print("| %s | %d | %.1f %% | %.3f | %.3f |" % (col, s["models"], 100 * s["median_abs_error"],
                                                       s["kendall_tau"], s["geomean_pred_over_meas"]))
    print()
    print("| model | " + " | ".join(c for c, _, _ in COLUMNS) + " |")
    print("|---|" + "---|" * len(COLUMNS))
    for n in names:
        cells = []
        for col, key, _ in COLUMNS:
            if col in rows[n] and rows[n][col][1] is None:
                cells.append("%.3f: kernels overlap (eager %.3f%s), left out" % (
                    rows[n][col][0], meas[n][WALL[key]], "" if rows[n][col][0] > 1.05 * meas[n][WALL[key]]
                    else "; batch-32 sum %.2f x its replay" % (meas[n]["infer_b32_kernel_ms"] / meas[n]["infer_b32_graph_ms"])))
            elif col in rows[n]:
                x, y = rows[n][col]
                cells.append("%.3f / %.3f (%+.1f %%)" % (x, y, 100 * (y / x - 1)))
            else:
                cells.append("-")
        print("| %s | %s |" % (n, " | ".join(cells)))
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump({"cluster": a.cluster, "summary": summary, "rows": rows}, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    return 0


def grouped(src, dst):
    d = json.load(open(src))
    grid = d.get("models", {}).get("conv_grid")
    if not grid:
        raise SystemExit("gpu_heldout.py: %s: no conv_grid model (gpu_profile.py --conv-grid)" % src)

    def is_grouped(row):
        g = [int(x.split("=")[1]) for x in row["attrs"].split(", ") if x.startswith("groups=")]
        return bool(g) and 1 < g[0] < row["in"][0][1]
    out = {k: v for k, v in d.items() if k not in ("models", "micro")}
    out["method"] = d.get("method", "") + "; tools/gpu_heldout.py grouped %s" % os.path.basename(src)
    out["models"] = {"conv_grid_grouped": {k: [r for r in grid[k] if is_grouped(r)]
                                           for k in ("layers_b1", "layers_b32") if k in grid}}
    out["micro"] = []
    with open(dst + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(dst + ".tmp", dst)
    sys.stderr.write("gpu_heldout.py: wrote %s (%d grouped convolutions per batch)\n"
                     % (dst, len(out["models"]["conv_grid_grouped"].get("layers_b32", []))))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="write the held-out set as weight-less ONNX into DIR")
    e.add_argument("dir")
    e.add_argument("--set", choices=("heldout", "calib"), default="heldout",
                   help="heldout: the held-out and sealed sets (default); calib: the extra calibration set")
    c = sub.add_parser("check", help="predicted against measured, per model and column")
    c.add_argument("measurements")
    c.add_argument("dir")
    c.add_argument("--gopt", default=os.path.join(ROOT, "build", "bin", "gopt"))
    c.add_argument("--cluster", default="H100")
    c.add_argument("--json", help="also write the figures to this JSON file")
    c.add_argument("--strict", action="store_true",
                   help="also leave out the training kernel sum of a model whose batch-32 kernel sum "
                        "is above 1.1 x its CUDA-graph replay (its kernels overlap; gopt calibrate's rule)")
    g = sub.add_parser("grouped", help="the grouped convolutions of a --conv-grid file")
    g.add_argument("grid")
    g.add_argument("out")
    a = p.parse_args(argv)
    if a.cmd == "grouped":
        grouped(a.grid, a.out)
        return 0
    if a.cmd == "export":
        export(a.dir, CALIB if a.set == "calib" else HELDOUT)
        return 0
    return check(a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
