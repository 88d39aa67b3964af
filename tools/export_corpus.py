#!/usr/bin/python3
"""Export the gopt model corpus: real architectures to ONNX, structure only.

Each model is exported with torch.onnx.export (eval mode, constant folding on) and saved as
corpus/NAME.onnx with every initializer of >= 1 KiB moved to ONNX external data
(location NAME.onnx.data, one file per model). Small tensors (shape constants, scalars) and
Constant-node attributes stay inline. By default the .data files are deleted afterwards, so the
repository only carries graph structure; --with-weights keeps them (random weights, seeded).

Also writes corpus/manifest.json: per model opset, symbolic batch, node count, op counts,
PyTorch parameter count vs ONNX initializer element count.

Run with Debian's interpreter: /usr/bin/python3 tools/export_corpus.py [--with-weights] [--only a,b]
"""
import argparse
import io
import json
import math
import os
import sys
import warnings

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "corpus")
SIZE_THRESHOLD = 1024  # bytes: tensors smaller than this stay inline in the .onnx


# ---------------------------------------------------------------------------------------------
# Custom models (small configs, plain torch ops)
# ---------------------------------------------------------------------------------------------

class LstmSeq2Seq(nn.Module):
    """Embedding + 2-layer LSTM encoder, 1-layer LSTM decoder fed the encoder's final state,
    teacher forcing (decoder input is given), Linear projection to the target vocabulary."""

    def __init__(self, src_vocab=500, tgt_vocab=500, emb=64, hidden=128, enc_layers=2):
        super().__init__()
        self.src_emb = nn.Embedding(src_vocab, emb)
        self.tgt_emb = nn.Embedding(tgt_vocab, emb)
        self.encoder = nn.LSTM(emb, hidden, num_layers=enc_layers, batch_first=True)
        self.decoder = nn.LSTM(emb, hidden, num_layers=1, batch_first=True)
        self.proj = nn.Linear(hidden, tgt_vocab)

    def forward(self, src, tgt_in):
        _, (h, c) = self.encoder(self.src_emb(src))
        dec, _ = self.decoder(self.tgt_emb(tgt_in), (h[-1:], c[-1:]))
        return self.proj(dec)


class MultiHeadAttention(nn.Module):
    """Self-attention written with matmuls (no nn.MultiheadAttention fast path)."""

    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)

    def split(self, x):
        b, s = x.shape[0], x.shape[1]
        return x.reshape(b, s, self.h, self.dk).transpose(1, 2)

    def forward(self, x, bias):
        b, s = x.shape[0], x.shape[1]
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.dk) + bias
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, self.h * self.dk)
        return self.o(y)


class BertLayer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.attn = MultiHeadAttention(d, heads)
        self.ln1 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x, bias):
        x = self.ln1(x + self.attn(x, bias))  # post-LN as in BERT
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class BertTiny(nn.Module):
    """BERT-style encoder: token + learned position + segment embeddings, 4 post-LN layers,
    padding mask from attention_mask, tanh pooler on the first token."""

    def __init__(self, vocab=1000, d=128, heads=4, ffn=512, layers=4, max_pos=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.seg = nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList([BertLayer(d, heads, ffn) for _ in range(layers)])
        self.pool = nn.Linear(d, d)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device)
        x = self.tok(input_ids) + self.pos(pos) + self.seg(torch.zeros_like(input_ids))
        x = self.ln(x)
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pool(x[:, 0]))


