#!/usr/bin/python3
"""check_layouts.py GOPT [DATA]: the executor's layout-assignment pass (gopt run --layouts auto|plain).

1. A small CNN built here with onnx.helper whose convolutions are followed by every post-op kind the
   pass absorbs (Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSwish, x*Sigmoid(x), residual Add, and an
   Add before a Relu) and by MaxPool, AveragePool and BatchNormalization kept in oneDNN's layout:
   a squeeze-excitation block (GlobalAveragePool, per-channel Mul, oneDNN's under the pass): both
   modes against PyTorch (torch.nn.functional in float64) at rtol 1e-3 / atol 1e-4, and the auto
   run must absorb every one of those ops and keep the SE block's input and output in oneDNN's
   layout.
2. A densenet / inception-shaped block (dense_cnn: channel Concat, BatchNorm, Relu, zero Pad into
   AveragePool, a Pad of nothing) against PyTorch in both modes; under auto the Concat takes the
   BatchNorm and its Relu (k_concat_bn.c: the concatenation is never made), the AveragePool its
   Pad, and the tensors stay in oneDNN's layout (at most the input's reorders into its two convs
   and the output's back).
3. Corpus models with weights (DATA/resnet18, mobilenet_v2, efficientnet_b0 from
   tools/make_testdata.py corpus, when DATA is given): auto's outputs equal plain's (rtol 1e-4,
   atol 1e-5), and on mobilenet_v2 the activation reorders per run drop (a behaviour, not a time):
   auto < plain / 10, and auto's reorders_plain equals plain's reorders.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

fails = []


def run(gopt, model, inputs, out_dir, layouts):
    cmd = [gopt, "run", model, "--inputs", inputs, "--outputs", out_dir, "--format", "npy",
           "--layouts", layouts, "--threads", "1", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fails.append(f"{model} --layouts {layouts}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
        return None, []
    outs, i = [], 0
    while os.path.exists(os.path.join(out_dir, f"output_{i}.npy")):
        outs.append(np.load(os.path.join(out_dir, f"output_{i}.npy")))
        i += 1
    return json.loads(p.stdout)["layouts"], outs


def close(name, got, want, rtol, atol):
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
        err = np.max(np.abs(got - want)) if got.shape == want.shape else "shape"
        fails.append(f"{name}: outputs differ (max abs err {err})")
        return False
    return True


class Net:
    """Builds a graph with onnx.helper (random weights from seed) and computes PyTorch's reference."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.inits, self.nodes = [], []

    def w(self, name, *shape, scale=None):
        a = self.rng.uniform(-1, 1, shape).astype(np.float32)
        if scale is not None:
            a *= scale
        self.inits.append(numpy_helper.from_array(a, name))
        return a

    def conv(self, name, x, cin, cout, k, group=1, stride=1):
        W = self.w(name + "_w", cout, cin // group, k, k, scale=(3.0 / (cin // group * k * k)) ** 0.5)
        B = self.w(name + "_b", cout, scale=0.1)
        self.nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], group=group,
                                           pads=[k // 2] * 4, strides=[stride, stride]))
        return W, B

    @staticmethod
    def t_conv(x, WB, group=1, stride=1):
        W, B = WB
        return F.conv2d(x, torch.from_numpy(W).double(), torch.from_numpy(B).double(), stride=stride,
                        padding=W.shape[2] // 2, groups=group)

    def node(self, op, ins, out, **attrs):
        self.nodes.append(helper.make_node(op, ins, [out], **attrs))

    def save(self, tmp, name, x, yshape, y):
        """Writes name.onnx and name_in/input_0.npy; returns (model path, input folder, y)."""
        graph = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, yshape)],
                                  initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.checker.check_model(model)
        path = os.path.join(tmp, name + ".onnx")
        onnx.save(model, path)
        os.makedirs(os.path.join(tmp, name + "_in"))
        np.save(os.path.join(tmp, name + "_in", "input_0.npy"), x)
        return path, os.path.join(tmp, name + "_in"), y


