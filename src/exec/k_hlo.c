/* k_hlo.c: kernels for the HLO opcodes whose nodes are opaque in the IR (docs/HLO.md), so that
 * imported XLA modules run and a compiler pass can be checked to leave outputs unchanged.
 * Data movement and elementwise ops are reference kernels (k_ref.h: values as doubles, stored back
 * in the declared dtype; integer bit operations on the exact 32-bit patterns): broadcast with
 * dimensions, reshape/bitcast/copy, slice, dynamic-slice, dynamic-update-slice, pad (edge and
 * interior, negative edges), iota, reverse, reduce with any scalar computation (interpreted per
 * element by the scalar evaluator below; variadic reduces included), sort (stable, comparator
 * interpreted), gather, scatter (combiner interpreted), dot with dimension numbers, the cuBLAS GEMM
 * custom-calls of optimised GPU modules (alpha, beta, RELU/BIAS epilogues), the elementwise ops without
 * an ONNX twin (rsqrt, log-plus-one, exponential-minus-one, atan2, clamp, remainder, shifts,
 * bitwise and/or/xor/not on integers, compare NE, bitcast-convert, is-finite, ...), and the
 * custom-call cuda_threefry2x32 (JAX's counter-based RNG, Random123's Threefry-2x32 with 20
 * rounds; operands key0, key1, x0, x1 as jaxlib passes them). tuple and get-tuple-element copy bytes; while runs its condition and body, conditional the
 * selected branch, in nested executors; call and fusion run their computation in a
 * nested executor. Semantics as XLA's operation semantics page states them. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_hlo.h"
#include "ops/ops_hlo.h"

#define NODE (k->node)
#define G (x->g)

const char *ex_hlo_op(const gopt_graph *g, int32_t n) {
  const char *t = gopt_node_type(g, n);
  return strncmp(t, "hlo::", 5) ? NULL : t + 5;
}
#define hop ex_hlo_op

/* ---- scalar semantics ------------------------------------------------------------------------ */

static int dt_int(int dt) {
  return dt != GOPT_DT_FLOAT && dt != GOPT_DT_DOUBLE && dt != GOPT_DT_FLOAT16 && dt != GOPT_DT_BFLOAT16;
}
static int dt_signed(int dt) {
  return dt == GOPT_DT_INT8 || dt == GOPT_DT_INT16 || dt == GOPT_DT_INT32 || dt == GOPT_DT_INT64;
}
static int dt_bits(int dt) { return dt == GOPT_DT_BOOL ? 1 : (int)gopt_dtype_size(dt) * 8; }

/* The bit pattern of integer value v in a dt-wide register, and back. */
static uint64_t to_bits(double v, int dt) {
  int w = dt_bits(dt);
  uint64_t u = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
  return w >= 64 ? u : u & ((1ull << w) - 1);
}
static double from_bits(uint64_t u, int dt) {
  int w = dt_bits(dt);
  if (w < 64) u &= (1ull << w) - 1;
  if (dt_signed(dt) && w < 64 && (u >> (w - 1)) & 1) return (double)(int64_t)(u | ~((1ull << w) - 1));
  return dt_signed(dt) ? (double)(int64_t)u : (double)u;
}

static double wrap(double v, int dt) { /* integer results wrap to their type's width */
  if (!dt_int(dt) || dt == GOPT_DT_BOOL || !isfinite(v)) return v;
  if (fabs(v) < 9.2e18) return from_bits(to_bits(trunc(v), dt), dt);
  return 0;
}

