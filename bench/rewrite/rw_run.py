"""rw_run.py: the one way the rewrite benchmarks run `gopt rewrite`: the command with -o OUT and
--json added, its output checked with tools/onnx_check.py (onnx.checker full check)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import onnx_check  # noqa: E402


def rewrite(cmd, keep=None):
    """Runs cmd (gopt rewrite MODEL ...) with -o and --json; returns (json or None, error line,
    wall seconds). keep: a path the checked output is copied to."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "o.onnx")
        t0 = time.time()
        r = subprocess.run(list(cmd) + ["-o", out, "--json"], capture_output=True, text=True)
        wall = time.time() - t0
        if r.returncode != 0:
            lines = r.stderr.strip().splitlines()
            return None, (lines[-1] if lines else f"exit {r.returncode}"), wall
        try:
            onnx_check.full_check(out)
        except Exception as e:  # noqa: BLE001 - reported in the row
            return None, f"onnx.checker: {str(e).splitlines()[0]}", wall
        if keep:
            shutil.copyfile(out, keep)
        return json.loads(r.stdout), "", wall
