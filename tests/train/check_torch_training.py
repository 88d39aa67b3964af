#!/usr/bin/python3
"""check_torch_training.py GOPT: training steps of PyTorch exports that use the newer gradient rules.

Two small models are exported with Debian's PyTorch (random weights, opset 17) into a temporary
folder: a U-Net-like image model (Conv, InstanceNorm with affine, PReLU, ConvTranspose with
output_padding, torch.maximum, amax, PixelShuffle, which exports as DepthToSpace in CRD mode,
cumsum) and a sequence model (GroupNorm, which exports through InstanceNormalization,
ConvTranspose1d, adaptive max pooling, LayerNorm, multi-head attention, a GRU, an RNN, an einsum,
clamp). For each, `gopt info MODEL --training --json` must succeed and hold the backward op that
each rule emits (ConvGradWeight for the convolutions, Equal for maximum and amax, Less for
PReLU, Sqrt for the recomputed statistics, a second CumSum, GRUGrad, RNNGrad, the einsum's two
gradient Einsums), and `gopt simulate MODEL --training` must run.
The rules' values are checked by finite differences in test_train_numeric; this checks that real
exports reach them. One line per model; exit 1 on the first failure.
"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

import torch
import torch.nn as nn


class UNetish(nn.Module):
    def __init__(s):
        super().__init__()
        s.e1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.InstanceNorm2d(16, affine=True), nn.PReLU(16))
        s.e2 = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.InstanceNorm2d(32, affine=True), nn.PReLU())
        s.up = nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1)
        s.d2s = nn.PixelShuffle(2)
        s.out = nn.Conv2d(4 + 16, 3, 3, padding=1)

    def forward(s, x):
        a = s.e1(x)
        u = s.up(s.e2(a))
        m = torch.maximum(u, a) + torch.amax(u, dim=(2, 3), keepdim=True)
        p = nn.functional.avg_pool2d(s.d2s(m), 2)
        return s.out(torch.cat([p, m], 1)).cumsum(dim=3)


class Seq(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1, s.gn = nn.Conv1d(8, 16, 3, padding=1), nn.GroupNorm(4, 16)
        s.ct = nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1)
        s.ln, s.att = nn.LayerNorm(8), nn.MultiheadAttention(8, 2, batch_first=True)
        s.gru, s.rnn = nn.GRU(8, 8, batch_first=True), nn.RNN(8, 8, batch_first=True)
        s.w = nn.Parameter(torch.randn(8, 8))

    def forward(s, x):
        h = s.ct(nn.functional.silu(s.gn(s.c1(x))))
        h = nn.functional.adaptive_max_pool1d(h, 1) + h
        t = s.ln(h.transpose(1, 2))
        a, _ = s.att(t, t, t)
        g, _ = s.gru(a)
        r, _ = s.rnn(torch.einsum("bld,de->ble", g, s.w))
        return r.clamp(min=-1.0, max=1.0)


MODELS = {
    # 3 convolutions + the transposed one; Equal: maximum's two inputs and amax; Less: the PReLUs;
    # Sqrt: the instance norms' recomputed statistics; CumSum: forward and backward
    "unetish": (UNetish, (torch.randn(2, 3, 32, 32),),
                {"ConvGradWeight": 4, "Equal": 3, "Less": 2, "Sqrt": 2, "CumSum": 2, "Transpose": 1}),
    # the einsum and its two operands' gradients
    "seq": (Seq, (torch.randn(2, 8, 16),), {"ConvGradWeight": 2, "GRUGrad": 1, "RNNGrad": 1, "Einsum": 3}),
}


def main():
    gopt = sys.argv[1]
    warnings.filterwarnings("ignore")  # the exporter's notes on batch sizes and shape inference
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (make, args, want) in MODELS.items():
            path = os.path.join(tmp, name + ".onnx")
            torch.onnx.export(make().eval(), args, path, opset_version=17)
            r = subprocess.run([gopt, "info", path, "--training", "--json"], capture_output=True, text=True)
            if r.returncode:
                print(f"FAIL {name}: gopt info --training: {r.stderr.strip()}")
                return 1
            ops = json.loads(r.stdout)["ops"]
            short = {op: n for op, n in want.items() if ops.get(op, 0) < n}
            if short:
                print(f"FAIL {name}: expected at least {short} in the training step, got "
                      f"{ {op: ops.get(op, 0) for op in short} }")
                return 1
            s = subprocess.run([gopt, "simulate", path, "--training", "--cluster", "2xV100-nvlink"],
                               capture_output=True, text=True)
            if s.returncode or "step time" not in s.stdout:
                print(f"FAIL {name}: gopt simulate --training: {s.stderr.strip()}")
                return 1
            print(f"ok: {name}: training step of {sum(ops.values())} ops built and simulated "
                  f"({', '.join(f'{op} {ops[op]}' for op in want)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
