#!/usr/bin/python3
"""verify_shared.py [GOPT] [DIR] [--timeout S] [--mem-gb G] [--only SUBSTR]: runs `gopt passes MODULE
--verify --json` (the default pipeline, outputs compared by execution on random inputs of seed 1)
on every HLO module under DIR (default ../shared/hlo) and prints one line per module (verified /
outputs differ / not verified and why, seconds), then the count: "verified N of M modules".
Each run gets at most S seconds (default 900) and G GiB of address space (default 12); a module that
exceeds either is counted as not verified and says so. docs/PASSES.md records the count."""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def modules(d):
    out = []
    for r, _, fs in os.walk(d):
        out += [os.path.join(r, f) for f in fs if f.endswith(('.txt', '.hlo')) and f not in ('README.md',)]
    return sorted(out)


def run(gopt, path, timeout, mem_gb):
    def limit():
        b = int(mem_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (b, b))

    t = time.time()
    try:
        p = subprocess.run([gopt, 'passes', path, '--verify', '--json'], capture_output=True, text=True,
                           timeout=timeout, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return None, 'over the time limit (%d s)' % timeout, time.time() - t
    try:
        j = json.loads(p.stdout)
        return j.get('verified'), j.get('verify_note') or '', time.time() - t
    except ValueError:
        msg = (p.stderr.strip() or p.stdout.strip() or 'exit %d' % p.returncode).splitlines()[-1]
        return None, msg[:300], time.time() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('gopt', nargs='?', default=os.path.join(ROOT, 'build', 'bin', 'gopt'))
    ap.add_argument('dir', nargs='?', default=os.path.join(ROOT, '..', 'shared', 'hlo'))
    ap.add_argument('--timeout', type=int, default=900)
    ap.add_argument('--mem-gb', type=float, default=12)
    ap.add_argument('--only', default='')
    a = ap.parse_args()
    files = [f for f in modules(a.dir) if a.only in f]
    if not files:
        sys.exit('verify_shared.py: no .txt/.hlo modules under %s' % a.dir)
    n = 0
    for f in files:
        v, note, s = run(a.gopt, f, a.timeout, a.mem_gb)
        n += v is True
        state = 'verified' if v is True else 'DIFFER  ' if v is False else 'not run '
        print('%s %7.1f s  %s: %s' % (state, s, os.path.relpath(f, a.dir), note), flush=True)
    print('verified %d of %d modules' % (n, len(files)))


if __name__ == '__main__':
    main()
