#!/usr/bin/python3
"""ONNX backend node tests through `gopt run --check`.

  node_tests.py extract ARCHIVE DIR
      unpacks the node tests of an onnx release (../shared/onnx-node-tests-v1.22.0.tar.gz: 1,765
      folders onnx/backend/test/data/node/test_*/{model.onnx,test_data_set_0/*.pb}) into
      DIR/node/test_*. Skips the work when DIR/node/.archive already names the same archive
      (path, size, mtime). Members outside node/test_* or with '..' are refused.
  node_tests.py run GOPT DIR EXCLUDES [--jobs N] [--only SUBSTR] [--shard I/N] [--report FILE]
      runs every DIR/node/test_* (or the I-th of N interleaved shards of them, so that ctest can
      run the shards in parallel) with `GOPT run model.onnx --check case --threads 1`. EXCLUDES
      (tests/exec/node_excluded.txt) lists `test_name  reason` lines. Exit status 0 only when
      every test that is not excluded passes; excluded tests that now pass are listed (so the
      list stays honest) but do not fail the run. Prints the pass count over the tests it ran.
"""
import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tarfile
import time

PREFIX = "onnx/backend/test/data/node/"


def extract(archive, out):
    try:
        st = os.stat(archive)
    except OSError as e:
        print(f"node_tests: {archive}: cannot read the node-test archive ({e.strerror}); "
              f"it is ../shared/onnx-node-tests-v1.22.0.tar.gz beside the checkout "
              f"(cmake -DEXEC_NODE_ARCHIVE=PATH names another)", file=sys.stderr)
        return 2
    stamp_text = f"{os.path.abspath(archive)} {st.st_size} {int(st.st_mtime)}\n"
    node = os.path.join(out, "node")
    stamp = os.path.join(node, ".archive")
    if os.path.exists(stamp) and open(stamp).read() == stamp_text:
        print(f"{node}: already extracted from {archive}")
        return 0
    tmp = node + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    n = 0
    with tarfile.open(archive) as tar:
        for m in tar:
            if not m.name.startswith(PREFIX) or (not m.isfile() and not m.isdir()):
                continue
            rel = m.name[len(PREFIX):]
            if not rel or ".." in rel.split("/") or not rel.startswith("test_"):
                continue
            dst = os.path.join(tmp, rel)
            if m.isdir():
                os.makedirs(dst, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with tar.extractfile(m) as src, open(dst, "wb") as f:
                shutil.copyfileobj(src, f)
            n += 1
    with open(os.path.join(tmp, ".archive"), "w") as f:
        f.write(stamp_text)
    shutil.rmtree(node, ignore_errors=True)
    os.rename(tmp, node)
    tests = len([d for d in os.listdir(node) if d.startswith("test_")])
    print(f"{tests} node tests ({n} files) in {node}")
    return 0 if tests > 0 else 1


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
    ex = read_excludes(args.excludes)
    unknown = sorted(set(ex) - set(names))
    if args.only:
        names = [n for n in names if args.only in n]
    if args.shard:
        i, n = (int(v) for v in args.shard.split("/"))
        names = names[i::n]
        if i:
            unknown = []
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
        lines.append(f"excluded but not in the archive: {n}")
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
    g = sub.add_parser("extract")
    g.add_argument("archive")
    g.add_argument("dir")
    r = sub.add_parser("run")
    r.add_argument("gopt")
    r.add_argument("dir")
    r.add_argument("excludes")
    r.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    r.add_argument("--only", default="")
    r.add_argument("--shard", default="", help="I/N: run names[I::N] only")
    r.add_argument("--report", default="")
    a = ap.parse_args()
    return extract(a.archive, a.dir) if a.cmd == "extract" else run(a)


if __name__ == "__main__":
    sys.exit(main())