static double hmax(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double hmin(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }

/* Bitcast of one element between same-width types. */
static double bitcast1(double v, int from, int to) {
  uint64_t u = 0;
  if (from == GOPT_DT_FLOAT) {
    float f = (float)v;
    uint32_t b;
    memcpy(&b, &f, 4);
    u = b;
  } else if (from == GOPT_DT_DOUBLE) memcpy(&u, &v, 8);
  else u = to_bits(v, from);
  if (to == GOPT_DT_FLOAT) {
    uint32_t b = (uint32_t)u;
    float f;
    memcpy(&f, &b, 4);
    return f;
  }
  if (to == GOPT_DT_DOUBLE) {
    double d;
    memcpy(&d, &u, 8);
    return d;
  }
  return from_bits(u, to);
}

/* The elementwise opcodes the scalar evaluator knows, in the order of eop_names. */
enum {
  E_ADD, E_SUB, E_MUL, E_DIV, E_REM, E_MAX, E_MIN, E_POW, E_ATAN2, E_NEG, E_ABS, E_SIGN, E_EXP, E_EXPM1,
  E_LOG, E_LOG1P, E_SQRT, E_RSQRT, E_CBRT, E_TANH, E_TAN, E_SIN, E_COS, E_LOGISTIC, E_ERF, E_FLOOR,
  E_CEIL, E_ROUND_AFZ, E_ROUND_EVEN, E_ISFINITE, E_CLAMP, E_SELECT, E_CONVERT, E_COPY, E_REDPREC,
  E_BITCAST, E_COMPARE, E_AND, E_OR, E_XOR, E_NOT, E_POPCNT, E_SHL, E_SHRL, E_SHRA, E_COUNT
};
static const char *const eop_names[E_COUNT] = {
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2", "negate",
    "abs", "sign", "exponential", "exponential-minus-one", "log", "log-plus-one", "sqrt", "rsqrt", "cbrt",
    "tanh", "tan", "sine", "cosine", "logistic", "erf", "floor", "ceil", "round-nearest-afz",
    "round-nearest-even", "is-finite", "clamp", "select", "convert", "copy", "reduce-precision",
    "bitcast-convert", "compare", "and", "or", "xor", "not", "popcnt", "shift-left", "shift-right-logical",
    "shift-right-arithmetic"};
static const char *const dir_names[6] = {"EQ", "NE", "LT", "LE", "GT", "GE"};

/* Code of elementwise opcode op (E_*), -1 when the evaluator does not know it. */
static int eop_find(const char *op) {
  for (int i = 0; op && i < E_COUNT; i++)
    if (!strcmp(op, eop_names[i])) return i;
  return -1;
}
/* Compare direction code of node n (0..5 as dir_names), -1 when none of those. */
static int dir_find(const gopt_graph *g, int32_t n) {
  const char *d = gopt_node_get_string(g, n, "direction", "");
  for (int i = 0; i < 6; i++)
    if (!strcmp(d, dir_names[i])) return i;
  return -1;
}

static int cmp(int dir, double a, double b) {
  switch (dir) {
    case 0: return a == b;
    case 1: return a != b;
    case 2: return a < b;
    case 3: return a <= b;
    case 4: return a > b;
    default: return a >= b;
  }
}

/* One element of elementwise op code e (E_*) on a[0..na) with result dtype dt, operand dtype adt
 * and compare direction dir (dir_find). */
static double scalar_op(int e, int dt, int adt, int dir, const double *a, int na) {
  double x = na > 0 ? a[0] : 0, y = na > 1 ? a[1] : 0;
  int in = dt_int(adt), w = dt_bits(dt);
  uint64_t u = 0, sh = 0;
  switch (e) {
    case E_ADD: return wrap(x + y, dt);
    case E_SUB: return wrap(x - y, dt);
    case E_MUL: return in && w > 26 && w <= 32 ? from_bits(to_bits(x, dt) * to_bits(y, dt), dt) : wrap(x * y, dt);
    case E_DIV:
      if (in) return y == 0 ? (dt_signed(dt) ? -1 : from_bits(~0ull, dt)) : wrap(trunc(x / y), dt);
      return x / y;
    case E_REM: return in && y == 0 ? x : fmod(x, y);
    case E_MAX: return hmax(x, y);
    case E_MIN: return hmin(x, y);
    case E_POW: return wrap(pow(x, y), dt);
    case E_ATAN2: return atan2(x, y);
    case E_NEG: return wrap(-x, dt);
    case E_ABS: return fabs(x);
    case E_SIGN: return isnan(x) ? x : (x > 0) - (x < 0);
    case E_EXP: return exp(x);
    case E_EXPM1: return expm1(x);
    case E_LOG: return log(x);
    case E_LOG1P: return log1p(x);
    case E_SQRT: return sqrt(x);
    case E_RSQRT: return 1 / sqrt(x);
    case E_CBRT: return cbrt(x);
    case E_TANH: return tanh(x);
    case E_TAN: return tan(x);
    case E_SIN: return sin(x);
    case E_COS: return cos(x);
    case E_LOGISTIC: return 1 / (1 + exp(-x));
    case E_ERF: return erf(x);
    case E_FLOOR: return floor(x);
    case E_CEIL: return ceil(x);
    case E_ROUND_AFZ: return round(x);
    case E_ROUND_EVEN: return nearbyint(x);
    case E_ISFINITE: return isfinite(x) != 0;
    case E_CLAMP: return hmin(hmax(y, x), na > 2 ? a[2] : y);
    case E_SELECT: return x != 0 ? y : (na > 2 ? a[2] : 0);
    case E_CONVERT: case E_COPY: case E_REDPREC:
      return dt == GOPT_DT_BOOL ? x != 0 : in || !dt_int(dt) ? x : wrap(isnan(x) ? 0 : x, dt);
    case E_BITCAST: return bitcast1(x, adt, dt);
    case E_COMPARE: return cmp(dir, x, y);
    case E_AND: return from_bits(to_bits(x, dt) & to_bits(y, dt), dt);
    case E_OR: return from_bits(to_bits(x, dt) | to_bits(y, dt), dt);
    case E_XOR: return from_bits(to_bits(x, dt) ^ to_bits(y, dt), dt);
    case E_NOT: return dt == GOPT_DT_BOOL ? x == 0 : from_bits(~to_bits(x, dt), dt);
    case E_POPCNT: return __builtin_popcountll(to_bits(x, dt));
    default: break;
  }
  u = to_bits(x, dt);
  sh = to_bits(y, dt);
  if (e == E_SHL) return sh >= (uint64_t)w ? 0 : from_bits(u << sh, dt);
  if (e == E_SHRL) return sh >= (uint64_t)w ? 0 : from_bits(u >> sh, dt);
  return sh >= (uint64_t)w ? (x < 0 ? -1 : 0) : floor(x / ldexp(1, (int)sh)); /* E_SHRA */
}

/* ---- computations interpreted per element (reduce's to_apply) -------------------------------- */

typedef ex_hlo_scomp scomp;

static int is64(int dt) { return dt == GOPT_DT_INT64 || dt == GOPT_DT_UINT64; }

/* The two's complement pattern of integer value v (saturated outside the 64-bit range). */
static uint64_t d2u(double v) {
  if (isnan(v)) return 0;
  if (v >= 18446744073709551616.0) return ~0ull;
  if (v < -9223372036854775808.0) return 1ull << 63;
  return v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
}

void ex_hlo_scomp_free(scomp *c) {
  if (!c) return;
  free(c->order);
  free(c->val);
  free(c->bits);
  free(c->code);
  free(c->dir);
}

/* Scalar constant t of s into c->val / c->bits; 0, or an error. */
static int scomp_const(scomp *c, const gopt_graph *s, size_t t, gopt_error *err) {
  const gopt_tensor *tt = &s->tensors.a[t];
  const void *d = gopt_tensor_data(s, (int32_t)t);
  if (!d || gopt_tensor_numel(s, (int32_t)t) != 1) return gopt_error_set(err, GOPT_EUNSUP, "computation '%s': a non-scalar constant", gopt_graph_str(s, s->name));
  double v = 0;
  switch (tt->dtype) {
    case GOPT_DT_FLOAT: v = *(const float *)d; break;
    case GOPT_DT_DOUBLE: v = *(const double *)d; break;
    case GOPT_DT_INT32: v = *(const int32_t *)d; break;
    case GOPT_DT_INT64: case GOPT_DT_UINT64: memcpy(&c->bits[t], d, 8); v = tt->dtype == GOPT_DT_INT64 ? (double)(int64_t)c->bits[t] : (double)c->bits[t]; break;
    case GOPT_DT_UINT32: v = *(const uint32_t *)d; break;
    case GOPT_DT_INT16: v = *(const int16_t *)d; break;
    case GOPT_DT_UINT16: v = *(const uint16_t *)d; break;
    case GOPT_DT_BOOL: case GOPT_DT_UINT8: v = *(const uint8_t *)d; break;
    case GOPT_DT_INT8: v = *(const int8_t *)d; break;
    default: return gopt_error_set(err, GOPT_EUNSUP, "computation '%s': constant of dtype %s", gopt_graph_str(s, s->name), gopt_dtype_name(tt->dtype));
  }
  c->val[t] = v;
  return GOPT_OK;
}

/* Prepares computation s (scalar parameters) for scomp_eval; 0, or an error naming what it lacks. */
int ex_hlo_scomp_init(scomp *c, const gopt_graph *s, gopt_error *err) {
  memset(c, 0, sizeof *c);
  c->s = s;
  c->order = malloc((s->nodes.n + 1) * sizeof *c->order);
  c->val = calloc(s->tensors.n + 1, sizeof *c->val);
  c->bits = calloc(s->tensors.n + 1, sizeof *c->bits);
  c->code = calloc(s->nodes.n + 1, sizeof *c->code);
  c->dir = calloc(s->nodes.n + 1, sizeof *c->dir);
  if (!c->order || !c->val || !c->bits || !c->code || !c->dir) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  c->n_order = gopt_graph_topo(s, c->order, err);
  if (c->n_order < 0) return (int)c->n_order;
  for (size_t t = 0; t < s->tensors.n; t++) { /* scalar constants */
    if (!(s->tensors.a[t].flags & GOPT_T_CONST)) continue;
    int rc = scomp_const(c, s, t, err);
    if (rc) return rc;
  }
  for (int64_t i = 0; i < c->n_order; i++) {
    int32_t n = c->order[i];
    const char *op = hop(s, n);
    c->code[i] = (int16_t)(op && !strcmp(op, "tuple") ? -1 : op && !strcmp(op, "get-tuple-element") ? -2 : eop_find(op));
    c->dir[i] = (int8_t)dir_find(s, n);
    if (c->code[i] != -1 && c->code[i] != -2 && c->code[i] < 0) c->code[i] = -3;
    if (c->code[i] != -3 && (c->code[i] != E_COMPARE || c->dir[i] >= 0)) continue;
    return gopt_error_set(err, GOPT_EUNSUP, "computation '%s': op '%s' cannot be interpreted per element",
                          gopt_graph_str(s, s->name), gopt_node_type(s, n));
  }
  return GOPT_OK;
}

/* The 64-bit pattern operand j of node n stands for (exact for 64-bit integers and the f64 operand
 * of a bitcast-convert). */
static uint64_t arg64(const scomp *c, int32_t t) {
  int dt = c->s->tensors.a[t].dtype;
  double v = c->val[t];
  uint64_t u;
  if (is64(dt)) return c->bits[t];
  if (dt == GOPT_DT_DOUBLE) {
    memcpy(&u, &v, 8);
    return u;
  }
  return d2u(v);
}

/* One op of a computation where a 64-bit integer is an operand or the result, on exact 64-bit
 * patterns (two's complement wrap, XLA's division by zero: -1 or all ones, remainder x);
 * 0, or -1 when the op has no exact form here (the double evaluation applies). */
static int op64(int e, int dt, int adt, int dir, const uint64_t *a, int na, double sel, uint64_t *r) {
  uint64_t x = a[0], y = na > 1 ? a[1] : 0;
  int sg = adt == GOPT_DT_INT64 || (adt != GOPT_DT_UINT64 && dt == GOPT_DT_INT64);
  int64_t sx = (int64_t)x, sy = (int64_t)y;
  switch (e) {
    case E_ADD: *r = x + y; return 0;
    case E_SUB: *r = x - y; return 0;
    case E_MUL: *r = x * y; return 0;
    case E_NEG: *r = 0 - x; return 0;
    case E_AND: *r = x & y; return 0;
    case E_OR: *r = x | y; return 0;
    case E_XOR: *r = x ^ y; return 0;
    case E_NOT: *r = ~x; return 0;
    case E_SHL: *r = y >= 64 ? 0 : x << y; return 0;
    case E_SHRL: *r = y >= 64 ? 0 : x >> y; return 0;
    case E_SHRA: *r = (uint64_t)(y >= 64 ? (sx < 0 ? -1 : 0) : sx >> y); return 0;
    case E_ABS: *r = sg && sx < 0 ? 0 - x : x; return 0;
    case E_MAX: *r = (sg ? sx > sy : x > y) ? x : y; return 0;
    case E_MIN: *r = (sg ? sx < sy : x < y) ? x : y; return 0;
    case E_DIV:
      if (y == 0) *r = sg ? (uint64_t)-1 : ~0ull;
      else if (sg) *r = sx == INT64_MIN && sy == -1 ? x : (uint64_t)(sx / sy);
      else *r = x / y;
      return 0;
    case E_REM:
      if (y == 0) *r = x;
      else if (sg) *r = sx == INT64_MIN && sy == -1 ? 0 : (uint64_t)(sx % sy);
      else *r = x % y;
      return 0;
    case E_SELECT: *r = sel != 0 ? a[1] : a[2]; return 0;
    case E_COPY: case E_BITCAST: *r = x; return 0;
    case E_COMPARE: {
      int lt = sg ? sx < sy : x < y, eq = x == y;
      int res[6] = {eq, !eq, lt, lt || eq, !lt && !eq, !lt};
      *r = (uint64_t)res[dir < 0 || dir > 5 ? 0 : dir];
      return 0;
    }
    default: return -1;
  }
}

/* Evaluates node at order position i with 64-bit integer operands or result exactly; 0 when done,
 * -1 when the double evaluation applies. */
static int eval64(scomp *c, int64_t i, int32_t n) {
  const gopt_graph *s = c->s;
  const gopt_node *nd = &s->nodes.a[n];
  int32_t y = gopt_node_output(s, n, 0);
  int ydt = s->tensors.a[y].dtype, any = is64(ydt), e = c->code[i], adt = -1;
  uint64_t a[3] = {0}, r = 0;
  int na = nd->n_in < 3 ? nd->n_in : 3, first = e == E_SELECT ? 1 : 0;
  for (int j = 0; j < na; j++) {
    int32_t t = gopt_node_input(s, n, j);
    if (t < 0) return -1;
    any |= is64(s->tensors.a[t].dtype);
    a[j] = arg64(c, t);
    if (j == first) adt = s->tensors.a[t].dtype;
  }
  if (!any || adt < 0) return -1;
  if (e == E_CONVERT && !is64(adt)) return -1; /* from a double value: the double path wraps it */
  if (e == E_CONVERT && !is64(ydt)) { /* 64-bit integer to another type */
    double v = adt == GOPT_DT_INT64 ? (double)(int64_t)a[0] : (double)a[0];
    c->val[y] = scalar_op(E_CONVERT, ydt, GOPT_DT_DOUBLE, 0, &v, 1);
    return 0;
  }
  if (e != E_CONVERT && op64(e, ydt, adt, c->dir[i], a, na, na > 0 ? c->val[gopt_node_input(s, n, 0)] : 0, &r)) return -1;
  if (e == E_CONVERT) r = a[0];
  if (ydt == GOPT_DT_DOUBLE) memcpy(&c->val[y], &r, 8);
  else if (is64(ydt)) {
    c->bits[y] = r;
    c->val[y] = ydt == GOPT_DT_INT64 ? (double)(int64_t)r : (double)r;
  } else c->val[y] = e == E_COMPARE ? (double)r : from_bits(r, ydt);
  return 0;
}

/* Evaluates the computation on scalar parameters in[0..n_in) into out[0..outputs). */
void ex_hlo_scomp_eval(scomp *c, const double *in, double *out) {
  const gopt_graph *s = c->s;
  for (size_t i = 0; i < s->inputs.n; i++) {
    int32_t t = s->inputs.a[i];
    c->val[t] = in[i];
    if (is64(s->tensors.a[t].dtype)) c->bits[t] = d2u(in[i]);
  }
  for (int64_t i = 0; i < c->n_order; i++) {
    int32_t n = c->order[i];
    const gopt_node *nd = &s->nodes.a[n];
    if (c->code[i] < 0) { /* tuple, get-tuple-element */
      int64_t off = c->code[i] == -2 ? gopt_node_get_int(s, n, "hlo.leaf_offset", 0) : 0;
      for (int j = 0; j < nd->n_out; j++) {
        int32_t t = gopt_node_input(s, n, (int)off + j), o = gopt_node_output(s, n, j);
        c->val[o] = t >= 0 ? c->val[t] : 0;
        c->bits[o] = t >= 0 ? c->bits[t] : 0;
      }
      continue;
    }
    if (!eval64(c, i, n)) continue;
    double a[8] = {0};
    int na = nd->n_in < 8 ? nd->n_in : 8;
    for (int j = 0; j < na; j++) {
      int32_t t = gopt_node_input(s, n, j);
      a[j] = t >= 0 ? c->val[t] : 0;
    }
    int32_t y = gopt_node_output(s, n, 0), x0 = gopt_node_input(s, n, 0);
    int adt = x0 >= 0 ? s->tensors.a[x0].dtype : s->tensors.a[y].dtype;
    c->val[y] = scalar_op(c->code[i], s->tensors.a[y].dtype, adt, c->dir[i], a, na);
    if (is64(s->tensors.a[y].dtype)) c->bits[y] = d2u(c->val[y]);
  }
  for (size_t i = 0; i < s->outputs.n; i++) out[i] = c->val[s->outputs.a[i]];
}
#define scomp_init ex_hlo_scomp_init
#define scomp_eval ex_hlo_scomp_eval
#define scomp_free ex_hlo_scomp_free

/* ---- reference kernels ----------------------------------------------------------------------- */

/* Multi-index of flat index o in t's shape. */
void ex_hlo_unravel(const rt *t, int64_t o, int64_t *idx) {
  for (int i = t->rank - 1; i >= 0; i--) {
    idx[i] = t->d[i] ? o % t->d[i] : 0;
    o = t->d[i] ? o / t->d[i] : 0;
  }
}
int64_t ex_hlo_ravel(const rt *t, const int64_t *idx) {
  int64_t o = 0;
  for (int i = 0; i < t->rank; i++) o = o * t->d[i] + idx[i];
  return o;
}
#define unravel ex_hlo_unravel
#define ravel ex_hlo_ravel

/* Advances the multi-index idx over extents ext[0..r) by one element (the last dim fastest) and
 * keeps the offset *p in step with the per-dim strides st: an in-order walk without a division
 * per element. */
static inline void odo_next(int r, const int64_t *ext, const int64_t *st, int64_t *idx, int64_t *p) {
  for (int d = r - 1; d >= 0; d--) {
    *p += st[d];
    if (++idx[d] < ext[d]) return;
    *p -= st[d] * ext[d];
    idx[d] = 0;
  }
}

static int f_elementwise(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  int e = eop_find(hop(G, NODE)), dir = dir_find(G, NODE), na = nin < 3 ? nin : 3;
  if (e < 0 || (e == E_COMPARE && dir < 0)) return ex_node_error(x, NODE, err, GOPT_EUNSUP, "op not supported by the executor");
  int adt = in[na > 1 && e == E_SELECT ? 1 : 0].dt;
  double a[3];
  for (int64_t o = 0; o < out[0].n; o++) {
    for (int j = 0; j < na; j++) a[j] = in[j].v[in[j].n == out[0].n ? o : ref_bcast_index(&in[j], &out[0], o)];
    out[0].v[o] = scalar_op(e, out[0].dt, adt, dir, a, na);
  }
  return GOPT_OK;
}

static int f_copy(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  if (in[0].n != out[0].n) return ex_node_error(x, NODE, err, GOPT_EINVAL, "element counts differ");
  memcpy(out[0].v, in[0].v, (size_t)in[0].n * sizeof(double));
  return GOPT_OK;
}

static int f_broadcast(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  size_t nd = 0;
  const int64_t *dims = gopt_node_get_ints(G, NODE, "dimensions", &nd);
  if ((int)nd != in[0].rank) return ex_node_error(x, NODE, err, GOPT_EINVAL, "dimensions has %zu entries for rank %d", nd, in[0].rank);
  for (size_t i = 0; i < nd; i++)
    if (dims[i] < 0 || dims[i] >= out[0].rank || out[0].d[dims[i]] != in[0].d[i])
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "dimensions entry %zu does not match the shapes", i);
  /* per output dim: the input's stride along it (0 for a broadcast dim); the output is walked in
   * order with its multi-index and the input offset kept in step */
  int64_t ist[GOPT_MAX_RANK] = {0}, st[GOPT_MAX_RANK], idx[GOPT_MAX_RANK] = {0}, p = 0;
  ref_strides(&in[0], st);
  for (size_t i = 0; i < nd; i++) ist[dims[i]] = st[i];
  int r = out[0].rank;
  for (int64_t o = 0; o < out[0].n; o++) {
    out[0].v[o] = in[0].v[p];
    odo_next(r, out[0].d, ist, idx, &p);
  }
  return GOPT_OK;
}

