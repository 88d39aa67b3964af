#!/usr/bin/python3
"""make_fixtures.py: writes the tiny ONNX fixtures under tests/onnx/data/ (and the fuzz seed corpus
fuzz/corpus_onnx/) used by tests/onnx/test_onnx_*.c. Deterministic; run with Debian's
/usr/bin/python3 (onnx 1.12, numpy):

    /usr/bin/python3 tests/onnx/make_fixtures.py

Values are closed-form (see val() below) so the C tests can check them independently of onnx."""
import os
import shutil
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
CORPUS = os.path.join(HERE, "..", "..", "fuzz", "corpus_onnx")
OP13 = [helper.make_opsetid("", 13)]


def val(i):
    """Element i of every numeric fixture tensor: small integers, exact in every dtype."""
    return (i * 7) % 11 - 5


def save(model, name, check=True):
    if check:
        onnx.checker.check_model(model)
    onnx.save(model, os.path.join(DATA, name))


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


# dtype -> (numpy dtype, typed field)
NUMERIC = {
    TensorProto.FLOAT: (np.float32, "float_data"),
    TensorProto.DOUBLE: (np.float64, "double_data"),
    TensorProto.INT8: (np.int8, "int32_data"),
    TensorProto.UINT8: (np.uint8, "int32_data"),
    TensorProto.INT16: (np.int16, "int32_data"),
    TensorProto.UINT16: (np.uint16, "int32_data"),
    TensorProto.INT32: (np.int32, "int32_data"),
    TensorProto.INT64: (np.int64, "int64_data"),
    TensorProto.UINT32: (np.uint32, "uint64_data"),
    TensorProto.UINT64: (np.uint64, "uint64_data"),
    TensorProto.BOOL: (np.bool_, "int32_data"),
    TensorProto.FLOAT16: (np.float16, "int32_data"),
    TensorProto.COMPLEX64: (np.complex64, "float_data"),
    TensorProto.COMPLEX128: (np.complex128, "double_data"),
}
DIMS = [2, 3]


def values(dtype):
    npt = NUMERIC[dtype][0]
    v = np.array([val(i) for i in range(6)], dtype=np.float64)
    if npt in (np.uint8, np.uint16, np.uint32, np.uint64):
        v = v + 5  # non-negative
    if npt == np.bool_:
        return (v > 0).reshape(DIMS)
    if npt in (np.complex64, np.complex128):
        return (v + 1j * (v + 1)).astype(npt).reshape(DIMS)
    return v.astype(npt).reshape(DIMS)


def typed_tensor(name, dtype):
    arr = values(dtype)
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(DIMS)
    field = NUMERIC[dtype][1]
    flat = arr.flatten()
    if dtype == TensorProto.FLOAT16:
        getattr(t, field).extend(int(x) for x in flat.view(np.uint16))
    elif dtype in (TensorProto.COMPLEX64, TensorProto.COMPLEX128):
        for c in flat:
            getattr(t, field).extend([float(c.real), float(c.imag)])
    elif dtype == TensorProto.BOOL:
        getattr(t, field).extend(int(x) for x in flat)
    elif dtype in (TensorProto.FLOAT, TensorProto.DOUBLE):
        getattr(t, field).extend(float(x) for x in flat)
    else:
        getattr(t, field).extend(int(x) for x in flat)
    return t


def raw_tensor(name, dtype):
    t = numpy_helper.from_array(values(dtype), name)
    assert t.data_type == dtype and t.HasField("raw_data")
    return t


def bf16_tensor(name, raw):
    bits = [np.float32(val(i)).view(np.uint32) >> 16 for i in range(6)]  # exact: small integers
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.BFLOAT16
    t.dims.extend(DIMS)
    if raw:
        t.raw_data = struct.pack("<6H", *[int(b) for b in bits])
    else:
        t.int32_data.extend(int(b) for b in bits)
    return t


