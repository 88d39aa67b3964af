"""check_rewrite_cli.py GOPT: `gopt rewrite` on corpus and zoo models: exit 0, --json has the
documented keys, verified is true (gopt's executor and ONNX Runtime agree with the input's
outputs), the output passes onnx.checker (full check) and onnx shape inference; a model with
real weights (a small Conv+BN model built here) gets its BN folded into the weights and measured
times (gopt's executor and ONNX Runtime); a model nothing rewrites is reported 'unchanged';
Tensat's SqueezeNet loses its fire modules' Split/Relu/Concat; --list-methods lists greedy; bad
flags give one error line; the built-ins added for Tensat's models pass ONNX Runtime's check on
a model with weights; eqsat converts Tensat's VGG-19 (once refused) and makes Tensat's
SqueezeNet cheaper; Ctrl-C stops greedy, eqsat and rl with their best graph so far, verified and
written."""
import json
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

GOPT = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import onnx_check  # noqa: E402
KEYS = {"rules_applied", "predicted_before_s", "predicted_after_s", "measured_before_s",
        "measured_after_s", "verified", "search_seconds"}


def conv_bn_model(path):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "s"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "m"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "v")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["y"])]
    g = helper.make_graph(nodes, "convbn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


WRONG_RULES = {"rules": [{"name": "wrong_mm_add", "vars": 2,
    "src": {"ops": [{"op": "MatMul", "in": ["x0", "x1"]}], "out": ["o0"]},
    "dst": {"ops": [{"op": "Add", "in": ["x0", "x1"]}], "out": ["o0"]},
    "shapes": [{"x0": [4, 4], "x1": [4, 4]}], "verified": True}]}


def wrong_rule(d, method="greedy"):
    """A deliberately wrong rule (MatMul -> Add, cheaper) claimed verified: gopt rewrite verifies it
    before use, drops it and never applies it; forced past that check, the output verification
    fails naming the rule and where, and nothing is written (with greedy and with eqsat)."""
    failures = 0
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], "mm",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1024, 1024]) for n in "ab"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024, 1024])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    src, rules, out = (os.path.join(d, f) for f in ("mm.onnx", "wrong.json", "mm_out.onnx"))
    onnx.save(m, src)
    json.dump(WRONG_RULES, open(rules, "w"))
    cmd = [GOPT, "rewrite", src, "-o", out, "--rules", rules, "--json", "--verify", "exec", "--method", method]
    r = subprocess.run(cmd, capture_output=True, text=True)
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    if r.returncode != 0 or j.get("rules_applied") != {} or "wrong_mm_add" not in r.stderr:
        print(f"check_rewrite_cli: {method}: wrong rule not dropped: rc {r.returncode} {r.stdout!r} {r.stderr!r}", file=sys.stderr)
        failures += 1
    os.remove(out)
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "GOPT_REWRITE_FORCE_RULE": "wrong_mm_add"})
    if r.returncode == 0 or "wrong_mm_add" not in r.stderr or "'mm'" not in r.stderr or os.path.exists(out):
        print(f"check_rewrite_cli: {method}: forced wrong rule not caught: rc {r.returncode} {r.stderr!r}", file=sys.stderr)
        failures += 1
    return failures


