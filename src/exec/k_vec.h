/* k_vec.h: what the vector kernels compiled once per instruction set share (k_vec.inc, built by
 * k_vec_base.c, k_vec_avx2.c and k_vec_avx512.c): the fused elementwise program (loads,
 * instructions, stores), the reduction helpers, and the per-ISA entry points the executor picks
 * from at plan time (exec_isa.c: by CPU feature, or GOPT_ISA=baseline|avx2|avx512). */
#ifndef GOPT_EXEC_K_VEC_H
#define GOPT_EXEC_K_VEC_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "gopt/ops.h"

#define FX_BLK 512

enum {
  FX_COPY, FX_RELU, FX_LEAKY, FX_ELU, FX_SIGMOID, FX_HSIGMOID, FX_HSWISH, FX_TANH, FX_EXP, FX_LOG,
  FX_SQRT, FX_RECIP, FX_NEG, FX_ABS, FX_ERF, FX_FLOOR, FX_CEIL, FX_SIN, FX_COS, FX_SOFTPLUS,
  FX_CLIP, FX_ADD, FX_SUB, FX_MUL, FX_DIV, FX_POW, FX_MAX, FX_MIN, FX_PRELU, FX_WHERE, FX_ROUND,
  FX_SIGN, FX_SQUARE, FX_CUBE /* Pow with a constant exponent 2 or 3 */
};

typedef struct fx_load {
  const void *base;   /* set at run time from the tensor */
  int32_t tensor;
  int is_bool;        /* uint8 source converted to 0/1 */
  int kind;           /* 0 general, 1 contiguous full, 2 scalar */
  int64_t strides[GOPT_MAX_RANK]; /* element strides over the loop dims (0 = broadcast) */
  const float *own;   /* a store buffer of the program's pre-program (NULL: the tensor's value) */
} fx_load;

typedef struct fx_instr {
  uint8_t op;
  int16_t dst, a, b, c;
  float p0, p1;
} fx_instr;

typedef struct fx_store {
  int32_t tensor;
  int16_t reg;
  float *base;        /* set at run time from the tensor */
  float *own;         /* the buffer this store writes when it is a pre-program's (NULL: the tensor's) */
} fx_store;

typedef struct fx_prog fx_prog;
/* One block of a fused program: elements [start, start+len) (len <= FX_BLK) of every store.
 * regs: n_regs * FX_BLK floats of scratch; rp: n_regs pointers of scratch (per thread). */
typedef void (*fx_block_fn)(const fx_prog *f, float *regs, const float **rp, int64_t start,
                            int64_t len);

struct fx_prog {
  int rank;
  int64_t dims[GOPT_MAX_RANK];
  int64_t numel;
  int n_loads, n_instr, n_stores, n_regs;
  int n_members;      /* registers 0..n_members-1 hold member outputs; loads follow */
  fx_load *loads;
  fx_instr *instr;
  fx_store *stores;
  float *scratch;     /* n_threads * n_regs * FX_BLK */
  const float **ptrs; /* n_threads * n_regs register pointers */
  int n_threads;
  fx_block_fn block;  /* the ISA's block function */
  struct fx_prog *pre; /* members hoisted out of the loop, run first at their own shape (or NULL) */
  float *own;         /* pre's store buffers, which this program loads */
};

/* Reduction helpers (k_misc.c's general path and the vector kernels). */
static inline float ex_red_init(int op) {
  switch (op) {
    case GOPT_OP_REDUCE_MAX: case GOPT_OP_GLOBAL_MAX_POOL: return -INFINITY;
    case GOPT_OP_REDUCE_MIN: return INFINITY;
    case GOPT_OP_REDUCE_PROD: return 1.0f;
    default: return 0.0f;
  }
}
static inline float ex_red_step(int op, float acc, float v) {
  switch (op) {
    case GOPT_OP_REDUCE_MAX: case GOPT_OP_GLOBAL_MAX_POOL: return v > acc || isnan(v) ? v : acc;
    case GOPT_OP_REDUCE_MIN: return v < acc || isnan(v) ? v : acc;
    case GOPT_OP_REDUCE_PROD: return acc * v;
    case GOPT_OP_REDUCE_L2: case GOPT_OP_REDUCE_SUM_SQUARE: return acc + v * v;
    default: return acc + v;
  }
}
static inline float ex_red_final(int op, float acc, int64_t n) {
  switch (op) {
    case GOPT_OP_REDUCE_MEAN: case GOPT_OP_GLOBAL_AVG_POOL: return n ? acc / (float)n : NAN;
    case GOPT_OP_REDUCE_L2: return sqrtf(acc);
    default: return acc;
  }
}

/* reduce_forward: out[o, i] = reduce_r in[o, r, i] (in [outer, red, inner], out [outer, inner]). */
typedef void (*ex_reduce_fn)(float *out, const float *in, int op, int64_t outer, int64_t red,
                             int64_t inner);