static int f_slice(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int64_t st[GOPT_MAX_RANK], li[GOPT_MAX_RANK], sd[GOPT_MAX_RANK], idx[GOPT_MAX_RANK] = {0};
  int64_t ist[GOPT_MAX_RANK], step[GOPT_MAX_RANK], p = 0;
  int r = in[0].rank;
  if (ops_hlo_slice(G, NODE, r, st, li, sd) || out[0].rank != r)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "bad slice attribute");
  if (out[0].n == 0) return GOPT_OK;
  ref_strides(&in[0], ist);
  for (int i = 0; i < r; i++) { /* the last element read along each dim must be in bounds */
    if (st[i] < 0 || sd[i] < 1 || st[i] + (out[0].d[i] - 1) * sd[i] >= in[0].d[i])
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "slice out of bounds");
    p += st[i] * ist[i];
    step[i] = sd[i] * ist[i];
  }
  for (int64_t o = 0; o < out[0].n; o++) { /* output in order, the input offset kept in step */
    out[0].v[o] = in[0].v[p];
    odo_next(r, out[0].d, step, idx, &p);
  }
  return GOPT_OK;
}

/* Clamped start indices of dynamic-(update-)slice: inputs in[first..first+rank), window w. */
static void dyn_starts(const rt *in, int first, const rt *op, const int64_t *w, int64_t *st) {
  for (int i = 0; i < op->rank; i++) {
    double v = in[first + i].v ? in[first + i].v[0] : 0;
    int64_t s = (int64_t)v, hi = op->d[i] - w[i];
    st[i] = s < 0 ? 0 : s > hi ? hi : s;
  }
}

static int f_dynamic_slice(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  int64_t st[GOPT_MAX_RANK], idx[GOPT_MAX_RANK];
  if (nin != 1 + in[0].rank) return ex_node_error(x, NODE, err, GOPT_EUNSUP, "expects one scalar start index per dimension");
  dyn_starts(in, 1, &in[0], out[0].d, st);
  for (int64_t o = 0; o < out[0].n; o++) {
    unravel(&out[0], o, idx);
    for (int i = 0; i < in[0].rank; i++) idx[i] += st[i];
    out[0].v[o] = in[0].v[ravel(&in[0], idx)];
  }
  return GOPT_OK;
}

static int f_dynamic_update_slice(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  int64_t st[GOPT_MAX_RANK], idx[GOPT_MAX_RANK];
  if (nin != 2 + in[0].rank || in[1].rank != in[0].rank)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "expects an update of the operand's rank and one scalar start index per dimension");
  memcpy(out[0].v, in[0].v, (size_t)in[0].n * sizeof(double));
  dyn_starts(in, 2, &in[0], in[1].d, st);
  for (int64_t u = 0; u < in[1].n; u++) {
    unravel(&in[1], u, idx);
    for (int i = 0; i < in[0].rank; i++) idx[i] += st[i];
    out[0].v[ravel(&out[0], idx)] = in[1].v[u];
  }
  return GOPT_OK;
}

/* padding="lo_hi[_interior]x..." */
static int f_pad(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int64_t lo[GOPT_MAX_RANK], in_[GOPT_MAX_RANK], idx[GOPT_MAX_RANK];
  const char *s = gopt_node_get_string(G, NODE, "padding", "");
  int r = in[0].rank, d = 0;
  for (char *e = (char *)s; d < r; d++) {
    lo[d] = strtoll(e, &e, 10);
    if (*e != '_') break;
    strtoll(e + 1, &e, 10);
    in_[d] = 0;
    if (*e == '_') in_[d] = strtoll(e + 1, &e, 10);
    if (*e == 'x') e++;
  }
  if (d != r) return ex_node_error(x, NODE, err, GOPT_EINVAL, "bad padding attribute '%s'", s);
  for (int64_t o = 0; o < out[0].n; o++) out[0].v[o] = in[1].v[0];
  for (int64_t i = 0; i < in[0].n; i++) {
    unravel(&in[0], i, idx);
    int ok = 1;
    for (int j = 0; j < r && ok; j++) {
      idx[j] = lo[j] + idx[j] * (in_[j] + 1);
      ok = idx[j] >= 0 && idx[j] < out[0].d[j];
    }
    if (ok) out[0].v[ravel(&out[0], idx)] = in[0].v[i];
  }
  return GOPT_OK;
}

static int f_iota(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)in, (void)nin, (void)nout;
  int64_t dim = gopt_node_get_int(G, NODE, "iota_dimension", 0), idx[GOPT_MAX_RANK];
  if (dim < 0 || dim >= (out[0].rank ? out[0].rank : 1)) return ex_node_error(x, NODE, err, GOPT_EINVAL, "iota_dimension out of range");
  for (int64_t o = 0; o < out[0].n; o++) {
    unravel(&out[0], o, idx);
    out[0].v[o] = out[0].rank ? (double)idx[dim] : 0;
  }
  return GOPT_OK;
}

