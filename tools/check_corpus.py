#!/usr/bin/python3
"""Check the gopt CLI against onnx (the independent reference) on every model in corpus/.

usage: check_corpus.py --gopt PATH [--model NAME] [--corpus DIR] [--all-lines]
                       {shapes|params|flops|roundtrip|batch}

  shapes     every tensor onnx shape inference types fully: same dtype, rank, concrete dims,
             symbolic dims symbolic (and named like the graph input's dim_param when onnx names it so)
  batch      symbolic-batch models with the batch fixed to 3: `gopt info --batch 3` matches onnx
  params     `params` == element count of all initializers
  flops      Conv/ConvTranspose/MatMul/Gemm FLOPs (2 x MACs, + bias adds) within 1% per op type
  roundtrip  `gopt convert` output passes onnx.checker and describes the same graph

Prints one line per failure (model, tensor, what differs), and `N passed, M failed` last; exits
0 only when nothing failed and something was compared (a run that compared nothing exits 1 with
a one-line message). Run with Debian's /usr/bin/python3 (needs the onnx package).
See docs/CORPUS.md for the conventions.
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper, shape_inference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOPT_TIMEOUT = 120  # seconds per gopt invocation
FIX_BATCH = 3  # batch size the `batch` check fixes symbolic batches to
FLOP_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
FLOP_RTOL = 0.01


class Report:
    """Counts checks; prints failures (capped per model unless --all-lines)."""

    def __init__(self, cap):
        self.passed = 0
        self.failed = 0
        self.cap = cap
        self.shown = {}

    def ok(self, n=1):
        self.passed += n

    def fail(self, model, msg):
        self.failed += 1
        k = self.shown.get(model, 0)
        self.shown[model] = k + 1
        if self.cap <= 0 or k < self.cap:
            print(f"FAIL {model}: {msg}", flush=True)
        elif k == self.cap:
            print(f"FAIL {model}: ... further failures of this model not shown (--all-lines)",
                  flush=True)

    def check(self, cond, model, msg):
        if cond:
            self.ok()
        else:
            self.fail(model, msg)
        return cond


# ---------------------------------------------------------------------------------------------
# onnx side
# ---------------------------------------------------------------------------------------------

def dtype_name(elem_type):
    return TensorProto.DataType.Name(elem_type)


def numel(dims):
    n = 1
    for d in dims:
        n *= int(d)
    return n


def load(path):
    return onnx.load(path, load_external_data=False)


def graph_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def input_dim_params(model):
    return {d.dim_param for i in graph_inputs(model) for d in i.type.tensor_type.shape.dim
            if d.HasField("dim_param")}


def has_symbolic_batch(model):
    return any(d.HasField("dim_param") for i in graph_inputs(model)
               for d in i.type.tensor_type.shape.dim[:1])


# ---- shape-tensor folding ----
# onnx 1.12's data propagation does not cover every op the PyTorch exporter uses to compute
# shapes at run time (Div for chunk bounds, Transpose/Cast/Reshape chains for Pad amounts, Range
# over a Gather of Shape, Resize sizes), so its inference stops there and names the dims
# 'unk__N'. fold_shapes() evaluates such small shape subgraphs with numpy, replaces the computed
# tensors by Constant nodes of the same name in a copy of the model, and re-runs onnx shape
# inference, until nothing more folds. onnx still infers every tensor; numpy only supplies the
# values of tiny int/bool/float shape tensors. Independent of gopt.

FOLD_MAX = 4096  # largest tensor (elements) folded


def _onnx_div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        q = np.abs(a) // np.abs(b)
        return (q * np.sign(a) * np.sign(b)).astype(a.dtype)
    return (a / b).astype(a.dtype)


def _axes(node, vals, attrs, pos):
    if len(node.input) > pos and node.input[pos]:
        return [int(v) for v in vals[pos].reshape(-1)]
    return list(attrs.get("axes", []))


def _eval(node, vals, attrs, opset):
    """numpy value of node's outputs from known input values (list), or None."""
    op, x = node.op_type, vals
    if op == "Gather":
        return [np.take(x[0], x[1].astype(np.int64), axis=attrs.get("axis", 0))]
    if op in ("Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater", "Max", "Min", "Pow"):
        a, b = x[0], x[1]
        f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": _onnx_div,
             "Equal": np.equal, "Less": np.less, "Greater": np.greater, "Max": np.maximum,
             "Min": np.minimum, "Pow": np.power}[op]
        r = f(a, b)
        return [r if op in ("Equal", "Less", "Greater") else r.astype(a.dtype)]
    if op in ("Not", "Neg", "Abs", "Floor", "Ceil", "Sqrt", "Identity"):
        f = {"Not": np.logical_not, "Neg": np.negative, "Abs": np.abs, "Floor": np.floor,
             "Ceil": np.ceil, "Sqrt": np.sqrt, "Identity": lambda v: v}[op]
        return [f(x[0]).astype(x[0].dtype)]
    if op == "Cast":
        return [x[0].astype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[attrs["to"]])]
    if op == "Concat":
        return [np.concatenate(x, axis=attrs["axis"])]
    if op == "Unsqueeze":
        r = x[0]
        axes = _axes(node, x, attrs, 1)
        rank = r.ndim + len(axes)
        for a in sorted(a % rank for a in axes):
            r = np.expand_dims(r, a)
        return [r]
    if op == "Squeeze":
        axes = _axes(node, x, attrs, 1)
        return [np.squeeze(x[0], axis=tuple(axes)) if axes else np.squeeze(x[0])]
    if op == "Slice":
        if opset < 10:
            starts, ends = attrs["starts"], attrs["ends"]
            axes = attrs.get("axes", list(range(len(starts))))
            steps = [1] * len(starts)
        else:
            starts, ends = [int(v) for v in x[1]], [int(v) for v in x[2]]
            axes = [int(v) for v in x[3]] if len(x) > 3 and x[3] is not None \
                else list(range(len(starts)))
            steps = [int(v) for v in x[4]] if len(x) > 4 and x[4] is not None \
                else [1] * len(starts)
        sl = [slice(None)] * x[0].ndim
        for st, en, ax, sp in zip(starts, ends, axes, steps):
            n = x[0].shape[ax]
            big = 2 ** 62
            en = None if (sp < 0 and en < -n) else max(min(en, big), -big)
            sl[ax] = slice(st, en, sp)
        return [x[0][tuple(sl)]]
    if op == "ConstantOfShape":
        v = onnx.numpy_helper.to_array(attrs["value"]) if "value" in attrs \
            else np.zeros(1, np.float32)
        return [np.full([int(d) for d in x[0]], v.reshape(-1)[0], dtype=v.dtype)]
    if op == "Reshape":
        shape = [int(d) for d in x[1]]
        if not attrs.get("allowzero", 0):
            shape = [x[0].shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return [x[0].reshape(shape)]
    if op == "Transpose":
        return [np.transpose(x[0], attrs.get("perm"))]
    if op == "Range":
        return [np.arange(x[0], x[1], x[2]).astype(x[0].dtype)]
    if op == "Where":
        return [np.where(x[0], x[1], x[2])]
    if op == "Mod":
        f = np.fmod if attrs.get("fmod", 0) else np.mod
        return [f(x[0], x[1]).astype(x[0].dtype)]
    if op == "ScatterND":  # reduction 'none' (what exporters emit for masked assignment)
        if attrs.get("reduction", b"none") not in (b"none", "none"):
            return None
        r, idx, upd = x[0].copy(), x[1].astype(np.int64), x[2]
        k = idx.shape[-1]
        for i in np.ndindex(idx.shape[:-1]):
            r[tuple(idx[i][:k])] = upd[i]
        return [r]
    if op == "Expand":
        shape = np.broadcast_shapes(x[0].shape, tuple(int(d) for d in x[1]))
        return [np.broadcast_to(x[0], shape).copy()]
    return None


def _const_node(name, value):
    return helper.make_node("Constant", [], [name], name=name + "__folded",
                            value=onnx.numpy_helper.from_array(np.asarray(value), name))


def _infer_raw(model):
    return shape_inference.infer_shapes(model, check_type=False, strict_mode=False,
                                        data_prop=True)


def _types(inf):
    out = {}
    for vi in list(inf.graph.input) + list(inf.graph.value_info) + list(inf.graph.output):
        if not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        dt = dtype_name(tt.elem_type) if tt.elem_type else None
        shape = None
        if tt.HasField("shape"):
            shape = [d.dim_value if d.HasField("dim_value") else
                     (d.dim_param if d.HasField("dim_param") else None) for d in tt.shape.dim]
        out[vi.name] = (dt, shape)
    for t in inf.graph.initializer:
        out[t.name] = (dtype_name(t.data_type), [int(d) for d in t.dims])
    return out


def fold_shapes(model, rounds=40):
    """Copy of model with computable shape subgraphs replaced by Constants (see above);
    returns (inferred model, types)."""
    m = copy.deepcopy(model)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 1)
    for _ in range(rounds):
        inf = _infer_raw(m)
        types = _types(inf)
        known = {}
        for t in m.graph.initializer:
            if t.data_location != TensorProto.EXTERNAL and numel(t.dims) <= FOLD_MAX:
                known[t.name] = onnx.numpy_helper.to_array(t)
        partial = {}  # Shape outputs with some unknown dims: list of int|None
        nodes, changed = [], False
        for node in m.graph.node:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            vals = None
            try:
                if node.op_type == "Constant":
                    if "value" in attrs:
                        vals = [onnx.numpy_helper.to_array(attrs["value"])]
                elif node.op_type == "Shape":
                    s = types.get(node.input[0], (None, None))[1]
                    if s is not None:
                        dims = [d if isinstance(d, int) else None for d in s]
                        st, en = attrs.get("start", 0), attrs.get("end", len(dims))
                        dims = dims[slice(st, en)]
                        if all(d is not None for d in dims):
                            vals = [np.array(dims, dtype=np.int64)]
                        else:
                            partial[node.output[0]] = dims
                elif (node.op_type == "Gather" and node.input[0] in partial
                      and node.input[1] in known):
                    idx = known[node.input[1]].astype(np.int64)
                    dims = partial[node.input[0]]
                    got = [dims[int(i)] for i in idx.reshape(-1)]
                    if all(d is not None for d in got):
                        vals = [np.array(got, dtype=np.int64).reshape(idx.shape)]
                elif all((not i) or i in known for i in node.input) and node.input:
                    vals = _eval(node, [known.get(i) if i else None for i in node.input],
                                 attrs, opset)
            except Exception:  # noqa: BLE001 - anything odd: leave the node to onnx
                vals = None
            if vals is None or any(np.asarray(v).size > FOLD_MAX for v in vals):
                nodes.append(node)
                continue
            for o, v in zip(node.output, vals):
                known[o] = np.asarray(v)
            if node.op_type == "Constant":
                nodes.append(node)
            else:
                nodes.extend(_const_node(o, v) for o, v in zip(node.output, vals))
                changed = True
        if not changed:
            return inf, types
        del m.graph.node[:]
        m.graph.node.extend(nodes)
    inf = _infer_raw(m)
    return inf, _types(inf)


