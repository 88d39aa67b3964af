#!/usr/bin/python3
"""check_zoo_export.py GOPT: models of other front ends written as HLO (`gopt convert M -o X.hlo`,
ONNX ops as gopt.TYPE custom-calls) re-import with the same FLOPs, bytes and op types, and with as
many instructions as tools/hlo/hlo_count.py counts in the written text. Covers a zoo model, a
training step (GPT-2, the issue's gpt2_train.hlo) and an ONNX file."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'tools', 'hlo'))
import hlo_count  # noqa: E402

CASES = [['gpt2:layers=2,seq=64', '--training'], ['gpt2', '--training'], ['resnet50', '--training'],
         ['corpus/squeezenet1_1.onnx']]


def info(gopt, args):
    r = subprocess.run([gopt, 'info', '--json'] + args, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def main():
    gopt = sys.argv[1]
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for case in CASES:
            out = os.path.join(d, 'm.hlo')
            subprocess.run([gopt, 'convert'] + case + ['-o', out], check=True, capture_output=True)
            a, b = info(gopt, case), info(gopt, [out])
            want = hlo_count.count(out)['instructions']
            same_ops = all(b['ops'].get(k) == v for k, v in a['ops'].items())
            ok = (abs(a['flops'] - b['flops']) <= 1e-9 * max(1, a['flops']) and
                  abs(a['bytes'] - b['bytes']) <= 1e-9 * max(1, a['bytes']) and
                  b['instructions'] == want and same_ops)
            print('%s %s: flops %g/%g bytes %g/%g instructions %d (text %d) ops same %s' % (
                'ok' if ok else 'FAIL', ' '.join(case), a['flops'], b['flops'], a['bytes'], b['bytes'],
                b['instructions'], want, same_ops))
            bad += not ok
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
