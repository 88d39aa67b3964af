/* nn_internal.h: private declarations shared by the src/nn files (ctx layout, arena allocation,
 * error recording, threading helpers, blocked GEMM). Not part of the public API. */
#ifndef GOPT_NN_INTERNAL_H
#define GOPT_NN_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "gopt/nn.h"
#include "util/util_internal.h"

typedef struct nn_block { struct nn_block *next; size_t size, used; unsigned char *mem; } nn_block;

struct gopt_nn_ctx {
  nn_block *blocks;          /* current block first */
  size_t total_used;         /* bytes handed out since the last reset */
  size_t hint;
  gopt_nn_tensor **tape;     /* every tensor created in this pass, creation order */
  int64_t n_tape, cap_tape;
  int training;
  gopt_error err;            /* first error (code 0 when none) */
};

/* Arena allocation (64-byte aligned, uninitialised / zeroed); NULL + ctx error on failure. */
void *nn_alloc(gopt_nn_ctx *ctx, size_t bytes);
void *nn_calloc(gopt_nn_ctx *ctx, size_t bytes);
/* Records the first error of the pass; returns NULL for convenience. */
void *nn_fail(gopt_nn_ctx *ctx, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* New op output of the given shape (data uninitialised), pushed on the tape. */
gopt_nn_tensor *nn_op_new(gopt_nn_ctx *ctx, int op, int ndim, const int64_t *shape);
/* Same, but the output shares data (never written again) with an existing tensor (detach, reshape). */
gopt_nn_tensor *nn_op_view(gopt_nn_ctx *ctx, int op, int ndim, const int64_t *shape, float *data);
/* Sets requires_grad from the sources. */
void nn_op_srcs(gopt_nn_tensor *t, gopt_nn_tensor *a, gopt_nn_tensor *b, gopt_nn_tensor *c);

/* Errors go through the library-wide helper (gopt/error.h). */
#define nn_err gopt_error_set

int nn_threads(void);
/* Work-size threshold below which loops run on one thread. */
#define NN_PAR_MIN 16384

/* C[M,N] = alpha * op(A) op(B) + beta * C, row-major, leading dims as in cblas. Large problems are
 * split into row or column blocks over nn_threads() threads, each a single-threaded sgemm, so the
 * result depends only on the thread count. */
void nn_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
             int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* Inverse of an index array idx[m] with values in [0,n): ptr[n+1] and pos[m] such that
 * pos[ptr[j]..ptr[j+1]) are the i with idx[i]==j in increasing order. Arena-allocated. */
int nn_invert_index(gopt_nn_ctx *ctx, const int32_t *idx, int64_t m, int64_t n, int32_t **ptr,
                    int32_t **pos);

/* Attention forward/backward kernels (nn_attn.c). */
void nn_attention_forward(gopt_nn_tensor *out);
void nn_attention_backward(gopt_nn_tensor *out);

/* Counter-based hash used for dropout masks: one splitmix64 step from state x. */
static inline uint64_t nn_mix64(uint64_t x) { return gopt_splitmix64(&x); }

#endif
