#!/usr/bin/python3
"""Interleaved timing of gopt's executor and ONNX Runtime on one test-data folder (CASE/model.onnx,
CASE/test_data_set_0/input_N.pb), robust to a shared machine's drift.

  pair_time.py GOPT CASE [--threads 1] [--warmup 3] [--reps 10] [--gopt-args "--layouts plain" ...]
      (a variant may start with NAME=VALUE environment settings: --gopt-args "GOPT_ISA=avx2")

Starts one long-lived process per engine: `GOPT run CASE/model.onnx --inputs ... --time --paced`
for each --gopt-args variant (default: one variant with no extra flags) and
`node tools/ort/ort_run.js ... --paced WARMUP`. Each does WARMUP untimed runs, then the driver asks
for REPS rounds; in a round every engine does exactly one timed run (wall clock, measured inside the
engine's own process, wall clock and the process's CPU time), one after the other, and the engine
that goes first rotates from round to round. Every run is kept (none dropped). Prints one JSON
object:
  {"reps", "warmup", "threads", "ort": median wall seconds, "gopt": [median wall seconds per
   variant], "ratio": [median over rounds of gopt_variant / ort wall times in that round, per
   variant], "ort_cpu", "gopt_cpu", "ratio_cpu": the same of CPU seconds}
A slow spell of the machine hits both engines of a round alike, so the per-round ratio moves far
less than the medians of two blocks measured one after the other. The CPU times leave out the
time a run waited for a core (on a shared machine the scheduler's preemptions, which favour the
shorter run); with one thread on an idle machine they equal the wall times.
Any error: one line on stderr, exit 1.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "ort"))
import ort_compare  # noqa: E402  (case_inputs, write_inputs: the input files ort_run.js reads)


def fail(msg):
    sys.exit(f"pair_time: {msg}")


class Engine:
    """One engine's process in --paced mode: run() asks for one timed run and returns its seconds.
    Its stderr goes to a temporary file (a pipe nobody reads could fill and stall it)."""

    def __init__(self, name, cmd, env=None):
        self.name = name
        self.err = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                  stderr=self.err, text=True, bufsize=1)
        self.expect("ready")

    def die(self, what):
        """Stops the process and exits naming it, with its last stderr line or WHAT."""
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.err.seek(0)
        err = self.err.read().strip().splitlines()
        fail(f"{self.name}: {err[-1] if err else what}")

    def expect(self, what):
        line = self.p.stdout.readline().strip()
        if line == what or (what is None and line):
            return line
        self.die(f"printed '{line}'" if line else "exited before " + (what or "a time"))

    def run(self):
        """One timed run: (wall seconds, CPU seconds)."""
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        line = self.expect(None)
        try:
            wall, cpu = (float(v) for v in line.split())
            return wall, cpu
        except ValueError:
            self.die(f"printed '{line}', not wall and CPU seconds")

    def close(self):
        self.p.stdin.close()
        if self.p.wait(timeout=60):
            self.die(f"exit status {self.p.returncode}")
        self.err.close()


def gopt_engine(a, variant, model, common):
    """The gopt process of one --gopt-args variant; its leading NAME=VALUE words set environment
    variables of that process (e.g. GOPT_ISA=avx2)."""
    words, env = shlex.split(variant), dict(os.environ)
    while words and "=" in words[0] and not words[0].startswith("-"):
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    return Engine(f"gopt run {variant}".strip(),
                  [a.gopt, "run", model, "--inputs", a.case, "--time", "--paced", "--warmup", str(a.warmup)]
                  + common + words, env)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gopt")
    ap.add_argument("case")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--gopt-args", action="append", default=None,
                    help="extra `gopt run` flags of one gopt variant, after optional NAME=VALUE "
                    "environment settings (repeat for several variants)")
    a = ap.parse_args()
    if a.threads < 1 or a.warmup < 0 or a.reps < 1:
        fail("--threads and --reps must be positive, --warmup not negative")
    variants = a.gopt_args or [""]
    with tempfile.TemporaryDirectory() as work:
        model, arrs = ort_compare.case_inputs(a.case)
        inp = ort_compare.write_inputs(model, arrs, work)
        common = ["--threads", str(a.threads)]
        engines = [gopt_engine(a, v, model, common) for v in variants]
        engines.append(Engine("ONNX Runtime", ["node", os.path.join(ROOT, "tools", "ort", "ort_run.js"), model,
                                               inp, os.path.join(work, "ort_out"), "--paced", str(a.warmup)]
                              + common))
        times = [[] for _ in engines]
        for r in range(a.reps):
            n = len(engines)
            for j in range(n):
                e = (r + j) % n  # the engine that goes first rotates
                times[e].append(engines[e].run())
        for e in engines:
            e.close()
    res = {"reps": a.reps, "warmup": a.warmup, "threads": a.threads}
    for c, suffix in ((0, ""), (1, "_cpu")):
        ort = [t[c] for t in times[-1]]
        gopt = [[t[c] for t in ts] for ts in times[:-1]]
        res["ort" + suffix] = statistics.median(ort)
        res["gopt" + suffix] = [statistics.median(g) for g in gopt]
        res["ratio" + suffix] = [statistics.median([a / b for a, b in zip(g, ort)]) for g in gopt]
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
