"""onnx_peer.py: the peer measurement for bench_import: python-onnx's own load + shape inference
of the same file, median over repetitions, and the process's peak RSS. Prints one JSON object."""
import json
import resource
import statistics
import sys
import time

import onnx

path, reps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
tl, ti = [], []
for _ in range(reps):
    t0 = time.perf_counter()
    m = onnx.load(path, load_external_data=False)
    t1 = time.perf_counter()
    onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
    t2 = time.perf_counter()
    tl.append(t1 - t0)
    ti.append(t2 - t1)
print(json.dumps({"model": path, "load_s": statistics.median(tl), "infer_s": statistics.median(ti),
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
