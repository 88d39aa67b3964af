"""onnx_check.py [MODEL.onnx ...]: onnx.checker's full check and strict shape inference on a model
whose weights may be external references to data that does not exist (gopt's structure-only
outputs): zeros stand in for those weights. Shared by the rewrite tests and bench/rewrite; as a
script it checks each file given and prints one line per failure (exit 1 if any)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto


def full_check(path):
    """Raises onnx's error when the model at path fails the full check or strict inference."""
    m = onnx.load(path, load_external_data=False)
    for t in m.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            n = int(np.prod(t.dims)) if len(t.dims) else 1
            del t.external_data[:]
            t.data_location = TensorProto.DEFAULT
            t.raw_data = bytes(n * onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type].itemsize)
    onnx.checker.check_model(m, full_check=True)
    onnx.shape_inference.infer_shapes(m, strict_mode=True)


if __name__ == "__main__":
    bad = 0
    for p in sys.argv[1:]:
        try:
            full_check(p)
        except Exception as e:  # noqa: BLE001 - one line per failing file
            bad += 1
            print(f"{p}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    sys.exit(1 if bad else 0)
