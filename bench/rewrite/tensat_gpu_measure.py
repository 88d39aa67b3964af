"""tensat_gpu_measure.py: Tensat's seven models and their rewrites timed on a real GPU, beside what
the calibrated GPU preset predicted for them (docs/REWRITE.md, "Tensat's seven measured on an
H100"). Three steps, the middle one on the GPU machine:

    python3 bench/rewrite/tensat_gpu_measure.py prepare GOPT DIR [--cluster H100]
    python3 bench/rewrite/tensat_gpu_measure.py measure DIR -o RESULT.json [--device cuda] [--reps 30]
    python3 bench/rewrite/tensat_gpu_measure.py table DIR RESULT.json

`prepare` (any machine, ~5 min on 2 cores) writes each model as ONNX (`gopt convert`) and its
greedy (budget 100), eqsat and rl rewrites costed on CLUSTER (`gopt rewrite --json`: every output
verified by gopt's executor and ONNX Runtime before it is written, then onnx.checker's full check),
then leaves the float weights out of every file (external-data entries with no data file, so the
files travel small; tools/onnx_torch.py gives such weights seeded random values: they do not
change a time) and records the predictions in DIR/manifest.json. `measure` runs each rewrite
against its input with tools/onnx_torch_run.py's compare(): the same seeded inputs, interleaved
runs, each model captured once in a CUDA graph and timed by replays (fp32, TF32 off, cuDNN
benchmark mode: how the H100 preset was calibrated). `table` prints the markdown rows: predicted
and measured reduction per model and method, with Tensat's published figure."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
from tensat_gpu import TENSAT  # noqa: E402

METHODS = ("greedy", "eqsat", "rl")


def strip_weights(path, min_bytes=4096):
    """Rewrites path with every float initializer of more than min_bytes made an external-data
    reference to a file that is not there (the shapes stay; the values become random on load)."""
    import onnx
    from onnx import external_data_helper
    m = onnx.load(path, load_external_data=False)
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
              onnx.TensorProto.DOUBLE}
    for t in m.graph.initializer:
        size = len(t.raw_data) or 4 * len(t.float_data)
        if t.data_type in floats and size > min_bytes and t.data_location != onnx.TensorProto.EXTERNAL:
            t.ClearField("raw_data")
            t.ClearField("float_data")
            external_data_helper.set_external_data(t, location="weights-left-out.bin", offset=0,
                                                   length=size)
            t.data_location = onnx.TensorProto.EXTERNAL
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(m.SerializeToString())
    os.replace(tmp, path)


def prepare(gopt, out, cluster):
    import rw_run
    os.makedirs(out, exist_ok=True)
    manifest = []
    for label, model, tensat in TENSAT:
        name = model.split(":")[0]
        src = os.path.join(out, f"{name}.in.onnx")
        r = subprocess.run([gopt, "convert", model, "-o", src], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"tensat_gpu_measure: gopt convert {model}: {r.stderr.strip()}")
        strip_weights(src)
        row = {"label": label, "model": model, "tensat": tensat, "cluster": cluster,
               "input": os.path.basename(src), "methods": {}}
        for m in METHODS:
            cmd = [gopt, "rewrite", model, "--method", m, "--cluster", cluster]
            j, err, _ = rw_run.rewrite(cmd + (["--budget", "100"] if m == "greedy" else []),
                                       keep=os.path.join(out, f"{name}.{m}.onnx"))
            if j is None:
                row["methods"][m] = {"error": err}
                continue
            strip_weights(os.path.join(out, f"{name}.{m}.onnx"))
            row["methods"][m] = {"file": f"{name}.{m}.onnx", "predicted_before_s": j["predicted_before_s"],
                                 "predicted_after_s": j["predicted_after_s"],
                                 "rules_applied": j["rules_applied"], "search_seconds": j["search_seconds"]}
        manifest.append(row)
        print(f"{label}: " + ", ".join(f"{m} {v.get('file', v.get('error'))}" for m, v in row["methods"].items()),
              file=sys.stderr)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def measure(d, result, device, reps):
    import torch
    import onnx_torch_run
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    cuda = device.startswith("cuda")
    res = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
           "reps": reps, "rows": []}
    for row in manifest:
        for m, v in row["methods"].items():
            if "file" not in v:
                continue
            pair = [os.path.join(d, row["input"]), os.path.join(d, v["file"])]
            try:
                r = onnx_torch_run.compare(pair, device, warmup=5, reps=reps, graph=cuda)
            except Exception as e:  # noqa: BLE001 - a capture failure falls back to eager, recorded
                print(f"{row['label']} {m}: CUDA graph failed ({str(e).splitlines()[0]}); eager", file=sys.stderr)
                r = onnx_torch_run.compare(pair, device, warmup=5, reps=reps, graph=False)
            res["rows"].append({"label": row["label"], "method": m, "mode": r["mode"],
                                "seconds": r["seconds"], "speedup": r["speedup"]})
            print(f"{row['label']} {m}: {r['seconds'][0] * 1e3:.3f} -> {r['seconds'][1] * 1e3:.3f} ms "
                  f"({r['mode']}), speed-up {r['speedup']:.3f}", file=sys.stderr)
            write_json(result, res)  # after every pair: a run cut short keeps what it measured


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def table(d, result):
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    with open(result) as f:
        res = json.load(f)
    got = {(r["label"], r["method"]): r for r in res["rows"]}
    print(f"measured on: {res['device']}, PyTorch {res['torch']}, median of {res['reps']} timed runs of each "
          f"model, interleaved\n")
    print("| model | method | rules applied | predicted ms before → after | predicted reduction | "
          "measured ms before → after | measured reduction | Tensat |")
    print("|---|---|---|---|---|---|---|---|")
    hits = {m: 0 for m in METHODS}
    slower = []
    for row in manifest:
        for m in METHODS:
            v = row["methods"].get(m, {})
            if "file" not in v:
                print(f"| {row['label']} | {m} | failed: {v.get('error', 'not run')} | | | | | {row['tensat']}% |")
                continue
            pb, pa = v["predicted_before_s"] * 1e3, v["predicted_after_s"] * 1e3
            ra = ", ".join(f"{k} ×{n}" for k, n in sorted(v["rules_applied"].items(), key=lambda kv: -kv[1])[:3])
            if len(v["rules_applied"]) > 3:
                ra += f", +{len(v['rules_applied']) - 3} more"
            g = got.get((row["label"], m))
            if g is None:
                meas = "not measured | "
            else:
                mb, ma = g["seconds"][0] * 1e3, g["seconds"][1] * 1e3
                red = 100 * (1 - ma / mb)
                hits[m] += red >= row["tensat"]
                if ma > mb:
                    slower.append(f"{row['label']} {m} ({red:+.1f}%)")
                meas = f"{mb:.3f} → {ma:.3f} | {red:.1f}%"
                if g["mode"] == "eager":
                    meas += " (eager)"
            print(f"| {row['label']} | {m} | {ra or 'none'} | {pb:.3f} → {pa:.3f} | {100 * (1 - pa / pb):.1f}% | "
                  f"{meas} | {row['tensat']}% |")
    print()
    for m in METHODS:
        print(f"- {m}: measured reduction ≥ Tensat's on {hits[m]} of {len(manifest)}")
    print(f"- measured slower than the input: {', '.join(slower) if slower else 'none'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("gopt")
    p.add_argument("dir")
    p.add_argument("--cluster", default="H100")
    p = sub.add_parser("measure")
    p.add_argument("dir")
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--reps", type=int, default=30)
    p = sub.add_parser("table")
    p.add_argument("dir")
    p.add_argument("result")
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a.gopt, a.dir, a.cluster)
    elif a.cmd == "measure":
        measure(a.dir, a.out, a.device, a.reps)
    else:
        table(a.dir, a.result)


if __name__ == "__main__":
    main()
