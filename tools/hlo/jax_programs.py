"""jax_programs.py OUTDIR: small JAX programs, each compiled and run once on the default device with
XLA dumping every module it compiles as HLO text, for the importer's tests on today's XLA
(tests/hlo/data/xla-2026b/README.md says what was kept). Each program exercises constructs the two
modules of ../shared/hlo/xla-2026/ lack: convolutions of every kind and their gradients
(feature and batch groups), reduce-window and select-and-scatter, while loops from lax.scan and
fori_loop, conditionals, sort and top-k, scatter and gather, dynamic-update-slice into a cache,
bf16/f16/int8 arithmetic, random bits, cuSOLVER and FFT custom-calls and fft instructions,
rematerialisation barriers, sharding annotations, a GPT-2-style training step.

Needs JAX with a GPU (the device machine; not CI). Writes OUTDIR/dump/ (XLA's files) and
OUTDIR/programs.json: per program its status, the error if it failed, and the median time of one
compiled call (20 calls after one warm-up). One program failing does not stop the others."""
import json
import os
import statistics
import sys
import time
import traceback

OUT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "jax_out")
os.makedirs(os.path.join(OUT, "dump"), exist_ok=True)
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={OUT}/dump"
                           " --xla_dump_hlo_as_text").strip()
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg  # noqa: E402,F401
from jax import lax  # noqa: E402

KEY = jax.random.PRNGKey(0)


def rnd(shape, i, dtype=jnp.float32):
    return jax.random.normal(jax.random.fold_in(KEY, i), shape, jnp.float32).astype(dtype)


def sgd(params, grads, lr=1e-2):
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)


# ---- 1. CNN training step: dense, depthwise, grouped, strided, dilated convs; pools ----
def cnn_setup():
    p = {"c1": rnd((3, 3, 3, 32), 1), "dw": rnd((3, 3, 1, 32), 2), "g4": rnd((3, 3, 8, 64), 3),
         "dil": rnd((3, 3, 64, 64), 4), "fc": rnd((64, 10), 5)}
    x, y = rnd((16, 32, 32, 3), 6), jax.nn.one_hot(jnp.arange(16) % 10, 10)
    return (p, x, y)


def cnn_train_step(p, x, y):
    dn = ("NHWC", "HWIO", "NHWC")

    def loss(p):
        h = jax.nn.relu(lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dn))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = lax.conv_general_dilated(h, p["dw"], (1, 1), "SAME", dimension_numbers=dn,
                                     feature_group_count=32)
        h = jax.nn.relu(lax.conv_general_dilated(h, p["g4"], (2, 2), ((1, 1), (1, 1)),
                                                 dimension_numbers=dn, feature_group_count=4))
        h = jax.nn.relu(lax.conv_general_dilated(h, p["dil"], (1, 1), "SAME", rhs_dilation=(2, 2),
                                                 dimension_numbers=dn))
        h = lax.reduce_window(h, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0
        logits = h.mean(axis=(1, 2)) @ p["fc"]
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), -1))

    l, g = jax.value_and_grad(loss)(p)
    return l, sgd(p, g)


# ---- 2. LSTM over lax.scan, trained (while loops, dynamic slices) ----
def lstm_setup():
    p = {"wx": rnd((64, 512), 11), "wh": rnd((128, 512), 12), "b": jnp.zeros(512), "wo": rnd((128, 1), 13)}
    return (p, rnd((16, 8, 64), 14), rnd((8, 1), 15))


