#!/usr/bin/python3
"""bench_nn_torch.py: the PyTorch twin of bench_nn.c: GraphSAGE(2 layers, hidden 128, relu,
layer norm) + 2 segment-recurrent attention blocks (4 heads, segment 128 with Transformer-XL
memory, FFN 256, post-norm) + linear head, MSE loss; times forward+backward on the graph and inputs
that `bench_nn --dump FILE` wrote, with the same thread count.

    /usr/bin/python3 bench/nn/bench_nn_torch.py FILE [--threads T] [--reps R]
"""
import argparse
import math
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

HID, HEADS, DFF, SEG = 128, 4, 256, 128


class Sage(torch.nn.Module):
    def __init__(self, din, dout):
        super().__init__()
        self.lin = torch.nn.Linear(2 * din, dout)
        self.ln = torch.nn.LayerNorm(dout)

    def forward(self, h, dst, src, inv_deg):
        nb = torch.zeros_like(h).index_add_(0, dst, h.index_select(0, src)) * inv_deg
        return self.ln(F.relu(self.lin(torch.cat([h, nb], 1))))


class SegBlock(torch.nn.Module):
    """Post-norm block; attention over segments of SEG rows, keys = [memory (previous segment's
    detached input projected by W_k/W_v) ; own segment]. Batched over segments (padding the tail)."""

    def __init__(self, d):
        super().__init__()
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.ff1, self.ff2 = torch.nn.Linear(d, DFF), torch.nn.Linear(DFF, d)

    def attn(self, x):
        T, d = x.shape
        L, H, dh = SEG, HEADS, d // HEADS
        S = (T + L - 1) // L
        pad = S * L - T
        q, k, v = self.q(x), self.k(x), self.v(x)
        xd = x.detach()
        km, vm = self.k(xd), self.v(xd)

        def seg(t):  # [T, d] -> [S, H, L, dh]
            t = F.pad(t, (0, 0, 0, pad))
            return t.view(S, L, H, dh).transpose(1, 2)

        q, k, v, km, vm = seg(q), seg(k), seg(v), seg(km), seg(vm)
        km = torch.cat([torch.zeros_like(km[:1]), km[:-1]], 0)  # memory = previous segment
        vm = torch.cat([torch.zeros_like(vm[:1]), vm[:-1]], 0)
        kk = torch.cat([km, k], 2)  # [S, H, 2L, dh]
        vv = torch.cat([vm, v], 2)
        valid = torch.ones(S, 2 * L, dtype=torch.bool)
        valid[0, :L] = False  # segment 0 has no memory
        if pad:
            valid[-1, 2 * L - pad:] = False  # padded own keys
        sc = torch.matmul(q, kk.transpose(-1, -2)) / math.sqrt(dh)
        sc = sc.masked_fill(~valid[:, None, None, :], float("-inf"))
        out = torch.matmul(torch.softmax(sc, -1), vv)  # [S, H, L, dh]
        return self.o(out.transpose(1, 2).reshape(S * L, d)[:T])

    def forward(self, x):
        a = self.ln1(x + self.attn(x))
        return self.ln2(a + self.ff2(F.gelu(self.ff1(a))))


class Model(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.s0, self.s1 = Sage(f, HID), Sage(HID, HID)
        self.b0, self.b1 = SegBlock(HID), SegBlock(HID)
        self.out = torch.nn.Linear(HID, 1)

    def forward(self, x, dst, src, inv_deg):
        h = self.s1(self.s0(x, dst, src, inv_deg), dst, src, inv_deg)
        return self.out(self.b1(self.b0(h)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    raw = open(a.file, "rb").read()
    n, f = np.frombuffer(raw, dtype="<i8", count=2)
    off = 16
    rp = np.frombuffer(raw, dtype="<i4", count=n + 1, offset=off); off += 4 * (n + 1)
    E = int(rp[-1])
    col = np.frombuffer(raw, dtype="<i4", count=E, offset=off); off += 4 * E
    x = torch.from_numpy(np.frombuffer(raw, dtype="<f4", count=n * f, offset=off).reshape(n, f).copy()); off += 4 * n * f
    y = torch.from_numpy(np.frombuffer(raw, dtype="<f4", count=n, offset=off).reshape(n, 1).copy())
    deg = np.diff(rp)
    dst = torch.from_numpy(np.repeat(np.arange(n), deg).astype(np.int64))
    src = torch.from_numpy(col.astype(np.int64))
    inv_deg = torch.from_numpy((1.0 / np.maximum(deg, 1)).astype(np.float32)).unsqueeze(1)
    m = Model(int(f))
    times, fwd = [], []
    for rep in range(a.reps + 1):
        t0 = time.perf_counter()
        loss = ((m(x, dst, src, inv_deg) - y) ** 2).mean()
        t1 = time.perf_counter()
        m.zero_grad(set_to_none=False)
        loss.backward()
        t2 = time.perf_counter()
        if rep:
            times.append(t2 - t0)
            fwd.append(t1 - t0)
    print("RESULT impl=torch-%s nodes=%d threads=%d median_ms=%.2f fwd_ms=%.2f loss=%.5f"
          % (torch.__version__, n, a.threads, statistics.median(times) * 1e3, statistics.median(fwd) * 1e3, loss.item()))


if __name__ == "__main__":
    main()
