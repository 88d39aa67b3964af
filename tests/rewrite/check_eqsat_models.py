"""check_eqsat_models.py GOPT: `gopt rewrite --method eqsat` on small models that reproduce two
bugs found on the corpus; outputs are verified by gopt's executor and ONNX Runtime (--verify both)
and checked by onnx.checker (full check) and strict shape inference:
- a 3-layer Gemm/Relu MLP with weights (vgg11's and vgg19's classifier) under the shipped rules:
  a rule verified only on square shapes (gen_0175) merged e-classes that compute different
  values and the extracted graph skipped a layer (verification failed, exit 1); now nothing
  cheaper is found and the input is kept (verified); the same MLP beside a second input whose two
  MatMuls merge must give a rewritten graph verified by both;
- a grouped conv with a dynamic batch reading an 82-character tensor name (efficientnet_b0,
  lraspp_mobilenet_v3_large) under merge_group_conv and fuse_conv_batchnorm: the merged conv lost
  its input (no static shape, exit 1); now the BatchNormalization is folded and the rewritten
  graph is verified by both."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

GOPT = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import onnx_check  # noqa: E402

RNG = np.random.default_rng(0)
LONG = "/features/features.7/features.7.0/block/block.0/block.0.2/Mul_output_0_long_name_"


def save(nodes, name, x, y, inits, path):
    g = h.make_graph(nodes, name, [x], [y], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def mlp(path, d=16, branch=False):
    inits, nodes, prev = [], [], "x"
    for i in range(3):
        inits += [nh.from_array(RNG.standard_normal((d, d)).astype(np.float32), f"w{i}"),
                  nh.from_array(RNG.standard_normal(d).astype(np.float32), f"b{i}")]
        nodes.append(h.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"g{i}"], name=f"gemm{i}", transB=1))
        prev = f"g{i}"
        if i < 2:
            nodes.append(h.make_node("Relu", [prev], [f"r{i}"], name=f"relu{i}"))
            prev = f"r{i}"
    if not branch:
        save(nodes, "mlp", h.make_tensor_value_info("x", T.FLOAT, [1, d]),
             h.make_tensor_value_info(prev, T.FLOAT, [1, d]), inits, path)
        return
    # a second input whose two MatMuls merge (cheaper): a rewritten graph is extracted, written
    # and verified
    inits += [nh.from_array(RNG.standard_normal((24, 40)).astype(np.float32), f"w{k}") for k in (3, 4)]
    nodes += [h.make_node("MatMul", ["z", f"w{k}"], [f"m{k}"], name=f"mm{k}") for k in (3, 4)]
    nodes.append(h.make_node("Add", ["m3", "m4"], ["y2"], name="add"))
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, [1, d]),
                                    h.make_tensor_value_info("z", T.FLOAT, [1, 24])],
                     [h.make_tensor_value_info(prev, T.FLOAT, [1, d]), h.make_tensor_value_info("y2", T.FLOAT, [1, 40])],
                     inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def gconv(path):
    inits = [nh.from_array(RNG.standard_normal((16, 2, 3, 3)).astype(np.float32) * 0.3, "w1"),
             nh.from_array(RNG.standard_normal(16).astype(np.float32), "b1")]
    inits += [nh.from_array(RNG.uniform(0.5, 1.5, 16).astype(np.float32), n) for n in ("s", "v")]
    inits += [nh.from_array(RNG.standard_normal(16).astype(np.float32), n) for n in ("bb", "mu")]
    nodes = [h.make_node("Relu", ["x"], [LONG], name="relu"),
             h.make_node("Conv", [LONG, "w1", "b1"], ["c"], name="gconv", group=4, kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c", "s", "bb", "mu", "v"], ["bn"], name="bn"),
             h.make_node("Sigmoid", ["bn"], ["sg"], name="sig"),
             h.make_node("Mul", ["bn", "sg"], ["y"], name="mul")]
    save(nodes, "gconv", h.make_tensor_value_info("x", T.FLOAT, ["N", 8, 12, 12]),
         h.make_tensor_value_info("y", T.FLOAT, ["N", 16, 12, 12]), inits, path)


def run(d, model, rules=None, rewritten=True):
    out = os.path.join(d, "out.onnx")
    cmd = [GOPT, "rewrite", model, "-o", out, "--json", "--method", "eqsat", "--verify", "both",
           "--seconds", "10"] + (["--rules", rules] if rules else [])
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    bad = r.returncode != 0 or j.get("verified") is not True
    if bad or (rewritten and (j.get("verified_with") != "both" or not j["rules_applied"])):
        print(f"check_eqsat_models: {os.path.basename(model)}: exit {r.returncode}: {r.stderr.strip()[-400:]}",
              file=sys.stderr)
        return 1
    onnx_check.full_check(out)
    print(f"{os.path.basename(model)}: verified ({j['verified_with']}), {j['rules_applied']}, "
          f"{j['predicted_before_s']:.3g} -> {j['predicted_after_s']:.3g} s; {j['search_note'][:160]}")
    return 0


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        m1, m1b, m2, rules = (os.path.join(d, f) for f in ("mlp.onnx", "mlp_branch.onnx", "gconv.onnx", "gconv.json"))
        mlp(m1)
        mlp(m1b, branch=True)
        gconv(m2)
        json.dump({"rules": [{"name": n, "builtin": True} for n in ("merge_group_conv", "fuse_conv_batchnorm")]},
                  open(rules, "w"))
        failures += run(d, m1, rewritten=False)  # nothing cheaper is sound here: the input is kept
        failures += run(d, m1b)
        failures += run(d, m2, rules)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