static int f_reverse(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  size_t nd = 0;
  const int64_t *dims = gopt_node_get_ints(G, NODE, "dimensions", &nd);
  int64_t idx[GOPT_MAX_RANK];
  for (int64_t o = 0; o < out[0].n; o++) {
    unravel(&out[0], o, idx);
    for (size_t i = 0; i < nd; i++)
      if (dims[i] >= 0 && dims[i] < in[0].rank) idx[dims[i]] = in[0].d[dims[i]] - 1 - idx[dims[i]];
    out[0].v[o] = in[0].v[ravel(&in[0], idx)];
  }
  return GOPT_OK;
}

/* reduce(x_0..x_{k-1}, init_0..init_{k-1}), dimensions, to_apply: (acc..., elem...) -> acc... */
static int f_reduce(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  const gopt_attr *a = gopt_node_attr(G, NODE, "to_apply");
  size_t nd = 0;
  const int64_t *dims = gopt_node_get_ints(G, NODE, "dimensions", &nd);
  int kk = nin / 2;
  if (!a || a->kind != GOPT_ATTR_GRAPH || nin != 2 * kk || nout != kk || kk > 4)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "reduce needs k operands, k initial values, k results (k <= 4) and to_apply");
  const gopt_graph *s = G->subgraphs.a[a->v.graph];
  if ((int)s->inputs.n != 2 * kk || (int)s->outputs.n != kk)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "to_apply has %zu parameters and %zu results", s->inputs.n, s->outputs.n);
  scomp c;
  int rc = scomp_init(&c, s, err);
  unsigned char red[GOPT_MAX_RANK] = {0};
  for (size_t i = 0; i < nd && !rc; i++) {
    if (dims[i] < 0 || dims[i] >= in[0].rank) rc = ex_node_error(x, NODE, err, GOPT_EINVAL, "dimension out of range");
    else red[dims[i]] = 1;
  }
  for (int j = 0; j < kk && !rc; j++)
    for (int64_t o = 0; o < out[j].n; o++) out[j].v[o] = in[kk + j].v[0];
  int64_t idx[GOPT_MAX_RANK], oi[GOPT_MAX_RANK];
  double args[8], res[4];
  int fast = 0; /* float add/max/min/multiply of the two parameters: no interpretation */
  if (!rc && kk == 1 && c.n_order == 1 && !dt_int(out[0].dt)) {
    const char *op = hop(s, c.order[0]);
    int32_t y = gopt_node_output(s, c.order[0], 0);
    if (s->nodes.a[c.order[0]].n_in == 2 && s->outputs.a[0] == y &&
        gopt_node_input(s, c.order[0], 0) != gopt_node_input(s, c.order[0], 1) &&
        s->tensors.a[gopt_node_input(s, c.order[0], 0)].flags & GOPT_T_INPUT &&
        s->tensors.a[gopt_node_input(s, c.order[0], 1)].flags & GOPT_T_INPUT)
      fast = !strcmp(op, "add") ? 1 : !strcmp(op, "maximum") ? 2 : !strcmp(op, "minimum") ? 3 : !strcmp(op, "multiply") ? 4 : 0;
  }
  for (int64_t i = 0; i < in[0].n && !rc; i++) {
    unravel(&in[0], i, idx);
    int r = 0;
    for (int d = 0; d < in[0].rank; d++)
      if (!red[d]) oi[r++] = idx[d];
    int64_t o = ravel(&out[0], oi);
    for (int j = 0; j < kk; j++) {
      args[j] = out[j].v[o];
      args[kk + j] = in[j].v[i];
    }
    if (fast) out[0].v[o] = fast == 1 ? args[0] + args[1] : fast == 2 ? hmax(args[0], args[1])
                          : fast == 3 ? hmin(args[0], args[1]) : args[0] * args[1];
    else {
      scomp_eval(&c, args, res);
      for (int j = 0; j < kk; j++) out[j].v[o] = res[j];
    }
  }
  scomp_free(&c);
  return rc;
}

/* sort(x_0..x_{k-1}), dimensions={d}, to_apply=less(lhs_0, rhs_0, lhs_1, rhs_1, ...): every line along
 * d sorted by the comparator, stably (merge sort), all operands permuted alike. */
static int sort_less(scomp *c, const rt *in, int k, int64_t base, int64_t inner, int64_t a, int64_t b) {
  double args[16], res[1];
  for (int j = 0; j < k; j++) {
    args[2 * j] = in[j].v[base + a * inner];
    args[2 * j + 1] = in[j].v[base + b * inner];
  }
  scomp_eval(c, args, res);
  return res[0] != 0;
}

/* A line of a sort: the comparator c over k operands (or, c NULL, the total order of operand 0's
 * values, descending when desc) at base, stride inner. */
typedef struct sline {
  scomp *c;
  const rt *in;
  int k, desc;
  int64_t base, inner;
} sline;

/* IEEE total order as a signed integer key (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN). */
static int64_t total_key(double v) {
  int64_t b;
  memcpy(&b, &v, sizeof b);
  return b < 0 ? b ^ INT64_MAX : b;
}

static int line_less(const sline *l, int64_t a, int64_t b) {
  if (l->c) return sort_less(l->c, l->in, l->k, l->base, l->inner, a, b);
  int64_t ka = total_key(l->in[0].v[l->base + a * l->inner]), kb = total_key(l->in[0].v[l->base + b * l->inner]);
  return l->desc ? ka > kb : ka < kb;
}

/* idx[0..m) = the positions of line l in stable sorted order (bottom-up merge sort); tmp holds m. */
static void line_sort(const sline *l, int64_t m, int64_t *idx, int64_t *tmp) {
  for (int64_t q = 0; q < m; q++) idx[q] = q;
  for (int64_t w = 1; w < m; w *= 2)
    for (int64_t lo = 0; lo < m - w; lo += 2 * w) {
      int64_t mid = lo + w, hi = lo + 2 * w < m ? lo + 2 * w : m, p = lo, q = mid, t = 0;
      while (p < mid || q < hi) tmp[t++] = q >= hi || (p < mid && !line_less(l, idx[q], idx[p])) ? idx[p++] : idx[q++];
      memcpy(idx + lo, tmp, (size_t)t * sizeof *idx);
    }
}

static int f_sort(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  const gopt_attr *a = gopt_node_attr(G, NODE, "to_apply");
  size_t nd = 0;
  const int64_t *dims = gopt_node_get_ints(G, NODE, "dimensions", &nd);
  if (!a || a->kind != GOPT_ATTR_GRAPH || nin != nout || nin > 8 || nd != 1 || dims[0] < 0 || dims[0] >= in[0].rank)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "sort needs at most 8 operands, one dimension and to_apply");
  const gopt_graph *s = G->subgraphs.a[a->v.graph];
  for (int j = 1; j < nin; j++)
    if (in[j].n != in[0].n) return ex_node_error(x, NODE, err, GOPT_EINVAL, "sort operands differ in size");
  if ((int)s->inputs.n != 2 * nin || s->outputs.n != 1)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "the comparator has %zu parameters", s->inputs.n);
  scomp c;
  int rc = scomp_init(&c, s, err);
  int64_t outer, m, inner;
  ref_split3(&in[0], (int)dims[0], &outer, &m, &inner);
  int64_t *idx = malloc((size_t)(2 * m + 1) * sizeof *idx), *tmp = idx ? idx + m : NULL;
  if (!rc && !idx) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int64_t o = 0; o < outer && !rc; o++)
    for (int64_t i = 0; i < inner; i++) {
      sline l = {&c, in, nin, 0, o * m * inner + i, inner};
      line_sort(&l, m, idx, tmp);
      for (int j = 0; j < nin; j++)
        for (int64_t q = 0; q < m; q++) out[j].v[l.base + q * inner] = in[j].v[l.base + idx[q] * inner];
    }
  free(idx);
  scomp_free(&c);
  return rc;
}

/* scan(inputs..., inits...), dimensions={d}, num_carries=C, is_reverse, to_apply (XLA's
 * HloScanInstruction, as its ScanExpander defines it): for step i = 0..L-1 along d (L-1-i when
 * is_reverse), (outputs_i..., carries) = to_apply(input slices at i..., carries), the carries
 * starting at the inits; results (output arrays..., final carries...). Here to_apply is
 * interpreted per element, so its parameters and results are the slices' elements (an
 * elementwise computation: a scalar one for rank-1 inputs, as jax's cumsum writes). */
#define SCAN_MAX 8
static int f_scan(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  const gopt_graph *s = ex_hlo_comp(G, NODE, "to_apply");
  size_t nd = 0;
  const int64_t *dims = gopt_node_get_ints(G, NODE, "dimensions", &nd);
  int64_t nci = gopt_node_get_int(G, NODE, "num_carries", -1); /* kept as text by the importer when not an int */
  int nc = (int)(nci >= 0 ? nci : strtol(gopt_node_get_string(G, NODE, "num_carries", "0"), NULL, 10)), ni = nin - nc, no = nout - nc;
  int rev = !strcmp(gopt_node_get_string(G, NODE, "is_reverse", "false"), "true");
  if (!s || nd != 1 || nc < 0 || ni < 1 || no < 0 || ni + nc > SCAN_MAX || no + nc > SCAN_MAX || (int)s->inputs.n != ni + nc ||
      (int)s->outputs.n != no + nc || dims[0] < 0 || dims[0] >= in[0].rank)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "scan needs inputs, num_carries inits, one dimension and to_apply of (elements..., carries...)");
  int64_t outer, m, inner, P;
  ref_split3(&in[0], (int)dims[0], &outer, &m, &inner);
  P = outer * inner;
  for (int j = 0; j < nin; j++)
    if (in[j].n != (j < ni ? P * m : P)) return ex_node_error(x, NODE, err, GOPT_EINVAL, "scan: operand %d does not fit the scanned shape", j);
  for (int j = 0; j < nout; j++)
    if (out[j].n != (j < no ? P * m : P)) return ex_node_error(x, NODE, err, GOPT_EINVAL, "scan: result %d does not fit the scanned shape", j);
  scomp c;
  int rc = scomp_init(&c, s, err);
  double args[2 * SCAN_MAX], res[2 * SCAN_MAX];
  for (int64_t p = 0; p < P && !rc; p++) { /* each position of the slices, independently */
    int64_t base = (p / inner) * m * inner + p % inner;
    for (int j = 0; j < nc; j++) args[ni + j] = in[ni + j].v[p];
    for (int64_t i = 0; i < m; i++) {
      int64_t at = base + (rev ? m - 1 - i : i) * inner;
      for (int j = 0; j < ni; j++) args[j] = in[j].v[at];
      scomp_eval(&c, args, res);
      for (int j = 0; j < no; j++) out[j].v[at] = res[j];
      for (int j = 0; j < nc; j++) args[ni + j] = res[no + j];
    }
    for (int j = 0; j < nc; j++) out[no + j].v[p] = args[ni + j];
  }
  scomp_free(&c);
  return rc;
}