def lstm_train_step(p, xs, y):
    def loss(p):
        def cell(c_h, x):
            c, h = c_h
            z = x @ p["wx"] + h @ p["wh"] + p["b"]
            i, f, g, o = jnp.split(z, 4, -1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (c, h), h
        (c, h), _ = lax.scan(cell, (jnp.zeros((8, 128)), jnp.zeros((8, 128))), xs)
        return jnp.mean((h @ p["wo"] - y) ** 2)

    l, g = jax.value_and_grad(loss)(p)
    return l, sgd(p, g)


# ---- 3. GPT-2-style training step with Adam (embedding gather/scatter, causal attention) ----
V, D, H, L, T, B = 1024, 256, 4, 4, 128, 4


def gpt2_setup():
    p = {"wte": rnd((V, D), 21) * 0.02, "wpe": rnd((T, D), 22) * 0.01, "blocks": []}
    for i in range(L):
        p["blocks"].append({"ln1": jnp.ones(D), "ln1b": jnp.zeros(D), "qkv": rnd((D, 3 * D), 30 + i) * 0.02,
                            "proj": rnd((D, D), 40 + i) * 0.02, "ln2": jnp.ones(D), "ln2b": jnp.zeros(D),
                            "fc": rnd((D, 4 * D), 50 + i) * 0.02, "fc2": rnd((4 * D, D), 60 + i) * 0.02})
    p["lnf"], p["lnfb"] = jnp.ones(D), jnp.zeros(D)
    tok = jax.random.randint(jax.random.fold_in(KEY, 70), (B, T + 1), 0, V)
    m = jax.tree_util.tree_map(jnp.zeros_like, p)
    return (p, m, m, tok)


def _ln(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + 1e-5) * g + b


def gpt2_loss(p, tok):
    x = p["wte"][tok[:, :-1]] + p["wpe"][None]
    mask = jnp.tril(jnp.ones((T, T), bool))
    for blk in p["blocks"]:
        h = _ln(x, blk["ln1"], blk["ln1b"]) @ blk["qkv"]
        q, k, v = [a.reshape(B, T, H, D // H).transpose(0, 2, 1, 3) for a in jnp.split(h, 3, -1)]
        att = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(D // H), -1e9)
        y = (jax.nn.softmax(att, -1) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
        x = x + y @ blk["proj"]
        x = x + jax.nn.gelu(_ln(x, blk["ln2"], blk["ln2b"]) @ blk["fc"], approximate=True) @ blk["fc2"]
    logits = _ln(x, p["lnf"], p["lnfb"]) @ p["wte"].T
    lp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(lp, tok[:, 1:, None], -1))


def gpt2_train_step(p, m, v, tok):
    l, g = jax.value_and_grad(gpt2_loss)(p, tok)
    m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
    v = jax.tree_util.tree_map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
    p = jax.tree_util.tree_map(lambda a, b, c: a - 3e-4 * b / (jnp.sqrt(c) + 1e-8), p, m, v)
    return l, p, m, v


# ---- 4. control flow, sort, top-k, cumulative ops ----
def control_setup():
    return (rnd((4096,), 80), jnp.int32(1))


def control_flow(x, k):
    def newton(s):
        y, it = s
        return (0.5 * (y + 2.0 / y), it + 1)
    r, iters = lax.while_loop(lambda s: (jnp.abs(s[0] * s[0] - 2.0) > 1e-6) & (s[1] < 50), newton,
                                 (jnp.float32(1.0), jnp.int32(0)))
    y = lax.cond(x.sum() > 0, lambda z: jnp.sin(z), lambda z: jnp.cos(z) * 2.0, x)
    y = lax.switch(k, [lambda z: z + 1.0, lambda z: z * z, lambda z: jnp.exp(-z)], y)
    y = lax.fori_loop(0, 5, lambda i, z: z * 0.9 + i, y)
    s = jnp.sort(y)
    tv, ti = lax.top_k(y, 16)
    order = jnp.argsort(-y)
    return s[:8] * r, tv, ti, order[:8], jnp.cumsum(y)[-4:], jnp.argmax(y), iters


# ---- 5. scatter and gather in their general forms ----
def scatter_setup():
    return (rnd((512, 64), 90), jax.random.randint(jax.random.fold_in(KEY, 91), (256,), 0, 512), rnd((256, 64), 92))


def scatter_gather(table, idx, upd):
    a = table.at[idx].add(upd)
    b = table.at[idx].set(upd)
    c = table.at[idx, 3].max(upd[:, 0])
    g = table[idx[:, None], jnp.arange(8)[None, :]]
    t = jnp.take_along_axis(table, jnp.argsort(table, axis=1)[:, :4], axis=1)
    seg = jax.ops.segment_sum(upd, idx % 32, num_segments=32)
    return a.sum(0), b[:4], c[:4], g.sum(), t, seg


# ---- 6. decoding with a bf16 KV cache updated in place ----
def decode_setup():
    return (jnp.zeros((2, 8, 256, 64), jnp.bfloat16), jnp.zeros((2, 8, 256, 64), jnp.bfloat16),
            rnd((2, 512), 100, jnp.bfloat16), rnd((512, 3 * 512), 101, jnp.bfloat16))


def kv_decode(kc, vc, x, w):
    def step(t, s):
        kc, vc, x = s
        q, k, v = jnp.split(x @ w, 3, -1)
        q, k, v = (a.reshape(2, 8, 1, 64) for a in (q, k, v))
        kc = lax.dynamic_update_slice(kc, k, (0, 0, t, 0))
        vc = lax.dynamic_update_slice(vc, v, (0, 0, t, 0))
        att = jnp.einsum("bhqd,bhkd->bhqk", q, kc, preferred_element_type=jnp.float32)
        att = jnp.where(jnp.arange(256)[None, None, None] <= t, att, -1e30)
        y = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(att, -1).astype(jnp.bfloat16), vc)
        return kc, vc, y.reshape(2, 512)
    return lax.fori_loop(0, 16, step, (kc, vc, x))


# ---- 7. mixed precision and integer arithmetic ----
def precision_setup():
    return (rnd((256, 512), 110), rnd((512, 256), 111),
            jax.random.randint(jax.random.fold_in(KEY, 112), (128, 256), -100, 100).astype(jnp.int8))


def mixed_precision(a, b, q):
    bf = lax.dot(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=jnp.float32)
    hf = (a.astype(jnp.float16) @ b.astype(jnp.float16)).astype(jnp.float32)
    iq = lax.dot(q, q.T, preferred_element_type=jnp.int32)
    bits = lax.bitcast_convert_type(a, jnp.int32)
    pc = lax.population_count(bits) + (bits >> 3) - (bits << 1) % 7
    rp = lax.reduce_precision(a, exponent_bits=5, mantissa_bits=10)
    el = (jnp.arctan2(a, b.T[:256, :512] + 1.0) + lax.erf(a) + jnp.expm1(a * 0.1) + jnp.log1p(jnp.abs(a))
          + jnp.round(a) + jnp.sign(a) + jnp.clip(a, -1, 1) + jnp.where(jnp.isfinite(a), a, 0.0))
    pad = lax.pad(a, 0.0, ((1, 2, 0), (0, 0, 1)))
    return bf.sum(), hf.sum(), iq.sum(), pc.sum(), rp.sum(), el.sum(), lax.rev(pad, (0,)).sum(), lax.iota(jnp.int32, 8)


# ---- 8. random bits, linear algebra (cuSOLVER custom-calls), FFTs ----
def linalg_setup():
    a = rnd((64, 64), 120)
    return (a @ a.T + 64 * jnp.eye(64), rnd((64, 8), 121), jax.random.PRNGKey(7), rnd((4, 256), 122))


def rng_linalg_fft(spd, b, key, sig):
    k1, k2 = jax.random.split(key)
    noise = jax.random.normal(k1, (64, 8)) + jax.random.uniform(k2, (64, 8)) + jax.random.bernoulli(k2, 0.3, (64, 8))
    bits = lax.rng_bit_generator(jnp.zeros(4, jnp.uint32), (16, 16), dtype=jnp.uint32)[1]
    chol = jnp.linalg.cholesky(spd)
    x = jax.scipy.linalg.cho_solve((chol, True), b + noise)
    qr = jnp.linalg.qr(spd)[0]
    w = jnp.linalg.eigh(spd)[0]
    tri = lax.linalg.triangular_solve(chol, b, left_side=True, lower=True)
    f = jnp.fft.rfft(sig)
    g = jnp.fft.ifft(jnp.fft.fft(sig.astype(jnp.complex64)))
    return x, qr.sum(), w, tri, jnp.abs(f).sum(), jnp.real(g).sum(), bits.sum()


# ---- 9. convolution forms: transposed, 1-D, 3-D, asymmetric padding, with gradients ----
def convs_setup():
    return ({"t": rnd((4, 4, 32, 16), 130), "c1": rnd((5, 8, 16), 131), "c3": rnd((3, 3, 3, 4, 8), 132)},
            rnd((2, 16, 16, 32), 133), rnd((2, 64, 8), 134), rnd((2, 8, 8, 8, 4), 135))


def conv_forms(p, x, s, v):
    def loss(p):
        up = lax.conv_transpose(x, p["t"], (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        c1 = lax.conv_general_dilated(s, p["c1"], (2,), ((2, 1),), lhs_dilation=(1,), rhs_dilation=(2,),
                                      dimension_numbers=("NWC", "WIO", "NWC"))
        c3 = lax.conv_general_dilated(v, p["c3"], (1, 1, 1), "SAME", dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
        return jnp.mean(up ** 2) + jnp.mean(jnp.tanh(c1)) + jnp.mean(jax.nn.relu(c3))
    return jax.value_and_grad(loss)(p)


# ---- 10. sharding annotations on a one-device mesh, rematerialisation, custom VJP, vmap ----
def misc_setup():
    return (rnd((64, 128), 140), rnd((128, 128), 141), rnd((8, 32), 142))


@jax.custom_vjp
def clipped_identity(x):
    return x


clipped_identity.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


def sharded_remat(x, w, rows):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(jax.devices()[:1], ("d",))

    @jax.checkpoint
    def layer(h):
        return jnp.tanh(h @ w)

    def loss(x):
        h = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P("d", None)))
        h = layer(layer(clipped_identity(h)))
        return jnp.sum(h ** 2)

    g = jax.grad(loss)(x)
    windows = jax.vmap(lambda r, i: lax.dynamic_slice(r, (i,), (8,)))(rows, jnp.arange(8) * 2)
    return g, windows


PROGRAMS = [("cnn_train_step", cnn_train_step, cnn_setup), ("lstm_train_step", lstm_train_step, lstm_setup),
            ("gpt2_train_step", gpt2_train_step, gpt2_setup), ("control_flow", control_flow, control_setup),
            ("scatter_gather", scatter_gather, scatter_setup), ("kv_decode", kv_decode, decode_setup),
            ("mixed_precision", mixed_precision, precision_setup),
            ("rng_linalg_fft", rng_linalg_fft, linalg_setup), ("conv_forms", conv_forms, convs_setup),
            ("sharded_remat", sharded_remat, misc_setup)]


def main():
    info = {"jax": jax.__version__, "device": str(jax.devices()[0]), "programs": {}}
    for name, fn, setup in PROGRAMS:
        try:
            args = setup()
            f = jax.jit(fn)
            jax.block_until_ready(f(*args))
            ts = []
            for _ in range(20):
                t0 = time.perf_counter()
                jax.block_until_ready(f(*args))
                ts.append(time.perf_counter() - t0)
            info["programs"][name] = {"status": "ok", "median_ms": 1e3 * statistics.median(ts)}
        except Exception as e:  # noqa: BLE001 - recorded, the next program runs
            info["programs"][name] = {"status": "failed", "error": f"{type(e).__name__}: {e}"[:2000],
                                      "trace": traceback.format_exc()[-3000:]}
        print(name, info["programs"][name].get("status"), info["programs"][name].get("median_ms",
              info["programs"][name].get("error", "")[:300]), flush=True)
    with open(os.path.join(OUT, "programs.json"), "w") as f:
        json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
