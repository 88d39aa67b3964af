/* exec_inplace.c: the buffer planner's in-place decisions. A step's output may take the buffer of
 * one of its inputs when that input dies at this step (its last use), is an activation (not a
 * graph input, output or weight), and the kernel can write over what it reads (k_elem.c: a
 * contiguous float input of a fused elementwise program whose blocks store after they load).
 * The run loop (exec.c) then hands the input's buffer to the output instead of allocating one;
 * the peak without in-place is tracked beside the real one. GOPT_INPLACE=0 turns it off. */
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

/* Whether step k already gave input index i to one of its outputs before out_j. */
static int taken(const ex_kernel *k, int out_j, int i) {
  for (int o = 0; o < out_j; o++)
    if (k->reuse[o] == i) return 1;
  return 0;
}

int ex_plan_inplace(gopt_exec *x, gopt_error *err) {
  const char *e = getenv("GOPT_INPLACE");
  x->n_inplace = 0;
  if (e && !strcmp(e, "0")) return GOPT_OK;
  for (size_t s = 0; s < x->n_steps; s++) {
    ex_kernel *k = &x->steps[s];
    for (int o = 0; o < k->n_out; o++) {
      int32_t t = k->out[o];
      if (x->vals[t].kind != EX_V_ACT) continue;
      for (int i = 0; i < k->n_in; i++) {
        int32_t u = k->in[i];
        if (u < 0 || u == t || x->vals[u].kind != EX_V_ACT || x->last_use[u] != (int32_t)s) continue;
        if (!ex_elem_can_alias(x, k, i, o)) continue;
        if (!k->reuse) {
          k->reuse = malloc(((size_t)k->n_out + 1) * sizeof *k->reuse);
          if (!k->reuse) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
          for (int q = 0; q < k->n_out; q++) k->reuse[q] = -1;
        }
        if (taken(k, o, i)) continue;
        k->reuse[o] = i;
        x->n_inplace++;
        break;
      }
    }
  }
  return GOPT_OK;
}

size_t gopt_exec_n_inplace(const gopt_exec *x) { return x ? x->n_inplace : 0; }
size_t gopt_exec_peak_bytes_without_inplace(const gopt_exec *x) { return x ? x->peak_plain : 0; }