def init_model(raw):
    """Every numeric dtype as an initializer (raw_data or typed fields), plus a string tensor."""
    inits = []
    for dt in NUMERIC:
        name = "w_" + TensorProto.DataType.Name(dt).lower()
        inits.append(raw_tensor(name, dt) if raw else typed_tensor(name, dt))
    inits.append(bf16_tensor("w_bfloat16", raw))
    s = helper.make_tensor("w_string", TensorProto.STRING, [2], [b"ab", b""])
    inits.append(s)
    node = helper.make_node("Add", ["x", "w_float"], ["y"], name="add")
    g = helper.make_graph([node], "inits", [vi("x", TensorProto.FLOAT, DIMS)],
                          [vi("y", TensorProto.FLOAT, DIMS)], inits)
    return helper.make_model(g, opset_imports=OP13)


def external_models():
    """W [4,4] and B [4] float in ext_model.data (B first, so W has a non-zero offset)."""
    w = np.array([val(i) for i in range(16)], dtype=np.float32)
    b = np.array([val(i + 100) for i in range(4)], dtype=np.float32)
    with open(os.path.join(DATA, "ext_model.data"), "wb") as f:
        f.write(b.tobytes())
        f.write(w.tobytes())

    def ext(name, dims, loc, off, length):
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(dims)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", loc), ("offset", str(off)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        return t

    for fname, loc in (("ext_model.onnx", "ext_model.data"), ("ext_missing.onnx", "missing.data")):
        inits = [ext("W", [4, 4], loc, 16, 64), ext("B", [4], loc, 0, 16)]
        nodes = [helper.make_node("Gemm", ["x", "W", "B"], ["y"], name="gemm", transB=1)]
        g = helper.make_graph(nodes, "ext", [vi("x", TensorProto.FLOAT, ["batch", 4])],
                              [vi("y", TensorProto.FLOAT, ["batch", 4])], inits)
        save(helper.make_model(g, opset_imports=OP13), fname, check=False)


def external_lowbit_model():
    """W [5] INT4 (-8, -1, 0, 3, 7) in ext_int4.data, packed two to a byte (low nibble first)."""
    q = [-8, -1, 0, 3, 7]
    nib = [v & 15 for v in q] + [0]
    with open(os.path.join(DATA, "ext_int4.data"), "wb") as f:
        f.write(bytes(nib[i] | nib[i + 1] << 4 for i in range(0, 6, 2)))
    t = TensorProto()
    t.name, t.data_type = "W", 22  # INT4 (onnx >= 1.16 names it)
    t.dims.extend([5])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "ext_int4.data"), ("offset", "0"), ("length", "3")):
        e = t.external_data.add()
        e.key, e.value = k, v
    nodes = [helper.make_node("Cast", ["W"], ["y"], name="cast", to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, "ext_int4", [], [vi("y", TensorProto.FLOAT, [5])], [t])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), "ext_int4.onnx", check=False)


def constants_model():
    """Every Constant attribute form, each feeding an Identity so the value stays used."""
    c_tensor = helper.make_tensor("ignored_name", TensorProto.FLOAT, [2, 2], [val(i) for i in range(4)])
    consts = [
        helper.make_node("Constant", [], ["c_value"], name="k0", value=c_tensor),
        helper.make_node("Constant", [], ["c_float"], name="k1", value_float=2.5),
        helper.make_node("Constant", [], ["c_floats"], name="k2", value_floats=[1.0, -2.0, 3.5]),
        helper.make_node("Constant", [], ["c_int"], name="k3", value_int=-7),
        helper.make_node("Constant", [], ["c_ints"], name="k4", value_ints=[4, 5, -6, 7]),
        helper.make_node("Constant", [], ["c_string"], name="k5", value_string="hi"),
        helper.make_node("Constant", [], ["c_strings"], name="k6", value_strings=["a", "bc"]),
    ]
    nodes = list(consts)
    for k in consts:
        o = k.output[0]
        nodes.append(helper.make_node("Identity", [o], ["id_" + o], name="id_" + o))
    # The first Constant output also feeds an Add with the input: constants mixed into dataflow.
    nodes.append(helper.make_node("Add", ["x", "c_value"], ["y"], name="add"))
    outs = [vi("y", TensorProto.FLOAT, [2, 2])] + [
        vi("id_c_value", TensorProto.FLOAT, [2, 2]), vi("id_c_float", TensorProto.FLOAT, []),
        vi("id_c_floats", TensorProto.FLOAT, [3]), vi("id_c_int", TensorProto.INT64, []),
        vi("id_c_ints", TensorProto.INT64, [4]), vi("id_c_string", TensorProto.STRING, []),
        vi("id_c_strings", TensorProto.STRING, [2])]
    g = helper.make_graph(nodes, "consts", [vi("x", TensorProto.FLOAT, [2, 2])], outs)
    save(helper.make_model(g, opset_imports=OP13), "constants.onnx")


