"""onnx_torch.py: a small ONNX interpreter on PyTorch for tools/gpu_profile.py: runs an ONNX
graph node by node with PyTorch's operators (so each ONNX node launches the kernels PyTorch has
for it), initializers as trainable parameters (a training step works), weights missing from the
file (external data not present) random. It covers the ops of typical CNN and transformer exports;
another op raises NotImplementedError naming it."""
import onnx
import torch
from onnx import numpy_helper

F = torch.nn.functional
DT = {1: torch.float32, 6: torch.int32, 7: torch.int64, 9: torch.bool, 10: torch.float16, 11: torch.float64,
      16: torch.bfloat16}


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _tensor(init):
    if init.data_location == onnx.TensorProto.EXTERNAL or (not init.raw_data and not any(
            [init.float_data, init.int64_data, init.int32_data, init.double_data])) and list(init.dims):
        dims = list(init.dims)
        if DT.get(init.data_type, torch.float32).is_floating_point:
            return torch.randn(dims) * 0.05
        return torch.zeros(dims, dtype=DT.get(init.data_type, torch.int64))
    return torch.from_numpy(numpy_helper.to_array(init).copy())


def _ints(x):
    return [int(v) for v in x.flatten().tolist()]


def _pads2d(a, nd):
    p = a.get("pads", [0] * (2 * nd))
    return p[:nd], p[nd:]


def _conv(x, w, b=None, a=None):
    nd = w.dim() - 2
    beg, end = _pads2d(a, nd)
    if beg != end:
        x = F.pad(x, [v for i in reversed(range(nd)) for v in (beg[i], end[i])])
        beg = [0] * nd
    f = [F.conv1d, F.conv2d, F.conv3d][nd - 1]
    return f(x, w, b, a.get("strides", [1] * nd), beg, a.get("dilations", [1] * nd), a.get("group", 1))


def _pool(x, a, kind):
    k = a["kernel_shape"]
    nd = len(k)
    beg, end = _pads2d(a, nd)
    if beg != end:
        x = F.pad(x, [v for i in reversed(range(nd)) for v in (beg[i], end[i])],
                  value=float("-inf") if kind == "max" else 0.0)
        beg = [0] * nd
    s = a.get("strides", [1] * nd)
    if kind == "max":
        return F.max_pool2d(x, k, s, beg, ceil_mode=bool(a.get("ceil_mode", 0)))
    return F.avg_pool2d(x, k, s, beg, ceil_mode=bool(a.get("ceil_mode", 0)),
                        count_include_pad=bool(a.get("count_include_pad", 0)))


def _slice(x, starts, ends, axes=None, steps=None):
    axes = _ints(axes) if axes is not None else list(range(len(starts)))
    steps = _ints(steps) if steps is not None else [1] * len(axes)
    idx = [slice(None)] * x.dim()
    for s, e, ax, st in zip(_ints(starts), _ints(ends), axes, steps):
        n = x.shape[ax]
        s = max(min(s + n if s < 0 else s, n), 0)
        e = max(min(e + n if e < 0 else e, n), 0)
        idx[ax] = slice(s, e, st)
    return x[tuple(idx)]


def _reshape(x, shape):
    s = _ints(shape)
    s = [x.shape[i] if v == 0 else v for i, v in enumerate(s)]
    return x.reshape(s)


def _split(x, a, split=None):
    ax = a.get("axis", 0)
    sizes = _ints(split) if split is not None else a.get("split")
    return torch.split(x, sizes, ax) if sizes else torch.chunk(x, a.get("num_outputs", 2), ax)


def _reduce(x, a, axes_in, fn):
    axes = _ints(axes_in) if axes_in is not None else a.get("axes")
    keep = bool(a.get("keepdims", 1))
    return fn(x, dim=axes, keepdim=keep) if axes else fn(x)


