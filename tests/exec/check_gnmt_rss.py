#!/usr/bin/python3
"""check_gnmt_rss.py GOPT: peak memory of `gopt run gnmt:batch=1` (issue 22's regression test).

The zoo's GNMT at batch 1 is an unrolled recurrent graph: 1.12 GB of weights (made up by the
executor, seed 0) read by 1001 MatMuls, 21 distinct weight tensors. When every MatMul packed its
own copy of its weights the run took 23.8 GB (OOM-killed); a 256 MiB cap on the copies (3.4 GB)
then made GPT-2-sized models fail. Each weight is now packed once and shared. Checks, from
`gopt run --json` and the child's peak RSS (getrusage):
  - where oneDNN packs MatMul weights on this CPU (AVX-512; its AVX2 MatMul reads them in place,
    and then no copy is made): fewer packed copies than primitives reading them (the copies are
    shared), and at most one copy's worth of bytes per weight (packed bytes <= 1.1 x the weights'
    bytes, padding allowed);
  - peak RSS <= 2.5 GiB (2.68 GB). Measured 2.13 GB (1.98 GiB) after the fix, twice (2
    threads): the weights (1.12 GB) plus one packed copy of the 21 shared ones (0.86 GB) plus
    activations, the graph and the process (~0.15 GB). The bound leaves 0.55 GB (26 %) for
    allocator, thread and oneDNN scratch variation (more cores, more per-thread scratch), and
    stays below the capped executor's 3.4 GB and far below the per-MatMul copies' 23.8 GB; one
    extra copy of every shared weight (+0.86 GB) would exceed it.
One line per check; exit 1 on failure.
"""
import json
import resource
import subprocess
import sys

from cpu_flags import has_avx512

BOUND = int(2.5 * 2**30)
WEIGHT_BYTES = 1123435520  # `gopt info gnmt:batch=1 --json` param_bytes


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_gnmt_rss.py GOPT")
    p = subprocess.run([sys.argv[1], "run", "gnmt:batch=1", "--json"], capture_output=True, text=True)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    if p.returncode:
        print(f"check_gnmt_rss: FAIL: gopt run gnmt:batch=1: {p.stderr.strip()}")
        return 1
    pw = json.loads(p.stdout)["packed_weights"]
    print(f"packed weights: {pw['copies']} copies ({pw['bytes'] / 1e9:.2f} GB) read by {pw['readers']} primitives")
    print(f"peak RSS {rss / 1e9:.2f} GB (bound {BOUND / 1e9:.2f} GB = 2.5 GiB)")
    ok = True
    if not has_avx512():
        # oneDNN chooses the weights' layout per CPU: its AVX2 MatMul reads them in place, so
        # nothing is packed and only the RSS bound applies
        if pw["copies"] or pw["readers"]:
            print("check_gnmt_rss: FAIL: packed weight copies on a CPU without AVX-512")
            ok = False
        print("packed weights: none on this CPU (no AVX-512: oneDNN reads the MatMul weights in place)")
    elif not (0 < pw["copies"] < pw["readers"]) or pw["bytes"] > 1.1 * WEIGHT_BYTES:
        print("check_gnmt_rss: FAIL: the packed weights are not shared (copies must be fewer than readers, "
              "bytes at most 1.1 x the weights')")
        ok = False
    if rss > BOUND:
        print("check_gnmt_rss: FAIL: peak RSS above the bound")
        ok = False
    print("check_gnmt_rss: ok" if ok else "check_gnmt_rss: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