/* topk(x), k=K, largest=true|false (XLA's op), and custom-call __gpu$TopK(x) with its comparator
 * (lhs value, rhs value, lhs index, rhs index) in called_computations: along the last dim, the first
 * k of a stable sort, as (values, s32 indices); the op sorts by the total order of the values,
 * largest first unless largest=false. */
static int f_topk(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  int cc = !strcmp(hop(G, NODE), "custom-call");
  const gopt_graph *s = cc ? ex_hlo_comp(G, NODE, "called_computations") : NULL;
  if (cc && !s) s = ex_hlo_comp(G, NODE, "called_computations.0");
  int64_t m = in[0].rank ? in[0].d[in[0].rank - 1] : 1, kk = out[0].rank ? out[0].d[out[0].rank - 1] : 1, rows = m ? in[0].n / m : 0;
  if (nin != 1 || nout != 2 || kk > m || out[0].n != rows * kk || out[1].n != rows * kk)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "topk: one operand and (values, indices) of k per line expected");
  if (cc && (!s || s->inputs.n != 4 || s->outputs.n != 1))
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "TopK: no comparator of (value, value, index, index) in called_computations");
  scomp c;
  int rc = s ? scomp_init(&c, s, err) : GOPT_OK;
  rt two[2] = {in[0], in[0]};
  int64_t *idx = malloc((size_t)(2 * m + 1) * sizeof *idx), *tmp = idx ? idx + m : NULL;
  two[1].v = malloc((size_t)in[0].n * sizeof(double) + 1);
  if (!rc && (!idx || !two[1].v)) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int64_t i = 0; !rc && i < in[0].n; i++) two[1].v[i] = (double)(i % m);
  for (int64_t r = 0; r < rows && !rc; r++) {
    sline l = {s ? &c : NULL, two, 2, strcmp(gopt_node_get_string(G, NODE, "largest", "true"), "false") != 0, r * m, 1};
    line_sort(&l, m, idx, tmp);
    for (int64_t q = 0; q < kk; q++) out[0].v[r * kk + q] = in[0].v[r * m + idx[q]], out[1].v[r * kk + q] = (double)idx[q];
  }
  free(idx);
  free(two[1].v);
  if (s) scomp_free(&c);
  return rc;
}

/* gather (XLA's semantics): offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim,
 * slice_sizes; start indices clamped so the slice stays inside the operand. */
static int f_gather(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  size_t no, nc, nm, ns, nbd, nsb;
  const int64_t *od = gopt_node_get_ints(G, NODE, "offset_dims", &no);
  const int64_t *cd = gopt_node_get_ints(G, NODE, "collapsed_slice_dims", &nc);
  const int64_t *sm = gopt_node_get_ints(G, NODE, "start_index_map", &nm);
  const int64_t *ss = gopt_node_get_ints(G, NODE, "slice_sizes", &ns);
  const int64_t *obd = gopt_node_get_ints(G, NODE, "operand_batching_dims", &nbd);
  const int64_t *sbd = gopt_node_get_ints(G, NODE, "start_indices_batching_dims", &nsb);
  int64_t ivd = gopt_node_get_int(G, NODE, "index_vector_dim", in[1].rank);
  int r = in[0].rank, ri = in[1].rank;
  if (nin != 2 || (int)ns != r || nbd != nsb || ivd < 0 || ivd > ri || nm > (size_t)r || (ivd < ri && in[1].d[ivd] != (int64_t)nm))
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "gather: unsupported dimension numbers");
  unsigned char is_off[GOPT_MAX_RANK] = {0}, coll[GOPT_MAX_RANK] = {0};
  for (size_t i = 0; i < no; i++)
    if (od[i] >= 0 && od[i] < out[0].rank) is_off[od[i]] = 1;
  for (size_t i = 0; i < nc; i++)
    if (cd[i] >= 0 && cd[i] < r) coll[cd[i]] = 1;
  for (size_t i = 0; i < nbd; i++) { /* a batching dim is indexed by its start_indices dim, like a collapsed one */
    if (obd[i] < 0 || obd[i] >= r || sbd[i] < 0 || sbd[i] >= ri || sbd[i] == ivd)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "gather: batching dims out of range");
    coll[obd[i]] = 1;
  }
  int64_t oi[GOPT_MAX_RANK], ii[GOPT_MAX_RANK], si[GOPT_MAX_RANK];
  for (int64_t o = 0; o < out[0].n; o++) {
    unravel(&out[0], o, oi);
    int nb = 0, nof = 0;
    for (int d = 0; d < out[0].rank; d++) /* batch dims index start_indices (index_vector_dim left out) */
      if (!is_off[d]) {
        if (nb == ivd) nb++;
        si[nb++] = oi[d];
      }
    for (int d = 0; d < r; d++) ii[d] = 0;
    for (size_t kk = 0; kk < nm; kk++) {
      if (ivd < ri) si[ivd] = (int64_t)kk;
      int64_t v = (int64_t)in[1].v[ravel(&in[1], si)], hi = in[0].d[sm[kk]] - ss[sm[kk]];
      ii[sm[kk]] = v < 0 ? 0 : v > hi ? hi : v;
    }
    for (size_t q = 0; q < nbd; q++) ii[obd[q]] = si[sbd[q]];
    for (int d = 0; d < r; d++)
      if (!coll[d]) {
        while (nof < out[0].rank && !is_off[nof]) nof++;
        if (nof < out[0].rank) ii[d] += oi[nof++];
      }
    out[0].v[o] = in[0].v[ravel(&in[0], ii)];
  }
  return GOPT_OK;
}

/* scatter (XLA's semantics) of k operands, scatter_indices, k updates (in that order) with
 * update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims, index_vector_dim and the
 * to_apply combiner (interpreted per element; applied in update order, so repeated indices
 * accumulate); an update whose window falls outside the operand is skipped (as XLA's CPU and GPU
 * backends do). Batching dims (input_batching_dims, scatter_indices_batching_dims) index the operand
 * by the update's position along the matching indices dim. */
static int f_scatter(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  size_t nw, ni, nm, nb, nsb;
  const int64_t *uw = gopt_node_get_ints(G, NODE, "update_window_dims", &nw);
  const int64_t *iw = gopt_node_get_ints(G, NODE, "inserted_window_dims", &ni);
  const int64_t *sm = gopt_node_get_ints(G, NODE, "scatter_dims_to_operand_dims", &nm);
  const int64_t *ibd = gopt_node_get_ints(G, NODE, "input_batching_dims", &nb);
  const int64_t *sbd = gopt_node_get_ints(G, NODE, "scatter_indices_batching_dims", &nsb);
  const gopt_attr *a = gopt_node_attr(G, NODE, "to_apply");
  int kk = (nin - 1) / 2;
  if (kk < 1 || kk > 4 || nin != 2 * kk + 1 || nout != kk || nb != nsb || !a || a->kind != GOPT_ATTR_GRAPH)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "scatter: needs k operands, indices, k updates, to_apply");
  const rt *op = &in[0], *ix = &in[kk], *up = &in[kk + 1];
  int r = op->rank, ri = ix->rank;
  int64_t ivd = gopt_node_get_int(G, NODE, "index_vector_dim", ri);
  if (ivd < 0 || ivd > ri || nm > (size_t)r || (ivd < ri && ix->d[ivd] != (int64_t)nm) || nw + ni + nb != (size_t)r)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "scatter: unsupported dimension numbers");
  unsigned char is_win[GOPT_MAX_RANK] = {0}, ins[GOPT_MAX_RANK] = {0};
  int64_t wsize[GOPT_MAX_RANK]; /* window size per operand dim */
  for (size_t i = 0; i < nw; i++)
    if (uw[i] >= 0 && uw[i] < up->rank) is_win[uw[i]] = 1;
  for (size_t i = 0; i < ni; i++)
    if (iw[i] >= 0 && iw[i] < r) ins[iw[i]] = 1;
  for (size_t i = 0; i < nb; i++) { /* a batching dim is indexed by its indices dim, like an inserted one */
    if (ibd[i] < 0 || ibd[i] >= r || sbd[i] < 0 || sbd[i] >= ri || sbd[i] == ivd)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "scatter: batching dims out of range");
    ins[ibd[i]] = 1;
  }
  for (int d = 0, w = 0; d < r; d++) wsize[d] = ins[d] ? 1 : (w < (int)nw ? up->d[uw[w++]] : 1);
  scomp c;
  int rc = scomp_init(&c, G->subgraphs.a[a->v.graph], err);
  for (int j = 0; j < kk; j++) memcpy(out[j].v, in[j].v, (size_t)in[j].n * sizeof(double));
  int64_t ui[GOPT_MAX_RANK], si[GOPT_MAX_RANK], st[GOPT_MAX_RANK], oi[GOPT_MAX_RANK];
  double args[8], res[4];
  for (int64_t u = 0; u < up->n && !rc; u++) {
    unravel(up, u, ui);
    int ns = 0, nwi = 0, skip = 0;
    for (int d = 0; d < up->rank; d++) /* scatter dims of the update index the indices */
      if (!is_win[d]) {
        if (ns == ivd) ns++;
        si[ns++] = ui[d];
      }
    for (int d = 0; d < r; d++) st[d] = 0;
    for (size_t q = 0; q < nm; q++) {
      if (ivd < ri) si[ivd] = (int64_t)q;
      st[sm[q]] = (int64_t)ix->v[ravel(ix, si)];
    }
    for (size_t q = 0; q < nb; q++) st[ibd[q]] = si[sbd[q]];
    for (int d = 0; d < r; d++) {
      skip |= st[d] < 0 || st[d] + wsize[d] > op->d[d];
      oi[d] = st[d];
      if (!ins[d]) { /* the next window dim of the update */
        while (nwi < up->rank && !is_win[nwi]) nwi++;
        if (nwi < up->rank) oi[d] += ui[nwi++];
      }
    }
    if (skip) continue;
    int64_t o = ravel(op, oi);
    for (int j = 0; j < kk; j++) {
      args[j] = out[j].v[o];
      args[kk + j] = in[kk + 1 + j].v[u];
    }
    scomp_eval(&c, args, res);
    for (int j = 0; j < kk; j++) out[j].v[o] = res[j];
  }
  scomp_free(&c);
  return rc;
}