def small_cnn(tmp):
    """Model, input and PyTorch reference of a CNN exercising every post-op kind."""
    net = Net(7)
    rng, inits, w, conv, t_conv, node = net.rng, net.inits, net.w, net.conv, net.t_conv, net.node
    C = 24  # not a multiple of 16: blocked layouts pad the channels

    inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "lo"))
    inits.append(numpy_helper.from_array(np.array(6.0, np.float32), "hi"))
    x = rng.uniform(-1, 1, (2, 3, 20, 20)).astype(np.float32)
    c1 = conv("c1", "x", 3, C, 3)                      # + Relu
    node("Relu", ["c1"], "r1")
    node("MaxPool", ["r1"], "p1", kernel_shape=[2, 2], strides=[2, 2])
    c2 = conv("c2", "p1", C, C, 3, group=C)            # depthwise + Clip (Relu6)
    node("Clip", ["c2", "lo", "hi"], "r2")
    c3 = conv("c3", "r2", C, C, 1)                     # + residual Add (sum post-op)
    node("Add", ["c3", "p1"], "a3")
    c4 = conv("c4", "a3", C, C, 3)                     # + x * Sigmoid(x) (swish)
    node("Sigmoid", ["c4"], "s4")
    node("Mul", ["c4", "s4"], "m4")
    c5 = conv("c5", "m4", C, C, 1)                     # + LeakyRelu, then Add (sum), then Tanh
    node("LeakyRelu", ["c5"], "l5", alpha=0.1)
    node("Add", ["m4", "l5"], "a5")
    node("Tanh", ["a5"], "t5")
    scale, bias = w("bn_s", C, scale=0.5) + 1.0, w("bn_b", C, scale=0.1)
    mean, var = w("bn_m", C, scale=0.1), np.abs(w("bn_v", C)) + 0.5
    inits[-4:] = [numpy_helper.from_array(a, n) for n, a in
                  (("bn_s", scale), ("bn_b", bias), ("bn_m", mean), ("bn_v", var))]
    node("BatchNormalization", ["t5", "bn_s", "bn_b", "bn_m", "bn_v"], "bn", epsilon=1e-5)
    c6 = conv("c6", "bn", C, 32, 3, stride=2)          # + HardSwish
    node("HardSwish", ["c6"], "h6")
    node("AveragePool", ["h6"], "ap", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    node("GlobalAveragePool", ["ap"], "gp")            # squeeze-excitation: oneDNN pooling and
    ce1 = conv("ce1", "gp", 32, 8, 1)                  # binary Mul on the kept layout
    node("Relu", ["ce1"], "re1")
    ce2 = conv("ce2", "re1", 8, 32, 1)
    node("Sigmoid", ["ce2"], "se")
    node("Mul", ["se", "ap"], "sx")                    # the activation as the second input
    c7 = conv("c7", "sx", 32, 16, 1)                   # + Sigmoid, a graph output
    node("Sigmoid", ["c7"], "y")
    with torch.no_grad():
        t = torch.from_numpy(x).double()
        p1 = F.max_pool2d(F.relu(t_conv(t, c1)), 2, 2)
        r2 = torch.clamp(t_conv(p1, c2, group=C), 0, 6)
        a3 = t_conv(r2, c3) + p1
        c4t = t_conv(a3, c4)
        m4 = c4t * torch.sigmoid(c4t)
        t5 = torch.tanh(m4 + F.leaky_relu(t_conv(m4, c5), 0.1))
        bn = F.batch_norm(t5, *(torch.from_numpy(a).double() for a in (mean, var, scale, bias)), eps=1e-5)
        h6 = F.hardswish(t_conv(bn, c6, stride=2))
        ap = F.avg_pool2d(h6, 3, 1, 1, count_include_pad=False)
        se = torch.sigmoid(t_conv(F.relu(t_conv(ap.mean(dim=(2, 3), keepdim=True), ce1)), ce2))
        y = torch.sigmoid(t_conv(se * ap, c7)).numpy()
    return net.save(tmp, "small", x, [2, 16, 5, 5], y)


def dense_cnn(tmp):
    """A densenet / inception-shaped block: two convs joined by a channel Concat, BatchNorm, Relu, a
    conv, a zero Pad before an AveragePool (inception's), and a Pad of nothing before another
    (densenet's transition). Under auto every one of them stays in oneDNN's layout."""
    net = Net(11)
    w, conv, t_conv, node = net.w, net.conv, net.t_conv, net.node
    x = net.rng.uniform(-1, 1, (1, 8, 12, 12)).astype(np.float32)
    ca = conv("ca", "x", 8, 16, 3)
    node("Relu", ["ca"], "ra")                          # a post-op of ca
    cb = conv("cb", "x", 8, 16, 1)
    node("Concat", ["ra", "cb"], "cat", axis=1)
    scale, bias, mean = w("bn_s", 32, scale=0.5) + 1.0, w("bn_b", 32, scale=0.1), w("bn_m", 32, scale=0.1)
    var = np.abs(w("bn_v", 32)) + 0.5
    net.inits[-4:] = [numpy_helper.from_array(a, n) for n, a in
                      (("bn_s", scale), ("bn_b", bias), ("bn_m", mean), ("bn_v", var))]
    node("BatchNormalization", ["cat", "bn_s", "bn_b", "bn_m", "bn_v"], "bn", epsilon=1e-5)
    node("Relu", ["bn"], "rb")
    cc = conv("cc", "rb", 32, 16, 1)
    net.inits.append(numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads1"))
    net.inits.append(numpy_helper.from_array(np.zeros(8, np.int64), "pads0"))
    node("Pad", ["cc", "pads1"], "pd")
    node("AveragePool", ["pd"], "ap", kernel_shape=[3, 3], strides=[1, 1])
    node("Pad", ["ap", "pads0"], "p0")                  # densenet's transition: a Pad of nothing
    node("AveragePool", ["p0"], "y", kernel_shape=[2, 2], strides=[2, 2])
    with torch.no_grad():
        t = torch.from_numpy(x).double()
        cat = torch.cat([F.relu(t_conv(t, ca)), t_conv(t, cb)], 1)
        bn = F.batch_norm(cat, *(torch.from_numpy(a).double() for a in (mean, var, scale, bias)), eps=1e-5)
        ap = F.avg_pool2d(F.pad(t_conv(F.relu(bn), cc), (1, 1, 1, 1)), 3, 1)
        y = F.avg_pool2d(ap, 2, 2).numpy()
    return net.save(tmp, "dense", x, [1, 16, 6, 6], y)


def check_small(gopt, tmp, name, built):
    """Runs a built (model, inputs, PyTorch output) in both modes; returns auto's layouts (or None)."""
    path, inp, want = built
    auto = None
    for mode in ("plain", "auto"):
        od = os.path.join(tmp, f"{name}_{mode}")
        os.makedirs(od)
        lay, outs = run(gopt, path, inp, od, mode)
        if lay is None:
            continue
        if close(f"{name} CNN --layouts {mode} vs PyTorch", outs[0], want, 1e-3, 1e-4):
            print(f"ok: {name} CNN --layouts {mode} matches PyTorch; {lay}")
        if mode == "auto":
            auto = lay
    return auto


def main():
    gopt = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else None
    with tempfile.TemporaryDirectory() as tmp:
        lay = check_small(gopt, tmp, "small", small_cnn(tmp))
        if lay is not None:
            # Relu, Clip, Add, Sigmoid+Mul, LeakyRelu+Add+Tanh, HardSwish, Relu, Sigmoid, Sigmoid
            if lay["post_op_nodes"] != 12:
                fails.append(f"small CNN: {lay['post_op_nodes']} post-op nodes, expected 12")
            if "ap" not in lay["tensors"] or "sx" not in lay["tensors"] or lay["reorders"] >= lay["reorders_plain"]:
                fails.append(f"small CNN: layouts not kept: {lay}")
        lay = check_small(gopt, tmp, "dense", dense_cnn(tmp))
        # auto: only the input's reorders into its two convs' layout and the output's back; the
        # Concat takes the BatchNorm and its Relu (one pass, the concatenation never made) and each
        # AveragePool its Pad (with ca's Relu: 5 nodes absorbed)
        if lay is not None and (lay["reorders"] > 3 or lay["post_op_nodes"] != 5 or "bn" in lay["tensors"] or
                                "cat" in lay["tensors"] or
                                not all(t in lay["tensors"] for t in ("ra", "cb", "rb", "cc", "ap"))):
            fails.append(f"dense CNN: Concat / BatchNorm+Relu / Pad+AveragePool / Pad left oneDNN's layout: {lay}")
        for m in ("resnet18", "mobilenet_v2", "efficientnet_b0") if data else ():
            d = os.path.join(data, m)
            res = {}
            for mode in ("plain", "auto"):
                od = os.path.join(tmp, m + "_" + mode)
                os.makedirs(od)
                res[mode] = run(gopt, os.path.join(d, "model.onnx"), d, od, mode)
            (lp, op), (la, oa) = res["plain"], res["auto"]
            if lp is None or la is None:
                continue
            same = all(close(f"{m} output {i}: auto vs plain", a, p, 1e-4, 1e-5) for i, (a, p) in enumerate(zip(oa, op)))
            if same and len(oa) == len(op):
                print(f"ok: {m}: auto equals plain; reorders {lp['reorders']} -> {la['reorders']}, "
                      f"{la['kept_tensors']} tensors kept, {la['post_op_nodes']} post-op nodes")
            if la["reorders_plain"] != lp["reorders"]:
                fails.append(f"{m}: auto says plain has {la['reorders_plain']} reorders, plain ran {lp['reorders']}")
            if m == "mobilenet_v2" and not la["reorders"] * 10 < lp["reorders"]:
                fails.append(f"mobilenet_v2: reorders did not drop: {lp['reorders']} -> {la['reorders']}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
