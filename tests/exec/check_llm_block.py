#!/usr/bin/python3
"""A modern LLM decoder block with the opset-23 ops, run by gopt's executor and by ONNX Runtime.

  check_llm_block.py GOPT [--seed N] [--keep DIR]

Builds with onnx.helper (random weights from --seed): x -> RMSNormalization -> Q/K/V projections
-> RotaryEmbedding on Q and K (3-D, num_heads, position_ids into cos/sin caches) -> Attention
(is_causal, grouped-query heads 4 / 2, past key/value of 4 steps, present outputs) -> output
projection + residual -> RMSNormalization -> SiLU MLP + residual. The model, its inputs and
tools/ort/ort_compare.py's `check` (gopt run --outputs against onnxruntime-node, rtol 1e-3, atol
1e-4 on every output: y, present_key, present_value) decide; exit 0 only when all match.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
B, S, HID, HQ, HKV, D, PAST, FF, MAXPOS = 1, 8, 32, 4, 2, 8, 4, 64, 16


def build(rng):
    f32 = np.float32
    w = lambda *s: (rng.standard_normal(s) / np.sqrt(s[0])).astype(f32)
    inv = 1.0 / (10000 ** (np.arange(0, D, 2) / D))
    ang = np.outer(np.arange(MAXPOS), inv)
    inits = {
        "rms1": (1 + 0.1 * rng.standard_normal(HID)).astype(f32), "rms2": (1 + 0.1 * rng.standard_normal(HID)).astype(f32),
        "wq": w(HID, HQ * D), "wk": w(HID, HKV * D), "wv": w(HID, HKV * D), "wo": w(HQ * D, HID),
        "w1": w(HID, FF), "w2": w(FF, HID), "cos": np.cos(ang).astype(f32), "sin": np.sin(ang).astype(f32),
    }
    N = helper.make_node
    nodes = [
        N("RMSNormalization", ["x", "rms1"], ["h"], axis=-1, epsilon=1e-5),
        N("MatMul", ["h", "wq"], ["q"]), N("MatMul", ["h", "wk"], ["k"]), N("MatMul", ["h", "wv"], ["v"]),
        N("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["qr"], num_heads=HQ),
        N("RotaryEmbedding", ["k", "cos", "sin", "pos"], ["kr"], num_heads=HKV),
        N("Attention", ["qr", "kr", "v", "", "past_key", "past_value"], ["att", "present_key", "present_value"],
          is_causal=1, q_num_heads=HQ, kv_num_heads=HKV),
        N("MatMul", ["att", "wo"], ["o"]), N("Add", ["x", "o"], ["r1"]),
        N("RMSNormalization", ["r1", "rms2"], ["h2"], axis=-1, epsilon=1e-5),
        N("MatMul", ["h2", "w1"], ["m"]), N("Sigmoid", ["m"], ["sg"]), N("Mul", ["m", "sg"], ["silu"]),
        N("MatMul", ["silu", "w2"], ["d"]), N("Add", ["r1", "d"], ["y"]),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "llm_block",
        [vi("x", TensorProto.FLOAT, [B, S, HID]), vi("pos", TensorProto.INT64, [B, S]),
         vi("past_key", TensorProto.FLOAT, [B, HKV, PAST, D]), vi("past_value", TensorProto.FLOAT, [B, HKV, PAST, D])],
        [vi("y", TensorProto.FLOAT, [B, S, HID]), vi("present_key", TensorProto.FLOAT, [B, HKV, PAST + S, D]),
         vi("present_value", TensorProto.FLOAT, [B, HKV, PAST + S, D])],
        [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], producer_name="gopt-test")
    model.ir_version = 10
    feeds = {
        "x": rng.standard_normal((B, S, HID)).astype(f32),
        "pos": (PAST + np.arange(S, dtype=np.int64)).reshape(B, S),
        "past_key": rng.standard_normal((B, HKV, PAST, D)).astype(f32),
        "past_value": rng.standard_normal((B, HKV, PAST, D)).astype(f32),
    }
    return model, feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gopt")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--keep", default="", help="write the case folder here instead of a temporary one")
    a = ap.parse_args()
    model, feeds = build(np.random.default_rng(a.seed))
    with tempfile.TemporaryDirectory() as tmp:
        case = a.keep or os.path.join(tmp, "llm_block")
        os.makedirs(os.path.join(case, "test_data_set_0"), exist_ok=True)
        onnx.save(model, os.path.join(case, "model.onnx"))
        for i, (name, arr) in enumerate(feeds.items()):
            with open(os.path.join(case, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(arr, name).SerializeToString())
        cmd = [sys.executable, os.path.join(ROOT, "tools", "ort", "ort_compare.py"), "check", a.gopt, case]
        return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
