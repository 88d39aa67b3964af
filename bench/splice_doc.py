#!/usr/bin/python3
"""bench/splice_doc.py: puts the output of one `bench/run.sh all` into docs/BENCHMARKS.md.

Usage: bench/run.sh all > /tmp/bench.md && bench/splice_doc.py /tmp/bench.md [DOC]

Replaces everything between the lines `<!-- bench-run:begin -->` and `<!-- bench-run:end -->` of
DOC (default docs/BENCHMARKS.md) with the run's output, unchanged, so that every figure in that
block comes from the same run. The document is written to a temporary name and renamed. Exits 1
with one line naming the file if the markers are missing or the run's output looks cut short.
"""
import os
import sys

BEGIN, END = "<!-- bench-run:begin -->", "<!-- bench-run:end -->"


def main(argv):
    if len(argv) not in (2, 3):
        print("usage: bench/splice_doc.py RUN_OUTPUT [DOC]", file=sys.stderr)
        return 2
    run_path = argv[1]
    doc_path = argv[2] if len(argv) == 3 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "docs", "BENCHMARKS.md")
    with open(run_path, encoding="utf-8") as f:
        run = f.read().strip("\n")
    if not run.startswith("Run of `bench/run.sh") or run.count("\n### ") < 3:
        print(f"{run_path}: not the output of a complete `bench/run.sh` run", file=sys.stderr)
        return 1
    if run.count("```") % 2:
        print(f"{run_path}: unbalanced ``` fence (run cut short?)", file=sys.stderr)
        return 1
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    b, e = doc.find(BEGIN), doc.find(END)
    if b < 0 or e < b:
        print(f"{doc_path}: missing {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    out = doc[:b + len(BEGIN)] + "\n\n" + run + "\n\n" + doc[e:]
    tmp = doc_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(out)
    os.replace(tmp, doc_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
