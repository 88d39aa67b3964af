#!/usr/bin/python3
"""nn_fixtures.py: builds small reference models in PyTorch and writes their parameters, inputs,
outputs, losses and EVERY gradient to tests/nn/fixtures/*.bin, which tests/nn/test_nn_torch.c
compares against gopt's C engine (src/nn). Run with Debian's /usr/bin/python3 (torch 1.13):

    /usr/bin/python3 tools/nn_fixtures.py [outdir]

File format (little-endian): b"GNNF", u32 count, then count records of
    u16 name_len, name, u8 dtype (0 = f32, 1 = i32), u8 ndim, u32 dims[ndim], data.
Parameter names match gopt's layer naming ("<prefix>.weight", ...); gradients are "grad.<name>".
"""
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float32)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "nn", "fixtures")


class Writer:
    def __init__(self):
        self.recs = []

    def add(self, name, t):
        if isinstance(t, torch.Tensor):
            t = t.detach().cpu().numpy()
        a = np.asarray(t)
        if a.ndim == 0:
            a = a.reshape(1)
        if a.dtype.kind in "iu":
            a = a.astype("<i4")
            dt = 1
        else:
            a = a.astype("<f4")
            dt = 0
        self.recs.append((name, dt, a))

    def params(self, named, grads=True):
        for name, p in named:
            self.add(name, p)
            if grads:
                self.add("grad." + name, p.grad)

    def save(self, fname):
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, fname), "wb") as f:
            f.write(b"GNNF" + struct.pack("<I", len(self.recs)))
            for name, dt, a in self.recs:
                nb = name.encode()
                f.write(struct.pack("<H", len(nb)) + nb + struct.pack("<BB", dt, a.ndim))
                f.write(struct.pack("<%dI" % a.ndim, *a.shape))
                f.write(a.tobytes())


def linear(prefix, din, dout, P, bias=True):
    lin = torch.nn.Linear(din, dout, bias=bias)
    P[prefix + ".weight"] = lin.weight
    if bias:
        P[prefix + ".bias"] = lin.bias
    return lin


def layernorm(prefix, d, P):
    ln = torch.nn.LayerNorm(d, eps=1e-5)
    with torch.no_grad():  # non-trivial affine so gradients through gamma/beta matter
        ln.weight.add_(0.1 * torch.randn(d))
        ln.bias.add_(0.1 * torch.randn(d))
    P[prefix + ".weight"] = ln.weight
    P[prefix + ".bias"] = ln.bias
    return ln


def attention(q, k, v, km, vm, H, L, causal, key_valid):
    """Segment-recurrent attention as in src/nn/nn_attn.c; q,k,v,km,vm: [T, H*dh]."""
    T, HD = q.shape
    dh = HD // H
    if L <= 0 or L > T:
        L = T
    outs = []
    for s0 in range(0, T, L):
        s1 = min(s0 + L, T)
        Lq = s1 - s0
        qs = q[s0:s1].reshape(Lq, H, dh).transpose(0, 1)  # [H, Lq, dh]
        ks, vs = k[s0:s1], v[s0:s1]
        valid = key_valid[s0:s1] if key_valid is not None else torch.ones(Lq, dtype=torch.bool)
        Lm = 0
        if km is not None and s0 > 0:
            Lm = L
            ks = torch.cat([km[s0 - L:s0], ks], 0)
            vs = torch.cat([vm[s0 - L:s0], vs], 0)
            mv = key_valid[s0 - L:s0] if key_valid is not None else torch.ones(L, dtype=torch.bool)
            valid = torch.cat([mv, valid], 0)
        W = ks.shape[0]
        ks = ks.reshape(W, H, dh).transpose(0, 1)
        vs = vs.reshape(W, H, dh).transpose(0, 1)
        sc = qs @ ks.transpose(1, 2) / math.sqrt(dh)  # [H, Lq, W]
        mask = valid.reshape(1, 1, W).expand(H, Lq, W).clone()
        if causal:
            tri = torch.ones(Lq, Lq, dtype=torch.bool).tril()
            mask[:, :, Lm:] &= tri
        sc = sc.masked_fill(~mask, float("-inf"))
        p = torch.softmax(sc, -1)
        outs.append((p @ vs).transpose(0, 1).reshape(Lq, HD))
    return torch.cat(outs, 0)