/* Copies operand src into dst as rows of K contiguous values: one row per index of the outer
 * dims (extents od[0..no), src strides os), a row over the contracted dims (extents cd[0..nc),
 * src strides cs) in the order the dimension numbers list them. */
static void dot_pack(const double *src, const int64_t *od, const int64_t *os, int no, const int64_t *cd,
                     const int64_t *cs, int nc, int64_t K, double *dst) {
  int64_t oi[GOPT_MAX_RANK] = {0}, ci[GOPT_MAX_RANK], rows = 1;
  for (int j = 0; j < no; j++) rows *= od[j];
  for (int64_t r = 0, p = 0; r < rows; r++) {
    int64_t q = p;
    for (int i = 0; i < nc; i++) ci[i] = 0;
    for (int64_t k = 0; k < K; k++) {
      dst[r * K + k] = src[q];
      odo_next(nc, cd, cs, ci, &q);
    }
    odo_next(no, od, os, oi, &p);
  }
}

/* The dot of dot_dims as batched GEMMs with OpenBLAS (double): each operand packed as [batch,
 * free, K] rows, out[0] = A (M x K) times B^T (K x N) per batch. Returns 0, or 1 when out of
 * memory (the caller runs the reference loop instead). nb batch dims, nl lhs free dims; os/cs
 * the operands' strides per output dim and per contracted index (dot_dims). */
static int dot_blas(rt *in, rt *out, int nb, int nl, int64_t os[2][GOPT_MAX_RANK], int64_t cs[2][GOPT_MAX_RANK],
                    const int64_t *cd, int nc, int64_t K) {
  int no = out[0].rank, nr = no - nb - nl;
  int64_t Bt = 1, M = 1, N = 1, od[GOPT_MAX_RANK], ost[GOPT_MAX_RANK];
  for (int j = 0; j < nb; j++) Bt *= out[0].d[j];
  for (int j = nb; j < nb + nl; j++) M *= out[0].d[j];
  for (int j = nb + nl; j < no; j++) N *= out[0].d[j];
  double *A = malloc((size_t)(Bt * M * K + 1) * sizeof *A), *B = malloc((size_t)(Bt * N * K + 1) * sizeof *B);
  if (!A || !B) {
    free(A);
    free(B);
    return 1;
  }
  for (int s = 0; s < 2; s++) { /* outer dims of operand s: the batch dims, then its free dims */
    int first = s ? nb + nl : nb, nf = s ? nr : nl;
    for (int j = 0; j < nb; j++) od[j] = out[0].d[j], ost[j] = os[s][j];
    for (int j = 0; j < nf; j++) od[nb + j] = out[0].d[first + j], ost[nb + j] = os[s][first + j];
    dot_pack(in[s].v, od, ost, nb + nf, cd, cs[s], nc, K, s ? B : A);
  }
  for (int64_t b = 0; b < Bt; b++)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0, A + b * M * K, (int)K,
                B + b * N * K, (int)K, 0.0, out[0].v + b * M * N, (int)N);
  free(A);
  free(B);
  return 0;
}

/* dot of in[0], in[1] with dimension numbers d[0..4) (lhs batch, rhs batch, lhs contracting, rhs
 * contracting; c[i] entries each) into out[0]: result dims are batch, lhs free, rhs free (XLA's
 * order). Large dots (>= 2^15 multiply-adds, K >= 8) run as OpenBLAS GEMMs (dot_blas); the rest
 * in the reference loop. */
static int dot_dims(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, const int64_t *const *d, const size_t *c,
                    gopt_error *err) {
  if (nin < 2 || c[0] != c[1] || c[2] != c[3])
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "dot needs two operands and matching dimension numbers");
  int role[2][GOPT_MAX_RANK]; /* per operand dim: output dim (>= 0) or -1 - contracted index */
  int no = (int)c[0];
  for (int s = 0; s < 2; s++) {
    for (int i = 0; i < in[s].rank; i++) role[s][i] = -1000;
    for (int j = 0; j < 4; j += 2)
      for (size_t i = 0; i < c[j + s]; i++) {
        if (d[j + s][i] < 0 || d[j + s][i] >= in[s].rank || role[s][d[j + s][i]] != -1000 ||
            (j && in[0].d[d[2][i]] != in[1].d[d[3][i]]))
          return ex_node_error(x, NODE, err, GOPT_EINVAL, "bad dimension numbers");
        role[s][d[j + s][i]] = j ? -1 - (int)i : (int)i;
      }
  }
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < in[s].rank; i++)
      if (role[s][i] == -1000) role[s][i] = no++;
  int nc = (int)c[2];
  if (no != out[0].rank) return ex_node_error(x, NODE, err, GOPT_EINVAL, "dot result rank %d, expected %d", out[0].rank, no);
  /* strides: per output dim and per contracted index, in each operand */
  int64_t cd[GOPT_MAX_RANK], ci[GOPT_MAX_RANK], nct = 1, oi[GOPT_MAX_RANK], st[2][GOPT_MAX_RANK];
  int64_t os[2][GOPT_MAX_RANK] = {{0}}, cs[2][GOPT_MAX_RANK] = {{0}};
  for (int i = 0; i < nc; i++) {
    cd[i] = in[0].d[d[2][i]];
    nct *= cd[i];
  }
  for (int s = 0; s < 2; s++) {
    ref_strides(&in[s], st[s]);
    for (int i = 0; i < in[s].rank; i++) {
      if (role[s][i] >= 0) os[s][role[s][i]] += st[s][i];
      else cs[s][-1 - role[s][i]] = st[s][i];
    }
  }
  int nl = 0; /* lhs free dims */
  for (int i = 0; i < in[0].rank; i++) nl += role[0][i] >= (int)c[0];
  if (nct >= 8 && (double)nct * (double)out[0].n >= 32768.0 && nct <= INT32_MAX && out[0].n <= INT32_MAX &&
      !dot_blas(in, out, (int)c[0], nl, os, cs, cd, nc, nct))
    return GOPT_OK;
  const double *A = in[0].v, *B = in[1].v;
  for (int64_t o = 0; o < out[0].n; o++) {
    unravel(&out[0], o, oi);
    int64_t pa = 0, pb = 0;
    for (int j = 0; j < no; j++) pa += oi[j] * os[0][j], pb += oi[j] * os[1][j];
    double acc = 0;
    for (int i = 0; i < nc; i++) ci[i] = 0;
    for (int64_t q = 0; q < nct; q++) {
      acc += A[pa] * B[pb];
      for (int i = nc - 1; i >= 0; i--) { /* next contracted multi-index, offsets kept in step */
        pa += cs[0][i], pb += cs[1][i];
        if (++ci[i] < cd[i]) break;
        pa -= cs[0][i] * cd[i], pb -= cs[1][i] * cd[i];
        ci[i] = 0;
      }
    }
    out[0].v[o] = acc;
  }
  return GOPT_OK;
}

static int f_dot(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  const char *key[4] = {"lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims"};
  const int64_t *d[4];
  size_t c[4];
  for (int i = 0; i < 4; i++) d[i] = gopt_node_get_ints(G, NODE, key[i], &c[i]);
  return nin == 2 ? dot_dims(x, k, in, nin, out, d, c, err)
                  : ex_node_error(x, NODE, err, GOPT_EINVAL, "dot needs two operands");
}

/* custom-call __cublas$gemm / __cublas$lt$matmul (XLA's GPU GEMM): out = alpha * dot(a, b) +
 * beta * c with the dot_dimension_numbers of backend_config's gemm_backend_config, epilogue
 * DEFAULT, RELU, BIAS (a vector over the last result dim, the operand after a, b and c) or
 * BIAS_RELU; the workspace result is left zero. */
static int f_gemm(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  const char *cfg = gopt_node_get_string(G, NODE, "backend_config", "");
  static const char *const key[4] = {"\"lhs_batch_dimensions\"", "\"rhs_batch_dimensions\"",
                                     "\"lhs_contracting_dimensions\"", "\"rhs_contracting_dimensions\""};
  int64_t dv[4][GOPT_MAX_RANK];
  const int64_t *d[4];
  size_t c[4];
  for (int i = 0; i < 4; i++) {
    int n = ops_hlo_json_ints(cfg, key[i], dv[i], GOPT_MAX_RANK);
    if (n < 0) return ex_node_error(x, NODE, err, GOPT_EUNSUP, "gemm: backend_config lacks %s", key[i]);
    d[i] = dv[i];
    c[i] = (size_t)n;
  }
  const char *al = strstr(cfg, "\"alpha_real\":"), *be = strstr(cfg, "\"beta\":"), *ep = strstr(cfg, "\"epilogue\":\"");
  double alpha = al ? strtod(al + 13, NULL) : 1, beta = be ? strtod(be + 7, NULL) : 0;
  int relu = 0, bias = 0;
  if (ep) {
    ep += 12;
    relu = !strncmp(ep, "RELU\"", 5) || !strncmp(ep, "BIAS_RELU\"", 10);
    bias = !strncmp(ep, "BIAS\"", 5) || !strncmp(ep, "BIAS_RELU\"", 10);
    if (!relu && !bias && strncmp(ep, "DEFAULT\"", 8))
      return ex_node_error(x, NODE, err, GOPT_EUNSUP, "gemm: epilogue %.12s not supported", ep);
  }
  int ci = beta != 0 ? 2 : -1, bi = bias ? (beta != 0 ? 3 : 2) : -1;
  if ((ci >= 0 && (nin <= ci || in[ci].n != out[0].n)) || (bi >= 0 && (nin <= bi || in[bi].n != out[0].d[out[0].rank - 1])))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "gemm: the beta or bias operand is missing or of the wrong size");
  int rc = dot_dims(x, k, in, 2, out, d, c, err);
  for (int64_t o = 0; o < out[0].n && !rc; o++) {
    double v = alpha * out[0].v[o] + (ci >= 0 ? beta * in[ci].v[o] : 0);
    if (bi >= 0) v += in[bi].v[o % in[bi].n];
    out[0].v[o] = relu && v < 0 ? 0 : v;
  }
  return rc;
}

