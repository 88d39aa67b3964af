/* nn_kernels.h: helpers shared by the forward ops and their backward (broadcast layout, attention
 * saved state, deterministic reductions). Private to src/nn. */
#ifndef GOPT_NN_KERNELS_H
#define GOPT_NN_KERNELS_H
#include <stdint.h>

#include "gopt/nn.h"

/* Broadcast of a and b into out, all padded to 4 dims (os: out shape; as/bs: element strides of a
 * and b per out dim, 0 where broadcast). b_rows > 0 when b is repeated along leading dims only
 * (b has b_rows elements, the trailing dims of out). */
typedef struct nn_bcast {
  int64_t os[4], as[4], bs[4];
  int64_t n, b_rows;
  int ndim, a_same, b_same;
} nn_bcast;
int nn_broadcast(const gopt_nn_tensor *a, const gopt_nn_tensor *b, nn_bcast *bc);

/* Sum in double over 256 fixed chunks; independent of the thread count. */
double nn_sum_det(const float *x, int64_t n);
/* Sum of squares, same fixed order. */
double nn_sumsq_det(const float *x, int64_t n);

typedef struct nn_attn_state {
  float *lse;        /* [H, T] log-sum-exp of each query's scaled scores (-inf: no visible key) */
  float *scratch;    /* nt * per_thread floats */
  int64_t per_thread, lk;  /* lk: max keys per query (seg_len, doubled with memory) */
  int nt;
} nn_attn_state;
#endif