/* Instruction sets the vector kernels are compiled for. */
enum { EX_ISA_BASELINE = 0, EX_ISA_AVX2 = 1, EX_ISA_AVX512 = 2, EX_ISA_COUNT = 3 };

/* lstm_cell: one LSTM step's gate math (ONNX gate order i, o, f, c) for B batch rows. g [B, 4H]
 * holds X W^T + h R^T + both biases and is overwritten (scratch); c and h [B, H] are read as the
 * previous state and updated in place; P [3H] holds the peepholes (i, o, f) or is NULL. */
typedef void (*ex_lstm_cell_fn)(float *g, float *c, float *h, const float *P, int64_t B, int64_t H);

/* gemm_acc: C [M, N] += A [M, K] Bt [K, N] (row-major, contiguous): the LSTM's projections,
 * small enough that a library call's packing costs more than the product. */
typedef void (*ex_gemm_acc_fn)(float *C, const float *A, const float *Bt, int64_t M, int64_t N, int64_t K);

/* count_nonfinite: how many of p[0..n) are Inf or NaN; *n_nan how many of them NaN. */
typedef size_t (*ex_count_nonfinite_fn)(const float *p, int64_t n, size_t *n_nan);

/* affine_rows: y[r*sy + j] = x[r*sx + j] a[j] + b[j] (r < rows, j < n), max(., 0) with relu;
 * affine_plane: y[i] = x[i] a + b (i < n), max(., 0) with relu. Per-channel scale and shift of
 * k_concat_bn.c over channels-last / blocked rows and plain planes. */
typedef void (*ex_affine_rows_fn)(float *y, const float *x, const float *a, const float *b, int64_t rows, int64_t n,
                                  int64_t sy, int64_t sx, int relu);
typedef void (*ex_affine_plane_fn)(float *y, const float *x, float a, float b, int64_t n, int relu);

typedef struct ex_vec_ops {
  fx_block_fn fx_block;
  ex_reduce_fn reduce;
  ex_lstm_cell_fn lstm_cell;
  ex_gemm_acc_fn gemm_acc;
  ex_count_nonfinite_fn count_nonfinite;
  ex_affine_rows_fn affine_rows;
  ex_affine_plane_fn affine_plane;
} ex_vec_ops;

/* The kernels of isa (EX_ISA_*). */
const ex_vec_ops *ex_vec_ops_for(int isa);

void ex_fx_block_base(const fx_prog *f, float *regs, const float **rp, int64_t start, int64_t len);
void ex_fx_block_avx2(const fx_prog *f, float *regs, const float **rp, int64_t start, int64_t len);
void ex_fx_block_avx512(const fx_prog *f, float *regs, const float **rp, int64_t start, int64_t len);
void ex_reduce_base(float *out, const float *in, int op, int64_t outer, int64_t red, int64_t inner);
void ex_reduce_avx2(float *out, const float *in, int op, int64_t outer, int64_t red, int64_t inner);
void ex_reduce_avx512(float *out, const float *in, int op, int64_t outer, int64_t red, int64_t inner);
void ex_lstm_cell_base(float *g, float *c, float *h, const float *P, int64_t B, int64_t H);
void ex_lstm_cell_avx2(float *g, float *c, float *h, const float *P, int64_t B, int64_t H);
void ex_lstm_cell_avx512(float *g, float *c, float *h, const float *P, int64_t B, int64_t H);
void ex_gemm_acc_base(float *C, const float *A, const float *Bt, int64_t M, int64_t N, int64_t K);
void ex_gemm_acc_avx2(float *C, const float *A, const float *Bt, int64_t M, int64_t N, int64_t K);
void ex_gemm_acc_avx512(float *C, const float *A, const float *Bt, int64_t M, int64_t N, int64_t K);
size_t ex_count_nonfinite_base(const float *p, int64_t n, size_t *n_nan);
size_t ex_count_nonfinite_avx2(const float *p, int64_t n, size_t *n_nan);
size_t ex_count_nonfinite_avx512(const float *p, int64_t n, size_t *n_nan);
void ex_affine_rows_base(float *y, const float *x, const float *a, const float *b, int64_t rows, int64_t n,
                         int64_t sy, int64_t sx, int relu);
void ex_affine_plane_base(float *y, const float *x, float a, float b, int64_t n, int relu);
void ex_affine_rows_avx2(float *y, const float *x, const float *a, const float *b, int64_t rows, int64_t n,
                         int64_t sy, int64_t sx, int relu);
void ex_affine_plane_avx2(float *y, const float *x, float a, float b, int64_t n, int relu);
void ex_affine_rows_avx512(float *y, const float *x, const float *a, const float *b, int64_t rows, int64_t n,
                           int64_t sy, int64_t sx, int relu);
void ex_affine_plane_avx512(float *y, const float *x, float a, float b, int64_t n, int relu);

#endif
