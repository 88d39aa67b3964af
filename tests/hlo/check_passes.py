#!/usr/bin/python3
"""check_passes.py GOPT DIR OUTDIR: on every HLO module under DIR, `gopt passes` with the default
order through the CLI: the run succeeds, its result written as HLO re-imports, and the re-import
has as many instructions as the pass report says (ops_after) and as tools/hlo/hlo_count.py counts
in the written text (an independent count). Each single pass is checked the same way in-process,
with output equality where the module runs, by tests/hlo/test_passes_exec.c (one process instead
of three per pass and module keeps this test to seconds). Also `gopt passes --verify`'s three
outcomes."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'tools', 'hlo'))
import hlo_count  # noqa: E402


def check_verify(gopt, root):
    """--verify: a module the executor runs is verified (exit 0, verified true); one it cannot run
    is reported as not verified (exit 0, verified null, the op named); a bad --seed is a usage
    error (exit 2, one line)."""
    bad = 0
    cases = [(os.path.join(root, 'hloenv', 'hlo_test.txt'), [], 0, True),
             (os.path.join(root, 'hloenv', 'jraph', 'module_0101.jit_accuracy.49.before_optimizations.txt'), [], 0, None),
             (os.path.join(root, 'hloenv', 'hlo_test.txt'), ['--seed', 'x'], 2, None)]
    for f, extra, want_rc, want in cases:
        r = subprocess.run([gopt, 'passes', f, '--verify', '--json'] + extra, capture_output=True, text=True)
        ok = r.returncode == want_rc
        if ok and want_rc == 0:
            rep = json.loads(r.stdout)
            ok = rep.get('verified') is want and rep.get('verify_note')
        elif ok:
            ok = len(r.stderr.strip().splitlines()) == 1
        if not ok:
            print('FAIL --verify %s %s: exit %d, %s %s' % (f, extra, r.returncode, r.stdout[-300:], r.stderr.strip()))
            bad += 1
    return bad


def main():
    gopt, root, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
                   if f.endswith('.txt') or f.endswith('.hlo'))
    bad = runs = 0
    total_before = total_after = 0
    for f in files:
        for order in ['default']:
            dst = os.path.join(out, 'p.hlo')
            r = subprocess.run([gopt, 'passes', f, '--order', order, '--json', '-o', dst],
                               capture_output=True, text=True)
            runs += 1
            if r.returncode:
                print('FAIL %s %s: %s' % (f, order, r.stderr.strip()))
                bad += 1
                continue
            rep = json.loads(r.stdout)
            ri = subprocess.run([gopt, 'info', '--json', dst], capture_output=True, text=True)
            got = json.loads(ri.stdout)['instructions'] if ri.returncode == 0 else None
            text = hlo_count.count(dst)['instructions']
            if got != rep['ops_after'] or text != got:
                print('FAIL %s %s: report %d -> %d, re-import %s, text %d %s' % (
                    f, order, rep['ops_before'], rep['ops_after'], got, text, ri.stderr.strip()))
                bad += 1
            if order == 'default':
                total_before += rep['ops_before']
                total_after += rep['ops_after']
    bad += check_verify(gopt, root)
    print('%d modules, %d pass runs, default order %d -> %d instructions, %d failures' % (
        len(files), runs, total_before, total_after, bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
