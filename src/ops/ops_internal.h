/* ops_internal.h: state shared by shape inference (infer.c), the per-op shape rules
 * (shape_rules.c) and value propagation (values.c). Internal to src/ops. */
#ifndef GOPT_OPS_INTERNAL_H
#define GOPT_OPS_INTERNAL_H

#include <stdint.h>

#include "gopt/graph.h"
#include "gopt/ops.h"

/* A shape under construction: rank < 0 means unknown rank. Dims follow graph.h's encoding
 * (>= 0 concrete, < 0 a symbol). */
typedef struct oshape {
  int rank;
  int64_t d[GOPT_MAX_RANK];
} oshape;

/* One element of a tracked tensor value: concrete (s == PV_CONC; i for integer/bool dtypes, f for
 * float dtypes), a symbol (s >= 0: the value equals dim symbol s), or unknown (s == PV_UNK). */
#define PV_CONC (-1)
#define PV_UNK (-2)
typedef struct pval {
  int64_t i;
  double f;
  int32_t s;
} pval;

/* A tracked float value as an integer (truncated toward zero). NaN, infinities and values beyond
 * +-9.2e18 give INT64_MIN, which is never a valid dim, index or count. */
static inline int64_t pv_f2i(double f) { return (f > -9.2e18 && f < 9.2e18) ? (int64_t)f : INT64_MIN; }

/* Most elements whose values are tracked through propagation (constants are read up to
 * OPS_MAX_CONST_VALS). */
#define OPS_MAX_VALS 64
#define OPS_MAX_CONST_VALS 1024

/* Monomial coef * prod(s[0..n-1]) over primitive symbols (sorted); the factorisation of a product
 * symbol created during inference. */
#define MONO_MAX 8
typedef struct mono {
  int64_t coef;
  int n;
  uint32_t s[MONO_MAX];
} mono;

typedef struct memo_ent {
  int64_t key[12];
  int nk;
  uint32_t sym;
} memo_ent;

typedef struct ictx {
  gopt_graph *g;
  gopt_error *err;
  int fold, keep_src;
  int64_t opset;       /* default-domain opset of the graph */
  uint32_t sym_base;   /* symbols with id >= sym_base were created by this run */
  size_t nt;           /* tensors when the run started (sizes of vals/nvals) */
  pval **vals;         /* per tensor: tracked value, NULL when untracked */
  int32_t *nvals;
  unsigned char *vdone; /* per tensor: constant decoding attempted */
  memo_ent *memo;      /* open-addressing table: key -> symbol */
  size_t memo_cap, memo_n;
  mono *monos;         /* per symbol id: factorisation (coef 0 = primitive) */
  size_t monos_n;
  int32_t node;        /* node being inferred (for messages) */
} ictx;

/* ---- infer.c: helpers for rules ---- */
int ops_node_err(ictx *c, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Formats a shape as "[1,batch,3]" ("[?]" for unknown rank) into buf. */
const char *ops_fmt_shape(const ictx *c, const oshape *s, char *buf, size_t len);
/* Shape of input i of node n into *s; returns the tensor id, or -1 (s->rank = -1) when absent. */
int32_t ops_in_shape(const ictx *c, int32_t n, int i, oshape *s);
int ops_in_dtype(const ictx *c, int32_t n, int i);
int32_t ops_in(const ictx *c, int32_t n, int i);  /* -1 when absent or beyond n_in */
int32_t ops_out(const ictx *c, int32_t n, int i); /* -1 when absent or beyond n_out */
/* Sets output i of node n (skipped when absent). Returns 0 or an error. */
int ops_set_out(ictx *c, int32_t n, int i, int dtype, const oshape *s);

/* Symbol arithmetic. Every result is a dim (>= 0 concrete, < 0 symbol); results that cannot be
 * represented exactly become a symbol memoised on (op, operands) so equal expressions share it. */
int64_t ops_fresh(ictx *c, int64_t tag, int64_t a, int64_t b, int64_t d);
/* Memoised symbol for an arbitrary key of up to 10 values. */
int64_t ops_fresh_key(ictx *c, const int64_t *key, int nk);
int64_t ops_dim_mul(ictx *c, int64_t a, int64_t b);
int64_t ops_dim_add(ictx *c, int64_t a, int64_t b);
int64_t ops_dim_sub(ictx *c, int64_t a, int64_t b);
/* a / b when exact (concrete or by cancelling factors); sets *ok = 0 and returns a memoised
 * symbol otherwise. */
int64_t ops_dim_div(ictx *c, int64_t a, int64_t b, int *ok);
void ops_dim_mono(ictx *c, int64_t d, mono *m);
/* Product of k dims, and prod(num) / prod(den) (*ok = 0 and a memoised symbol when not exact). */
int64_t ops_dims_product(ictx *c, const int64_t *d, int k);
int64_t ops_dims_ratio(ictx *c, const int64_t *num, int nn, const int64_t *den, int nd, int *ok);
int64_t ops_mono_dim(ictx *c, const mono *m);
/* Broadcasts two dims (ONNX multidirectional rule); sets *bad on a concrete mismatch. */
int64_t ops_bcast_dim(ictx *c, int64_t a, int64_t b, int *bad);

/* Tracked value of tensor t (constants decoded on first use): element array and count, or NULL. */
const pval *ops_val(ictx *c, int32_t t, int32_t *cnt);
/* Stores a value for t (copied). cnt must equal t's static element count. */
int ops_set_val(ictx *c, int32_t t, const pval *v, int32_t cnt);
/* Integer values of input i as int64 (all concrete): returns count, or -1 when not known. */
int ops_in_ints(ictx *c, int32_t n, int i, int64_t *out, int max);
int ops_in_floats(ictx *c, int32_t n, int i, double *out, int max);
/* Integer list from attribute (old opsets) or input i (new opsets): returns count (0 = absent and
 * *present = 0), -1 when the input exists but its values are unknown. */
int ops_attr_or_input_ints(ictx *c, int32_t n, const char *attr, int i, int from_input,
                           int64_t *out, int max, int *present);
int ops_is_float_dtype(int dt);
int ops_is_int_dtype(int dt);

/* ---- shape_rules.c ---- */
int ops_infer_node(ictx *c, int32_t n);
/* shape_rules_modern.c: the rules of the opset 13-24 additions (CastLike, BitCast, CumProd,
 * LpNormalization, RMSNormalization, RotaryEmbedding, Attention); 0 for other ops. */
int ops_infer_modern(ictx *c, int32_t n, int op);

/* ---- values.c ---- */
/* Propagates tracked values through node n (outputs' shapes already set). */
int ops_prop_values(ictx *c, int32_t n);

#endif
