#!/usr/bin/python3
"""Make test data for `gopt run --check`: models with weights, fixed inputs and reference outputs,
in the ONNX backend test layout (DIR/CASE/model.onnx, DIR/CASE/test_data_set_0/input_N.pb and
output_N.pb).

  corpus   every corpus model from tools/export_corpus.py (same definitions, seeds and export
           settings, but WITH its weights: initializers >= 1 KiB go to model.onnx.data next to
           model.onnx), fixed seeded inputs, and PyTorch's outputs of the same eval-mode model.
  ops      one tiny model per op the executor implements (onnx.helper), inputs from numpy, and
           reference outputs from numpy or torch.nn.functional (independent of gopt).
  io       tensor files written by numpy (.npy) and onnx (.pb: raw_data and typed fields) that
           tests/exec/test_exec.c reads back.

Run with Debian's interpreter:
  /usr/bin/python3 tools/make_testdata.py corpus --out DIR [--only a,b]
  /usr/bin/python3 tools/make_testdata.py ops --out DIR
  /usr/bin/python3 tools/make_testdata.py io --out DIR
A case whose files exist and whose stamp matches this script's hash is skipped (--force redoes it).
"""
import argparse
import hashlib
import io
import os
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

SCRIPT_HASH = hashlib.sha1(open(os.path.abspath(__file__), "rb").read()).hexdigest()[:12]


def write_case(case_dir, model_proto, inputs, outputs, external=False, stamp=True):
    """Writes model.onnx and test_data_set_0 (inputs/outputs: lists of (name, ndarray))."""
    os.makedirs(os.path.join(case_dir, "test_data_set_0"), exist_ok=True)
    path = os.path.join(case_dir, "model.onnx")
    data = os.path.join(case_dir, "model.onnx.data")
    if os.path.exists(data):
        os.remove(data)  # onnx appends to an existing data file
    if external:
        onnx.save_model(model_proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data", size_threshold=1024, convert_attribute=False)
    else:
        onnx.save_model(model_proto, path)
    for kind, lst in (("input", inputs), ("output", outputs)):
        for i, (name, arr) in enumerate(lst):
            t = numpy_helper.from_array(np.array(arr, order="C"), name)  # keeps 0-d arrays 0-d
            with open(os.path.join(case_dir, "test_data_set_0", f"{kind}_{i}.pb"), "wb") as f:
                f.write(t.SerializeToString())
    if stamp:
        with open(os.path.join(case_dir, "stamp"), "w") as f:
            f.write(SCRIPT_HASH + "\n")


def up_to_date(case_dir):
    try:
        with open(os.path.join(case_dir, "stamp")) as f:
            return f.read().strip() == SCRIPT_HASH
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# Corpus models with weights
# ---------------------------------------------------------------------------------------------

def corpus_case(name, out_dir):
    import torch
    import export_corpus as ec

    ctor, inputs_fn, in_names, out_names, opset, symbolic = ec.MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    torch.manual_seed(1)
    ec.decorrelate(model)
    torch.manual_seed(2)
    inputs = inputs_fn()
    if name == "bert_tiny":  # exercise the padding mask: the second sequence ends early
        inputs[1][1, 24:] = 0
    dyn = {n: {0: "batch"} for n in in_names + out_names} if symbolic else None
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, buf, opset_version=opset, input_names=in_names,
                          output_names=out_names, dynamic_axes=dyn, do_constant_folding=True,
                          training=torch.onnx.TrainingMode.EVAL)
        outs = model(*inputs)
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    proto = onnx.load_from_string(buf.getvalue())
    proto.graph.name = name
    write_case(os.path.join(out_dir, name), proto,
               [(n, t.numpy()) for n, t in zip(in_names, inputs)],
               [(n, t.numpy()) for n, t in zip(out_names, outs)], external=True)


# ---------------------------------------------------------------------------------------------
# Per-op cases
# ---------------------------------------------------------------------------------------------

DT = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.bool_: TensorProto.BOOL,
      np.int32: TensorProto.INT32}


def vinfo(name, arr):
    return helper.make_tensor_value_info(name, DT[arr.dtype.type], list(arr.shape))