class MHA(torch.nn.Module):
    def __init__(self, prefix, d, H, P):
        super().__init__()
        self.H = H
        self.q = linear(prefix + ".q", d, d, P)
        self.k = linear(prefix + ".k", d, d, P)
        self.v = linear(prefix + ".v", d, d, P)
        self.o = linear(prefix + ".o", d, d, P)

    def forward(self, x, L, mem, causal, key_valid):
        q, k, v = self.q(x), self.k(x), self.v(x)
        km = vm = None
        if mem and 0 < L < x.shape[0]:
            xd = x.detach()
            km, vm = self.k(xd), self.v(xd)
        return self.o(attention(q, k, v, km, vm, self.H, L, causal, key_valid))


class SegBlock(torch.nn.Module):
    def __init__(self, prefix, d, H, dff, L, P):
        super().__init__()
        self.L = L
        self.attn = MHA(prefix + ".attn", d, H, P)
        self.ln1 = layernorm(prefix + ".ln1", d, P)
        self.ff1 = linear(prefix + ".ff1", d, dff, P)
        self.ff2 = linear(prefix + ".ff2", dff, d, P)
        self.ln2 = layernorm(prefix + ".ln2", d, P)

    def forward(self, x, causal=False, key_valid=None):
        a = self.ln1(x + self.attn(x, self.L, True, causal, key_valid))
        return self.ln2(a + self.ff2(F.gelu(self.ff1(a))))


def sage_mean(h, rowptr, col):
    n = len(rowptr) - 1
    dst = torch.tensor(np.repeat(np.arange(n), np.diff(rowptr)), dtype=torch.long)
    out = torch.zeros(n, h.shape[1]).index_add(0, dst, h[torch.tensor(col, dtype=torch.long)])
    deg = torch.tensor(np.diff(rowptr), dtype=torch.float32).clamp(min=1).unsqueeze(1)
    return out / deg


def fix_mlp():
    torch.manual_seed(1)
    P = {}
    dims = [5, 8, 8, 3]
    lins = [linear("mlp.%d" % i, dims[i], dims[i + 1], P) for i in range(3)]
    x = torch.randn(6, 5, requires_grad=True)
    tgt = torch.randn(6, 3)
    h = x
    for i, l in enumerate(lins):
        h = l(h)
        if i < 2:
            h = F.gelu(h)
    loss = ((h - tgt) ** 2).mean()
    loss.backward()
    w = Writer()
    w.params(P.items())
    w.add("x", x); w.add("grad.x", x.grad); w.add("target", tgt); w.add("y", h); w.add("loss", loss)
    w.save("mlp.bin")


def fix_sage():
    torch.manual_seed(2)
    P = {}
    # 7 nodes; node 6 isolated (no in-neighbours), node 1 has a duplicate edge from 0
    nbrs = [[1, 2], [0, 0, 3], [1], [2, 4, 5], [3], [3, 4, 0], []]
    rowptr = np.cumsum([0] + [len(a) for a in nbrs]).astype(np.int32)
    col = np.array([c for a in nbrs for c in a], dtype=np.int32)
    l1 = linear("sage0.lin", 8, 6, P)
    ln = layernorm("sage0.ln", 6, P)
    l2 = linear("sage1.lin", 12, 6, P)
    x = torch.randn(7, 4, requires_grad=True)
    R = torch.randn(7, 6)
    h = ln(F.relu(l1(torch.cat([x, sage_mean(x, rowptr, col)], 1))))
    h = F.normalize(torch.tanh(l2(torch.cat([h, sage_mean(h, rowptr, col)], 1))), dim=-1, eps=1e-12)
    loss = (h * R).sum()
    loss.backward()
    w = Writer()
    w.params(P.items())
    w.add("rowptr", rowptr); w.add("col", col); w.add("R", R)
    w.add("x", x); w.add("grad.x", x.grad); w.add("y", h); w.add("loss", loss)
    w.save("sage.bin")


def fix_attn():
    torch.manual_seed(3)
    P = {}
    m = MHA("attn", 8, 2, P)
    x = torch.randn(6, 8, requires_grad=True)
    R = torch.randn(6, 8)
    kv = torch.tensor([1, 1, 0, 1, 1, 1], dtype=torch.bool)
    y = m(x, 0, False, True, kv)
    loss = (y * R).sum()
    loss.backward()
    w = Writer()
    w.params(P.items())
    w.add("key_valid", kv.int()); w.add("R", R)
    w.add("x", x); w.add("grad.x", x.grad); w.add("y", y); w.add("loss", loss)
    w.save("attn.bin")


