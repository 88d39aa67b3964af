/* exec_isa.c: which instruction set the executor's vector kernels (k_vec.inc) run with: the best
 * one this CPU supports (__builtin_cpu_supports: AVX-512 F/DQ/BW/VL, else AVX2 with FMA, else
 * baseline x86-64), or the one named by the environment variable GOPT_ISA (baseline, avx2, avx512
 * or auto), refused with one line when the CPU lacks it. Chosen once per executor, at plan time. */
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "exec/k_vec.h"

static const ex_vec_ops vec_ops[EX_ISA_COUNT] = {
    {ex_fx_block_base, ex_reduce_base, ex_lstm_cell_base, ex_gemm_acc_base, ex_count_nonfinite_base,
     ex_affine_rows_base, ex_affine_plane_base},
    {ex_fx_block_avx2, ex_reduce_avx2, ex_lstm_cell_avx2, ex_gemm_acc_avx2, ex_count_nonfinite_avx2,
     ex_affine_rows_avx2, ex_affine_plane_avx2},
    {ex_fx_block_avx512, ex_reduce_avx512, ex_lstm_cell_avx512, ex_gemm_acc_avx512, ex_count_nonfinite_avx512,
     ex_affine_rows_avx512, ex_affine_plane_avx512},
};
static const char *const isa_names[EX_ISA_COUNT] = {"baseline", "avx2", "avx512"};
static const char *const isa_needs[EX_ISA_COUNT] = {"", "AVX2 and FMA", "AVX-512 F, DQ, BW and VL"};

const ex_vec_ops *ex_vec_ops_for(int isa) {
  return &vec_ops[isa >= 0 && isa < EX_ISA_COUNT ? isa : EX_ISA_BASELINE];
}

/* Whether this CPU (and OS) can run the kernels compiled for isa. */
static int isa_supported(int isa) {
#if defined(GOPT_VEC_X86) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  switch (isa) {
    case EX_ISA_BASELINE: return 1;
    case EX_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case EX_ISA_AVX512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
    default: return 0;
  }
#else
  return isa == EX_ISA_BASELINE; /* the other files were compiled without their flags */
#endif
}

int ex_isa_select(gopt_exec *x, gopt_error *err) {
  const char *e = getenv("GOPT_ISA");
  if (!e || !*e || !strcmp(e, "auto")) {
    x->isa = EX_ISA_BASELINE;
    for (int i = EX_ISA_COUNT - 1; i > 0; i--)
      if (isa_supported(i)) {
        x->isa = i;
        break;
      }
    return GOPT_OK;
  }
  for (int i = 0; i < EX_ISA_COUNT; i++) {
    if (strcmp(e, isa_names[i]) != 0) continue;
    if (!isa_supported(i))
      return gopt_error_set(err, GOPT_EUNSUP, "GOPT_ISA=%s: this CPU does not support %s", e,
                            isa_needs[i]);
    x->isa = i;
    return GOPT_OK;
  }
  return gopt_error_set(err, GOPT_EINVAL,
                        "GOPT_ISA=%.40s: unknown instruction set (baseline, avx2, avx512 or auto)", e);
}

const char *gopt_exec_isa(const gopt_exec *x) {
  return isa_names[x && x->isa >= 0 && x->isa < EX_ISA_COUNT ? x->isa : EX_ISA_BASELINE];
}
