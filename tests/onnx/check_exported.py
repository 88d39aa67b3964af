#!/usr/bin/python3
"""check_exported.py DIR: checks the models gopt exported into DIR (test_onnx_roundtrip --export)
with onnx itself: onnx.checker.check_model passes, onnx shape inference runs (strict) on models of
standard ops, and each export matches its original fixture in tests/onnx/data/ as onnx reads
them: graph inputs/outputs (names, types, shapes), nodes (op types, domains, inputs, outputs,
attributes, names where the original had unique ones), constant values (initializers and
Constant nodes), external-data references and opset imports."""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
failures = []


def fail(name, msg):
    failures.append("%s: %s" % (name, msg))


def type_str(t):
    return str(t).replace("\n", " ")


def same_type(o, e):
    """Tensor types equal; a dim the original left unknown (no value, no param) matches a
    dim_param in the export (gopt names unknown dims unk__N)."""
    if o.WhichOneof("value") != e.WhichOneof("value"):
        return False
    if o.WhichOneof("value") != "tensor_type":
        return True
    a, b = o.tensor_type, e.tensor_type
    if a.elem_type != b.elem_type or a.HasField("shape") != b.HasField("shape"):
        return False
    if len(a.shape.dim) != len(b.shape.dim):
        return False
    for x, y in zip(a.shape.dim, b.shape.dim):
        kx, ky = x.WhichOneof("value"), y.WhichOneof("value")
        if kx is None and ky in (None, "dim_param"):
            continue
        if kx != ky or getattr(x, kx) != getattr(y, ky):
            return False
    return True


def norm(v):
    """bytes -> str inside nested lists, so string constants compare across representations."""
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (list, tuple)):
        return type(v)(norm(x) for x in v)
    return v


def to_list(t):
    """Values of tensor t (onnx 1.12's to_array cannot read typed complex data: pairs instead)."""
    if t.data_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128):
        real = np.float32 if t.data_type == onnx.TensorProto.COMPLEX64 else np.float64
        if t.HasField("raw_data"):
            return np.frombuffer(t.raw_data, dtype=real).tolist()
        return list(t.float_data) if t.data_type == onnx.TensorProto.COMPLEX64 else list(t.double_data)
    return numpy_helper.to_array(t).tolist()


def const_values(m):
    """name -> (dtype, dims, values or external location) for initializers and Constant nodes."""
    out = {}
    for t in m.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            ext = {e.key: e.value for e in t.external_data}
            out[t.name] = (t.data_type, list(t.dims), ("external", ext["location"], int(ext.get("offset", 0))))
        else:
            out[t.name] = (t.data_type, list(t.dims), to_list(t))
    for n in m.graph.node:
        if n.op_type != "Constant":
            continue
        a = n.attribute[0]
        v = helper.get_attribute_value(a)
        if a.name == "value":
            out[n.output[0]] = (v.data_type, list(v.dims), to_list(v))
        else:
            arr = np.array(v)
            if arr.dtype.kind in "SUO":
                dt = onnx.TensorProto.STRING
                arr = np.array([x if isinstance(x, bytes) else x.encode() for x in np.atleast_1d(v)]).reshape(arr.shape)
            else:
                dt = onnx.TensorProto.FLOAT if arr.dtype.kind == "f" else onnx.TensorProto.INT64
            out[n.output[0]] = (dt, list(arr.shape), arr.tolist())
    return out