def op_model(op, inputs, outputs, opset=13, inits=(), **attrs):
    """A one-node model. inputs/outputs: lists of (name, ndarray); inits: initializers."""
    init_names = {n for n, _ in inits}
    node = helper.make_node(op, [n for n, _ in inputs] + [n for n, _ in inits if n not in
                                                          [m for m, _ in inputs]],
                            [n for n, _ in outputs], name=op.lower() + "_0", **attrs)
    graph = helper.make_graph([node], "op_" + op,
                              [vinfo(n, a) for n, a in inputs if n not in init_names],
                              [vinfo(n, a) for n, a in outputs],
                              initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def model_from_nodes(name, nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, name, [vinfo(n, a) for n, a in inputs],
                              [vinfo(n, a) for n, a in outputs],
                              initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def op_cases():
    """Yields (case name, model, inputs, outputs)."""
    import torch
    import torch.nn.functional as F
    from math import erf

    rng = np.random.default_rng(0)

    def r(*s):
        return rng.standard_normal(s).astype(np.float32)

    def t(a):
        return torch.from_numpy(a)

    def unary(op, fn, x=None, **attrs):
        x = r(2, 3, 4, 5) if x is None else x
        y = fn(x).astype(np.float32)
        return op, op_model(op, [("x", x)], [("y", y)], **attrs), [("x", x)], [("y", y)]

    yield unary("Relu", lambda x: np.maximum(x, 0))
    yield unary("Sigmoid", lambda x: 1 / (1 + np.exp(-x)))
    yield unary("Tanh", np.tanh)
    yield unary("Erf", np.vectorize(erf))
    yield unary("Sqrt", np.sqrt, x=np.abs(r(2, 3, 4, 5)) + 0.1)
    yield unary("Exp", np.exp)
    yield unary("Neg", np.negative)
    yield unary("Abs", np.abs)
    yield unary("HardSigmoid", lambda x: np.clip(0.3 * x + 0.4, 0, 1), alpha=0.3, beta=0.4)
    yield unary("HardSwish", lambda x: x * np.clip(x / 6 + 0.5, 0, 1), x=3 * r(2, 3, 4, 5), opset=14)
    yield unary("LeakyRelu", lambda x: np.where(x >= 0, x, 0.1 * x), alpha=0.1)
    yield unary("Identity", lambda x: x)

    for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                   ("Div", np.divide)):
        a, b = r(2, 3, 4, 5), r(3, 1, 5)
        y = fn(a, b).astype(np.float32)
        yield op, op_model(op, [("a", a), ("b", b)], [("y", y)]), [("a", a), ("b", b)], [("y", y)]
    a = np.abs(r(2, 3, 4)) + 0.5
    b = np.array(3.0, dtype=np.float32)
    y = np.power(a, b).astype(np.float32)
    yield "Pow", op_model("Pow", [("a", a)], [("y", y)], inits=[("b", b)]), [("a", a)], [("y", y)]
    # integer arithmetic (shape subgraphs): truncating division
    ai = np.array([7, -7, 9, 12], dtype=np.int64)
    bi = np.array([2, 2, -4, 5], dtype=np.int64)
    yi = np.trunc(ai / bi).astype(np.int64)
    yield "Div_int64", op_model("Div", [("a", ai), ("b", bi)], [("y", yi)]), [("a", ai), ("b", bi)], [("y", yi)]
    x = r(3, 4)
    lo, hi = np.array(-0.5, np.float32), np.array(0.7, np.float32)
    y = np.clip(x, lo, hi)
    yield "Clip", op_model("Clip", [("x", x)], [("y", y)], inits=[("lo", lo), ("hi", hi)]), [("x", x)], [("y", y)]
    c = rng.random((4, 5)) > 0.5
    a, b = r(4, 5), r(1, 5)
    y = np.where(c, a, b)
    yield "Where", op_model("Where", [("c", c), ("a", a), ("b", b)], [("y", y)]), [("c", c), ("a", a), ("b", b)], [("y", y)]
    yield "Not", op_model("Not", [("c", c)], [("y", ~c)]), [("c", c)], [("y", ~c)]
    xi = np.array([[1, 0, 3]], dtype=np.int64)
    yield "Cast", op_model("Cast", [("x", xi)], [("y", xi.astype(np.float32))], to=TensorProto.FLOAT), \
        [("x", xi)], [("y", xi.astype(np.float32))]
    xf = np.array([1.7, -2.5, 0.0, 3.2], dtype=np.float32)
    yield "Cast_f2i", op_model("Cast", [("x", xf)], [("y", xf.astype(np.int64))], to=TensorProto.INT64), \
        [("x", xf)], [("y", xf.astype(np.int64))]

    # layout and indexing
    x = r(2, 3, 4)
    y = np.transpose(x, (2, 0, 1))
    yield "Transpose", op_model("Transpose", [("x", x)], [("y", y)], perm=[2, 0, 1]), [("x", x)], [("y", y)]
    shape = np.array([4, -1], dtype=np.int64)
    y = x.reshape(4, 6)
    yield "Reshape", op_model("Reshape", [("x", x)], [("y", y)], inits=[("s", shape)]), [("x", x)], [("y", y)]
    yield "Flatten", op_model("Flatten", [("x", x)], [("y", x.reshape(2, 12))], axis=1), [("x", x)], [("y", x.reshape(2, 12))]
    ax = np.array([1], dtype=np.int64)
    yield "Unsqueeze", op_model("Unsqueeze", [("x", x)], [("y", x[:, None])], inits=[("ax", ax)]), [("x", x)], [("y", x[:, None])]
    x1 = r(2, 1, 4)
    yield "Squeeze", op_model("Squeeze", [("x", x1)], [("y", x1[:, 0])], inits=[("ax", ax)]), [("x", x1)], [("y", x1[:, 0])]
    a, b = r(2, 3, 4), r(2, 5, 4)
    y = np.concatenate([a, b], axis=1)
    yield "Concat", op_model("Concat", [("a", a), ("b", b)], [("y", y)], axis=1), [("a", a), ("b", b)], [("y", y)]
    x = r(2, 6, 5)
    sp = np.array([2, 4], dtype=np.int64)
    yield "Split", op_model("Split", [("x", x)], [("y0", x[:, :2]), ("y1", x[:, 2:])], inits=[("sp", sp)], axis=1), \
        [("x", x)], [("y0", x[:, :2]), ("y1", x[:, 2:])]
    x = r(4, 10, 6)
    st, en, axs, stp = (np.array(v, dtype=np.int64) for v in ([1, -1, 0], [3, 1, 100], [0, 1, 2], [1, -3, 2]))
    y = x[1:3, -1:1:-3, 0:100:2]
    yield "Slice", op_model("Slice", [("x", x)], [("y", y)], inits=[("st", st), ("en", en), ("ax", axs), ("sp", stp)]), \
        [("x", x)], [("y", y)]
    data = r(10, 4)
    idx = np.array([[0, 9], [-1, 3]], dtype=np.int64)
    y = data[idx]
    yield "Gather", op_model("Gather", [("d", data), ("i", idx)], [("y", y)], axis=0), [("d", data), ("i", idx)], [("y", y)]
    y = np.take(r(3, 5, 2) if False else data.reshape(2, 5, 4), np.array([4, 0], dtype=np.int64), axis=1)
    d3 = data.reshape(2, 5, 4)
    i3 = np.array([4, 0], dtype=np.int64)
    yield "Gather_axis1", op_model("Gather", [("d", d3), ("i", i3)], [("y", y)], axis=1), [("d", d3), ("i", i3)], [("y", y)]
    x = r(1, 2, 3, 4)
    pads = np.array([0, 0, 1, 2, 0, 0, 2, 1], dtype=np.int64)
    cv = np.array(0.5, dtype=np.float32)
    y = np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)), constant_values=0.5)
    yield "Pad", op_model("Pad", [("x", x)], [("y", y)], inits=[("p", pads), ("v", cv)]), [("x", x)], [("y", y)]
    y = np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)), mode="reflect")
    yield "Pad_reflect", op_model("Pad", [("x", x)], [("y", y)], inits=[("p", pads)], mode="reflect"), [("x", x)], [("y", y)]
    shp = np.array([2, 3, 5], dtype=np.int64)
    y = np.full((2, 3, 5), 1.5, dtype=np.float32)
    yield "ConstantOfShape", op_model("ConstantOfShape", [("s", shp)], [("y", y)],
                                      value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])), [("s", shp)], [("y", y)]
    x = r(2, 3, 4)
    yield "Shape", op_model("Shape", [("x", x)], [("y", np.array(x.shape, dtype=np.int64))]), [("x", x)], \
        [("y", np.array(x.shape, dtype=np.int64))]
    s0, l0, d0 = (np.array(v, dtype=np.int64) for v in (2, 11, 3))
    y = np.arange(2, 11, 3, dtype=np.int64)
    yield "Range", op_model("Range", [("s", s0), ("l", l0), ("d", d0)], [("y", y)]), [("s", s0), ("l", l0), ("d", d0)], [("y", y)]
    x = r(2, 3, 4)
    ax2 = [1, 2]
    y = x.mean(axis=(1, 2), keepdims=True)
    yield "ReduceMean", op_model("ReduceMean", [("x", x)], [("y", y)], axes=ax2, keepdims=1), [("x", x)], [("y", y)]
    y = x.mean(axis=-1)
    yield "ReduceMean_last", op_model("ReduceMean", [("x", x)], [("y", y)], axes=[-1], keepdims=0), [("x", x)], [("y", y)]
    y = x.mean(axis=(0, 2), keepdims=True)
    yield "ReduceMean_split_axes", op_model("ReduceMean", [("x", x)], [("y", y)], axes=[0, 2], keepdims=1), [("x", x)], [("y", y)]
    x = r(2, 3, 4, 5)
    y = x.mean(axis=(2, 3), keepdims=True)
    yield "GlobalAveragePool", op_model("GlobalAveragePool", [("x", x)], [("y", y)]), [("x", x)], [("y", y)]
    x = r(2, 3, 7)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    yield "Softmax", op_model("Softmax", [("x", x)], [("y", y)], axis=-1), [("x", x)], [("y", y)]
    x2 = x.reshape(2, 21)
    e = np.exp(x2 - x2.max(axis=-1, keepdims=True))
    y = (e / e.sum(axis=-1, keepdims=True)).reshape(2, 3, 7)
    yield "Softmax_opset11", op_model("Softmax", [("x", x)], [("y", y)], opset=11, axis=1), [("x", x)], [("y", y)]

    # compute-heavy ops: references from torch.nn.functional
    x, w, b = r(2, 4, 9, 8), r(6, 2, 3, 3), r(6)
    y = F.conv2d(t(x), t(w), t(b), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2).numpy()
    yield "Conv", op_model("Conv", [("x", x)], [("y", y)], inits=[("w", w), ("b", b)], kernel_shape=[3, 3],
                           strides=[2, 1], pads=[1, 0, 1, 0], dilations=[1, 2], group=2), [("x", x)], [("y", y)]
    x, w = r(2, 3, 20), r(5, 3, 2)
    y = F.conv1d(F.pad(t(x), (4, 0)), t(w), dilation=4).numpy()
    yield "Conv1d_dilated", op_model("Conv", [("x", x)], [("y", y)], inits=[("w", w)], kernel_shape=[2],
                                     pads=[4, 0], dilations=[4]), [("x", x)], [("y", y)]
    x, w = r(1, 8, 6, 6), r(8, 1, 3, 3)
    y = F.conv2d(t(x), t(w), padding=1, groups=8).numpy()
    yield "Conv_depthwise", op_model("Conv", [("x", x)], [("y", y)], inits=[("w", w)], kernel_shape=[3, 3],
                                     pads=[1, 1, 1, 1], group=8), [("x", x)], [("y", y)]
    a, b = r(2, 3, 5, 4), r(2, 3, 4, 6)
    yield "MatMul_batched", op_model("MatMul", [("a", a), ("b", b)], [("y", a @ b)]), [("a", a), ("b", b)], [("y", a @ b)]
    a, b = r(2, 5, 4), r(4, 3)
    yield "MatMul_3d2d", op_model("MatMul", [("a", a), ("b", b)], [("y", a @ b)]), [("a", a), ("b", b)], [("y", a @ b)]
    a, b = r(1, 5, 4), r(3, 4, 2)
    yield "MatMul_bcast", op_model("MatMul", [("a", a), ("b", b)], [("y", a @ b)]), [("a", a), ("b", b)], [("y", a @ b)]
    a, w, c2 = r(3, 8), r(5, 8), r(5)
    y = a @ w.T + c2
    yield "Gemm", op_model("Gemm", [("a", a)], [("y", y)], inits=[("w", w), ("c", c2)], transB=1), [("a", a)], [("y", y)]
    y = 0.5 * (a @ w.T) + 2.0 * c2
    yield "Gemm_alpha_beta", op_model("Gemm", [("a", a)], [("y", y)], inits=[("w", w), ("c", c2)], transB=1,
                                      alpha=0.5, beta=2.0), [("a", a)], [("y", y)]
    x = r(1, 2, 7, 7)
    y = F.max_pool2d(t(x), 3, 2, 1, ceil_mode=True).numpy()
    yield "MaxPool_ceil", op_model("MaxPool", [("x", x)], [("y", y)], kernel_shape=[3, 3], strides=[2, 2],
                                   pads=[1, 1, 1, 1], ceil_mode=1), [("x", x)], [("y", y)]
    y = F.avg_pool2d(t(x), 3, 1, 1, count_include_pad=False).numpy()
    yield "AveragePool_excl", op_model("AveragePool", [("x", x)], [("y", y)], kernel_shape=[3, 3],
                                       pads=[1, 1, 1, 1]), [("x", x)], [("y", y)]
    y = F.avg_pool2d(t(x), 3, 2, 1, count_include_pad=True).numpy()
    yield "AveragePool_incl", op_model("AveragePool", [("x", x)], [("y", y)], kernel_shape=[3, 3], strides=[2, 2],
                                       pads=[1, 1, 1, 1], count_include_pad=1), [("x", x)], [("y", y)]
    x = r(2, 3, 4, 5)
    sc, bi, mu, var = r(3), r(3), r(3), np.abs(r(3)) + 0.5
    y = F.batch_norm(t(x), t(mu), t(var), t(sc), t(bi), eps=1e-3).numpy()
    yield "BatchNormalization", op_model("BatchNormalization", [("x", x)], [("y", y)],
                                         inits=[("s", sc), ("b", bi), ("m", mu), ("v", var)], epsilon=1e-3), \
        [("x", x)], [("y", y)]
    x, g2, b2 = r(2, 5, 8), r(8), r(8)
    y = F.layer_norm(t(x), (8,), t(g2), t(b2), eps=1e-5).numpy()
    yield "LayerNormalization", op_model("LayerNormalization", [("x", x)], [("y", y)], opset=17,
                                         inits=[("g", g2), ("b", b2)], axis=-1, epsilon=1e-5), [("x", x)], [("y", y)]
    x = r(1, 2, 3, 4)
    y = F.interpolate(t(x), size=(7, 9), mode="bilinear", align_corners=False).numpy()
    roi, scl = np.zeros(0, np.float32), np.zeros(0, np.float32)
    sizes = np.array([1, 2, 7, 9], dtype=np.int64)
    yield "Resize_linear", op_model("Resize", [("x", x)], [("y", y)], inits=[("roi", roi), ("sc", scl), ("sz", sizes)],
                                    mode="linear", coordinate_transformation_mode="pytorch_half_pixel"), [("x", x)], [("y", y)]
    y = F.interpolate(t(x), scale_factor=2, mode="nearest").numpy()
    sc2 = np.array([1, 1, 2, 2], dtype=np.float32)
    yield "Resize_nearest", op_model("Resize", [("x", x)], [("y", y)], inits=[("roi", roi), ("sc", sc2)],
                                     mode="nearest", coordinate_transformation_mode="asymmetric",
                                     nearest_mode="floor"), [("x", x)], [("y", y)]
    # LSTM: torch reference; ONNX gate order i,o,f,c vs torch i,f,g,o
    T, B, I, H = 5, 2, 3, 4
    lstm = torch.nn.LSTM(I, H)
    x = r(T, B, I)
    h0, c0 = r(1, B, H), r(1, B, H)
    with torch.no_grad():
        yt, (hn, cn) = lstm(t(x), (t(h0), t(c0)))

    def reorder(m):  # torch i,f,g,o -> onnx i,o,f,c
        i_, f_, g_, o_ = np.split(m, 4, axis=0)
        return np.concatenate([i_, o_, f_, g_], axis=0)
    W = reorder(lstm.weight_ih_l0.detach().numpy())[None]
    R = reorder(lstm.weight_hh_l0.detach().numpy())[None]
    Bb = np.concatenate([reorder(lstm.bias_ih_l0.detach().numpy()), reorder(lstm.bias_hh_l0.detach().numpy())])[None]
    Y = yt.numpy()[:, None]
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["Y", "Yh", "Yc"], hidden_size=H, name="lstm_0")
    m = model_from_nodes("op_LSTM", [node], [("x", x), ("h0", h0), ("c0", c0)],
                         [("Y", Y), ("Yh", hn.numpy()), ("Yc", cn.numpy())],
                         inits=[("W", W.astype(np.float32)), ("R", R.astype(np.float32)), ("B", Bb.astype(np.float32))], opset=14)
    yield "LSTM", m, [("x", x), ("h0", h0), ("c0", c0)], [("Y", Y), ("Yh", hn.numpy()), ("Yc", cn.numpy())]
    # a Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain (run with --no-fold by the tests)
    x = r(2, 6, 4)
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0, name="gather"),
             helper.make_node("Unsqueeze", ["d0", "ax0"], ["d0u"], name="unsq"),
             helper.make_node("Concat", ["d0u", "rest"], ["shp"], axis=0, name="concat"),
             helper.make_node("Reshape", ["x", "shp"], ["y"], name="reshape")]
    y = x.reshape(2, 3, 8)
    m = model_from_nodes("shape_chain", nodes, [("x", x)], [("y", y)],
                         inits=[("i0", np.array(0, np.int64)), ("ax0", np.array([0], np.int64)),
                                ("rest", np.array([3, 8], np.int64))])
    yield "shape_chain", m, [("x", x)], [("y", y)]
    # two branches of different widths: orders that finish one branch first peak differently
    N = 1000
    x = r(N)
    Z, W = r(4, N), r(2, N)
    nodes = [helper.make_node("Add", ["x", "Z"], ["a1"], name="a1"),
             helper.make_node("ReduceMean", ["a1"], ["a2"], axes=[0], keepdims=0, name="a2"),
             helper.make_node("Add", ["x", "W"], ["b1"], name="b1"),
             helper.make_node("ReduceMean", ["b1"], ["b2"], axes=[0], keepdims=0, name="b2"),
             helper.make_node("Add", ["a2", "b2"], ["y"], name="y")]
    y = (x + Z).mean(0) + (x + W).mean(0)
    m = model_from_nodes("branches", nodes, [("x", x)], [("y", y)], inits=[("Z", Z), ("W", W)])
    yield "branches", m, [("x", x)], [("y", y)]
    # an elementwise chain after a MatMul (fusion decisions)
    x, w, c1 = r(16, 32), r(32, 64), r(64)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "c1"], ["t1"], name="add"),
             helper.make_node("Sigmoid", ["t1"], ["t2"], name="sig"),
             helper.make_node("Mul", ["t1", "t2"], ["t3"], name="mul"),
             helper.make_node("Tanh", ["t3"], ["y"], name="tanh")]
    h = x @ w + c1
    y = np.tanh(h * (1 / (1 + np.exp(-h)))).astype(np.float32)
    m = model_from_nodes("chain", nodes, [("x", x)], [("y", y)], inits=[("w", w), ("c1", c1)])
    yield "chain", m, [("x", x)], [("y", y)]

    yield from control_cases()
    yield from string_cases()