def if_model():
    """If whose branches read the outer tensors x and w (outer-scope references)."""
    then_g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["t_out"], name="then_add")],
                               "then_branch", [], [vi("t_out", TensorProto.FLOAT, ["n", 3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="else_neg")],
                               "else_branch", [], [vi("e_out", TensorProto.FLOAT, ["n", 3])])
    nodes = [helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g),
             helper.make_node("Relu", ["y"], ["z"], name="relu")]
    w = numpy_helper.from_array(np.array([val(i) for i in range(3)], dtype=np.float32), "w")
    g = helper.make_graph(nodes, "ifg", [vi("cond", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, ["n", 3])],
                          [vi("z", TensorProto.FLOAT, ["n", 3])], [w],
                          value_info=[vi("y", TensorProto.FLOAT, ["n", 3])])
    save(helper.make_model(g, opset_imports=OP13), "if_model.onnx")


def opaque_models():
    for fname, with_vi in (("opaque_vi.onnx", True), ("opaque_novi.onnx", False)):
        n0 = helper.make_node("MyOp", ["x"], ["h"], name="foo", domain="com.example", alpha=0.5,
                              mode="fast", sizes=[1, 2, 3], scales=[0.25, 0.5], tags=["p", "q"])
        n1 = helper.make_node("Relu", ["h"], ["y"], name="relu")
        g = helper.make_graph([n0, n1], "opq", [vi("x", TensorProto.FLOAT, ["batch", 8])],
                              [vi("y", TensorProto.FLOAT, ["batch", 8, None])],
                              value_info=[vi("h", TensorProto.FLOAT, ["batch", 8, None])] if with_vi else [])
        m = helper.make_model(g, opset_imports=OP13 + [helper.make_opsetid("com.example", 1)])
        save(m, fname, check=with_vi)
    # An op of the default domain gopt has no rule for, without value_info.
    g = helper.make_graph([helper.make_node("FooBar", ["x"], ["y"], name="mystery")], "unk",
                          [vi("x", TensorProto.FLOAT, [2])], [vi("y2", TensorProto.FLOAT, [2])])
    g.node[0].output[0] = "y_internal"
    g.node.append(helper.make_node("Relu", ["y_internal"], ["y2"], name="relu"))
    save(helper.make_model(g, opset_imports=OP13), "unknown_op.onnx", check=False)


