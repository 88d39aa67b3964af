"""check_rewrite_measured.py GOPT: `gopt rewrite --cluster host --costdb DB --measure` on a small
Conv+BatchNorm+Relu model with weights (built here).
- The cost database is created, every op of the input and the candidates is profiled into it
  (entries = ops profiled), and a second run profiles nothing and predicts the same costs (cached).
- A written result is measured no slower than its input on gopt's executor; a kept one says why.
- A result measured slower (test hook GOPT_REWRITE_FAKE_MEASURE=BEFORE,AFTER) is not written: the
  output is the input (same nodes, same weights), --json says kept_input with the reason, stderr
  has one line saying so, exit 0, onnx.checker passes; measured faster, the rewrite is written.
- --measure-on ort: the guard names ONNX Runtime, whose times are in the JSON.
- A bad --measure-on value is one error line, exit 2."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

GOPT = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_check  # noqa: E402
from check_rewrite_cli import conv_bn_model  # noqa: E402

FAILED = []


def check(cond, msg):
    if not cond:
        FAILED.append(msg)
        print(f"check_rewrite_measured: FAIL: {msg}", file=sys.stderr)


def rewrite(model, out, extra=(), env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([GOPT, "rewrite", model, "-o", out, "--json", "--cluster", "host", "--verify", "exec",
                        "--measure", *extra], capture_output=True, text=True, cwd=ROOT, env=e)
    if r.returncode != 0:
        raise SystemExit(f"check_rewrite_measured: exit {r.returncode}: {r.stderr.strip()}")
    onnx_check.full_check(out)
    return json.loads(r.stdout), r.stderr


def weights(path):
    m = onnx.load(path)
    return [n.op_type for n in m.graph.node], {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}


def main():
    with tempfile.TemporaryDirectory() as d:
        model, out, db = os.path.join(d, "convbn.onnx"), os.path.join(d, "out.onnx"), os.path.join(d, "c.sqlite")
        conv_bn_model(model)
        ops_in, w_in = weights(model)
        # measured op costs, profiled on demand and cached
        j, _ = rewrite(model, out, ("--costdb", db))
        print(f"costdb run 1: {j['rules_applied']} predicted {j['predicted_before_s']:.3g} -> "
              f"{j['predicted_after_s']:.3g} s, profiled {j['costdb_profiled']}, written {j['written']}")
        check(os.path.exists(db), "the cost database was not written")
        check(j["costdb_profiled"] >= 3 and j["costdb_entries"] == j["costdb_profiled"]
              and j["costdb_unmeasurable"] == 0, f"profiling: {j}")
        if j["written"]:
            check(j["measured_after_s"] <= j["measured_before_s"], f"written but measured slower: {j}")
        else:
            check(j["kept_input"] or not j["rules_applied"], f"not written, no reason: {j}")
        j2, _ = rewrite(model, out, ("--costdb", db))
        check(j2["costdb_profiled"] == 0 and j2["costdb_entries"] == j["costdb_entries"],
              f"second run profiled again: {j2['costdb_profiled']}")
        check(j2["predicted_before_s"] == j["predicted_before_s"] and j2["predicted_after_s"] == j["predicted_after_s"],
              f"cached costs differ: {j['predicted_after_s']} vs {j2['predicted_after_s']}")
        # measured slower: the input is written as it came
        j, err = rewrite(model, out, env={"GOPT_REWRITE_FAKE_MEASURE": "0.001,0.002"})
        lines = [ln for ln in err.splitlines() if "input kept" in ln]
        check(j["kept_input"] is True and j["written"] is False and "slower" in j.get("kept_reason", ""),
              f"slower result: {j}")
        check(len(lines) == 1 and "1 ms -> 2 ms" in lines[0], f"stderr: {err!r}")
        check(j["candidate_nodes_after"] < j["nodes_before"] and j["nodes_after"] == j["nodes_before"],
              f"node counts {j}")
        ops_out, w_out = weights(out)
        check(ops_out == ops_in and set(w_out) == set(w_in)
              and all(np.array_equal(w_in[k], w_out[k]) for k in w_in), f"kept output is not the input: {ops_out}")
        # measured faster: written
        j, _ = rewrite(model, out, env={"GOPT_REWRITE_FAKE_MEASURE": "0.002,0.001"})
        ops_out, _ = weights(out)
        check(j["written"] is True and j["kept_input"] is False and "BatchNormalization" not in ops_out,
              f"faster result not written: {j} {ops_out}")
        # the guard on ONNX Runtime's measurement (verification with it, then 3 timed rounds)
        r = subprocess.run([GOPT, "rewrite", model, "-o", out, "--json", "--cluster", "host", "--measure",
                            "--measure-on", "ort"], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "GOPT_REWRITE_FAKE_MEASURE": "0.001,0.002"})
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        check(j.get("kept_input") is True and "ONNX Runtime" in j.get("kept_reason", "")
              and j.get("ort_measured_before_s") is not None, f"--measure-on ort: {r.returncode} {j} {r.stderr!r}")
        r = subprocess.run([GOPT, "rewrite", model, "-o", out, "--measure-on", "gpu"], capture_output=True, text=True)
        check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--measure-on" in r.stderr,
              f"bad --measure-on: {r.returncode} {r.stderr!r}")
    if FAILED:
        raise SystemExit(f"check_rewrite_measured: {len(FAILED)} failure(s)")
    print("check_rewrite_measured: ok")


if __name__ == "__main__":
    main()
