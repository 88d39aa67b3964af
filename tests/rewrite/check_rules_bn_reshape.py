"""check_rules_bn_reshape.py GOPT RULES: generated BatchNormalization and Reshape rules from the
shipped rules file, applied by `gopt rewrite` on small models with weights and verified against
ONNX Runtime. The rules are found by their structure, not their names: BN over a batch concat
(BN(x0), BN(x1) -> Concat axis 0  =>  Concat axis 0 -> BN, one parameter set) and Reshape over
Add (Reshape(x0, s), Reshape(x1, s) -> Add  =>  Add -> Reshape(s)). Each is applied through the
GOPT_REWRITE_APPLY_RULE hook (every match, whatever the cost); the output must be verified by
gopt's executor and ONNX Runtime, pass onnx.checker (full check) and have one BN / one Reshape
left. The rules must be enabled and carry a Z3 proof. `gopt rules generate --domains` with an
unknown domain is one error line."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

GOPT, RULES = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import onnx_check  # noqa: E402


def ops(p):
    return [(o["op"], o["in"], o.get("attrs", {})) for o in p["ops"]]


def is_bn_concat(r):
    """src: BN(x0, P), BN(x1, P), Concat0 of both (the output); dst: Concat0(x0, x1), BN(o0, P)."""
    s, d = ops(r["src"]), ops(r["dst"])
    if sorted(t for t, _, _ in s) != ["BatchNormalization", "BatchNormalization", "Concat"] or len(d) != 2:
        return False
    bns = [i for t, i, _ in s if t == "BatchNormalization"]
    cat = [(i, a) for t, i, a in s if t == "Concat"][0]
    return (bns[0][0] != bns[1][0] and bns[0][1:] == bns[1][1:] and cat[1] == {"axis": 0}
            and sorted(cat[0]) == ["o0", "o1"] and d[0][0] == "Concat" and d[0][2] == {"axis": 0}
            and sorted(d[0][1]) == sorted([bns[0][0], bns[1][0]]) and d[1][0] == "BatchNormalization"
            and d[1][1] == ["o0"] + bns[0][1:])


def is_reshape_add(r):
    """src: Reshape(x0, s), Reshape(x1, s), Add of both; dst: Add(x0, x1), Reshape(o0, s); rank 2."""
    s, d = ops(r["src"]), ops(r["dst"])
    if sorted(t for t, _, _ in s) != ["Add", "Reshape", "Reshape"] or [t for t, _, _ in d] != ["Add", "Reshape"]:
        return False
    rs = [i for t, i, _ in s if t == "Reshape"]
    add = [i for t, i, _ in s if t == "Add"][0]
    return (rs[0][0] != rs[1][0] and rs[0][1] == rs[1][1] and sorted(add) == ["o0", "o1"]
            and sorted(d[0][1]) == sorted([rs[0][0], rs[1][0]]) and d[1][1] == ["o0", rs[0][1]]
            and len(r["shapes"][0][rs[0][0]]) == 2)


def find_rule(rules, pred, what):
    found = [r for r in rules if not r.get("builtin") and pred(r)]
    ok = [r for r in found if r.get("verified") and r.get("proof") == "z3"]
    if not ok:
        print(f"check_rules_bn_reshape: no enabled, Z3-proved {what} rule in {RULES} "
              f"({len(found)} of that form: {[(r['name'], r.get('reason')) for r in found]})", file=sys.stderr)
        return None
    return ok[0]


def save(nodes, inputs, outputs, inits, path):
    g = helper.make_graph(nodes, "m", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


def bn_model(path):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "s"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "m"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "v")]
    nodes = [helper.make_node("BatchNormalization", [x, "s", "b", "m", "v"], [y], name=y, epsilon=1e-5)
             for x, y in (("a", "bna"), ("c", "bnc"))]
    nodes.append(helper.make_node("Concat", ["bna", "bnc"], ["y"], name="cat", axis=0))
    save(nodes, [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8, 6, 6]) for n in "ac"],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 6, 6])], inits, path)


def reshape_model(path):
    inits = [numpy_helper.from_array(np.array([4, 32], dtype=np.int64), "shape")]
    nodes = [helper.make_node("Reshape", [x, "shape"], [y], name=y) for x, y in (("a", "ra"), ("c", "rc"))]
    nodes.append(helper.make_node("Add", ["ra", "rc"], ["y"], name="add"))
    save(nodes, [helper.make_tensor_value_info(n, TensorProto.FLOAT, [8, 16]) for n in "ac"],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])], [*inits], path)


def apply(d, rule, build, left_op, tag):
    src, rules, out = (os.path.join(d, f"{tag}{s}") for s in (".onnx", ".json", "_out.onnx"))
    build(src)
    json.dump({"rules": [rule]}, open(rules, "w"))
    r = subprocess.run([GOPT, "rewrite", src, "-o", out, "--rules", rules, "--json"], capture_output=True,
                       text=True, env={**os.environ, "GOPT_REWRITE_APPLY_RULE": rule["name"]})
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    if (j.get("rules_applied") != {rule["name"]: 1} or j.get("verified") is not True
            or j.get("verified_with") != "both"):
        print(f"check_rules_bn_reshape: {tag} ({rule['name']}): rc {r.returncode} {j} {r.stderr!r}", file=sys.stderr)
        return 1
    onnx_check.full_check(out)
    left = [n.op_type for n in onnx.load(out).graph.node]
    if left.count(left_op) != 1:
        print(f"check_rules_bn_reshape: {tag}: output ops {left}", file=sys.stderr)
        return 1
    print(f"{tag}: {rule['name']} applied, ops now {left}, max |diff| {j.get('max_abs_diff', 0):.3g}, "
          f"verified with {j['verified_with']}")
    return 0


def bad_domain(d):
    """gopt rules generate --domains with an unknown name: one error line naming it, exit 1."""
    out = os.path.join(d, "never.json")
    r = subprocess.run([GOPT, "rules", "generate", "-o", out, "--domains", "genbn,nosuch"], capture_output=True, text=True)
    if r.returncode != 1 or "'nosuch'" not in r.stderr or len(r.stderr.strip().splitlines()) != 1 or os.path.exists(out):
        print(f"check_rules_bn_reshape: --domains nosuch: rc {r.returncode} {r.stderr!r}", file=sys.stderr)
        return 1
    return 0


def main():
    rules = json.load(open(RULES))["rules"]
    bn = find_rule(rules, is_bn_concat, "BN-over-batch-concat")
    rs = find_rule(rules, is_reshape_add, "Reshape-over-Add")
    failures = (bn is None) + (rs is None)
    with tempfile.TemporaryDirectory() as d:
        failures += bad_domain(d)
        if bn:
            failures += apply(d, bn, bn_model, "BatchNormalization", "bn_concat")
        if rs:
            failures += apply(d, rs, reshape_model, "Reshape", "reshape_add")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