def compare(name, orig, exp):
    go, ge = orig.graph, exp.graph
    inits = {t.name for t in go.initializer}
    oi = [v for v in go.input if v.name not in inits]
    ei = [v for v in ge.input if v.name not in {t.name for t in ge.initializer}]
    if [v.name for v in oi] != [v.name for v in ei] or not all(same_type(a.type, b.type) for a, b in zip(oi, ei)):
        fail(name, "graph inputs differ: %s vs %s" % ([type_str(v) for v in oi], [type_str(v) for v in ei]))
    if [v.name for v in go.output] != [v.name for v in ge.output] or \
            not all(same_type(a.type, b.type) for a, b in zip(go.output, ge.output)):
        fail(name, "graph outputs differ")

    def nodes(g):
        return [n for n in g.node if n.op_type != "Constant"]

    no, ne = nodes(go), nodes(ge)
    if len(no) != len(ne):
        fail(name, "node counts differ: %d vs %d" % (len(no), len(ne)))
    names = [n.name for n in no]
    by_out = {tuple(n.output): n for n in ne}
    for n in no:
        e = by_out.get(tuple(n.output))
        if e is None:
            fail(name, "node with outputs %s missing" % list(n.output))
            continue
        if (n.op_type, n.domain, list(n.input)) != (e.op_type, e.domain, list(e.input)):
            fail(name, "node %s differs: %s/%s%s vs %s/%s%s" % (n.name, n.domain, n.op_type, list(n.input),
                                                               e.domain, e.op_type, list(e.input)))
        if n.name and names.count(n.name) == 1 and n.name != e.name:
            fail(name, "node name %s became %s" % (n.name, e.name))
        oa = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        ea = {a.name: helper.get_attribute_value(a) for a in e.attribute}
        if set(oa) != set(ea):
            fail(name, "node %s attributes %s vs %s" % (n.name, sorted(oa), sorted(ea)))
        for k in oa:
            if k in ea and isinstance(oa[k], onnx.GraphProto):
                compare(name + "/" + n.name + "." + k, helper.make_model(oa[k]), helper.make_model(ea[k]))
            elif k in ea and oa[k] != ea[k]:
                fail(name, "node %s attribute %s: %r vs %r" % (n.name, k, oa[k], ea[k]))
    used = {i for n in go.node for i in n.input} | {o.name for o in go.output}
    co = {k: v for k, v in const_values(orig).items() if k in used}
    ce = const_values(exp)
    for k, v in co.items():
        if k not in ce:
            fail(name, "constant %s missing" % k)
        elif norm(ce[k]) != norm(v):
            fail(name, "constant %s differs: %s vs %s" % (k, str(v)[:80], str(ce[k])[:80]))
    ovi = {v.name: v.type for v in go.value_info}
    evi = {v.name: v.type for v in ge.value_info}
    for k, v in ovi.items():
        if k in evi and not same_type(v, evi[k]):
            fail(name, "value_info %s differs: %s vs %s" % (k, type_str(v), type_str(evi[k])))
        if k not in evi and k in {o for n in ge.node for o in n.output}:
            fail(name, "value_info %s dropped" % k)


def main():
    d = sys.argv[1]
    files = sorted(f for f in os.listdir(d) if f.endswith(".onnx"))
    if not files:
        print("no exported models in %s" % d)
        return 1
    for f in files:
        exp = onnx.load(os.path.join(d, f), load_external_data=False)
        try:  # with its external data when the files exist (gopt then exports the bytes inline)
            orig = onnx.load(os.path.join(DATA, f))
        except (OSError, FileNotFoundError):
            orig = onnx.load(os.path.join(DATA, f), load_external_data=False)
        # The checker insists that external data files exist: check a copy whose references to
        # missing files (structure-only exports) are replaced by zero bytes of the right size.
        chk = onnx.ModelProto()
        chk.CopyFrom(exp)
        for t in chk.graph.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                ext = {e.key: e.value for e in t.external_data}
                if not os.path.exists(os.path.join(d, ext["location"])):
                    n = int(np.prod(t.dims)) * np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type]).itemsize
                    del t.external_data[:]
                    t.data_location = onnx.TensorProto.DEFAULT
                    t.raw_data = bytes(n)
        try:
            onnx.checker.check_model(chk)
        except Exception as e:  # noqa: BLE001 - report every checker failure
            fail(f, "onnx.checker: %s" % str(e).splitlines()[0])
        custom = any(n.domain not in ("", "ai.onnx") for n in exp.graph.node)
        if not custom:
            try:
                onnx.shape_inference.infer_shapes(exp, strict_mode=True)
            except Exception as e:  # noqa: BLE001
                fail(f, "onnx shape inference: %s" % str(e).splitlines()[0])
        if [(o.domain, o.version) for o in orig.opset_import] != [(o.domain, o.version) for o in exp.opset_import]:
            fail(f, "opset imports differ")
        compare(f, orig, exp)
    for m in failures:
        print("FAIL", m)
    print("checked %d exported models, %d failures" % (len(files), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