/* Random123's Threefry-2x32, 20 rounds (as jax._src.prng.threefry2x32). */
static void threefry2x32(uint32_t k0, uint32_t k1, uint32_t *x0, uint32_t *x1) {
  static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu}, a = *x0 + ks[0], b = *x1 + ks[1];
  for (int i = 0; i < 5; i++) {
    for (int j = 0; j < 4; j++) {
      int r = rot[i & 1][j];
      a += b;
      b = (b << r) | (b >> (32 - r));
      b ^= a;
    }
    a += ks[(i + 1) % 3];
    b += ks[(i + 2) % 3] + (uint32_t)(i + 1);
  }
  *x0 = a;
  *x1 = b;
}

static int f_threefry(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  if (nin != 4 || nout != 2) return ex_node_error(x, NODE, err, GOPT_EINVAL, "cuda_threefry2x32 needs 4 operands and 2 results");
  for (int i = 0; i < 4; i++)
    if (in[i].n != out[0].n && in[i].n != 1) return ex_node_error(x, NODE, err, GOPT_EINVAL, "operand %d has %lld elements for %lld", i, (long long)in[i].n, (long long)out[0].n);
  for (int64_t o = 0; o < out[0].n; o++) {
    uint32_t v[4];
    for (int i = 0; i < 4; i++) v[i] = (uint32_t)to_bits(in[i].v[in[i].n == 1 ? 0 : o], GOPT_DT_UINT32);
    threefry2x32(v[0], v[1], &v[2], &v[3]);
    out[0].v[o] = v[2];
    out[1].v[o] = v[3];
  }
  return GOPT_OK;
}

/* ---- byte kernels: tuple, get-tuple-element; nested executor: call, fusion ------------------- */

static size_t tbytes(const gopt_exec *x, int32_t t) {
  return (size_t)ex_numel(x, t) * gopt_dtype_size(ex_dtype(x, t));
}

/* The leaves of the operands of the async-start that async-done/-update node n (through -update
 * nodes) waits on: where the called computation's results begin in its tuple; 0 when not found. */
static int64_t async_result_offset(const gopt_graph *g, int32_t n) {
  for (int hops = 0; hops < 64 && n >= 0 && g->nodes.a[n].n_in > 0; hops++) {
    int32_t t = gopt_node_input(g, n, 0);
    const char *op = t >= 0 && g->tensors.a[t].producer >= 0 ? hop(g, g->tensors.a[t].producer) : NULL;
    n = t >= 0 ? g->tensors.a[t].producer : -1;
    if (op && !strcmp(op, "async-start")) return g->nodes.a[n].n_in;
    if (!op || strcmp(op, "async-update")) return 0;
  }
  return 0;
}

/* tuple, get-tuple-element, async-update (its operand unchanged) and async-done (the called
 * computation's results, after the operand leaves, of the async-start's tuple). */
static int run_leaves(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const char *op = hop(G, NODE);
  int64_t off = !strcmp(op, "tuple") || !strcmp(op, "async-update") ? 0 : !strcmp(op, "async-done") ? async_result_offset(G, NODE)
                                                                      : gopt_node_get_int(G, NODE, "hlo.leaf_offset", 0);
  for (int i = 0; i < k->n_out; i++) {
    int32_t t = off + i < k->n_in ? k->in[off + i] : -1;
    if (t < 0 || tbytes(x, t) != tbytes(x, k->out[i]))
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "result %d does not match its operand leaf", i);
    memcpy(ex_data(x, k->out[i]), ex_data(x, t), tbytes(x, t));
  }
  return GOPT_OK;
}

static void sub_fini(void *st) { gopt_exec_free(st); }

static int run_sub(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  gopt_exec *s = k->st;
  int rc = GOPT_OK;
  for (size_t i = 0; i < gopt_exec_n_inputs(s) && !rc; i++) {
    gopt_host_tensor h = ex_host_view(x, k->in[i]);
    rc = gopt_exec_set_input(s, i, &h, err);
  }
  if (!rc) rc = gopt_exec_run(s, err);
  size_t off = strcmp(hop(G, NODE), "async-start") ? 0 : (size_t)k->n_in, nr = gopt_exec_n_outputs(s);
  for (size_t i = 0; i < off && !rc; i++) /* async-start's tuple: (operands, results, context) */
    memcpy(ex_data(x, k->out[i]), ex_data(x, k->in[i]), tbytes(x, k->in[i]));
  for (size_t i = off + nr; i < (size_t)k->n_out; i++) memset(ex_data(x, k->out[i]), 0, tbytes(x, k->out[i]));
  for (size_t i = 0; i < nr && !rc; i++) {
    gopt_host_tensor h = {0};
    rc = gopt_exec_get_output(s, i, &h, err);
    if (!rc && h.nbytes != tbytes(x, k->out[off + i])) rc = ex_node_error(x, NODE, err, GOPT_EINVAL, "result %zu has the wrong size", i);
    if (!rc) memcpy(ex_data(x, k->out[off + i]), h.data, h.nbytes);
    gopt_host_tensor_clear(&h);
  }
  return rc;
}

/* The computation a call/fusion node runs, NULL when none. */
static const gopt_graph *callee(const gopt_graph *g, int32_t n) {
  const gopt_attr *a = gopt_node_attr(g, n, "to_apply");
  if (!a) a = gopt_node_attr(g, n, "calls");
  return a && a->kind == GOPT_ATTR_GRAPH ? g->subgraphs.a[a->v.graph] : NULL;
}

static int prepare_sub(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *s = callee(G, NODE);
  gopt_exec_opts o = {0};
  o.threads = x->threads;
  o.seed = x->seed;
  gopt_exec *e = NULL;
  gopt_error sub = {0};
  if (!s) return ex_node_error(x, NODE, err, GOPT_EUNSUP, "no called computation");
  int rc = gopt_exec_new(s, &o, &e, NULL, &sub);
  if (rc) return ex_node_error(x, NODE, err, rc, "computation '%s': %s", gopt_graph_str(s, s->name), sub.msg);
  size_t nr = gopt_exec_n_outputs(e);
  int async = !strcmp(hop(G, NODE), "async-start"); /* results (operands, results, context...) */
  if (gopt_exec_n_inputs(e) != (size_t)k->n_in || (async ? nr + (size_t)k->n_in > (size_t)k->n_out : nr != (size_t)k->n_out)) {
    gopt_exec_free(e);
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "operands/results do not match the computation's parameters/results");
  }
  k->st = e;
  k->fini = sub_fini;
  k->run = run_sub;
  return GOPT_OK;
}

const gopt_graph *ex_hlo_comp(const gopt_graph *g, int32_t n, const char *key) {
  const gopt_attr *a = gopt_node_attr(g, n, key);
  return a && a->kind == GOPT_ATTR_GRAPH ? g->subgraphs.a[a->v.graph] : NULL;
}

/* ---- conditional: each branch in a nested executor ------------------------------------------- */

#define HLO_COND_MAX 64

typedef struct hcond {
  int nb;
  gopt_exec *br[HLO_COND_MAX];
  int off[HLO_COND_MAX + 1], cnt[HLO_COND_MAX + 1]; /* per operand (0: the selector): its leaves */
} hcond;

static void cond_fini(void *st) {
  hcond *c = st;
  for (int i = 0; c && i < c->nb; i++) gopt_exec_free(c->br[i]);
  free(c);
}

/* Branch b gets operand b + 1's leaves; pred true runs branch 0 (true_computation), an index out
 * of range the last branch (XLA's semantics). */
static int run_cond(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  hcond *c = k->st;
  const void *sel = ex_data(x, k->in[0]);
  int dt = ex_dtype(x, k->in[0]);
  int64_t b = dt == GOPT_DT_BOOL ? !*(const uint8_t *)sel : dt == GOPT_DT_INT64 ? *(const int64_t *)sel : *(const int32_t *)sel;
  if (dt == GOPT_DT_BOOL ? 0 : (b < 0 || b >= c->nb)) b = c->nb - 1;
  gopt_exec *e = c->br[b];
  int rc = GOPT_OK;
  for (int i = 0; i < c->cnt[b + 1] && !rc; i++) {
    gopt_host_tensor h = ex_host_view(x, k->in[c->off[b + 1] + i]);
    rc = gopt_exec_set_input(e, (size_t)i, &h, err);
  }
  if (!rc) rc = gopt_exec_run(e, err);
  for (int i = 0; i < k->n_out && !rc; i++) {
    gopt_host_tensor h = {0};
    rc = gopt_exec_get_output(e, (size_t)i, &h, err);
    if (!rc && h.nbytes != tbytes(x, k->out[i])) rc = ex_node_error(x, NODE, err, GOPT_EINVAL, "branch result %d has the wrong size", i);
    if (!rc) memcpy(ex_data(x, k->out[i]), h.data, h.nbytes);
    gopt_host_tensor_clear(&h);
  }
  return rc;
}

/* The branches of conditional n in order (true/false, or branch_computations.0...); their count. */
static int cond_branches(const gopt_graph *g, int32_t n, const gopt_graph **br) {
  if ((br[0] = ex_hlo_comp(g, n, "true_computation")) && (br[1] = ex_hlo_comp(g, n, "false_computation"))) return 2;
  int nb = 0;
  char key[48];
  for (; nb < HLO_COND_MAX; nb++) {
    snprintf(key, sizeof key, "branch_computations.%d", nb);
    if (!(br[nb] = ex_hlo_comp(g, n, key))) break;
  }
  return nb;
}