def infer(model):
    """onnx's shapes (after fold_shapes): name -> (dtype name or None, shape or None); a shape is
    a list of ints, strings (dim_param) and None (unknown dim)."""
    return fold_shapes(model)


def fix_batch(model, n):
    """Copy of model with every symbolic dim 0 of the graph inputs set to n, and the graph
    outputs' symbolic dims cleared (left for inference to fill)."""
    m = copy.deepcopy(model)
    for i in graph_inputs(m):
        dims = i.type.tensor_type.shape.dim
        if len(dims) and dims[0].HasField("dim_param"):
            dims[0].dim_value = n  # oneof: clears dim_param
    for o in m.graph.output:
        for d in o.type.tensor_type.shape.dim:
            if d.HasField("dim_param"):
                d.Clear()
    del m.graph.value_info[:]
    return m


def full(shape):
    return shape is not None and all(d is not None for d in shape)


# ---------------------------------------------------------------------------------------------
# gopt side
# ---------------------------------------------------------------------------------------------

class GoptError(Exception):
    pass


def run_gopt(gopt, args):
    try:
        r = subprocess.run([gopt] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=GOPT_TIMEOUT)
    except FileNotFoundError:
        raise GoptError(f"cannot run {gopt}")
    except subprocess.TimeoutExpired:
        raise GoptError(f"`gopt {' '.join(args)}` timed out after {GOPT_TIMEOUT}s")
    if r.returncode != 0:
        err = r.stderr.decode(errors="replace").strip().splitlines()
        raise GoptError(f"`gopt {' '.join(args)}` exited {r.returncode}: "
                        f"{err[-1] if err else '(no stderr)'}")
    return r.stdout.decode(errors="replace")