class Gpt2Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = MultiHeadAttention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x, bias):
        x = x + self.attn(self.ln1(x), bias)  # pre-LN
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt2Tiny(nn.Module):
    """GPT-2-style decoder: causal mask (masked_fill with -inf), pre-LN blocks, final LN,
    LM head tied to the token embedding."""

    def __init__(self, vocab=1000, d=128, heads=4, layers=3, ctx=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([Gpt2Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.register_buffer("causal", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)))

    def forward(self, input_ids):
        s = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe(torch.arange(s, device=input_ids.device))
        mask = self.causal[:s, :s]
        bias = torch.zeros(s, s, device=input_ids.device).masked_fill(~mask, float("-inf"))
        for blk in self.blocks:
            x = blk(x, bias)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head


class WaveNet(nn.Module):
    """WaveNet-style stack: causal (left-padded) dilated Conv1d, gated tanh*sigmoid units,
    1x1 residual and skip convs, two stacks of dilations 1..64, ReLU/1x1 output head."""

    def __init__(self, res=32, gate=32, skip=64, classes=256, dilations=(1, 2, 4, 8, 16, 32, 64),
                 stacks=2):
        super().__init__()
        self.gate = gate
        self.inp = nn.Conv1d(1, res, 1)
        self.dil = [d for _ in range(stacks) for d in dilations]
        self.filt = nn.ModuleList([nn.Conv1d(res, 2 * gate, 2, dilation=d) for d in self.dil])
        self.res = nn.ModuleList([nn.Conv1d(gate, res, 1) for _ in self.dil])
        self.skip = nn.ModuleList([nn.Conv1d(gate, skip, 1) for _ in self.dil])
        self.out1 = nn.Conv1d(skip, skip, 1)
        self.out2 = nn.Conv1d(skip, classes, 1)

    def forward(self, wav):
        x = self.inp(wav)
        skips = 0
        for d, filt, res, skp in zip(self.dil, self.filt, self.res, self.skip):
            h = filt(F.pad(x, (d, 0)))  # causal: pad left by dilation*(kernel-1)
            a, b = torch.split(h, self.gate, dim=1)
            z = torch.tanh(a) * torch.sigmoid(b)
            skips = skips + skp(z)
            x = x + res(z)
        return self.out2(F.relu(self.out1(F.relu(skips))))


class SegWrapper(nn.Module):
    """torchvision segmentation nets return a dict; export only the 'out' tensor."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


# ---------------------------------------------------------------------------------------------
# Corpus definition
# ---------------------------------------------------------------------------------------------

def img(n=1, hw=224):
    return (torch.randn(n, 3, hw, hw),)


def tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


# name -> (constructor, example inputs, input names, output names, opset, symbolic batch)
MODELS = {
    "resnet18": (tv("resnet18"), lambda: img(2), ["input"], ["logits"], 13, True),
    "mobilenet_v2": (tv("mobilenet_v2"), img, ["input"], ["logits"], 11, False),
    "squeezenet1_1": (tv("squeezenet1_1"), img, ["input"], ["logits"], 9, False),
    "densenet121": (tv("densenet121"), img, ["input"], ["logits"], 13, False),
    "efficientnet_b0": (tv("efficientnet_b0"), img, ["input"], ["logits"], 14, False),
    "inception_v3": (tv("inception_v3", aux_logits=False, init_weights=False),
                     lambda: img(1, 299), ["input"], ["logits"], 13, False),
    "shufflenet_v2_x1_0": (tv("shufflenet_v2_x1_0"), img, ["input"], ["logits"], 12, False),
    "vgg11": (tv("vgg11"), img, ["input"], ["logits"], 11, False),
    "lraspp_mobilenet_v3_large": (
        lambda: SegWrapper(torchvision.models.segmentation.lraspp_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=21)),
        img, ["input"], ["out"], 14, False),
    "lstm_seq2seq": (LstmSeq2Seq,
                     lambda: (torch.randint(0, 500, (2, 12)), torch.randint(0, 500, (2, 10))),
                     ["src", "tgt_in"], ["logits"], 14, True),
    "bert_tiny": (BertTiny,
                  lambda: (torch.randint(0, 1000, (2, 32)), torch.ones(2, 32, dtype=torch.int64)),
                  ["input_ids", "attention_mask"], ["last_hidden", "pooled"], 17, True),
    "gpt2_tiny": (Gpt2Tiny, lambda: (torch.randint(0, 1000, (2, 32)),), ["input_ids"], ["logits"],
                  15, True),
    "wavenet": (WaveNet, lambda: (torch.randn(2, 1, 1024),), ["wav"], ["logits"], 13, True),
    "swin_t": (tv("swin_t"), img, ["input"], ["logits"], 14, False),
}


def numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def decorrelate(model):
    """Give every floating parameter/buffer whose elements are all equal (BatchNorm/LayerNorm
    ones and zeros, zero-initialised biases) small random values. Trained models never have
    such tensors; left alone, the exporter (eval mode) de-duplicates equal-valued initializers
    and e.g. every folded Conv bias of the same width would become one shared initializer."""
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point() and t.numel() > 1 and bool((t == t.flatten()[0]).all()):
                if bool((t > 0).all()):  # scales and running variances stay positive
                    t.copy_(t * (1.0 + 0.1 * torch.rand_like(t)))
                else:
                    t.add_(0.02 * torch.randn_like(t))


def export_one(name, with_weights):
    ctor, inputs_fn, in_names, out_names, opset, symbolic = MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    torch.manual_seed(1)
    decorrelate(model)
    inputs = inputs_fn()
    torch_numel = sum(p.numel() for p in model.parameters())
    dyn = {n: {0: "batch"} for n in in_names + out_names} if symbolic else None
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, buf, opset_version=opset, input_names=in_names,
                          output_names=out_names, dynamic_axes=dyn, do_constant_folding=True,
                          training=torch.onnx.TrainingMode.EVAL)
    proto = onnx.load_from_string(buf.getvalue())
    proto.graph.name = name
    if not symbolic:
        # the exporter names a fixed output dim it could not trace (swin_t's logits get
        # 'Gemmlogits_dim_0'): a fixed-batch model declares its outputs' real sizes
        with torch.no_grad():
            outs = model(*inputs)
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        for o, t in zip(proto.graph.output, outs):
            for d, v in zip(o.type.tensor_type.shape.dim, t.shape):
                if d.HasField("dim_param"):
                    d.dim_value = int(v)
    for node in proto.graph.node:
        node.doc_string = ""
    onnx.checker.check_model(proto)
    init_numel = sum(numel(t.dims) for t in proto.graph.initializer)
    path = os.path.join(CORPUS, name + ".onnx")
    data_name = name + ".onnx.data"
    data_path = os.path.join(CORPUS, data_name)
    if os.path.exists(data_path):
        os.remove(data_path)  # onnx appends to an existing data file
    onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data_name, size_threshold=SIZE_THRESHOLD, convert_attribute=False)
    data_bytes = os.path.getsize(data_path) if os.path.exists(data_path) else 0
    if not with_weights and os.path.exists(data_path):
        os.remove(data_path)
    ops = {}
    for node in proto.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    bn_affine = sum(m.weight.numel() + m.bias.numel() for m in model.modules()
                    if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.affine)
    ext = sum(1 for t in proto.graph.initializer
              if t.data_location == onnx.TensorProto.EXTERNAL or len(t.raw_data) >= SIZE_THRESHOLD)
    entry = {
        "opset": opset,
        "symbolic_batch": symbolic,
        "inputs": {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                   for i in proto.graph.input},
        "outputs": {o.name: [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]
                    for o in proto.graph.output},
        "nodes": len(proto.graph.node),
        "initializers": len(proto.graph.initializer),
        "external_initializers": ext,
        "torch_numel": torch_numel,
        "onnx_init_numel": init_numel,
        "numel_diff": init_numel - torch_numel,
        "torch_bn_affine_numel": bn_affine,
        "onnx_bytes": os.path.getsize(path),
        "data_bytes": data_bytes,
        "ops": dict(sorted(ops.items())),
    }
    print(f"{name:28s} opset {opset:2d} {'batch' if symbolic else 'fixed':5s} "
          f"nodes {entry['nodes']:4d} onnx {entry['onnx_bytes']:8d} B data {data_bytes:10d} B "
          f"torch {torch_numel:9d} onnx {init_numel:9d} diff {init_numel - torch_numel:+d}",
          flush=True)
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--with-weights", action="store_true",
                    help="keep corpus/NAME.onnx.data (random seeded weights) next to each model")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    for n in names:
        if n not in MODELS:
            sys.exit(f"export_corpus: unknown model '{n}' (known: {', '.join(MODELS)})")
    os.makedirs(CORPUS, exist_ok=True)
    torch.set_num_threads(2)
    man_path = os.path.join(CORPUS, "manifest.json")
    manifest = {}
    if os.path.exists(man_path) and args.only:
        with open(man_path) as f:
            manifest = json.load(f)
    for n in names:
        manifest[n] = export_one(n, args.with_weights)
    manifest = {k: manifest[k] for k in MODELS if k in manifest}
    tmp = man_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, man_path)
    total = sum(os.path.getsize(os.path.join(CORPUS, k + ".onnx")) for k in manifest)
    print(f"{len(manifest)} models, {total} bytes of .onnx in corpus/")


if __name__ == "__main__":
    main()
