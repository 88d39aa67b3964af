#!/usr/bin/python3
"""PyTorch's side of bench/exec/run.sh (Debian /usr/bin/python3).

  time NAME DIR   eager CPU time of corpus model NAME (tools/export_corpus.py's definition, the
                  seeds tools/make_testdata.py uses) on the inputs in DIR/test_data_set_0:
                  warm-ups, then the median of timed runs; prints one JSON line.
  chain --out DIR writes an elementwise-chain-heavy ONNX model (8 chains of 7 broadcast/unary ops
                  on [4,64,112,112] activations joined by Adds) with inputs, for the fused-vs-
                  unfused measurement, and prints PyTorch's eager time of the same computation.
  kernels         PyTorch's eager time of the single ops bench/exec/bench_exec_isa.c times on
                  x[4,64,112,112] (relu, broadcast add, sigmoid, tanh, exp, mean over the last
                  axis, max over channels, global average pool); prints one JSON line.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))


def median_time(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def load_inputs(d):
    d = os.path.join(d, "test_data_set_0")
    xs, i = [], 0
    while os.path.exists(os.path.join(d, f"input_{i}.pb")):
        xs.append(torch.from_numpy(numpy_helper.to_array(onnx.load_tensor(os.path.join(d, f"input_{i}.pb"))).copy()))
        i += 1
    return xs


def cmd_time(a):
    import export_corpus as ec
    ctor = ec.MODELS[a.name][0]
    torch.manual_seed(0)
    model = ctor().eval()
    torch.manual_seed(1)
    ec.decorrelate(model)
    xs = load_inputs(a.dir)
    with torch.no_grad():
        t = median_time(lambda: model(*xs), a.warmup, a.reps)
    print(json.dumps({"model": a.name, "seconds": t, "threads": torch.get_num_threads()}))


CHAINS, SHAPE = 8, (4, 64, 112, 112)


def chain_ops(x, cs):
    """The chain computation in torch (the same as the ONNX model)."""
    acc = None
    for k in range(CHAINS):
        c = cs[k]
        t = x * c
        t = t + 0.5
        t = torch.sigmoid(t) * x
        t = torch.tanh(t)
        t = t - c
        t = torch.relu(t)
        acc = t if acc is None else acc + t
    return acc


def cmd_chain(a):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    cs = [rng.standard_normal((SHAPE[1], 1, 1)).astype(np.float32) for _ in range(CHAINS)]
    nodes, inits = [], [numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    acc = None
    for k in range(CHAINS):
        inits.append(numpy_helper.from_array(cs[k], f"c{k}"))
        p = f"k{k}_"
        nodes += [helper.make_node("Mul", ["x", f"c{k}"], [p + "a"], name=p + "mul"),
                  helper.make_node("Add", [p + "a", "half"], [p + "b"], name=p + "add"),
                  helper.make_node("Sigmoid", [p + "b"], [p + "c"], name=p + "sig"),
                  helper.make_node("Mul", [p + "c", "x"], [p + "d"], name=p + "mulx"),
                  helper.make_node("Tanh", [p + "d"], [p + "e"], name=p + "tanh"),
                  helper.make_node("Sub", [p + "e", f"c{k}"], [p + "f"], name=p + "sub"),
                  helper.make_node("Relu", [p + "f"], [p + "g"], name=p + "relu")]
        if acc is None:
            acc = p + "g"
        else:
            nodes.append(helper.make_node("Add", [acc, p + "g"], [p + "acc"], name=p + "acc"))
            acc = p + "acc"
    nodes[-1].output[0] = "y"
    g = helper.make_graph(nodes, "ew_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    os.makedirs(os.path.join(a.out, "test_data_set_0"), exist_ok=True)
    onnx.save_model(m, os.path.join(a.out, "model.onnx"))
    xt, ct = torch.from_numpy(x), [torch.from_numpy(c) for c in cs]
    with torch.no_grad():
        y = chain_ops(xt, ct).numpy()
        t = median_time(lambda: chain_ops(xt, ct), a.warmup, a.reps)
    for kind, name, arr in (("input", "x", x), ("output", "y", y)):
        with open(os.path.join(a.out, "test_data_set_0", f"{kind}_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr, name).SerializeToString())
    print(json.dumps({"model": "ew_chain", "seconds": t, "threads": torch.get_num_threads()}))


def cmd_kernels(a):
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.uniform(-1, 1, SHAPE).astype(np.float32))
    c = torch.from_numpy((0.01 * np.arange(SHAPE[1], dtype=np.float32)).reshape(SHAPE[1], 1, 1))
    ops = {"relu": lambda: torch.relu(x), "add_bcast": lambda: x + c, "sigmoid": lambda: torch.sigmoid(x),
           "tanh": lambda: torch.tanh(x), "exp": lambda: torch.exp(x),
           "reduce_mean_last": lambda: x.mean(dim=3, keepdim=True),
           "reduce_max_c": lambda: x.amax(dim=1, keepdim=True),
           "global_avg_pool": lambda: torch.nn.functional.adaptive_avg_pool2d(x, 1)}
    with torch.no_grad():
        out = {k: median_time(f, a.warmup, a.reps) for k, f in ops.items()}
    print(json.dumps({"seconds": out, "threads": torch.get_num_threads()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("time")
    t.add_argument("name")
    t.add_argument("dir")
    c = sub.add_parser("chain")
    c.add_argument("--out", required=True)
    sub.add_parser("kernels")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    {"time": cmd_time, "chain": cmd_chain, "kernels": cmd_kernels}[a.cmd](a)


if __name__ == "__main__":
    main()
