#!/usr/bin/python3
"""check_hlo.py GOPT DIR [--roundtrip OUTDIR]: every HLO module under DIR (*.txt, *.hlo) imports
with `gopt info --json`, reporting as many instructions as tools/hlo/hlo_count.py (an independent
count of the text's instruction lines) finds. With --roundtrip, each module is also written back
with `gopt convert -o OUTDIR/X.hlo`, and the re-import must have the same instruction count and the
same structural hash (gopt_graph_hash) as the original import. Exits 1 on any difference."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'tools', 'hlo'))
import hlo_count  # noqa: E402


def info(gopt, path):
    r = subprocess.run([gopt, 'info', '--json', path], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return json.loads(r.stdout), None


def main():
    gopt, root = sys.argv[1], sys.argv[2]
    out = sys.argv[sys.argv.index('--roundtrip') + 1] if '--roundtrip' in sys.argv else None
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
                   if f.endswith('.txt') or f.endswith('.hlo'))
    bad = 0
    total = 0
    for f in files:
        want = hlo_count.count(f)['instructions']
        total += want
        got, err = info(gopt, f)
        if got is None or got['instructions'] != want:
            print('FAIL import %s: text %d, gopt %s %s' % (f, want, got and got['instructions'], err or ''))
            bad += 1
            continue
        if out:
            os.makedirs(out, exist_ok=True)
            dst = os.path.join(out, os.path.basename(f).replace('.txt', '') + '.rt.hlo')
            r = subprocess.run([gopt, 'convert', f, '-o', dst], capture_output=True, text=True)
            again, err = info(gopt, dst) if r.returncode == 0 else (None, r.stderr.strip())
            if again is None or again['instructions'] != want or again['hash'] != got['hash']:
                print('FAIL round trip %s: %s' % (f, err or 'instructions %d -> %d, hash %s -> %s' % (
                    want, again['instructions'], got['hash'], again['hash'])))
                bad += 1
    print('%d modules, %d instructions, %d failures' % (len(files), total, bad))
    return 1 if bad or not files else 0


if __name__ == '__main__':
    sys.exit(main())