def gopt_info(gopt, path, batch=None):
    args = ["info", path, "--json", "--tensors"]
    if batch is not None:
        args += ["--batch", str(batch)]
    out = run_gopt(gopt, args)
    try:
        info = json.loads(out)
    except json.JSONDecodeError as e:
        raise GoptError(f"`gopt {' '.join(args)}` printed invalid JSON ({e})")
    if not isinstance(info, dict):
        raise GoptError(f"`gopt {' '.join(args)}` printed JSON that is not an object")
    return info


def gopt_tensors(info):
    """gopt tensors as name -> (dtype, shape); raises GoptError on a malformed list."""
    ts = info.get("tensors")
    if not isinstance(ts, list):
        raise GoptError("JSON has no `tensors` list (is --tensors implemented?)")
    out = {}
    for t in ts:
        if not isinstance(t, dict) or "name" not in t:
            raise GoptError(f"malformed tensors entry {str(t)[:80]}")
        shape = t.get("shape")
        out[t["name"]] = (t.get("dtype"), shape if isinstance(shape, list) else None)
    return out


def fmt(shape):
    return "?" if shape is None else "[" + ",".join(str(d) for d in shape) + "]"


# ---------------------------------------------------------------------------------------------
# checks; each takes (rep, gopt, name, path, model) and reports into rep
# ---------------------------------------------------------------------------------------------

