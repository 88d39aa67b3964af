/* k_hlo.h: what the HLO kernel files share (k_hlo.c: data movement, reduce, sort, gather, scatter,
 * dot, control flow; k_hlo_window.c: convolution, reduce-window, select-and-scatter;
 * k_hlo_custom.c: custom-call targets; k_hlo_norm.c: batch normalisation). Values are doubles in row-major logical order (k_ref.h). */
#ifndef GOPT_EXEC_K_HLO_H
#define GOPT_EXEC_K_HLO_H

#include "exec/k_ref.h"

/* The opcode of node n when its type is "hlo::OPCODE", else NULL. */
const char *ex_hlo_op(const gopt_graph *g, int32_t n);

/* Multi-index of flat index o in t's shape, and back. */
void ex_hlo_unravel(const rt *t, int64_t o, int64_t *idx);
int64_t ex_hlo_ravel(const rt *t, const int64_t *idx);

/* A scalar computation (reduce's to_apply, a select or scatter computation) interpreted per
 * element: ex_hlo_scomp_init prepares it (0, or an error naming the op it cannot interpret),
 * ex_hlo_scomp_eval maps its scalar parameters in[] to its results out[]. */
typedef struct ex_hlo_scomp {
  const gopt_graph *s;
  int32_t *order;
  int64_t n_order;
  double *val;   /* per tensor of s */
  uint64_t *bits; /* per tensor of s: the exact pattern of 64-bit integer values */
  int16_t *code; /* per order position: E_* code, -1 tuple, -2 get-tuple-element */
  int8_t *dir;   /* per order position: compare direction */
} ex_hlo_scomp;
int ex_hlo_scomp_init(ex_hlo_scomp *c, const gopt_graph *s, gopt_error *err);
void ex_hlo_scomp_eval(ex_hlo_scomp *c, const double *in, double *out);
void ex_hlo_scomp_free(ex_hlo_scomp *c);

/* The computation in GRAPH attribute key of node n, NULL when none. */
const gopt_graph *ex_hlo_comp(const gopt_graph *g, int32_t n, const char *key);

/* Kernels of k_hlo_window.c (convolution, reduce-window, select-and-scatter) and k_hlo_custom.c
 * (custom-call targets) for node n, NULL when the node is not theirs. */
ref_fn ex_hlo_window_kernel(const gopt_graph *g, int32_t n);
ref_fn ex_hlo_custom_kernel(const gopt_graph *g, int32_t n);
/* Kernel of k_hlo_norm.c (batch-norm-training, -inference, -grad) for node n, NULL otherwise. */
ref_fn ex_hlo_norm_kernel(const gopt_graph *g, int32_t n);

#endif
