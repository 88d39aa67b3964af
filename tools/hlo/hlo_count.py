#!/usr/bin/python3
"""hlo_count.py: an independent count of an HLO text module's instructions (the reference for
gopt's importer test): every line inside a computation body of the form `[ROOT] name = ...`.
Prints JSON {"file":..., "instructions":N, "computations":C, "uncalled":[...]} per file."""
import json
import re
import sys

INSTR = re.compile(r'^\s*(ROOT\s+)?%?[A-Za-z0-9_.\-]+\s*=\s*\S')
HEAD = re.compile(r'^\s*(ENTRY\s+)?%?([A-Za-z0-9_.\-]+)\s*(\(.*\))?\s*(->.*)?\{\s*$')
CALLS = re.compile(r'(?:to_apply|calls|body|condition|comparator|select|scatter)=%?([A-Za-z0-9_.\-]+)')
BRANCH = re.compile(r'(?:branch_computations|called_computations)=\{([^}]*)\}')


def count(path):
    n = 0
    comps, called, entry = [], set(), None
    depth = 0
    with open(path, encoding='utf-8') as f:
        for line in f:
            s = line.strip()
            if depth == 0:
                m = HEAD.match(line)
                if m and not s.startswith('HloModule'):
                    comps.append(m.group(2))
                    if m.group(1):
                        entry = m.group(2)
                    depth = 1
                continue
            if s == '}' or s.startswith('}, '):  # "}, execution_thread=..." closes too
                depth = 0
                continue
            if INSTR.match(line):
                n += 1
                called.update(CALLS.findall(line))
                for b in BRANCH.findall(line):
                    called.update(x.strip().lstrip('%') for x in b.split(',') if x.strip())
    if entry is None and comps:
        entry = comps[-1]
    unc = [c for c in comps if c not in called and c != entry]
    return {"file": path, "instructions": n, "computations": len(comps), "uncalled": unc}


if __name__ == '__main__':
    for p in sys.argv[1:]:
        print(json.dumps(count(p)))