def compare_tensors(rep, name, ref, got, input_params, exact, label=""):
    """Compare onnx's fully-typed tensors with gopt's. exact: every dim onnx knows must be a
    concrete int on both sides (symbolic onnx dims are not compared). Returns #compared."""
    compared = 0
    for tname, (rdt, rshape) in ref.items():
        if rdt is None or not full(rshape):
            continue
        if exact and any(isinstance(d, str) for d in rshape):
            rshape = [None if isinstance(d, str) else d for d in rshape]
        compared += 1
        if tname not in got:
            rep.fail(name, f"tensor '{tname}'{label}: missing in gopt (onnx: {rdt} {fmt(rshape)})")
            continue
        gdt, gshape = got[tname]
        problems = []
        if gdt != rdt:
            problems.append(f"dtype {gdt} != onnx {rdt}")
        if gshape is None:
            problems.append("no shape")
        elif len(gshape) != len(rshape):
            problems.append(f"rank {len(gshape)} != onnx {len(rshape)}")
        else:
            for ax, (r, g) in enumerate(zip(rshape, gshape)):
                if r is None:
                    continue
                if isinstance(r, int):
                    if isinstance(g, bool) or not isinstance(g, int) or g != r:
                        problems.append(f"dim {ax} {g!r} != onnx {r}")
                elif r.startswith("unk__") and r not in input_params:
                    continue  # onnx's name for a dim it could not infer: nothing to compare
                elif not isinstance(g, str):
                    problems.append(f"dim {ax} {g!r} is not symbolic (onnx '{r}')")
                elif r in input_params and g != r:
                    problems.append(f"dim {ax} '{g}' != onnx '{r}'")
        if problems:
            rep.fail(name, f"tensor '{tname}'{label}: gopt {gdt} {fmt(gshape)} vs onnx "
                           f"{rdt} {fmt(rshape)}: " + "; ".join(problems))
        else:
            rep.ok()
    return compared


def check_shapes(rep, gopt, name, path, model):
    _, ref = infer(model)
    got = gopt_tensors(gopt_info(gopt, path))
    n = compare_tensors(rep, name, ref, got, input_dim_params(model), exact=False)
    print(f"{name}: compared {n} tensors", flush=True)


def check_batch(rep, gopt, name, path, model):
    if not has_symbolic_batch(model):
        print(f"{name}: fixed batch, skipped", flush=True)
        return
    _, ref = infer(fix_batch(model, FIX_BATCH))
    got = gopt_tensors(gopt_info(gopt, path, batch=FIX_BATCH))
    n = compare_tensors(rep, name, ref, got, set(), exact=True, label=f" (batch {FIX_BATCH})")
    print(f"{name}: compared {n} tensors with batch {FIX_BATCH}", flush=True)


def check_params(rep, gopt, name, path, model):
    want = sum(numel(t.dims) for t in model.graph.initializer)
    info = gopt_info(gopt, path)
    got = info.get("params")
    rep.check(got == want, name, f"params {got!r} != onnx initializer elements {want}")