def control_cases():
    """If / Loop / Scan with outer-scope reads (also two levels down), run-time shapes in a body,
    Scan axes and directions; references from plain numpy loops."""
    rng = np.random.default_rng(14)
    f, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    x = rng.standard_normal(3).astype(np.float32)
    n = np.array(4, np.int64)
    # Loop: body reads main-graph `s` (an activation), an If inside reads it two levels down
    then_g = helper.make_graph([helper.make_node("Mul", ["w", "s"], ["t"], name="then_mul")], "then_g", [],
                               [helper.make_tensor_value_info("t", f, [3])])
    else_g = helper.make_graph([helper.make_node("Identity", ["w"], ["t2"], name="else_id")], "else_g", [],
                               [helper.make_tensor_value_info("t2", f, [3])])
    body = helper.make_graph(
        [helper.make_node("Add", ["v", "s"], ["w"], name="body_add"),
         helper.make_node("Greater", ["i", "one"], ["big"], name="body_gt"),
         helper.make_node("If", ["big"], ["t_out"], then_branch=then_g, else_branch=else_g, name="body_if"),
         helper.make_node("Identity", ["c"], ["c_out"], name="body_cond"),
         helper.make_node("Identity", ["t_out"], ["scan"], name="body_scan")],
        "body", [helper.make_tensor_value_info("i", i64, []), helper.make_tensor_value_info("c", b, []),
                 helper.make_tensor_value_info("v", f, [3])],
        [helper.make_tensor_value_info("c_out", b, []), helper.make_tensor_value_info("t_out", f, [3]),
         helper.make_tensor_value_info("scan", f, [3])])
    nodes = [helper.make_node("Mul", ["x", "two"], ["s"], name="double"),
             helper.make_node("Loop", ["n", "", "x"], ["v_final", "scans"], body=body, name="loop")]
    v, s, scans = x.copy(), x * 2, []
    for it in range(int(n)):
        w = v + s
        v = w * s if it > 1 else w
        scans.append(v)
    scans = np.stack(scans).astype(np.float32)
    m = model_from_nodes("loop_nested", nodes, [("x", x), ("n", n)], [("v_final", v), ("scans", scans)],
                         inits=[("two", np.array(2, np.float32)), ("one", np.array(1, np.int64))])
    yield "Loop_nested", m, [("x", x), ("n", n)], [("v_final", v), ("scans", scans)]
    # If whose branches read a main-graph activation; cond false takes else_branch
    a = rng.standard_normal((2, 3)).astype(np.float32)
    then_g = helper.make_graph([helper.make_node("Add", ["sq", "a"], ["y1"], name="then_add")], "then_g", [],
                               [helper.make_tensor_value_info("y1", f, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["sq", "a"], ["y2"], name="else_sub")], "else_g", [],
                               [helper.make_tensor_value_info("y2", f, [2, 3])])
    nodes = [helper.make_node("Mul", ["a", "a"], ["sq"], name="square"),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="if")]
    c = np.array(False)
    y = (a * a - a).astype(np.float32)
    m = model_from_nodes("if_outer", nodes, [("a", a), ("c", c)], [("y", y)])
    yield "If_outer", m, [("a", a), ("c", c)], [("y", y)]
    # Scan-11: x1 [2,4] scanned along axis 1, x2 [4,3] along axis 0 backwards; outputs stacked
    # along axis 1 (forward) and axis 0 (reverse)
    acc0 = rng.standard_normal(2).astype(np.float32)
    x1 = rng.standard_normal((2, 4)).astype(np.float32)
    x2 = rng.standard_normal((4, 3)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "e1"], ["acc_out"], name="acc_add"),
         helper.make_node("Identity", ["acc_out"], ["o1"], name="o1_id"),
         helper.make_node("Add", ["e2", "e2"], ["o2"], name="o2_add")],
        "scan_body", [helper.make_tensor_value_info("acc", f, [2]), helper.make_tensor_value_info("e1", f, [2]),
                      helper.make_tensor_value_info("e2", f, [3])],
        [helper.make_tensor_value_info("acc_out", f, [2]), helper.make_tensor_value_info("o1", f, [2]),
         helper.make_tensor_value_info("o2", f, [3])])
    node = helper.make_node("Scan", ["acc0", "x1", "x2"], ["acc_final", "y1", "y2"], body=body,
                            num_scan_inputs=2, scan_input_axes=[1, 0], scan_input_directions=[0, 1],
                            scan_output_axes=[1, 0], scan_output_directions=[0, 1], name="scan")
    acc, o1, o2 = acc0.copy(), [], []
    for t_ in range(4):
        acc = acc + x1[:, t_]
        o1.append(acc)
        o2.append(x2[3 - t_] * 2)
    y1 = np.stack(o1, axis=1).astype(np.float32)
    y2 = np.stack(o2[::-1], axis=0).astype(np.float32)
    m = model_from_nodes("scan_axes", [node], [("acc0", acc0), ("x1", x1), ("x2", x2)],
                         [("acc_final", acc), ("y1", y1), ("y2", y2)], opset=11)
    yield "Scan_axes", m, [("acc0", acc0), ("x1", x1), ("x2", x2)], [("acc_final", acc), ("y1", y1), ("y2", y2)]


