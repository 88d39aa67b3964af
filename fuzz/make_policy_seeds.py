#!/usr/bin/env python3
"""make_policy_seeds.py OUT_DIR [--small]: seeds for fuzz/fuzz_policy_load.c from the shipped
policies/*.gpol. Each policy gives a framed seed (first byte 1, then the 2-byte metadata length,
the metadata text and the weights checkpoint: the harness rewrites them as a well-formed file with
a correct checksum) and a raw one (first byte 0, then the file as is). --small writes only the
framed metadata with an empty checkpoint, a few hundred bytes each (fuzz/corpus_policy/seed-*,
committed); fuzz/run.sh writes the full seeds into its working corpus."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    out, small = sys.argv[1], "--small" in sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    pol = os.path.join(HERE, "policies")
    for name in sorted(os.listdir(pol)):
        if not name.endswith(".gpol"):
            continue
        d = open(os.path.join(pol, name), "rb").read()
        ml = struct.unpack_from("<I", d, 12)[0]
        meta = d[16:16 + ml]
        cl = struct.unpack_from("<Q", d, 16 + ml)[0]
        ck = d[24 + ml:24 + ml + cl]
        stem = name[:-5]
        framed = b"\x01" + struct.pack("<H", ml) + meta + (b"" if small else ck)
        open(os.path.join(out, f"seed-{stem}.bin"), "wb").write(framed)
        if not small:
            open(os.path.join(out, f"seed-{stem}-raw.bin"), "wb").write(b"\x00" + d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