static int prepare_cond(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *br[HLO_COND_MAX];
  int nb = cond_branches(G, NODE, br);
  size_t nc = 0;
  const int64_t *cnt = gopt_node_get_ints(G, NODE, "hlo.operands", &nc);
  if (nb < 1 || (cnt && nc != (size_t)nb + 1) || (!cnt && k->n_in != nb + 1))
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "conditional: branches and operands do not match");
  hcond *c = calloc(1, sizeof *c);
  if (!c) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = c;
  k->fini = cond_fini;
  k->run = run_cond;
  for (int j = 0, o = 0; j <= nb; j++) {
    c->off[j] = o;
    c->cnt[j] = cnt && cnt[j] > 0 ? (int)cnt[j] : 1;
    o += c->cnt[j];
  }
  if (c->cnt[0] != 1 || c->off[nb] + c->cnt[nb] != k->n_in)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "conditional: operand leaves do not add up");
  gopt_exec_opts o = {0};
  o.threads = x->threads;
  o.seed = x->seed;
  for (; c->nb < nb; c->nb++) {
    gopt_error sub = {0};
    int rc = gopt_exec_new(br[c->nb], &o, &c->br[c->nb], NULL, &sub);
    if (rc) return ex_node_error(x, NODE, err, rc, "branch %d: %s", c->nb, sub.msg);
    if (gopt_exec_n_inputs(c->br[c->nb]) != (size_t)c->cnt[c->nb + 1] || gopt_exec_n_outputs(c->br[c->nb]) != (size_t)k->n_out)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "branch %d's parameters/results do not match", c->nb);
  }
  return GOPT_OK;
}

/* ---- while: condition and body in nested executors ---------------------------------------- */

#define HLO_WHILE_MAX_TRIPS 100000000LL /* a loop past this many rounds is an error, not a hang */

typedef struct hwhile {
  gopt_exec *cond, *body;
} hwhile;

static void while_fini(void *st) {
  hwhile *w = st;
  if (!w) return;
  gopt_exec_free(w->cond);
  gopt_exec_free(w->body);
  free(w);
}

/* Feeds the state (the while's result buffers) to e's inputs. */
static int while_feed(gopt_exec *x, ex_kernel *k, gopt_exec *e, gopt_error *err) {
  int rc = GOPT_OK;
  for (int i = 0; i < k->n_out && !rc; i++) {
    gopt_host_tensor h = ex_host_view(x, k->out[i]);
    rc = gopt_exec_set_input(e, (size_t)i, &h, err);
  }
  return rc;
}

/* state = operands; while cond(state): state = body(state); results = state. */
static int run_while(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  hwhile *w = k->st;
  int rc = GOPT_OK;
  for (int i = 0; i < k->n_out && !rc; i++) {
    if (tbytes(x, k->in[i]) != tbytes(x, k->out[i])) rc = ex_node_error(x, NODE, err, GOPT_EINVAL, "state %d changes size", i);
    else memcpy(ex_data(x, k->out[i]), ex_data(x, k->in[i]), tbytes(x, k->in[i]));
  }
  for (long long trip = 0; !rc; trip++) {
    gopt_host_tensor c = {0};
    rc = while_feed(x, k, w->cond, err);
    if (!rc) rc = gopt_exec_run(w->cond, err);
    if (!rc) rc = gopt_exec_get_output(w->cond, 0, &c, err);
    int go = !rc && c.nbytes >= 1 && ((unsigned char *)c.data)[0];
    gopt_host_tensor_clear(&c);
    if (rc || !go) break;
    if (trip >= HLO_WHILE_MAX_TRIPS) return ex_node_error(x, NODE, err, GOPT_ERANGE, "loop ran %lld rounds", trip);
    rc = while_feed(x, k, w->body, err);
    if (!rc) rc = gopt_exec_run(w->body, err);
    for (int i = 0; i < k->n_out && !rc; i++) {
      gopt_host_tensor h = {0};
      rc = gopt_exec_get_output(w->body, (size_t)i, &h, err);
      if (!rc && h.nbytes != tbytes(x, k->out[i])) rc = ex_node_error(x, NODE, err, GOPT_EINVAL, "body result %d has the wrong size", i);
      if (!rc) memcpy(ex_data(x, k->out[i]), h.data, h.nbytes);
      gopt_host_tensor_clear(&h);
    }
  }
  return rc;
}

static int prepare_while(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *sc = ex_hlo_comp(G, NODE, "condition"), *sb = ex_hlo_comp(G, NODE, "body");
  gopt_exec_opts o = {0};
  o.threads = x->threads;
  o.seed = x->seed;
  gopt_error sub = {0};
  hwhile *w = calloc(1, sizeof *w);
  if (!w) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = w;
  k->fini = while_fini;
  int rc = gopt_exec_new(sc, &o, &w->cond, NULL, &sub);
  if (!rc) rc = gopt_exec_new(sb, &o, &w->body, NULL, &sub);
  if (rc) return ex_node_error(x, NODE, err, rc, "while: %s", sub.msg);
  if (k->n_in != k->n_out || gopt_exec_n_inputs(w->cond) != (size_t)k->n_in || gopt_exec_n_outputs(w->cond) != 1 ||
      gopt_exec_n_inputs(w->body) != (size_t)k->n_in || gopt_exec_n_outputs(w->body) != (size_t)k->n_out)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "operands/results do not match the condition's and body's");
  k->run = run_while;
  return GOPT_OK;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static ref_fn ref_kernel(const gopt_graph *g, int32_t n) {
  const char *op = hop(g, n);
  ref_fn f = op ? ex_hlo_custom_kernel(g, n) : NULL;
  if (!f && op) f = ex_hlo_window_kernel(g, n);
  if (!f && op) f = ex_hlo_norm_kernel(g, n);
  if (!op || f) return f;
  if (!strcmp(op, "broadcast")) return f_broadcast;
  if (!strcmp(op, "reshape") || !strcmp(op, "bitcast") || !strcmp(op, "copy")) return f_copy;
  if (!strcmp(op, "slice")) return f_slice;
  if (!strcmp(op, "dynamic-slice")) return f_dynamic_slice;
  if (!strcmp(op, "dynamic-update-slice")) return f_dynamic_update_slice;
  if (!strcmp(op, "pad")) return f_pad;
  if (!strcmp(op, "iota")) return f_iota;
  if (!strcmp(op, "reverse")) return f_reverse;
  if (!strcmp(op, "reduce")) return f_reduce;
  if (!strcmp(op, "dot")) return f_dot;
  if (!strcmp(op, "sort")) return f_sort;
  if (!strcmp(op, "scan")) return f_scan;
  if (!strcmp(op, "topk") || (!strcmp(op, "custom-call") && strstr(gopt_node_get_string(g, n, "custom_call_target", ""), "__gpu$TopK")))
    return f_topk;
  if (!strcmp(op, "gather")) return f_gather;
  if (!strcmp(op, "scatter")) return f_scatter;
  if (!strcmp(op, "custom-call") && strstr(gopt_node_get_string(g, n, "custom_call_target", ""), "cuda_threefry2x32"))
    return f_threefry;
  if (!strcmp(op, "custom-call") && strstr(gopt_node_get_string(g, n, "custom_call_target", ""), "__cublas$") &&
      !strstr(gopt_node_get_string(g, n, "custom_call_target", ""), "$f8") && /* FP8 GEMMs take scale operands */
      (strstr(gopt_node_get_string(g, n, "custom_call_target", ""), "gemm") ||
       strstr(gopt_node_get_string(g, n, "custom_call_target", ""), "matmul")))
    return f_gemm;
  if (eop_find(op) >= 0 && g->nodes.a[n].n_out == 1) return f_elementwise;
  return NULL;
}

int ex_hlo_handles(const gopt_exec *x, int32_t n) {
  const char *op = hop(x->g, n);
  if (!op) return 0;
  if (!strcmp(op, "tuple") || !strcmp(op, "get-tuple-element") || !strcmp(op, "async-update") || !strcmp(op, "async-done")) return 1;
  if (!strcmp(op, "call") || !strcmp(op, "fusion") || !strcmp(op, "async-start")) return callee(x->g, n) != NULL;
  if (!strcmp(op, "while")) return ex_hlo_comp(x->g, n, "condition") && ex_hlo_comp(x->g, n, "body");
  if (!strcmp(op, "conditional")) {
    const gopt_graph *br[HLO_COND_MAX];
    return cond_branches(x->g, n, br) > 0;
  }
  return ref_kernel(x->g, n) != NULL;
}

int ex_prepare_hlo(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const char *op = hop(G, NODE);
  if (!strcmp(op, "tuple") || !strcmp(op, "get-tuple-element") || !strcmp(op, "async-update") || !strcmp(op, "async-done")) {
    k->run = run_leaves;
    return GOPT_OK;
  }
  if (!strcmp(op, "call") || !strcmp(op, "fusion") || !strcmp(op, "async-start")) return prepare_sub(x, k, err);
  if (!strcmp(op, "while")) return prepare_while(x, k, err);
  if (!strcmp(op, "conditional")) return prepare_cond(x, k, err);
  if (!strcmp(op, "reduce") || !strcmp(op, "sort") || !strcmp(op, "scatter") || !strcmp(op, "scan")) { /* the computation must be interpretable: say so now */
    const gopt_attr *a = gopt_node_attr(G, NODE, "to_apply");
    scomp c;
    gopt_error e = {0};
    int rc = a && a->kind == GOPT_ATTR_GRAPH ? scomp_init(&c, G->subgraphs.a[a->v.graph], &e)
                                              : gopt_error_set(&e, GOPT_EUNSUP, "no to_apply computation");
    if (a && a->kind == GOPT_ATTR_GRAPH) scomp_free(&c);
    if (rc) return ex_node_error(x, NODE, err, rc, "%s", e.msg);
  }
  return ex_prepare_ref_fn(x, k, ref_kernel(G, NODE), err);
}