def string_cases():
    """STRING tensors: an input passed through Identity, a STRING initializer cast to FLOAT, floats
    cast to STRING (numpy's str() of each float32); references from numpy."""
    st, f = TensorProto.STRING, TensorProto.FLOAT
    s = np.array(["monday", "", "Tuesday x"], dtype=object)
    c = np.array(["1.5", "-2", "1e3"], dtype=object)
    x = np.array([3.0, 1e-5, -0.1, 123456.0], dtype=np.float32)
    y_id, y_num = s.copy(), c.astype(np.float32)
    y_str = np.array([str(v) for v in x], dtype=object)
    nodes = [helper.make_node("Identity", ["s"], ["y_id"], name="id"),
             helper.make_node("Cast", ["c"], ["y_num"], to=f, name="cast_num"),
             helper.make_node("Cast", ["x"], ["y_str"], to=st, name="cast_str")]
    graph = helper.make_graph(nodes, "strings", [helper.make_tensor_value_info("s", st, [3]), vinfo("x", x)],
                              [helper.make_tensor_value_info("y_id", st, [3]), vinfo("y_num", y_num),
                               helper.make_tensor_value_info("y_str", st, [4])],
                              initializer=[numpy_helper.from_array(c, "c")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    yield "Cast_strings", m, [("s", s), ("x", x)], [("y_id", y_id), ("y_num", y_num), ("y_str", y_str)]

DECISIONS = {
    "branches/order_a.json": {"order": ["a1", "a2", "b1", "b2", "y"]},
    "branches/order_b.json": {"order": ["b1", "a1", "a2", "b2", "y"]},
    "branches/order_bad.json": {"order": ["a2", "a1", "b1", "b2", "y"]},
    "chain/fusion.json": {"fusion": [["add", "sig", "mul", "tanh"]]},
    "chain/fusion_bad.json": {"fusion": [["mm", "add", "sig"]]},
    "If_outer/order_ok.json": {"order": ["square", "if"]},
    "If_outer/order_bad.json": {"order": ["if", "square"]},  # the If's branches read square's output
}


def error_models(out):
    """Models the executor must refuse with a clear message."""
    os.makedirs(out, exist_ok=True)
    x = np.zeros((2, 3), np.float32)
    m = op_model("Multinomial", [("x", x)], [("y", np.zeros((2, 1), np.int32))])  # random: no kernel
    onnx.save_model(m, os.path.join(out, "unsupported.onnx"))
    # an If whose taken branch gives [3] where the model declares [2]
    f = TensorProto.FLOAT
    one = helper.make_tensor("v", f, [3], [1, 2, 3])
    br = helper.make_graph([helper.make_node("Constant", [], ["b"], value=one, name="c3")], "branch", [],
                           [helper.make_tensor_value_info("b", f, [3])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=br, else_branch=br, name="if_bad")],
                          "if_bad", [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", f, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save_model(m, os.path.join(out, "if_bad_shape.onnx"))
    scan_error_models(out)
    llm_error_models(out)


def scan_error_models(out):
    """Scans whose axes or stacked rank do not fit (outputs undeclared, so the body is inferred)."""
    f = TensorProto.FLOAT

    def scan(name, xshape, body_nodes, body_in_shape, body_out_rank, **attrs):
        body = helper.make_graph(body_nodes, "body", [helper.make_tensor_value_info("xi", f, body_in_shape)],
                                 [helper.make_tensor_value_info("yo", f, None)])
        node = helper.make_node("Scan", ["x"], ["y"], body=body, num_scan_inputs=1, name=name, **attrs)
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", f, xshape)],
                              [helper.make_tensor_value_info("y", f, None)])
        onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)]),
                        os.path.join(out, name + ".onnx"))

    ident = [helper.make_node("Identity", ["xi"], ["yo"], name="id")]
    scan("scan_input_axis", [2, 3], ident, None, 1, scan_input_axes=[2])
    scan("scan_output_axis", [2, 3], ident, None, 1, scan_output_axes=[3])
    # a rank-16 input: the body's slice is 15-D, unsqueezed to 16-D, stacked to 17-D
    ax = helper.make_tensor("ax", TensorProto.INT64, [1], [0])
    unsq = [helper.make_node("Constant", [], ["a"], value=ax, name="k"),
            helper.make_node("Unsqueeze", ["xi", "a"], ["yo"], name="unsq")]
    scan("scan_rank_overflow", [1] * 16, unsq, None, 16)


