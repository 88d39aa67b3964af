#!/usr/bin/python3
"""passes_bench.py GOPT WORKDIR BUDGET [DOC]: the pass-ordering evaluation of docs/PASSES.md. Runs
`gopt passes --json --verify` with every order on the held-out real modules (bench/passes/heldout.txt)
and on gopt's own GPT-2, BERT and ResNet training steps exported to HLO, and prints markdown tables
(written into DOC between the passes-bench markers when given): op-count reduction of each method
against XLA's default order, simulated step time, the executor's CPU time under the default and
the learned (rl) order, verification status and search time, with the
paper's 13.3% (GPT-2 training) and 10.4% (mix) alongside. --only P1,P2 evaluates only the held-out
modules under those prefixes (no training steps, no --verify: executing today's full-size modules
in the reference executor takes minutes each; test_passes_exec verifies every pass on those the
executor runs) and writes between the passes-bench-today markers
(bench/passes/run.sh today: today's XLA modules, xla-2026 and xla-2026b)."""
import filecmp
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
DATA = os.path.join(ROOT, 'tests', 'hlo', 'data')
TRAIN_STEPS = [('gpt2', 'gpt2_train', 'gpt2'), ('gpt2:layers=2', 'gpt2_2l_train', 'gpt2'),
               ('bert', 'bert_train', 'bert'), ('resnet50', 'resnet50_train', 'resnet')]
METHODS = ['default', 'default-gpu', 'random', 'greedy', 'genetic', 'rl', 'rl+search']
TIMED = ('default', 'rl')  # the orders whose modules are timed on gopt's executor
BEGIN, END = '<!-- passes-bench:begin -->', '<!-- passes-bench:end -->'
# --verify runs a module twice in the reference executor (values as doubles): a module above this
# many GFLOPs is evaluated without it and says so (hloenv's efficientnet-jax module_0698, a batch
# of 250 at 150x150: 830 GFLOPs of convolution, over 21 GB as doubles, killed by the OOM killer)
VERIFY_GFLOPS = float(os.environ.get('PASSES_VERIFY_GFLOPS', '100'))


def heldout():
    pre = [l.strip() for l in open(os.path.join(ROOT, 'bench', 'passes', 'heldout.txt'))
           if l.strip() and not l.startswith('#')]
    files = sorted(os.path.relpath(os.path.join(d, f), DATA) for d, _, fs in os.walk(DATA) for f in fs
                   if f.endswith('.txt') or f.endswith('.hlo'))
    return [f for f in files if any(f.startswith(p) for p in pre)]


def gflops(gopt, path):
    r = subprocess.run([gopt, 'info', path, '--json'], capture_output=True, text=True)
    return json.loads(r.stdout)['flops'] / 1e9 if r.returncode == 0 and r.stdout.strip() else 0.0


def run(gopt, path, method, budget, verify=True, over=None, out=None):
    """One `gopt passes` report; over (a note) marks a module verified by no one: too large; out
    writes the optimised module there."""
    if over:
        verify = False
    args = [gopt, 'passes', path, '--json', '--seed', '1'] + (['--verify'] if verify else [])
    args += ['-o', out] if out else []
    if method == 'rl+search':
        args += ['--order', 'rl', '--budget', str(budget)]
    else:
        args += ['--order', method] + (['--budget', str(budget)] if method in ('random', 'greedy', 'genetic') else [])
    r = subprocess.run(args, capture_output=True, text=True)
    if r.stdout.strip():
        rep = json.loads(r.stdout)
        if over:
            rep['verify_skipped'] = over
        return rep
    return {'error': r.stderr.strip()}


def cpu_ms(gopt, path):
    """Median CPU time (ms, one thread, 5 runs after a warm-up) of a module on gopt's executor
    (random inputs), or None when the executor cannot run it."""
    r = subprocess.run([gopt, 'run', path, '--time', '--json', '--threads', '1', '--warmup', '1', '--reps', '5'],
                       capture_output=True, text=True)
    try:
        return json.loads(r.stdout)['time']['cpu_seconds'] * 1e3 if r.returncode == 0 else None
    except (ValueError, KeyError):
        return None


def cpu_pair(gopt, a, b):
    """(a's ms, b's ms): each timed twice, alternating a, b, a, b, the lower median kept (the
    machine is shared: this damps a burst of load landing on one side); b None: the same module."""
    ta, tb = [], []
    for _ in range(2):
        ta.append(cpu_ms(gopt, a))
        if b:
            tb.append(cpu_ms(gopt, b))
    lo = lambda t: min(t) if t and all(v is not None for v in t) else None  # noqa: E731
    return lo(ta), lo(tb) if b else lo(ta)


