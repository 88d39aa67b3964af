"""cpu_flags.py: what the executor tests need to know about this CPU. oneDNN packs constant MatMul
weights into a blocked copy on AVX-512 CPUs and reads them in place with its AVX2 kernels, so the
packed-weight checks (check_gpt2_small.py, check_gnmt_rss.py; test_exec_matmul.c asks the same
with __builtin_cpu_supports) apply only where has_avx512() is true."""


def has_avx512():
    """True when /proc/cpuinfo lists avx512f (False where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split()
    except OSError:
        pass
    return False