def fix_seg():
    torch.manual_seed(4)
    P = {}
    b0 = SegBlock("blk0", 8, 2, 16, 4, P)
    b1 = SegBlock("blk1", 8, 2, 16, 4, P)
    x = torch.randn(10, 8, requires_grad=True)
    R = torch.randn(10, 8)
    kv = torch.tensor([1, 1, 1, 0, 1, 1, 1, 1, 1, 1], dtype=torch.bool)
    y = b1(b0(x, False, kv), False, kv)
    loss = (y * R).sum()
    loss.backward()
    w = Writer()
    w.params(P.items())
    w.add("key_valid", kv.int()); w.add("R", R)
    w.add("x", x); w.add("grad.x", x.grad); w.add("y", y); w.add("loss", loss)
    w.save("seg.bin")


def fix_ppo():
    torch.manual_seed(5)
    P = {}
    pi = linear("pi", 6, 4, P)
    x = torch.randn(5, 6, requires_grad=True)
    logits = pi(x)
    lp_all = F.log_softmax(logits, -1)
    actions = torch.tensor([0, 3, 1, 2, 1])
    logp = lp_all.gather(1, actions.unsqueeze(1)).squeeze(1)
    logp_old = (logp + torch.tensor([0.5, -0.4, 0.05, 0.3, -0.02])).detach()
    adv = torch.tensor([1.0, -0.5, 0.8, -1.2, 0.3])
    r = torch.exp(logp - logp_old)
    surr = torch.minimum(r * adv, torch.clamp(r, 0.8, 1.2) * adv)
    ent = -(lp_all.exp() * lp_all).sum(-1)
    loss = -surr.mean() - 0.01 * ent.mean()
    loss.backward()
    w = Writer()
    w.params(P.items())
    w.add("actions", actions.int()); w.add("logp_old", logp_old); w.add("adv", adv)
    w.add("x", x); w.add("grad.x", x.grad); w.add("logp", logp); w.add("entropy", ent); w.add("loss", loss)
    w.save("ppo.bin")


def fix_beta():
    torch.manual_seed(6)
    P = {}
    la = linear("beta.alpha", 5, 2, P)
    lb = linear("beta.beta", 5, 2, P)
    x = torch.randn(4, 5, requires_grad=True)
    a = F.softplus(la(x)) + 1
    b = F.softplus(lb(x)) + 1
    xs = torch.rand(4, 2) * 0.9 + 0.05
    d = torch.distributions.Beta(a, b)
    lp = d.log_prob(xs)
    ent = d.entropy()
    loss = -lp.mean() - 0.01 * ent.mean()
    loss.backward()
    w = Writer()
    w.params(P.items())
    w.add("samples", xs); w.add("alpha", a); w.add("beta", b)
    w.add("x", x); w.add("grad.x", x.grad); w.add("logp", lp); w.add("entropy", ent); w.add("loss", loss)
    w.save("beta.bin")


def sched(step, warm=2, total=6, lo=0.1):
    if step < warm:
        return (step + 1) / warm
    prog = min(1.0, (step - warm) / (total - warm))
    return lo + (1 - lo) * 0.5 * (1 + math.cos(math.pi * prog))


def fix_optim():
    torch.manual_seed(7)
    p0 = torch.randn(20)
    grads = torch.randn(6, 20) * torch.tensor([0.3, 3.0, 0.5, 2.0, 1.0, 0.1]).unsqueeze(1)
    w = Writer()
    w.add("p0", p0); w.add("grads", grads)
    cfgs = {
        "sgd": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01),
        "adam": lambda p: torch.optim.Adam([p], lr=0.05, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.01),
        "adamw": lambda p: torch.optim.AdamW([p], lr=0.05, betas=(0.8, 0.999), eps=1e-8, weight_decay=0.1),
    }
    for name, mk in cfgs.items():
        p = torch.nn.Parameter(p0.clone())
        opt = mk(p)
        sch = torch.optim.lr_scheduler.LambdaLR(opt, sched)
        hist = []
        for k in range(grads.shape[0]):
            p.grad = grads[k].clone()
            torch.nn.utils.clip_grad_norm_([p], 1.5)
            opt.step()
            sch.step()
            hist.append(p.detach().clone())
        w.add(name, torch.stack(hist))
    w.save("optim.bin")


if __name__ == "__main__":
    torch.set_num_threads(1)
    for f in (fix_mlp, fix_sage, fix_attn, fix_seg, fix_ppo, fix_beta, fix_optim):
        f()
    print("fixtures written to", os.path.abspath(OUT))
