#!/usr/bin/python3
"""check_pair_time.py GOPT CASE: bench/exec/pair_time.py on CASE with two gopt variants (the
default and `--layouts plain`) and 4 rounds: the JSON has one median and one ratio per variant,
wall and CPU, all positive; a variant whose flags gopt refuses makes pair_time exit 1 with one
line naming it. Exit 1 on any failure."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PT = [sys.executable, os.path.join(ROOT, "bench", "exec", "pair_time.py")]


def main():
    gopt, case = sys.argv[1], sys.argv[2]
    p = subprocess.run(PT + [gopt, case, "--reps", "4", "--warmup", "1", "--gopt-args", "",
                             "--gopt-args", "--layouts plain"], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"FAIL: pair_time exited {p.returncode}: {p.stderr.strip()}")
    d = json.loads(p.stdout)
    bad = []
    if d["reps"] != 4 or d["warmup"] != 1:
        bad.append(f"reps/warmup {d['reps']}/{d['warmup']}")
    for suffix in ("", "_cpu"):
        g, o, r = d["gopt" + suffix], d["ort" + suffix], d["ratio" + suffix]
        if len(g) != 2 or len(r) != 2 or not (o > 0 and all(v > 0 for v in g + r)):
            bad.append(f"{suffix or 'wall'}: gopt {g}, ort {o}, ratio {r}")
    p = subprocess.run(PT + [gopt, case, "--reps", "1", "--gopt-args", "--layouts bogus"],
                       capture_output=True, text=True)
    if p.returncode != 1 or "gopt run --layouts bogus" not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
        bad.append(f"refused variant: exit {p.returncode}, stderr {p.stderr.strip()!r}")
    for b in bad:
        print("FAIL:", b)
    print("ok" if not bad else f"{len(bad)} failures", json.dumps(d))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