def ref_flops(model):
    """Per op type FLOPs of Conv/ConvTranspose/MatMul/Gemm from onnx-inferred shapes.
    Returns (flops by op, list of nodes whose shapes onnx could not infer)."""
    inf, shapes = infer(model)
    flops = {}
    unknown = []

    def shp(t):
        s = shapes.get(t, (None, None))[1]
        return s if full(s) and all(isinstance(d, int) for d in s) else None

    for node in inf.graph.node:
        op = node.op_type
        if op not in FLOP_OPS:
            continue
        ins = [shp(t) if t else None for t in node.input]
        y = shp(node.output[0])
        has_c = len(node.input) > 2 and node.input[2] != ""
        if y is None or ins[0] is None or ins[1] is None:
            unknown.append(f"{op} '{node.name or node.output[0]}'")
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if op == "Conv":
            w = ins[1]  # [Cout, Cin/group, k...]
            f = 2 * numel(y) * w[1] * numel(w[2:])
            f += numel(y) if has_c else 0
        elif op == "ConvTranspose":
            x, w = ins[0], ins[1]  # w: [Cin, Cout/group, k...]; every input pixel scatters
            f = 2 * numel(x) * w[1] * numel(w[2:])
            f += numel(y) if has_c else 0
        elif op == "MatMul":
            f = 2 * numel(y) * ins[0][-1]  # numel(Y) = batch * M * N; K = A's last dim
        else:  # Gemm
            a = ins[0]
            k = a[0] if attrs.get("transA", 0) else a[1]
            f = 2 * numel(y) * k + (numel(y) if has_c else 0)
        flops[op] = flops.get(op, 0) + f
    return flops, unknown


def check_flops(rep, gopt, name, path, model):
    batch = None
    if has_symbolic_batch(model):
        batch = 1
        model = fix_batch(model, 1)
    want, unknown = ref_flops(model)
    for u in unknown:
        rep.fail(name, f"{u}: onnx could not infer its shapes, FLOPs not checkable")
    info = gopt_info(gopt, path, batch=batch)
    by_op = info.get("flops_by_op")
    if not isinstance(by_op, dict):
        rep.fail(name, "JSON has no `flops_by_op` object")
        return
    for op in FLOP_OPS:
        w = want.get(op, 0)
        g = by_op.get(op, 0)
        if not isinstance(g, (int, float)):
            rep.fail(name, f"flops_by_op[{op}] = {g!r} is not a number")
            continue
        if w == 0 and g == 0:
            continue
        err = abs(g - w) / max(w, 1)
        rep.check(err <= FLOP_RTOL, name,
                  f"{op} FLOPs gopt {g} vs reference {w} (rel. error {err:.2%})")
    tag = " (batch 1)" if batch else ""
    print(f"{name}: reference FLOPs{tag} " +
          ", ".join(f"{op} {want[op]}" for op in FLOP_OPS if op in want), flush=True)


def external_data_problems(model):
    """Our own consistency check of external-data references (the onnx checker only tests that
    the file exists). Returns (problems, {location: bytes needed})."""
    problems, need = [], {}
    for t in model.graph.initializer:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        kv = {e.key: e.value for e in t.external_data}
        loc = kv.get("location")
        if not loc:
            problems.append(f"initializer '{t.name}': external data without location")
            continue
        if os.path.isabs(loc) or ".." in loc.replace("\\", "/").split("/"):
            problems.append(f"initializer '{t.name}': location '{loc}' leaves the model folder")
            continue
        try:
            off, length = int(kv.get("offset", 0)), kv.get("length")
            length = None if length is None else int(length)
        except ValueError:
            problems.append(f"initializer '{t.name}': non-numeric offset/length")
            continue
        np_type = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE.get(t.data_type)
        item = np_type.itemsize if np_type is not None and t.data_type != TensorProto.STRING \
            else None
        want = numel(t.dims) * item if item else None
        if length is None:
            length = want or 0
        elif want is not None and length != want:
            problems.append(f"initializer '{t.name}': external length {length} != "
                            f"{numel(t.dims)} elements x {item} bytes")
        need[loc] = max(need.get(loc, 0), off + length)
    return problems, need


