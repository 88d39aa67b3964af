#!/usr/bin/env python3
"""check_fusion_runs.py: every fusion decision gopt makes for this CPU runs, and computes what the
unfused run computes (issue 29, docs/TASKS.md "Fusion legality per target").

For each model and method: `gopt optimize MODEL --task fusion --cluster host --method M -o f.json`,
then `gopt run MODEL --fusion f.json` and `gopt run MODEL` (same --seed: the same random inputs and
made-up weights); every output must match within the executor's tolerance (|a-b| <= atol + rtol|b|).
Prints one line per (model, method) with the group count, the groups by kind and the largest
difference; exits 1 when any run fails or differs.

usage: check_fusion_runs.py GOPT [--models a,b] [--methods go,local,xla,tvm] [--budget N]
                            [--rtol R] [--atol A] [--layouts auto|plain]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

CORPUS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "densenet121", "efficientnet_b0", "inception_v3",
          "shufflenet_v2_x1_0", "vgg11", "lraspp_mobilenet_v3_large", "lstm_seq2seq", "bert_tiny",
          "gpt2_tiny", "wavenet", "swin_t"]


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def outputs(d):
    return [np.load(f) for f in sorted(glob.glob(os.path.join(d, "output_*.npy")),
                                       key=lambda s: int(s.rsplit("_", 1)[1].split(".")[0]))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gopt")
    ap.add_argument("--models", default=",".join(CORPUS))
    ap.add_argument("--methods", default="go,local,xla,tvm")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--layouts", default="auto")
    ap.add_argument("--corpus", default="corpus")
    a = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.models.split(","):
            model = os.path.join(a.corpus, m + ".onnx")
            ref = os.path.join(tmp, m + ".ref")
            rc, _, err = run([a.gopt, "run", model, "--threads", "1", "--layouts", a.layouts, "--format", "npy",
                              "--outputs", ref])
            if rc:
                print(f"FAIL {m}: the unfused run failed: {err.strip().splitlines()[-1]}")
                bad += 1
                continue
            want = outputs(ref)
            for meth in a.methods.split(","):
                f = os.path.join(tmp, f"{m}.{meth}.json")
                rc, _, err = run([a.gopt, "optimize", model, "--task", "fusion", "--cluster", "host", "--method",
                                  meth, "--budget", str(a.budget), "--threads", "1", "--no-history", "-o", f])
                if rc:
                    print(f"FAIL {m} {meth}: optimize: {err.strip().splitlines()[-1]}")
                    bad += 1
                    continue
                groups = json.load(open(f)).get("fusion", [])
                out = os.path.join(tmp, f"{m}.{meth}.out")
                rc, _, err = run([a.gopt, "run", model, "--threads", "1", "--layouts", a.layouts, "--fusion", f,
                                  "--format", "npy", "--outputs", out])
                if rc:
                    print(f"FAIL {m} {meth}: run --fusion ({len(groups)} groups): {err.strip().splitlines()[-1]}")
                    bad += 1
                    continue
                got = outputs(out)
                worst, ok = 0.0, len(got) == len(want)
                for x, y in zip(got, want):
                    if x.shape != y.shape or x.dtype != y.dtype:
                        ok = False
                        continue
                    if x.dtype.kind in "fc":
                        d = np.abs(x.astype(np.float64) - y.astype(np.float64))
                        lim = a.atol + a.rtol * np.abs(y.astype(np.float64))
                        ok = ok and bool(np.all(d <= lim))
                        worst = max(worst, float(d.max()) if d.size else 0.0)
                    else:
                        ok = ok and bool(np.array_equal(x, y))
                print(f"{'ok  ' if ok else 'FAIL'} {m} {meth}: {len(groups)} groups, "
                      f"max |fused - unfused| {worst:.3g}")
                bad += not ok
    print(f"{'FAIL' if bad else 'PASS'}: {bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