OPS = {
    "Conv": lambda a, x, w, b=None: _conv(x, w, b, a),
    "Gemm": lambda a, x, w, b=None: F.linear(x.t() if a.get("transA") else x, w if a.get("transB") else w.t(), b),
    "MatMul": lambda a, x, y: x @ y,
    "Add": lambda a, x, y: x + y, "Sub": lambda a, x, y: x - y, "Mul": lambda a, x, y: x * y,
    "Div": lambda a, x, y: x / y if x.is_floating_point() else torch.div(x, y, rounding_mode="floor"),
    "Pow": lambda a, x, y: torch.pow(x, y), "Sqrt": lambda a, x: torch.sqrt(x), "Exp": lambda a, x: torch.exp(x),
    "Relu": lambda a, x: torch.relu(x), "Sigmoid": lambda a, x: torch.sigmoid(x), "Tanh": lambda a, x: torch.tanh(x),
    "Erf": lambda a, x: torch.erf(x), "Neg": lambda a, x: -x, "Not": lambda a, x: ~x,
    "LeakyRelu": lambda a, x: F.leaky_relu(x, a.get("alpha", 0.01)),
    "Clip": lambda a, x, lo=None, hi=None: torch.clamp(x, None if lo is None else float(lo), None if hi is None else float(hi)),
    "HardSwish": lambda a, x: F.hardswish(x), "HardSigmoid": lambda a, x: F.hardsigmoid(x),
    "Gelu": lambda a, x: F.gelu(x, approximate=a.get("approximate", b"none").decode() if isinstance(a.get("approximate"), bytes) else "none"),
    "Softmax": lambda a, x: torch.softmax(x, a.get("axis", -1)),
    "Transpose": lambda a, x: x.permute(a.get("perm", list(reversed(range(x.dim()))))),
    "Reshape": lambda a, x, s: _reshape(x, s),
    "Flatten": lambda a, x: x.reshape(int(torch.tensor(x.shape[:a.get("axis", 1)]).prod()), -1),
    "Concat": lambda a, *xs: torch.cat(xs, a["axis"]),
    "Slice": lambda a, x, s, e, ax=None, st=None: _slice(x, s, e, ax, st),
    "Split": lambda a, x, s=None: _split(x, a, s),
    "Gather": lambda a, x, i: torch.index_select(x, a.get("axis", 0), i.flatten().long()).reshape(
        list(x.shape[:a.get("axis", 0) % x.dim()]) + list(i.shape) + list(x.shape[a.get("axis", 0) % x.dim() + 1:])),
    "Squeeze": lambda a, x, ax=None: x.squeeze(tuple(_ints(ax)) if ax is not None else tuple(a.get("axes", []))) if (ax is not None or a.get("axes")) else x.squeeze(),
    "Unsqueeze": lambda a, x, ax=None: _unsqueeze(x, _ints(ax) if ax is not None else a["axes"]),
    "Shape": lambda a, x: torch.tensor(list(x.shape), dtype=torch.int64, device=x.device),
    "ConstantOfShape": lambda a, s: torch.full(_ints(s), float(numpy_helper.to_array(a["value"]).flatten()[0]) if "value" in a else 0.0,
                                               device=s.device),
    "Cast": lambda a, x: x.to(DT.get(a["to"], torch.float32)),
    "MaxPool": lambda a, x: _pool(x, a, "max"), "AveragePool": lambda a, x: _pool(x, a, "avg"),
    "GlobalAveragePool": lambda a, x: x.mean(tuple(range(2, x.dim())), keepdim=True),
    "BatchNormalization": lambda a, x, s, b, m, v: F.batch_norm(x, m, v, s, b, False, 0.0, a.get("epsilon", 1e-5)),
    "LayerNormalization": lambda a, x, s, b=None: F.layer_norm(x, x.shape[a.get("axis", -1):], s, b, a.get("epsilon", 1e-5)),
    "ReduceMean": lambda a, x, ax=None: _reduce(x, a, ax, torch.mean),
    "ReduceSum": lambda a, x, ax=None: _reduce(x, a, ax, torch.sum),
    "Pad": lambda a, x, p, v=None: F.pad(x, [q for i in reversed(range(x.dim())) for q in (_ints(p)[i], _ints(p)[i + x.dim()])],
                                         value=float(v) if v is not None else 0.0),
    "Expand": lambda a, x, s: x * torch.ones(_ints(s), dtype=x.dtype, device=x.device),
    "Where": lambda a, c, x, y: torch.where(c, x, y), "Equal": lambda a, x, y: x == y,
    "Range": lambda a, s, e, d: torch.arange(s.item(), e.item(), d.item(), device=s.device),
    "Identity": lambda a, x: x, "Dropout": lambda a, x, *r: x,
    "Resize": lambda a, x, roi=None, sc=None, sz=None: F.interpolate(
        x, size=_ints(sz)[2:] if sz is not None and sz.numel() else None,
        scale_factor=[float(v) for v in sc.tolist()[2:]] if sz is None or not sz.numel() else None,
        mode="nearest" if a.get("mode", b"nearest") in (b"nearest", "nearest") else "bilinear"),
}


def _unsqueeze(x, axes):
    for ax in sorted(v % (x.dim() + len(axes)) for v in axes):
        x = x.unsqueeze(ax)
    return x


