#!/usr/bin/python3
"""ONNX backend node tests through `gopt run --check`.

  node_tests.py generate DIR
      writes the ONNX backend node tests of Debian's python-onnx (onnx 1.12: 922 folders
      DIR/node/test_*/model.onnx + test_data_set_*/) with `onnx.backend.test.cmd_tools
      generate-data`. onnx 1.12's generators still use numpy's removed aliases np.float, np.int,
      np.bool and np.object (gone in numpy 1.24), so they are restored first.
  node_tests.py run GOPT DIR EXCLUDES [--jobs N] [--only SUBSTR] [--report FILE]
      runs every DIR/node/test_* with `GOPT run model.onnx --check case --threads 1`. EXCLUDES
      (tests/exec/node_excluded.txt) lists `test_name  reason` lines. Exit status 0 only when
      every test that is not excluded passes; excluded tests that now pass are listed (so the
      list stays honest) but do not fail the run. Prints the pass rate over all tests.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import time


def generate(out):
    import numpy as np
    for alias, typ in (("float", float), ("int", int), ("bool", bool), ("object", object)):
        if alias not in np.__dict__:
            setattr(np, alias, typ)
    from onnx.backend.test.cmd_tools import main as onnx_main
    os.makedirs(out, exist_ok=True)
    sys.argv = ["cmd_tools", "generate-data", "-o", out]
    onnx_main()
    n = len([d for d in os.listdir(os.path.join(out, "node")) if d.startswith("test_")])
    print(f"{n} node tests in {os.path.join(out, 'node')}")
    return 0 if n > 0 else 1


def read_excludes(path):
    """Returns {test_name: reason}; lines are `name  reason`, '#' starts a comment."""
    ex = {}
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            if len(parts) < 2:
                raise SystemExit(f"{path}:{ln}: '{parts[0]}' has no reason")
            ex[parts[0]] = parts[1]
    return ex


def run_one(gopt, case):
    cmd = [gopt, "run", os.path.join(case, "model.onnx"), "--check", case, "--threads", "1"]
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        err = p.stderr.decode(errors="replace").strip().splitlines()
        msg = next((l for l in err if "error" in l.lower() or "FAIL" in l), err[-1] if err else "")
        return p.returncode == 0, msg
    except subprocess.TimeoutExpired:
        return False, "timeout (60 s)"


def run(args):
    root = os.path.join(args.dir, "node")
    names = sorted(d for d in os.listdir(root) if d.startswith("test_"))
    if args.only:
        names = [n for n in names if args.only in n]
    ex = read_excludes(args.excludes)
    unknown = sorted(set(ex) - set(os.listdir(root)))
    t0 = time.time()
    res = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futs = {pool.submit(run_one, args.gopt, os.path.join(root, n)): n for n in names}
        for f in concurrent.futures.as_completed(futs):
            res[futs[f]] = f.result()
    passed = [n for n in names if res[n][0]]
    bad = [n for n in names if not res[n][0] and n not in ex]
    stale = [n for n in names if res[n][0] and n in ex]
    lines = []
    for n in bad:
        lines.append(f"FAIL (not excluded) {n}: {res[n][1]}")
    for n in stale:
        lines.append(f"NOW PASSES (remove from {os.path.basename(args.excludes)}) {n}")
    for n in unknown:
        lines.append(f"excluded but not generated: {n}")
    rate = 100.0 * len(passed) / max(1, len(names))
    lines.append(f"node tests: {len(passed)}/{len(names)} pass ({rate:.1f}%), "
                 f"{sum(1 for n in names if n in ex and not res[n][0])} excluded fail, "
                 f"{len(bad)} unexpected failures, {len(stale)} excluded now pass, "
                 f"{time.time() - t0:.0f} s")
    print("\n".join(lines))
    if args.report:
        with open(args.report, "w") as f:
            for n in names:
                f.write(f"{'pass' if res[n][0] else 'FAIL'} {n} {'' if res[n][0] else res[n][1]}\n")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("dir")
    r = sub.add_parser("run")
    r.add_argument("gopt")
    r.add_argument("dir")
    r.add_argument("excludes")
    r.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    r.add_argument("--only", default="")
    r.add_argument("--report", default="")
    a = ap.parse_args()
    return generate(a.dir) if a.cmd == "generate" else run(a)


if __name__ == "__main__":
    sys.exit(main())
