#!/usr/bin/python3
"""check_binding.py GOPT_BIN: the Python binding (python/gopt, over libgopt.so) agrees with the gopt
CLI's --json output on the same inputs: info (zoo models and an ONNX file), simulate (with and
without a decisions file), optimize (a baseline, search methods with a seed, the learned policy
when a shipped one exists; the decisions files written), compare (a subset and the full method
list), and errors (gopt.Error carries the CLI's one-line message)."""
import json
import os
import subprocess
import sys
import tempfile

import gopt

GOPT = sys.argv[1]
from pycase import case, failures  # noqa: E402


def cli(*args):
    p = subprocess.run([GOPT] + list(args), capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("gopt %s failed: %s" % (" ".join(args), p.stderr))
    return json.loads(p.stdout)


def cli_error(*args):
    p = subprocess.run([GOPT] + list(args), capture_output=True, text=True)
    assert p.returncode != 0, args
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


def same(a, b, path="", rel=1e-12, skip=()):
    """Asserts a == b recursively (floats within rel); keys in skip are not compared."""
    if isinstance(a, dict) and isinstance(b, dict):
        ka, kb = set(a) - set(skip), set(b) - set(skip)
        if ka != kb:
            raise AssertionError("%s: keys differ: only binding %s, only CLI %s" % (path, ka - kb, kb - ka))
        for k in ka:
            same(a[k], b[k], path + "." + k, rel, skip)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            raise AssertionError("%s: lengths %d != %d" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s[%d]" % (path, i), rel, skip)
    elif isinstance(a, float) or isinstance(b, float):
        if abs(a - b) > rel * max(abs(a), abs(b), 1e-300):
            raise AssertionError("%s: %r != %r" % (path, a, b))
    elif a != b:
        raise AssertionError("%s: %r != %r" % (path, a, b))




TIMING = ("seconds",)  # wall-clock fields differ between runs


@case("info: zoo models and an ONNX file")
def _():
    for spec in ["resnet50", "inception_v3", "gnmt:layers=2,steps=4", "tests/onnx/data/shapes.onnx"]:
        same(gopt.load(spec).info(), cli("info", spec, "--json"), spec)


@case("zoo: the model list and node counts")
def _():
    z = cli("zoo", "--json")
    same([{k: m[k] for k in ("name", "description", "knobs")} for m in gopt.zoo()],
         [{k: m[k] for k in ("name", "description", "knobs")} for m in z])
    p = subprocess.run([GOPT, "zoo", "--nodes", "gnmt:layers=8,steps=100"], capture_output=True, text=True)
    assert str(gopt.zoo_node_count("gnmt:layers=8,steps=100")) in p.stdout, p.stdout


@case("simulate: default and decisions file, trace written")
def _():
    with tempfile.TemporaryDirectory() as d:
        m = gopt.load("resnet50")
        same(m.simulate("4xV100-nvlink"), cli("simulate", "resnet50", "--cluster", "4xV100-nvlink", "--json"))
        dec = "tests/sim/fixtures/resnet50_split.json"
        tr = os.path.join(d, "t.json")
        a = m.simulate("2xV100", decisions=dec, trace=tr)
        b = cli("simulate", "resnet50", "--cluster", "2xV100", "--decisions", dec, "--json", "--trace", tr)
        same(a, b)
        assert json.load(open(tr))["traceEvents"], "empty trace"
        with open(dec) as f:
            same(m.simulate("2xV100", decisions=json.load(f)), b, skip=("trace",))


@case("optimize: baselines, search methods (seeded), learned policy; decisions files")
def _():
    with tempfile.TemporaryDirectory() as d:
        runs = [("placement", "2xV100", "metis", []), ("placement", "4xV100-nvlink", "anneal", ["--budget", "300", "--seed", "7"]),
                ("fusion", "V100", "local", ["--budget", "200", "--seed", "1", "--start", "default"]),
                ("joint", "2xV100", "brkga", ["--budget", "300", "--seed", "2"]),
                ("memory", "2xV100", "metis+mem_greedy", [])]
        try:
            gopt.find_policy("placement")
            runs.append(("placement", "2xV100", "go", ["--samples", "4", "--seed", "3"]))
        except gopt.Error as e:
            print("     (no shipped placement policy: %s)" % e)
        for task, cl, method, extra in runs:
            kw = {"budget": None, "seed": 0, "start": None, "samples": 16}
            for k, v in zip(extra[::2], extra[1::2]):
                kw[k[2:]] = v if k == "--start" else int(v)
            fa, fb = os.path.join(d, "a.json"), os.path.join(d, "b.json")
            a = gopt.load("resnet50").optimize(task, cl, method, threads=2, out=fa, **kw)
            b = cli("optimize", "resnet50", "--task", task, "--cluster", cl, "--method", method, "--threads", "2",
                    "--json", "-o", fb, *extra)
            assert len(a.pop("x")) > 0
            a["decisions"] = b["decisions"]
            same(a, b, "%s/%s" % (task, method), skip=TIMING)
            same(json.load(open(fa)), json.load(open(fb)), "decisions %s/%s" % (task, method))


@case("compare: a subset of methods and the full list")
def _():
    a = gopt.load("resnet50").compare("placement", "2xV100", methods="single,metis,random,local", budget=150,
                                      seed=4, threads=2)
    b = cli("compare", "resnet50", "--task", "placement", "--cluster", "2xV100", "--methods",
            "single,metis,random,local", "--budget", "150", "--seed", "4", "--threads", "2", "--json")
    for r in a["results"]:
        r.pop("x")
    same(a, b, skip=TIMING)
    a = gopt.load("resnet50:depth=18").compare("schedule", "2xV100", budget=60, threads=1)
    b = cli("compare", "resnet50:depth=18", "--task", "schedule", "--cluster", "2xV100", "--budget", "60",
            "--threads", "1", "--json")
    for r in a["results"]:
        r.pop("x")
    same(a, b, skip=TIMING)


@case("request_stop from another thread stops a search with its best so far")
def _():
    import threading
    m = gopt.load("inception_v3")
    t = threading.Timer(0.3, gopt.request_stop)
    t.start()
    r = m.optimize("placement", "4xV100-nvlink", "anneal", seconds=60, seed=1, threads=1)
    t.join()
    assert r["interrupted"], r  # without the stop it would run its 60 s
    assert r["objective"] <= r["default_objective"], r
    r = m.optimize("placement", "4xV100-nvlink", "anneal", budget=50, seed=1, threads=1)
    assert not r["interrupted"] and r["evaluations"] == 50, r  # the next run starts clear


@case("errors: gopt.Error carries the CLI's one-line message")
def _():
    checks = [
        (lambda: gopt.load("resnet51"), ["info", "resnet51"]),
        (lambda: gopt.load("resnet50:depth=7"), ["info", "resnet50:depth=7"]),
        (lambda: gopt.load("tests/onnx/data/cyclic.onnx"), ["info", "tests/onnx/data/cyclic.onnx"]),
        (lambda: gopt.load("tests/cli/data/truncated.onnx"), ["info", "tests/cli/data/truncated.onnx"]),
        (lambda: gopt.load("no/such/model.onnx"), ["info", "no/such/model.onnx"]),
        (lambda: gopt.load("resnet50").simulate("2xV999"), ["simulate", "resnet50", "--cluster", "2xV999"]),
        (lambda: gopt.load("resnet50").simulate("2xV100", decisions="tests/sim/fixtures/decisions_bad_node.json"),
         ["simulate", "resnet50", "--cluster", "2xV100", "--decisions", "tests/sim/fixtures/decisions_bad_node.json"]),
    ]
    for fn, args in checks:
        line = cli_error(*args)
        try:
            fn()
            raise AssertionError("no gopt.Error for %s" % args)
        except gopt.Error as e:
            assert "\n" not in str(e), str(e)
            assert e.code < 0, e.code
            assert line.endswith(str(e)), "%s: CLI '%s', binding '%s'" % (args, line, e)
    try:
        gopt.load("resnet50").optimize("placement", "2xV100", "xla")
        raise AssertionError("xla applied to placement")
    except gopt.Error as e:
        line = cli_error("optimize", "resnet50", "--task", "placement", "--cluster", "2xV100", "--method", "xla")
        assert line.endswith(str(e)), (line, str(e))


print("binding: %s (gopt %s)" % (gopt.library_path(), gopt.__version__))
if failures:
    print("check_binding: %d case(s) failed: %s" % (len(failures), ", ".join(failures)), file=sys.stderr)
    sys.exit(1)
print("check_binding: all cases agree with the CLI")