def vs_default(rep):
    return 100.0 * (rep['ops_default'] - rep['ops_after']) / rep['ops_default'] if rep['ops_default'] else 0.0


def short_verify(rep):
    if 'verify_skipped' in rep:
        return 'over budget'
    if 'verified' not in rep:
        return 'not checked'
    v = rep['verified']
    return 'equal' if v is True else 'MISMATCH' if v is False else 'not executable'


def main():
    args = sys.argv[1:]
    only = None  # --only P1,P2: just the held-out modules under these prefixes, no training steps
    if '--only' in args:
        i = args.index('--only')
        only = args[i + 1].split(',')
        del args[i:i + 2]
    gopt, work, budget = args[0], args[1], int(args[2])
    doc = args[3] if len(args) > 3 else None
    begin, end = (BEGIN, END) if only is None else ('<!-- passes-bench-today:begin -->',
                                                    '<!-- passes-bench-today:end -->')
    os.makedirs(work, exist_ok=True)
    have_rl = subprocess.run([gopt, 'passes', os.path.join(DATA, 'neuron', 'linear_module_forward.hlo'),
                              '--order', 'rl'], capture_output=True, text=True).returncode == 0
    methods = [m for m in METHODS if have_rl or not m.startswith('rl')]
    modules = []  # (label, path, group)
    for spec, name, group in TRAIN_STEPS if only is None else []:
        out = os.path.join(work, name + '.hlo')
        subprocess.run([gopt, 'convert', spec, '--training', '-o', out], check=True, capture_output=True)
        modules.append(('gopt %s --training' % spec, out, group))
    for f in heldout():
        if only is not None and not any(f.startswith(p) for p in only):
            continue
        group = 'jax-gpt2' if f.startswith('xla-2026b/gpt2_train_step.before') else \
            'today' if f.startswith('xla-2026') else 'real'
        modules.append((f, os.path.join(DATA, f), group))
    res, cpu = {}, {}  # cpu: label -> (default ms, learned ms, same module)
    for label, path, _ in modules:
        gf = gflops(gopt, path) if only is None else 0.0
        over = 'not verified: %.0f GFLOPs, over the bench\'s %.0f-GFLOP budget for --verify' % (
            gf, VERIFY_GFLOPS) if gf > VERIFY_GFLOPS else None
        outs = {}
        for m in methods:
            if only is None and m in TIMED:
                outs[m] = os.path.join(work, 'timed_%s.hlo' % m.replace('+', '_'))
            res[label, m] = run(gopt, path, m, budget, verify=only is None, over=over, out=outs.get(m))
            sys.stderr.write('.')
            sys.stderr.flush()
        # executor CPU time of the module under XLA's default order and under the learned one
        # (timed once when both orders write the same module text)
        if len(outs) == 2 and not over and all('error' not in res[label, m] for m in outs):
            a, b = (res[label, m] for m in TIMED)
            same = a['ops_after'] == b['ops_after'] and filecmp.cmp(outs[TIMED[0]], outs[TIMED[1]], shallow=False)
            cpu[label] = cpu_pair(gopt, outs[TIMED[0]], None if same else outs[TIMED[1]]) + (same,)
    sys.stderr.write('\n')
    lines = []
    w = lines.append
    w('Budget %d evaluations (pass runs) for random, greedy, genetic and rl+search; seed 1; episode '
      'cap 32 passes; objective ops. "vs default" = (ops after the default order - ops after the '
      'method) / ops after the default order, so > 0 means fewer instructions than XLA\'s default order.'
      % budget)
    w('')
    real = ('real', 'today', 'jax-gpt2')
    groups = [('GPT-2 training steps (gopt)', lambda g: g == 'gpt2', 'paper: 13.3%'),
              ('GPT-2 training step (JAX 0.11)', lambda g: g == 'jax-gpt2', 'paper: 13.3%'),
              ('GPT-2/BERT/ResNet training steps (gopt)', lambda g: g in ('gpt2', 'bert', 'resnet'),
               'paper: 10.4% (its mix)'),
              ('today\'s XLA modules (%d)' % sum(1 for m in modules if m[2] in ('today', 'jax-gpt2')),
               lambda g: g in ('today', 'jax-gpt2'), ''),
              ('held-out real modules (%d)' % sum(1 for m in modules if m[2] in real), lambda g: g in real, ''),
              ('all', lambda g: True, '')]
    w('| method | ' + ' | '.join(g[0] for g in groups) + ' | mean sim. time vs default | verified equal / not executable / mismatch / over budget | mean search time |')
    w('|---|' + '---:|' * len(groups) + '---:|---|---:|')
    for m in methods:
        cells = []
        for _, sel, _ in groups:
            vals = [vs_default(res[l, m]) for l, _, g in modules if sel(g) and 'error' not in res[l, m]]
            cells.append('%+.2f%%' % (sum(vals) / len(vals)) if vals else '-')
        tv = [100.0 * (res[l, m]['time_default'] - res[l, m]['time_after']) / res[l, m]['time_default']
              for l, _, _ in modules if 'error' not in res[l, m] and res[l, m]['time_default'] > 0]
        ver = [short_verify(res[l, m]) for l, _, _ in modules if 'error' not in res[l, m]]
        st = [res[l, m]['search_seconds'] for l, _, _ in modules if 'error' not in res[l, m]]
        errs = sum(1 for l, _, _ in modules if 'error' in res[l, m])
        vcell = 'not checked here (test_passes_exec)' if only is not None else '%d / %d / %d / %d' % (
            ver.count('equal'), ver.count('not executable'), ver.count('MISMATCH'), ver.count('over budget'))
        w('| %s | %s | %+.2f%% | %s%s | %.3f s |' % (
            m, ' | '.join(cells), sum(tv) / len(tv) if tv else 0, vcell,
            ' (%d failed runs)' % errs if errs else '', sum(st) / len(st) if st else 0))
    w('| targets | ' + ' | '.join(g[2] for g in groups) + ' | | | |')
    w('')
    timed = [(l, v) for l, v in cpu.items() if v[0] and v[1]]
    if timed:
        gains = [100.0 * (v[0] - v[1]) / v[0] for _, v in timed]
        w('Executor CPU time under XLA\'s default order and under the learned order (rl), one thread, the lower '
          'of two medians of 5 runs (the orders alternating), random inputs: %d modules timed (%d of them the same module under both '
          'orders, timed once), mean gain of rl over default %+.2f%%, best %+.2f%%, worst %+.2f%% (per module '
          'below; modules the executor does not run, or over the verification budget, are not timed).'
          % (len(timed), sum(1 for _, v in timed if v[2]), sum(gains) / len(gains), max(gains), min(gains)))
        w('')
    w('Per module: instructions after each method (in brackets: vs default), simulated step time (V100, '
      'analytical) after the default order and after the best method, verification of every method\'s '
      'result, and the search times.')
    w('')
    w('| module | before | ' + ' | '.join(methods) + ' | time default -> best | exec CPU ms default -> rl | '
      'verification | search s |')
    w('|---|---:|' + '---:|' * len(methods) + '---:|---:|---|---|')
    for label, _, _ in modules:
        rs = [res[label, m] for m in methods]
        ok = [r for r in rs if 'error' not in r]
        if not ok:
            w('| %s | failed: %s |' % (label, rs[0]['error'][:120]))
            continue
        cells = []
        for r in rs:
            cells.append('failed' if 'error' in r else '%d' % r['ops_after'] if r['ops_after'] == r['ops_default']
                         else '%d (%+.1f%%)' % (r['ops_after'], vs_default(r)))
        best = min(ok, key=lambda r: r['time_after'])
        vs = sorted(set(short_verify(r) for r in ok))
        why = next((r.get('verify_note', '') for r in ok if short_verify(r) == 'not executable'), '')
        why = why or next((r['verify_skipped'] for r in ok if 'verify_skipped' in r), '')
        ver = ', '.join(vs) + (' (%s)' % why[:80] if why and vs in (['not executable'], ['over budget']) else '')
        srch = '/'.join('%.2f' % r['search_seconds'] for r, m in zip(rs, methods)
                        if 'error' not in r and m not in ('default', 'default-gpu'))
        c = cpu.get(label)
        ccell = 'n/a' if not c or not c[0] or not c[1] else '%.3g (same module)' % c[0] if c[2] else \
            '%.3g -> %.3g (%+.1f%%)' % (c[0], c[1], 100.0 * (c[0] - c[1]) / c[0])
        w('| %s | %d | %s | %.3f -> %.3f ms | %s | %s | %s |' % (
            label, ok[0]['ops_before'], ' | '.join(cells), ok[0]['time_default'] * 1e3, best['time_after'] * 1e3,
            ccell, ver, srch))
    text = '\n'.join(lines) + '\n'
    print(text)
    if doc:
        d = open(doc).read()
        if begin in d and end in d:
            d = d[:d.index(begin) + len(begin)] + '\n' + text + d[d.index(end):]
            tmp = doc + '.tmp'
            open(tmp, 'w').write(d)
            os.replace(tmp, doc)


if __name__ == '__main__':
    main()
