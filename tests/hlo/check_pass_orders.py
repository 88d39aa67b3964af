#!/usr/bin/python3
"""check_pass_orders.py GOPT DIR OUTDIR [--every K] [ORDER...]: `gopt passes --json` with every
order (XLA's CPU and GPU defaults, random, greedy, genetic and rl by default) and small budgets on
every HLO module under DIR. Checks: the run succeeds; the report is consistent (ops_after is the last step's count,
the default order's result equals ops_default); a search never ends above the module it started
from (it keeps the best prefix, the empty one included); replaying the reported sequence as a list
gives the same count and the written result re-imports with that count (every 4th module); a second
run with the same seed gives the same sequence (every 20th). The objective `time` runs on a few
modules. --every K: only every K-th module (the sanitizer build)."""
import json
import os
import subprocess
import sys

SEARCH = {'random', 'greedy', 'genetic', 'rl'}


def run(gopt, *args):
    r = subprocess.run([gopt, 'passes'] + list(args) + ['--json'], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip() or 'exit %d' % r.returncode)
    return json.loads(r.stdout)


def check(gopt, f, order, out, extra=(), deep=True):
    dst = os.path.join(out, 'r.hlo')
    rep = run(gopt, f, '--order', order, '--budget', '24', '--seed', '3', *(('-o', dst) if deep else ()),
              *extra)
    errs = []
    last = rep['steps'][-1]['ops_after'] if rep['steps'] else rep['ops_before']
    if last != rep['ops_after'] or len(rep['sequence']) != len(rep['steps']):
        errs.append('report inconsistent')
    if order in ('default', 'default-cpu') and rep['ops_after'] != rep['ops_default']:
        errs.append('default order %d != ops_default %d' % (rep['ops_after'], rep['ops_default']))
    obj = 'time_after' if '--objective' in extra else 'ops_after'
    start = 'time_before' if '--objective' in extra else 'ops_before'
    if order in SEARCH and rep[obj] > rep[start] * (1 + 1e-9):
        errs.append('search ended above its start (%s %g > %g)' % (obj, rep[obj], rep[start]))
    if not deep:
        return rep, errs
    if order in SEARCH and rep['sequence']:
        again = run(gopt, f, '--order', ','.join(rep['sequence']))
        if again['ops_after'] != rep['ops_after']:
            errs.append('replayed sequence gives %d, not %d' % (again['ops_after'], rep['ops_after']))
    ri = subprocess.run([gopt, 'info', '--json', dst], capture_output=True, text=True)
    got = json.loads(ri.stdout)['instructions'] if ri.returncode == 0 else None
    if got != rep['ops_after']:
        errs.append('written result re-imports with %s instructions, not %d' % (got, rep['ops_after']))
    return rep, errs


def main():
    gopt, root, out = sys.argv[1:4]
    rest, every = sys.argv[4:], 1
    if rest[:1] == ['--every']:
        every, rest = int(rest[1]), rest[2:]
    orders = rest or ['default', 'default-gpu', 'random', 'greedy', 'genetic', 'rl']
    os.makedirs(out, exist_ok=True)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
                   if f.endswith('.txt') or f.endswith('.hlo'))[::every]
    bad = runs = 0
    for i, f in enumerate(files):
        for order in orders:
            runs += 1
            try:
                rep, errs = check(gopt, f, order, out, deep=i % 4 == 0)
                if order in SEARCH and i % 20 == 0:  # determinism on a sample
                    rep2, _ = check(gopt, f, order, out)
                    if rep2['sequence'] != rep['sequence']:
                        errs.append('same seed, different sequence')
                if order in SEARCH and i % 30 == 0:  # the time objective on a sample
                    _, e2 = check(gopt, f, order, out, ('--objective', 'time'))
                    errs += ['time: ' + e for e in e2]
            except (RuntimeError, ValueError, KeyError, IndexError) as e:
                errs = [str(e)]
            for e in errs:
                print('FAIL %s --order %s: %s' % (f, order, e))
            bad += bool(errs)
    print('%d modules, %d runs, %d failures' % (len(files), runs, bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
