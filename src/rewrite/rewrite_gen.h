/* rewrite_gen.h: the rule generator's operator set, its value type and its domains (internal to
 * rewrite_gen.c and rewrite_gen_ops.c). A domain is one enumeration: an operator subset, the
 * shapes of its three input variables (two shape sets: fingerprint / first test, second test) and
 * the constant parameters its BatchNormalization or Reshape ops read. */
#ifndef GOPT_REWRITE_GEN_H
#define GOPT_REWRITE_GEN_H

#include <stdint.h>

/* The 2-D operators come first, in the order the shipped 2-D rules were generated with (the
 * enumeration order, and so the gen_* names, depend on it). */
enum {
  G_MATMUL, G_ADD, G_MUL, G_RELU, G_TRANSPOSE, G_CONCAT0, G_CONCAT1, G_SPLIT0, G_SPLIT1,
  G_CONV,     /* Conv, stride 1, "same" pads; kernel from the weight, group = C_in / weight C_in */
  G_SMUL,     /* Mul by a rank-0 scalar variable */
  G_GEMM,     /* Gemm(A, B) */
  G_GEMM_TA,  /* Gemm(A, B), transA = 1 */
  G_GEMM_TB,  /* Gemm(A, B), transB = 1 */
  G_GEMM_C,   /* Gemm(A, B, C) (bias C of the output's shape) */
  G_BN,       /* BatchNormalization (inference, epsilon 1e-5) with the domain's parameter set */
  G_RESHAPE,  /* Reshape to the domain's constant target shape */
  G_NOPS
};

extern const char *const rw_gen_name[G_NOPS];
extern const int rw_gen_arity[G_NOPS];
extern const int rw_gen_outs[G_NOPS];

#define G_VARS 3
#define G_MAXOPS 4
#define G_MAXT (G_VARS + 2 * G_MAXOPS)
#define G_MAXE 1200 /* elements of a value (16 x 16 matrices, [12, 6, 3, 3] conv weights) */

/* A value: rank 0..4, dims, doubles in row-major order. */
typedef struct gval {
  int rank;
  int d[4];
  double v[G_MAXE];
} gval;

typedef struct gop {
  uint8_t type, in[3];
  uint8_t kh, kw, grp; /* a Conv's kernel and group (from its operands' shapes) */
  uint8_t st, dl;      /* its stride and dilation (the domain's) */
} gop;

/* Constant parameters (variables after the enumerated ones, "const" in the rule): a BN domain's
 * scale, bias, mean and variance ([C] each, the activations' channels), or a Reshape domain's
 * target shape (int64, one per shape set). */
#define G_MAXPAR 4

typedef struct gdomain {
  const char *prefix;  /* rule names: prefix_NNNN */
  uint32_t ops;        /* bit mask of the operators */
  int rank[G_VARS];
  int dims[2][G_VARS][4];
  int key_ops;         /* keep only candidates with a Conv / scalar Mul / Gemm (or key_mask) on a side */
  int shapes_listed;   /* 2: both shape sets go into the rule (kernels do not scale by 2) */
  uint32_t key_mask;   /* the key operators when not 0 (else every operator from G_CONV on) */
  int n_par;           /* constant parameters: 4 (BN), 1 (Reshape) or 0 */
  int par_dim[2];      /* BN: the channel count per shape set */
  int shape[2][4];     /* Reshape: the target shape per shape set (rank shape_rank) */
  int shape_rank;
  int conv_stride, conv_dil; /* the Conv ops' stride and dilation (0: 1) */
} gdomain;

/* The parameter values of one evaluation: BN's scale, bias, mean, variance, or the Reshape
 * target as par[0] (rank 1, the dims as values). */
typedef struct gparams {
  gval p[G_MAXPAR];
  int stride, dil; /* the Conv ops' */
} gparams;

/* The domains, 2-D first (the shipped gen_* rules). */
const gdomain *rw_gen_domains(int *n);

static inline int gval_numel(const gval *a) {
  int n = 1;
  for (int k = 0; k < a->rank; k++) n *= a->d[k];
  return n;
}

/* Evaluates op `type` on a (and b, c; BN and Reshape read par) into out[0..1]; sets o's conv
 * fields; 0, or -1 when the shapes do not fit. */
int rw_gen_eval(int type, const gval *a, const gval *b, const gval *c, const gparams *par, gval *out, gop *o);

/* Fills par for domain dom's shape set `set`: random BN parameters (variance in [0.5, 1.5)) or
 * the Reshape target, and the conv stride and dilation. */
void rw_gen_params(const gdomain *dom, int set, uint64_t seed, gparams *par);

#endif