def shapes_model():
    """Symbolic and unnamed dims, value_info, attributes of every kind, nameless and duplicate
    node names, an input that is also an initializer, two opsets, ir_version 7."""
    wc = numpy_helper.from_array(
        np.array([val(i) for i in range(8 * 3 * 3 * 3)], dtype=np.float32).reshape(8, 3, 3, 3), "wc")
    shape = numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("Conv", ["x", "wc"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[1, 1]),
        helper.make_node("LeakyRelu", ["c"], ["r"], name="", alpha=0.125),
        helper.make_node("Reshape", ["r", "shape"], ["f"], name="dup"),
        helper.make_node("Softmax", ["f"], ["s"], name="dup", axis=1),
        helper.make_node("Sum", ["s", "s"], ["y"], name=""),
    ]
    inputs = [vi("x", TensorProto.FLOAT, ["batch", 3, 8, None]), vi("wc", TensorProto.FLOAT, [8, 3, 3, 3])]
    g = helper.make_graph(nodes, "shapes", inputs, [vi("y", TensorProto.FLOAT, ["batch", None])], [wc, shape],
                          value_info=[vi("c", TensorProto.FLOAT, ["batch", 8, 8, None]),
                                      vi("r", TensorProto.FLOAT, ["batch", 8, 8, None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11), helper.make_opsetid("ai.onnx.ml", 2)])
    m.ir_version = 7
    save(m, "shapes.onnx")


def ir3_model():
    """IR version 3 / opset 8: initializers are listed among the graph inputs."""
    b = numpy_helper.from_array(np.array([val(i) for i in range(4)], dtype=np.float32), "b")
    g = helper.make_graph([helper.make_node("Add", ["x", "b"], ["y"], name="add")], "ir3",
                          [vi("x", TensorProto.FLOAT, [1, 4]), vi("b", TensorProto.FLOAT, [4])],
                          [vi("y", TensorProto.FLOAT, [1, 4])], [b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])
    m.ir_version = 3
    save(m, "ir3_model.onnx")


def bad_models():
    f = TensorProto.FLOAT
    # A -> B -> A
    g = helper.make_graph([helper.make_node("Relu", ["x", "b"], ["a"], name="na"),
                           helper.make_node("Relu", ["a"], ["b"], name="nb")], "cyc",
                          [vi("x", f, [2])], [vi("b", f, [2])])
    save(helper.make_model(g, opset_imports=OP13), "cyclic.onnx", check=False)
    g = helper.make_graph([helper.make_node("Add", ["x", "nope"], ["y"], name="adder")], "dang",
                          [vi("x", f, [2])], [vi("y", f, [2])])
    save(helper.make_model(g, opset_imports=OP13), "dangling.onnx", check=False)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="first"),
                           helper.make_node("Neg", ["x"], ["y"], name="second")], "dup",
                          [vi("x", f, [2])], [vi("y", f, [2])])
    save(helper.make_model(g, opset_imports=OP13), "dup_output.onnx", check=False)
    # Opsets before 7: Add-6's `broadcast` attribute means something else than at opset 7
    # (refused); Relu-1 with its legacy consumed_inputs means the same (accepted).
    g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"], name="r", broadcast=0)], "old",
                          [vi("x", f, [2])], [vi("y", f, [2])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 6)]), "opset6.onnx", check=False)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r", consumed_inputs=[0])],
                          "old", [vi("x", f, [2])], [vi("y", f, [2])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 1)]), "opset1_relu.onnx",
         check=False)
    # A value_info with a negative dim and an initializer whose raw_data is too short.
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "neg",
                          [vi("x", f, [2, -3])], [vi("y", f, [2])])
    save(helper.make_model(g, opset_imports=OP13), "negative_dim.onnx", check=False)
    w = TensorProto(name="w", data_type=f, dims=[1 << 40, 1 << 40], raw_data=b"\0" * 8)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "bomb",
                          [vi("x", f, [2])], [vi("y", f, [2])], [w])
    save(helper.make_model(g, opset_imports=OP13), "huge_dims.onnx", check=False)
    w = TensorProto(name="w", data_type=f, dims=[1000, 1000], raw_data=b"\0" * 8)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "short",
                          [vi("x", f, [2])], [vi("y", f, [2])], [w])
    save(helper.make_model(g, opset_imports=OP13), "short_raw.onnx", check=False)
    with open(os.path.join(DATA, "not_onnx.txt"), "w") as fh:
        fh.write("This is a text file, not an ONNX model.\nIt has two lines.\n")
    # A 1x1 PNG (signature, IHDR, IDAT, IEND), written byte by byte.
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    with open(os.path.join(DATA, "not_onnx.png"), "wb") as fh:
        fh.write(png)
    open(os.path.join(DATA, "empty.onnx"), "wb").close()


def main():
    os.makedirs(DATA, exist_ok=True)
    save(init_model(True), "init_raw.onnx", check=True)
    save(init_model(False), "init_typed.onnx", check=True)
    external_models()
    external_lowbit_model()
    constants_model()
    if_model()
    opaque_models()
    shapes_model()
    ir3_model()
    bad_models()
    # Seed corpus for the fuzzer: the valid fixtures and a few of the bad ones.
    os.makedirs(CORPUS, exist_ok=True)
    for name in sorted(os.listdir(DATA)):
        if name.endswith(".onnx") and name != "empty.onnx":
            shutil.copy(os.path.join(DATA, name), os.path.join(CORPUS, name))
    total = sum(os.path.getsize(os.path.join(DATA, n)) for n in os.listdir(DATA))
    print("wrote %d files, %d bytes, to %s" % (len(os.listdir(DATA)), total, DATA))
    return 0


if __name__ == "__main__":
    sys.exit(main())