def llm_error_models(out):
    """Attention / RotaryEmbedding / LinearAttention / CausalConvWithState with inputs whose shapes
    do not fit each other."""
    f = TensorProto.FLOAT

    def model(name, op, ins, opset, yshape=None, **attrs):  # yshape: for ops without a shape rule
        node = helper.make_node(op, [n for n, _ in ins], ["y"], name=name, **attrs)
        g = helper.make_graph([node], name, [helper.make_tensor_value_info(n, *ts) for n, ts in ins
                                             if n], [helper.make_tensor_value_info("y", f, yshape)])
        onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
                        os.path.join(out, name + ".onnx"))

    q = ("q", (f, [2, 2, 3, 4]))
    k1, v1 = ("k", (f, [1, 2, 3, 4])), ("v", (f, [1, 2, 3, 4]))
    model("attn_kv_batch", "Attention", [q, k1, v1], 23)
    # K's head size 5 against Q's 4: the shape rule rejects it (it used to infer a shape)
    model("attn_head_size", "Attention", [("q", (f, [1, 2, 3, 4])), ("k", (f, [1, 2, 3, 5])), v1], 23)
    q1 = ("q", (f, [1, 2, 3, 4]))
    model("attn_mask_dim", "Attention", [q1, k1, v1, ("mask", (f, [2, 3]))], 23)
    model("attn_mask_rank", "Attention", [q1, k1, v1, ("mask", (f, [1, 1, 1, 3, 3]))], 23)
    q3, k3, v3 = ("q", (f, [3, 2, 3, 4])), ("k", (f, [3, 2, 3, 4])), ("v", (f, [3, 2, 3, 4]))
    model("attn_nonpad", "Attention", [q3, k3, v3, ("", None), ("", None), ("", None),
                                       ("len", (TensorProto.INT64, [2]))], 24)
    model("attn_past_heads", "Attention", [q1, k1, v1, ("", None), ("pk", (f, [1, 1, 2, 4])),
                                           ("pv", (f, [1, 1, 2, 4]))], 23)
    x = ("x", (f, [1, 2, 3, 4]))
    model("rotary_sin_cache", "RotaryEmbedding", [x, ("cos", (f, [1, 3, 2])), ("sin", (f, [1, 2, 2]))], 23)
    model("rotary_position_ids", "RotaryEmbedding", [x, ("cos", (f, [8, 2])), ("sin", (f, [8, 2])),
                                                     ("pos", (TensorProto.INT64, [1, 2]))], 23)
    model("linattn_k_batch", "LinearAttention", [("q", (f, [2, 3, 8])), ("k", (f, [1, 3, 8])), ("v", (f, [2, 3, 8]))],
          27, [2, 3, 8], q_num_heads=2, kv_num_heads=2, update_rule="linear")
    model("causalconv_past", "CausalConvWithState", [("x", (f, [1, 2, 5])), ("w", (f, [2, 1, 3])),
                                                     ("", None), ("p", (f, [1, 2, 1]))], 27, [1, 2, 5])


