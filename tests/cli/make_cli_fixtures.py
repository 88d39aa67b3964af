"""make_cli_fixtures.py: writes the bad-input models the CLI tests use (tests/cli/data/):
a model whose shapes contradict each other, and a model file cut in half.
Run with Debian's /usr/bin/python3 (python3-onnx)."""
import os

import onnx
from onnx import TensorProto, helper

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
os.makedirs(here, exist_ok=True)

# MatMul of [2,3] by [4,5]: inner dims 3 vs 4.
g = helper.make_graph(
    [helper.make_node("MatMul", ["a", "b"], ["c"], name="bad_matmul")], "mismatch",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 5])],
    [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
onnx.save(m, os.path.join(here, "shape_mismatch.onnx"))

# The first half of a real corpus model's bytes.
src = os.path.join(os.path.dirname(here), "..", "..", "corpus", "resnet18.onnx")
with open(src, "rb") as f:
    data = f.read()
with open(os.path.join(here, "truncated.onnx"), "wb") as f:
    f.write(data[: len(data) // 2])