# Inputs that ops read as Python integers (shapes, axes, sizes): given the CPU copy of an integer
# constant, so a forward makes no device-to-host copy and can be captured in a CUDA graph.
HOST_ARGS = {"Reshape": (1,), "Slice": (1, 2, 3, 4), "Split": (1,), "Squeeze": (1,), "Unsqueeze": (1,),
             "Pad": (1, 2), "Expand": (1,), "ConstantOfShape": (0,), "Resize": (1, 2, 3),
             "ReduceMean": (1,), "ReduceSum": (1,), "Range": (0, 1, 2)}


class OnnxModule(torch.nn.Module):
    """The ONNX model at path as a module; inputs in graph-input order; outputs a tuple. Constants
    (initializers and Constant nodes) are parameters (floats) or buffers, so .to(device) moves
    them; integer constants also keep a CPU copy (self.host) for the arguments of HOST_ARGS."""

    def __init__(self, path, fold=False):
        super().__init__()
        m = onnx.load(path, load_external_data=False)
        self.g = m.graph
        self.params = torch.nn.ParameterDict()
        self.consts = {}
        self.host = {}
        consts = [(i.name, _tensor(i)) for i in self.g.initializer]
        consts += [(n.output[0], torch.from_numpy(numpy_helper.to_array(_attrs(n)["value"]).copy()))
                   for n in self.g.node if n.op_type == "Constant"]
        self.folded = set()
        if fold:
            consts += self._fold(dict(consts))
        for i, (name, t) in enumerate(consts):
            if t.is_floating_point():
                self.params[str(i)] = torch.nn.Parameter(t)
                self.consts[name] = ("p", str(i))
            else:
                self.register_buffer("c%d" % i, t)
                self.consts[name] = ("b", "c%d" % i)
                self.host[name] = t.clone()
        init_names = {i.name for i in self.g.initializer}
        self.inputs = [i.name for i in self.g.input if i.name not in init_names]
        for n in self.g.node:
            if n.op_type not in OPS and n.op_type != "Constant":
                raise NotImplementedError("%s: ONNX op %s is not covered by tools/onnx_torch.py" % (path, n.op_type))

    def _fold(self, vals):
        """Constant folding, as inference runtimes do before running a model (ONNX Runtime's and
        TensorRT's graph optimisation): every node whose inputs are all constants is evaluated once
        here, on the CPU, and becomes a constant; returns the new (name, tensor) pairs and marks the
        nodes in self.folded. Off by default: a training step must keep its weights as parameters."""
        new = []
        with torch.no_grad():
            for k, n in enumerate(self.g.node):
                if n.op_type == "Constant" or n.op_type not in OPS or not all(i in vals for i in n.input if i):
                    continue
                out = OPS[n.op_type](_attrs(n), *[vals[i] if i else None for i in n.input])
                for name, v in zip(n.output, out if isinstance(out, (tuple, list)) else (out,)):
                    vals[name] = v.contiguous()
                    new.append((name, vals[name]))
                self.folded.add(k)
        return new

    def forward(self, *xs):
        env = {}
        for k, (kind, key) in self.consts.items():
            env[k] = self.params[key] if kind == "p" else getattr(self, key)
        env.update(zip(self.inputs, xs))
        hosted = dict(self.host)  # integer values known on the CPU: constants, shapes, their arithmetic
        for k, n in enumerate(self.g.node):
            if n.op_type == "Constant" or k in self.folded:
                continue
            a = _attrs(n)
            if n.op_type == "Shape":
                outs = (torch.tensor(list(env[n.input[0]].shape), dtype=torch.int64),)
            elif all(i in hosted for i in n.input if i) and any(n.input):
                out = OPS[n.op_type](a, *[hosted[i] if i else None for i in n.input])
                outs = out if isinstance(out, (tuple, list)) else (out,)
            else:
                want = HOST_ARGS.get(n.op_type, ())
                args = [(hosted[i] if k in want and i in hosted else env[i]) if i else None
                        for k, i in enumerate(n.input)]
                while args and args[-1] is None:
                    args.pop()
                out = OPS[n.op_type](a, *args)
                outs = out if isinstance(out, (tuple, list)) else (out,)
            for name, v in zip(n.output, outs):
                if v.device.type == "cpu" and not v.is_floating_point():
                    hosted[name] = v
                env[name] = v
        return tuple(env[o.name] for o in self.g.output)


def example_inputs(path, batch):
    """Random inputs for the graph inputs; the leading dim (symbolic or 1) becomes batch."""
    m = onnx.load(path, load_external_data=False)
    init_names = {i.name for i in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in init_names:
            continue
        tt = i.type.tensor_type
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in tt.shape.dim]
        if dims:
            dims[0] = batch
        dt = DT.get(tt.elem_type, torch.float32)
        out.append(torch.randn(dims).to(dt) if dt.is_floating_point else torch.randint(0, 2, dims, dtype=dt))
    return tuple(out)
