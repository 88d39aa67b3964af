#!/usr/bin/python3
"""check_dtypes.py GOPT: `gopt run --check` compares every dtype the executor can produce.

For each numeric dtype an Identity model (input x -> output y, opset 13; for the dtypes the
executor has no Identity kernel for, the graph input is the output) and two test-data sets
are written to a temporary folder with onnx.helper / numpy (the independent reference):
  equal   expected output = the input: --check must pass (exit 0)
  differ  one element changed well beyond the tolerances (for the 64-bit integers by 1 at 2^60,
          which a comparison through double would miss): --check must fail (exit 1, "check FAILED")
and a FLOAT model checked against a COMPLEX64 reference must stop with the one-line error naming
the dtype --check cannot compare. An INT4 initializer (packed by hand) through DequantizeLinear
gives the dequantised values, and `gopt convert` writes it packed again. Prints one line per
case; exits 1 when any case is wrong.
Run with Debian's /usr/bin/python3 (needs onnx and numpy).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

# dtype name -> (onnx type, numpy type or None for bfloat16, values, changed value for element 1)
CASES = {
    "FLOAT": (TensorProto.FLOAT, np.float32, [0.5, -1.25, 3.0, 1e-3], 1.5),
    "DOUBLE": (TensorProto.DOUBLE, np.float64, [0.5, -1.25, 3.0, 1e-3], 1.5),
    "FLOAT16": (TensorProto.FLOAT16, np.float16, [0.5, -1.25, 3.0, 1e-3], 1.5),
    "BFLOAT16": (TensorProto.BFLOAT16, None, [0.5, -1.25, 3.0, 2.0], 1.5),
    "INT8": (TensorProto.INT8, np.int8, [-128, 5, 127, 0], 6),
    "INT16": (TensorProto.INT16, np.int16, [-32768, 5, 32767, 0], 6),
    "INT32": (TensorProto.INT32, np.int32, [-(2 ** 31), 5, 2 ** 31 - 1, 0], 6),
    "INT64": (TensorProto.INT64, np.int64, [-(2 ** 63), 2 ** 60, 2 ** 63 - 1, 0], 2 ** 60 + 1),
    "UINT8": (TensorProto.UINT8, np.uint8, [0, 5, 255, 1], 6),
    "UINT16": (TensorProto.UINT16, np.uint16, [0, 5, 65535, 1], 6),
    "UINT32": (TensorProto.UINT32, np.uint32, [0, 5, 2 ** 32 - 1, 1], 6),
    "UINT64": (TensorProto.UINT64, np.uint64, [0, 2 ** 60, 2 ** 64 - 1, 1], 2 ** 60 + 1),
    "BOOL": (TensorProto.BOOL, np.bool_, [True, False, True, False], True),
}


NO_IDENTITY = ("FLOAT16", "BFLOAT16", "UINT32", "UINT64")


def raw_bytes(elem, np_type, vals):
    """Little-endian raw bytes of vals; bfloat16 as the high halves of float32."""
    if np_type is None:
        f = np.array(vals, dtype="<f4").view("<u4")
        return (f >> 16).astype("<u2").tobytes()
    return np.array(vals, dtype=np.dtype(np_type).newbyteorder("<")).tobytes()


def tensor(name, elem, np_type, vals):
    return helper.make_tensor(name, elem, [len(vals)], raw_bytes(elem, np_type, vals), raw=True)


def write_case(root, elem, np_type, vals, want_vals, want_elem=None, identity=True):
    """Model of dtype elem in root/model.onnx (an Identity node, or with identity=False the graph
    input itself as the output); test_data_set_0 with input vals and expected want_vals (of dtype
    want_elem, default elem)."""
    os.makedirs(os.path.join(root, "test_data_set_0"))
    y = "y" if identity else "x"
    nodes = [helper.make_node("Identity", ["x"], ["y"], name="id")] if identity else []
    g = helper.make_graph(nodes, "dtype_check",
                          [helper.make_tensor_value_info("x", elem, [len(vals)])],
                          [helper.make_tensor_value_info(y, elem, [len(vals)])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, os.path.join(root, "model.onnx"))
    d = os.path.join(root, "test_data_set_0")
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(tensor("x", elem, np_type, vals).SerializeToString())
    with open(os.path.join(d, "output_0.pb"), "wb") as f:
        if want_elem is None:
            f.write(tensor(y, elem, np_type, want_vals).SerializeToString())
        else:
            f.write(want_vals.SerializeToString())


def run(gopt, root):
    r = subprocess.run([gopt, "run", os.path.join(root, "model.onnx"), "--check", root,
                        "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    return r.returncode, r.stderr.decode(errors="replace")


def main():
    gopt = sys.argv[1]
    bad = 0
    tmp = tempfile.mkdtemp(prefix="gopt_check_dtypes_")

    def report(ok, msg, err=""):
        nonlocal bad
        print(("ok: " if ok else "FAIL: ") + msg + ("" if ok else "\n" + err.strip()), flush=True)
        bad += not ok

    for name, (elem, np_type, vals, changed) in CASES.items():
        # the executor has no Identity kernel for these; it still produces them as outputs
        # (a graph input or a constant passed through)
        ident = name not in NO_IDENTITY
        how = "Identity" if ident else "input as output"
        root = os.path.join(tmp, name + "_equal")
        write_case(root, elem, np_type, vals, vals, identity=ident)
        rc, err = run(gopt, root)
        report(rc == 0, f"{name} ({how}): equal reference passes (exit {rc})", err)
        root = os.path.join(tmp, name + "_differ")
        want = list(vals)
        want[1] = changed
        write_case(root, elem, np_type, vals, want, identity=ident)
        rc, err = run(gopt, root)
        report(rc == 1 and "check FAILED" in err and "1 of 4 beyond tolerance" in err,
               f"{name} ({how}): reference differing in one element fails (exit {rc})", err)

    # a dtype --check cannot compare: one error line naming it
    root = os.path.join(tmp, "COMPLEX64_ref")
    cref = helper.make_tensor("y", TensorProto.COMPLEX64, [4],
                              np.zeros(8, dtype="<f4").tobytes(), raw=True)
    write_case(root, TensorProto.FLOAT, np.float32, [1.0, 2.0, 3.0, 4.0], cref, TensorProto.COMPLEX64)
    rc, err = run(gopt, root)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    report(rc != 0 and len(lines) == 1 and "dtype COMPLEX64 cannot be compared" in lines[0]
           and "output_0.pb" in lines[0],
           f"COMPLEX64 reference: one-line error (exit {rc}): {lines[0] if lines else ''}", err)

    # sub-byte constants: an INT4 initializer (packed two to a byte, low nibble first, built by
    # hand: onnx 1.12's helper has no INT4) through DequantizeLinear, before and after
    # `gopt convert` (which must write it packed again)
    root = os.path.join(tmp, "INT4_const")
    os.makedirs(os.path.join(root, "test_data_set_0"))
    w = TensorProto()
    w.name, w.data_type = "w", 22
    w.dims.extend([5])
    w.raw_data = bytes([0x21, 0xF8, 0x07])  # 1, 2, -8, -1, 7
    g = helper.make_graph([helper.make_node("DequantizeLinear", ["w", "s"], ["y"])], "int4", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])],
                          [w, helper.make_tensor("s", TensorProto.FLOAT, [], [0.5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.save(m, os.path.join(root, "model.onnx"))
    with open(os.path.join(root, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(tensor("y", TensorProto.FLOAT, np.float32, [0.5, 1.0, -4.0, -0.5, 3.5]).SerializeToString())
    rc, err = run(gopt, root)
    report(rc == 0, f"INT4 initializer through DequantizeLinear (exit {rc})", err)
    conv = subprocess.run([gopt, "convert", os.path.join(root, "model.onnx"), "-o", os.path.join(root, "conv.onnx")],
                          stderr=subprocess.PIPE)
    packed = [t.raw_data for t in onnx.load(os.path.join(root, "conv.onnx")).graph.initializer if t.name == "w"] \
        if conv.returncode == 0 else []
    report(packed == [bytes([0x21, 0xF8, 0x07])], f"gopt convert writes the INT4 initializer packed: {packed}",
           conv.stderr.decode(errors="replace"))

    subprocess.run(["rm", "-rf", tmp], check=False)
    print(f"check_dtypes: {bad} case(s) wrong" if bad else "check_dtypes: all cases ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