def group_conv(d):
    """merge_group_conv (TASO's merge of group convs; never cheaper under the simulator, so forced by
    the GOPT_REWRITE_APPLY_RULE test hook) on a model with weights: both convs go from 4 groups to
    2 with block-diagonal weights; the output passes gopt's executor and ONNX Runtime verification
    and the full onnx.checker check."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 2, 3, 3)).astype(np.float32) * 0.3, "w1"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal((16, 4, 3, 3)).astype(np.float32) * 0.3, "w2")]
    conv = dict(dilations=[1, 1], group=4, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], strides=[1, 1], **conv),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], strides=[2, 2], **conv)]
    g = helper.make_graph(nodes, "gconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 6, 6])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    src, rules, out = (os.path.join(d, f) for f in ("gconv.onnx", "gconv.json", "gconv_out.onnx"))
    onnx.save(m, src)
    json.dump({"rules": [{"name": "merge_group_conv", "builtin": True}]}, open(rules, "w"))
    r = subprocess.run([GOPT, "rewrite", src, "-o", out, "--rules", rules, "--json"], capture_output=True,
                       text=True, env={**os.environ, "GOPT_REWRITE_APPLY_RULE": "merge_group_conv"})
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    groups = [a.i for n in onnx.load(out).graph.node for a in n.attribute if a.name == "group"] if j else []
    if (j.get("rules_applied") != {"merge_group_conv": 2} or j.get("verified") is not True
            or j.get("verified_with") != "both" or j.get("ort_measured_after_s") is None or groups != [2, 2]):
        print(f"check_rewrite_cli: merge_group_conv: rc {r.returncode} {j} groups {groups} {r.stderr!r}", file=sys.stderr)
        return 1
    onnx_check.full_check(out)
    print(f"merge_group_conv: groups 4 -> {groups}, max |diff| {j['max_abs_diff']:.3g}, verified with {j['verified_with']}")
    return 0


NEW_BUILTINS = ("sink_unary_below_concat", "swap_unary_maxpool", "merge_parallel_matmul_batched", "merge_matmul_add",
                "merge_separable_sum")


def tensat_builtins(d):
    """The built-ins added for Tensat's models on one model with weights (only they are enabled):
    Concat(Relu, Relu) -> Relu(Concat) then MaxPool(Relu) -> Relu(MaxPool); two MatMuls sharing an
    [8, 16] input -> one batched MatMul; x W_i + h U_i for two cells -> [x h] [W_i; U_i] over one
    Concat; two separable convs (grouped 3x3, then 1x1) on one input summed -> one grouped conv with
    interleaved channels and one 1x1 conv. Greedy applies each; the output passes gopt's executor and ONNX Runtime verification
    and the full onnx.checker check."""
    rng = np.random.default_rng(2)
    w = {n: rng.standard_normal(s).astype(np.float32) * 0.3 for n, s in
         (("wc1", (4, 3, 3, 3)), ("wc2", (4, 3, 1, 1)), ("a1", (16, 12)), ("a2", (16, 12)),
          ("w0", (6, 5)), ("u0", (4, 5)), ("w1", (6, 5)), ("u1", (4, 5)), ("sga", (4, 2, 3, 3)),
          ("sgb", (6, 2, 3, 3)), ("sbb", (6,)), ("spa", (5, 4, 1, 1)), ("spb", (5, 6, 1, 1)), ("sbp", (5,)))}
    conv = dict(dilations=[1, 1], group=1, strides=[1, 1])
    nodes = [helper.make_node("Conv", ["x", "wc1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], **conv),
             helper.make_node("Conv", ["x", "wc2"], ["c2"], kernel_shape=[1, 1], pads=[0, 0, 0, 0], **conv),
             helper.make_node("Relu", ["c1"], ["r1"]), helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Concat", ["r1", "r2"], ["cat"], axis=1),
             helper.make_node("MaxPool", ["cat"], ["y0"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MatMul", ["z", "a1"], ["y1"]), helper.make_node("MatMul", ["z", "a2"], ["y2"])]
    for i in range(2):
        nodes += [helper.make_node("MatMul", ["xa", f"w{i}"], [f"xw{i}"]),
                  helper.make_node("MatMul", ["ha", f"u{i}"], [f"hu{i}"]),
                  helper.make_node("Add", [f"xw{i}", f"hu{i}"], [f"cell{i}"])]
    sep = dict(dilations=[1, 1], group=2, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    pw = dict(dilations=[1, 1], group=1, kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1])
    nodes += [helper.make_node("Conv", ["sx", "sga"], ["sa"], **sep),
              helper.make_node("Conv", ["sx", "sgb", "sbb"], ["sb"], **sep),
              helper.make_node("Conv", ["sa", "spa", "sbp"], ["pa"], **pw),
              helper.make_node("Conv", ["sb", "spb"], ["pb"], **pw),
              helper.make_node("Add", ["pa", "pb"], ["ysep"])]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "tensat_builtins",
                          [vi("x", TensorProto.FLOAT, [1, 3, 10, 10]), vi("z", TensorProto.FLOAT, [8, 16]),
                           vi("xa", TensorProto.FLOAT, [2, 6]), vi("ha", TensorProto.FLOAT, [2, 4]),
                           vi("sx", TensorProto.FLOAT, [1, 4, 6, 6])],
                          [vi("y0", TensorProto.FLOAT, [1, 8, 5, 5]), vi("y1", TensorProto.FLOAT, [8, 12]),
                           vi("y2", TensorProto.FLOAT, [8, 12]), vi("cell0", TensorProto.FLOAT, [2, 5]),
                           vi("cell1", TensorProto.FLOAT, [2, 5]), vi("ysep", TensorProto.FLOAT, [1, 5, 6, 6])],
                          [numpy_helper.from_array(v, n) for n, v in w.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    src, rules, out = (os.path.join(d, f) for f in ("tb.onnx", "tb.json", "tb_out.onnx"))
    onnx.save(m, src)
    json.dump({"rules": [{"name": n, "builtin": True} for n in NEW_BUILTINS]}, open(rules, "w"))
    r = subprocess.run([GOPT, "rewrite", src, "-o", out, "--rules", rules, "--json"], capture_output=True, text=True)
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    if (set(j.get("rules_applied", {})) != set(NEW_BUILTINS) or j.get("verified") is not True
            or j.get("verified_with") != "both"):
        print(f"check_rewrite_cli: new built-ins: rc {r.returncode} {j} {r.stderr!r}", file=sys.stderr)
        return 1
    onnx_check.full_check(out)
    print(f"new built-ins: {j['rules_applied']} max |diff| {j['max_abs_diff']:.3g}, verified with {j['verified_with']}")
    return 0


def interrupted(d, model, method, extra, ready):
    """Ctrl-C (SIGINT) once the progress log (GOPT_PROGRESS=1: plain lines when not a terminal)
    shows a line matching ready(line): the search stops with its best graph so far, which is
    verified and written like any result (exit 0, "interrupted": true, checker-valid)."""
    out = os.path.join(d, f"int_{method}.onnx")
    p = subprocess.Popen([GOPT, "rewrite", model, "-o", out, "--json", "--verify", "exec", "--method", method, *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env={**os.environ, "GOPT_PROGRESS": "1"})
    log = []
    for line in p.stderr:
        log.append(line)
        if line.startswith(f"gopt rewrite: {method}:") and ready(line):
            p.send_signal(signal.SIGINT)
            break
    stdout, rest = p.communicate()
    j = json.loads(stdout) if p.returncode == 0 and stdout.strip() else {}
    if p.returncode != 0 or j.get("interrupted") is not True or j.get("verified") is not True or not os.path.exists(out):
        print(f"check_rewrite_cli: {method} {model}: Ctrl-C did not give the best so far: rc {p.returncode} "
              f"{stdout[-300:]!r} {''.join(log[-3:])}{rest[-300:]}", file=sys.stderr)
        return 1, j
    onnx_check.full_check(out)
    print(f"interrupted {method} {model}: {j['rules_applied']} {j['predicted_before_s']:.3g} -> "
          f"{j['predicted_after_s']:.3g} after {j['search_seconds']:.1f} s ({log[-1].strip()})")
    return 0, j


def roofline(d):
    """A V100 costed by the roofline (`"gpu_model": false`): there a folded BatchNorm saves its
    kernel; under the measured-GPU model of the GPU presets the bias the fold adds runs as a kernel
    of its own (as in PyTorch), so folding gains nothing there (docs/SIMULATOR.md)."""
    path = os.path.join(d, "v100_roofline.json")
    with open(path, "w") as f:
        json.dump({"devices": [{"preset": "V100", "gpu_model": False}]}, f)
    return path


def run(model, out, extra=()):
    r = subprocess.run([GOPT, "rewrite", model, "-o", out, "--json", "--budget", "10", *extra],
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"check_rewrite_cli: {model}: exit {r.returncode}: {r.stderr.strip()}")
    j = json.loads(r.stdout)
    missing = KEYS - set(j)
    if missing or j["verified"] is not True:
        raise SystemExit(f"check_rewrite_cli: {model}: bad JSON {j}")
    if j["predicted_after_s"] > j["predicted_before_s"] * (1 + 1e-9):
        raise SystemExit(f"check_rewrite_cli: {model}: cost went up {j}")
    onnx_check.full_check(out)
    return j


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        for model in ("corpus/squeezenet1_1.onnx", "corpus/bert_tiny.onnx", "corpus/resnet18.onnx",
                      "resnet50", "inception_v3:image=75", "bert:layers=2"):
            j = run(model, os.path.join(d, "out.onnx"))
            print(f"{model}: {j['rules_applied']} {j['predicted_before_s']:.3g} -> {j['predicted_after_s']:.3g}")
            if not j["rules_applied"] and j.get("verified_with") != "unchanged":
                print(f"check_rewrite_cli: {model}: nothing rewritten but not 'unchanged': {j}", file=sys.stderr)
                failures += 1
        # Tensat's SqueezeNet: merged expand convs, one Relu (hoisted over the Split, or sunk below
        # the Concat first), Concat(Split) gone; budget 100: the 11 Relu moves come first
        j = run("squeezenet:tensat=1", os.path.join(d, "sq.onnx"), ("--budget", "100"))
        if (not {"enlarge_merge_conv", "concat_of_split"} <= set(j["rules_applied"])
                or not {"hoist_unary_over_split", "sink_unary_below_concat"} & set(j["rules_applied"])):
            print(f"check_rewrite_cli: squeezenet:tensat=1 rules {j['rules_applied']}", file=sys.stderr)
            failures += 1
        r = subprocess.run([GOPT, "rewrite", "--list-methods"], capture_output=True, text=True)
        if r.returncode != 0 or "greedy" not in r.stdout.split():
            print(f"check_rewrite_cli: --list-methods: {r.stdout!r}", file=sys.stderr)
            failures += 1
        src = os.path.join(d, "convbn.onnx")
        conv_bn_model(src)
        j = run(src, os.path.join(d, "convbn_out.onnx"), ("--cluster", roofline(d)))
        if (j["rules_applied"].get("fuse_conv_batchnorm") != 1 or j["measured_before_s"] is None
                or j.get("ort_measured_before_s") is None or j.get("ort_measured_after_s") is None):
            print(f"check_rewrite_cli: Conv+BN model not folded or not measured: {j}", file=sys.stderr)
            failures += 1
        m = onnx.load(os.path.join(d, "convbn_out.onnx"))
        if [n.op_type for n in m.graph.node] != ["Conv", "Relu"]:
            print(f"check_rewrite_cli: folded model has ops {[n.op_type for n in m.graph.node]}", file=sys.stderr)
            failures += 1
        failures += wrong_rule(d)
        failures += group_conv(d)
        failures += tensat_builtins(d)
        # eqsat (Tensat): same verification and checker path, same JSON fields
        failures += wrong_rule(d, "eqsat")
        for model in ("corpus/squeezenet1_1.onnx", "resnet50", "inception_v3:image=75", "corpus/gpt2_tiny.onnx"):
            # these saturate in a few iterations; the time limit only guards a slow (sanitized,
            # loaded) run, where 10 s stopped resnet50's saturation after 41 of 53 folds.
            # gpt2_tiny: its ConstantOfShape's value attribute once lost its bytes in the
            # conversion (verification failed: "value attribute unreadable")
            j = run(model, os.path.join(d, "out.onnx"), ("--method", "eqsat", "--budget", "20000", "--seconds", "120")
                    + (("--cluster", roofline(d)) if model == "resnet50" else ()))
            print(f"eqsat {model}: {j['rules_applied']} {j['predicted_before_s']:.3g} -> {j['predicted_after_s']:.3g}")
            if "extraction: " not in j.get("search_note", ""):
                print(f"check_rewrite_cli: eqsat {model}: no extraction note {j}", file=sys.stderr)
                failures += 1
            if model == "resnet50" and j["rules_applied"].get("fuse_conv_batchnorm") != 53:
                print(f"check_rewrite_cli: eqsat resnet50: BN not folded {j}", file=sys.stderr)
                failures += 1
        # Tensat's VGG-19: the e-graph's conversion once produced a graph reading a tensor nothing
        # produced (after concat_of_split); it converts now (the ILP's "cheaper" graph was that
        # unproduced tensor standing in for computed ones: VGG-19 has nothing cheaper here)
        j = run("vgg19:tensat=1", os.path.join(d, "vgg.onnx"), ("--method", "eqsat", "--seconds", "3", "--budget", "20000"))
        print(f"eqsat vgg19:tensat=1: {j['search_note'][-120:]}")
        if "failed to convert" in j["search_note"]:
            print(f"check_rewrite_cli: eqsat vgg19:tensat=1: {j['search_note']}", file=sys.stderr)
            failures += 1
        # Tensat's SqueezeNet: the extraction costs the merged conv's contiguous Split as free (like
        # the simulator), so eqsat merges the expand convs and the result is cheaper
        j = run("squeezenet:tensat=1", os.path.join(d, "sq.onnx"), ("--method", "eqsat", "--budget", "20000",
                                                                     "--seconds", "120"))
        print(f"eqsat squeezenet:tensat=1: {j['rules_applied']} {j['predicted_before_s']:.3g} -> {j['predicted_after_s']:.3g}")
        if not j["rules_applied"].get("enlarge_merge_conv") or not j["predicted_after_s"] < j["predicted_before_s"]:
            print(f"check_rewrite_cli: eqsat squeezenet:tensat=1 not cheaper: {j}", file=sys.stderr)
            failures += 1
        # Ctrl-C: greedy once it has a cheaper graph, eqsat during saturation (NasRNN: its first
        # iteration takes seconds; its weights are small, so the checker's zeros stay cheap)
        f, j = interrupted(d, "nasrnn", "greedy", ("--budget", "1000000", "--seconds", "3000"),
                           lambda line: " generated," in line and "(0.0% less)" not in line)
        if not f and not j["predicted_after_s"] < j["predicted_before_s"]:
            print(f"check_rewrite_cli: interrupted greedy lost its best graph: {j}", file=sys.stderr)
            f = 1
        failures += f
        f, j = interrupted(d, "nasrnn", "eqsat", ("--budget", "1000000", "--seconds", "3000"),
                           lambda line: "rewrites applied" in line and " 0 rewrites applied" not in line)
        if not f and "stop: interrupted" not in j.get("search_note", ""):
            print(f"check_rewrite_cli: interrupted eqsat: {j.get('search_note')}", file=sys.stderr)
            f = 1
        failures += f
        # rl: SIGINT at its second progress line (2 s in; a 10-step NasRNN's episode of up to 1000
        # rewrites runs far longer): the policy is offered STOP only, the best graph seen is kept
        f, j = interrupted(d, "nasrnn:steps=10", "rl", ("--budget", "1000", "--seconds", "3000"),
                           lambda line: "rewrite steps" in line and not line.split(":")[2].strip().startswith("0/"))
        failures += f
        j = run(src, os.path.join(d, "convbn_out.onnx"), ("--method", "eqsat", "--cluster", roofline(d)))
        m = onnx.load(os.path.join(d, "convbn_out.onnx"))
        if j["rules_applied"].get("fuse_conv_batchnorm") != 1 or [n.op_type for n in m.graph.node] != ["Conv", "Relu"]:
            print(f"check_rewrite_cli: eqsat: Conv+BN model not folded: {j}", file=sys.stderr)
            failures += 1
        r = subprocess.run([GOPT, "rewrite", src, "-o", os.path.join(d, "x.onnx"), "--method", "nope"],
                           capture_output=True, text=True)
        if r.returncode == 0 or len(r.stderr.strip().splitlines()) != 1 or "nope" not in r.stderr:
            print(f"check_rewrite_cli: bad --method not one error line: {r.stderr!r}", file=sys.stderr)
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