def check_roundtrip(rep, gopt, name, path, model):
    tmp = tempfile.mkdtemp(prefix=f"gopt_rt_{name}_")
    try:
        out = os.path.join(tmp, name + ".onnx")
        run_gopt(gopt, ["convert", path, "-o", out])
        if not rep.check(os.path.isfile(out), name, f"gopt convert wrote no {out}"):
            return
        a = gopt_info(gopt, path)
        b = gopt_info(gopt, out)  # before the checker: full_check rewrites the file it checks
        try:
            conv = load(out)
        except Exception as e:  # noqa: BLE001 - any parse failure is a failed check
            rep.fail(name, f"converted model does not parse as ONNX: {e}")
            return
        # onnx.checker on a copy, with zero-filled (sparse) stand-ins for missing data files
        problems, need = external_data_problems(conv)
        for p in problems:
            rep.fail(name, "converted: " + p)
        for loc, size in need.items():
            f = os.path.join(tmp, loc)
            if os.path.exists(f):
                rep.check(os.path.getsize(f) >= size, name,
                          f"converted: data file {loc} has {os.path.getsize(f)} bytes, "
                          f"references need {size}")
            else:
                os.makedirs(os.path.dirname(f), exist_ok=True)
                with open(f, "wb") as fh:
                    fh.truncate(size)
        chk = os.path.join(tmp, "checker_copy.onnx")
        shutil.copyfile(out, chk)
        try:
            onnx.checker.check_model(chk, full_check=True)
            rep.ok()
        except Exception as e:  # noqa: BLE001
            rep.fail(name, f"onnx.checker (full_check) rejects the converted model: "
                           f"{str(e).strip().splitlines()[0][:300]}")
        # onnx-level: same interface and initializers
        sig = lambda m: ([(i.name) for i in graph_inputs(m)], [o.name for o in m.graph.output])
        rep.check(sig(conv) == sig(model), name,
                  f"converted graph inputs/outputs {sig(conv)} != original {sig(model)}")
        inits = lambda m: {t.name: (t.data_type, list(t.dims)) for t in m.graph.initializer}
        ia, ib = inits(model), inits(conv)
        rep.check(ia == ib, name, f"converted initializers differ: only original "
                  f"{sorted(set(ia) - set(ib))[:5]}, only converted {sorted(set(ib) - set(ia))[:5]}"
                  f", changed {[k for k in set(ia) & set(ib) if ia[k] != ib[k]][:5]}")
        # gopt's own view of both must agree
        for key in ("nodes", "params", "ops"):
            rep.check(a.get(key) == b.get(key), name,
                      f"`{key}` original {a.get(key)!r} vs round-tripped {b.get(key)!r}")
        ta, tb = gopt_tensors(a), gopt_tensors(b)
        # Constants that folding left unused are not part of the graph and are not exported:
        # the round trip compares the live tensors (gopt marks the others "live": false).
        dead = {t["name"] for t in a["tensors"] if t.get("live") is False}
        for t in sorted((set(ta) - dead) | set(tb)):
            if t not in tb:
                rep.fail(name, f"tensor '{t}' lost in round trip")
            elif t not in ta:
                rep.fail(name, f"tensor '{t}' appeared in round trip")
            else:
                rep.check(ta[t] == tb[t], name, f"tensor '{t}': original {ta[t][0]} "
                          f"{fmt(ta[t][1])} vs round-tripped {tb[t][0]} {fmt(tb[t][1])}")
        print(f"{name}: round trip compared {len(ta)} tensors", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


CHECKS = {"shapes": check_shapes, "batch": check_batch, "params": check_params,
          "flops": check_flops, "roundtrip": check_roundtrip}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gopt", required=True, help="path to the gopt binary")
    ap.add_argument("--model", help="check only this corpus model (name without .onnx)")
    ap.add_argument("--corpus", default=os.path.join(ROOT, "corpus"), help="corpus folder")
    ap.add_argument("--all-lines", action="store_true",
                    help="print every failure (default: at most 30 per model)")
    ap.add_argument("check", choices=sorted(CHECKS))
    args = ap.parse_args()

    names = sorted(f[:-5] for f in os.listdir(args.corpus) if f.endswith(".onnx"))
    if args.model:
        if args.model not in names:
            print(f"check_corpus: no model '{args.model}' in {args.corpus}", file=sys.stderr)
            return 2
        names = [args.model]
    if not names:
        print(f"check_corpus: no .onnx files in {args.corpus}", file=sys.stderr)
        return 2
    gopt = os.path.abspath(args.gopt) if os.path.exists(args.gopt) else args.gopt
    rep = Report(0 if args.all_lines else 30)
    for name in names:
        path = os.path.join(args.corpus, name + ".onnx")
        try:
            CHECKS[args.check](rep, gopt, name, path, load(path))
        except GoptError as e:
            rep.fail(name, str(e))
    print(f"{rep.passed} passed, {rep.failed} failed")
    if rep.passed + rep.failed == 0:
        print(f"check_corpus: '{args.check}' compared nothing on {len(names)} model(s) in "
              f"{args.corpus}", file=sys.stderr)
        return 1
    return 0 if rep.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
