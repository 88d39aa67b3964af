"""check_ort_run.py: tools/ort/ort_run.js (ONNX Runtime, the executor's independent oracle) runs
a small model built here with python-onnx and returns numpy's answer for float32 and int64
inputs; a bad input file gets one error line and exit 1."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(ROOT, "tools", "ort", "ort_run.js")


def main():
    with tempfile.TemporaryDirectory() as d:
        nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"]),
                 helper.make_node("Add", ["i", "i"], ["j"])]
        g = helper.make_graph(nodes, "g", [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [5])], [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
            helper.make_tensor_value_info("j", TensorProto.INT64, [5])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        model = os.path.join(d, "m.onnx")
        onnx.save(m, model)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((2, 3)).astype(np.float32)
        w = rng.standard_normal((3, 4)).astype(np.float32)
        i = np.arange(5, dtype=np.int64) * (1 << 40)
        spec = {"inputs": {}}
        for name, a, t in (("x", x, "float32"), ("w", w, "float32"), ("i", i, "int64")):
            a.tofile(os.path.join(d, name + ".bin"))
            spec["inputs"][name] = {"type": t, "dims": list(a.shape), "file": name + ".bin"}
        json.dump(spec, open(os.path.join(d, "in.json"), "w"))
        subprocess.run(["node", RUN, model, os.path.join(d, "in.json"), os.path.join(d, "out")], check=True)
        out = json.load(open(os.path.join(d, "out", "outputs.json")))["outputs"]
        y = np.fromfile(os.path.join(d, "out", out["y"]["file"]), np.float32).reshape(out["y"]["dims"])
        j = np.fromfile(os.path.join(d, "out", out["j"]["file"]), np.int64)
        ok = np.allclose(y, np.maximum(x, 0) @ w, rtol=1e-5, atol=1e-6) and np.array_equal(j, 2 * i)
        if not ok:
            print("check_ort_run: ONNX Runtime's outputs differ from numpy's", file=sys.stderr)
            return 1
        # a wrong-size input file: one error line, exit 1
        np.zeros(5, np.float32).tofile(os.path.join(d, "x.bin"))
        r = subprocess.run(["node", RUN, model, os.path.join(d, "in.json"), os.path.join(d, "out2")],
                           capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        if r.returncode != 1 or len(lines) != 1 or "expected 24" not in lines[0]:
            print(f"check_ort_run: bad input not reported as one line: rc {r.returncode}: {r.stderr!r}",
                  file=sys.stderr)
            return 1
    print("check_ort_run: ONNX Runtime matches numpy; bad input reported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