def lowbit_cases(out):
    """BitCast between INT4 and UINT4 (as held one per byte, INT4 sign-extended), checked through a
    Cast to INT32: -1, -8, 0, 3, 7 <-> 15, 8, 0, 3, 7."""
    d = os.path.join(out, "BitCast_int4")
    s = np.array([-1, -8, 0, 3, 7], np.int32)
    u = s & 15
    x = helper.make_tensor("w", TensorProto.INT32, [5], s.tolist())
    nodes = [helper.make_node("Constant", [], ["c32"], value=x, name="k"),
             helper.make_node("Cast", ["c32"], ["c4"], to=22, name="to_int4"),
             helper.make_node("BitCast", ["c4"], ["u4"], to=21, name="bc_u"),
             helper.make_node("Cast", ["u4"], ["yu"], to=TensorProto.INT32, name="out_u"),
             helper.make_node("BitCast", ["u4"], ["s4"], to=22, name="bc_s"),
             helper.make_node("Cast", ["s4"], ["ys"], to=TensorProto.INT32, name="out_s")]
    g = helper.make_graph(nodes, "bitcast_int4", [], [helper.make_tensor_value_info("yu", TensorProto.INT32, [5]),
                                                     helper.make_tensor_value_info("ys", TensorProto.INT32, [5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26)])
    write_case(d, m, [], [("yu", u), ("ys", s)], stamp=False)


def io_cases(out):
    os.makedirs(out, exist_ok=True)
    arrays = {
        "f32": (np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5),
        "i64": np.array([[-3, 5, 1 << 40]], dtype=np.int64),
        "bool": np.array([True, False, True]),
        "scalar": np.array(2.5, dtype=np.float32),
    }
    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), a)
        with open(os.path.join(out, name + ".pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, name).SerializeToString())
    # typed fields instead of raw_data
    typed = helper.make_tensor("f32_typed", TensorProto.FLOAT, [2, 3, 4], arrays["f32"].ravel().tolist())
    with open(os.path.join(out, "f32_typed.pb"), "wb") as f:
        f.write(typed.SerializeToString())
    typed = helper.make_tensor("i64_typed", TensorProto.INT64, [1, 3], arrays["i64"].ravel().tolist())
    with open(os.path.join(out, "i64_typed.pb"), "wb") as f:
        f.write(typed.SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["corpus", "ops", "io"])
    ap.add_argument("--out", required=True, help="output folder (one sub-folder per case)")
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--force", action="store_true", help="regenerate cases that are up to date")
    args = ap.parse_args()
    only = [n for n in args.only.split(",") if n]
    os.makedirs(args.out, exist_ok=True)
    if args.what == "corpus":
        import torch
        import export_corpus as ec
        torch.set_num_threads(2)
        for n in only:
            if n not in ec.MODELS:
                sys.exit(f"make_testdata: unknown model '{n}' (known: {', '.join(ec.MODELS)})")
        for n in only or list(ec.MODELS):
            d = os.path.join(args.out, n)
            if not args.force and up_to_date(d):
                continue
            print(f"make_testdata: {n}", flush=True)
            corpus_case(n, args.out)
    elif args.what == "io":
        io_cases(args.out)
    else:
        import json
        for name, model, ins, outs in op_cases():
            if only and name not in only:
                continue
            write_case(os.path.join(args.out, name), model, ins, outs, stamp=False)
        for rel, d in DECISIONS.items():
            with open(os.path.join(args.out, rel), "w") as f:
                json.dump(d, f)
                f.write("\n")
        error_models(os.path.join(args.out, "_errors"))
        lowbit_cases(args.out)
        print(f"make_testdata: op cases in {args.out}")


if __name__ == "__main__":
    main()
