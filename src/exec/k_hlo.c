/* k_hlo.c: kernels for the HLO opcodes whose nodes are opaque in the IR (docs/HLO.md), so that
 * imported XLA modules run and a compiler pass can be checked to leave outputs unchanged.
 * Data movement and elementwise ops are reference kernels (k_ref.h: values as doubles, stored back
 * in the declared dtype; integer bit operations on the exact 32-bit patterns): broadcast with
 * dimensions, reshape/bitcast/copy, slice, dynamic-slice, dynamic-update-slice, pad (edge and
 * interior, negative edges), iota, reverse, reduce with any scalar computation (interpreted per
 * element by the scalar evaluator below; variadic reduces included), the elementwise ops without
 * an ONNX twin (rsqrt, log-plus-one, exponential-minus-one, atan2, clamp, remainder, shifts,
 * bitwise and/or/xor/not on integers, compare NE, bitcast-convert, is-finite, ...), and the
 * custom-call cuda_threefry2x32 (JAX's counter-based RNG, Random123's Threefry-2x32 with 20
 * rounds). tuple and get-tuple-element copy bytes; call and fusion run their computation in a
 * nested executor. Semantics as XLA's operation semantics page states them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_ref.h"

#define NODE (k->node)
#define G (x->g)

static const char *hop(const gopt_graph *g, int32_t n) {
  const char *t = gopt_node_type(g, n);
  return strncmp(t, "hlo::", 5) ? NULL : t + 5;
}

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

static int cmp(const char *dir, double a, double b, int *r) {
  if (!strcmp(dir, "EQ")) *r = a == b;
  else if (!strcmp(dir, "NE")) *r = a != b;
  else if (!strcmp(dir, "LT")) *r = a < b;
  else if (!strcmp(dir, "LE")) *r = a <= b;
  else if (!strcmp(dir, "GT")) *r = a > b;
  else if (!strcmp(dir, "GE")) *r = a >= b;
  else return 0;
  return 1;
}

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

/* One element of elementwise opcode op on a[0..na) with result dtype dt (operand dtype adt) and
 * compare direction dir. Returns 1, or 0 when op is not an elementwise opcode this evaluator
 * knows. */
static int scalar_op(const char *op, int dt, int adt, const char *dir, const double *a, int na, double *r) {
  double x = na > 0 ? a[0] : 0, y = na > 1 ? a[1] : 0;
  int in = dt_int(adt), c;
  if (!strcmp(op, "add")) *r = wrap(x + y, dt);
  else if (!strcmp(op, "subtract")) *r = wrap(x - y, dt);
  else if (!strcmp(op, "multiply")) {
    if (in && dt_bits(dt) > 26 && dt_bits(dt) <= 32) *r = from_bits((to_bits(x, dt) * to_bits(y, dt)), dt);
    else *r = wrap(x * y, dt);
  } else if (!strcmp(op, "divide")) {
    if (in) *r = y == 0 ? (dt_signed(dt) ? -1 : from_bits(~0ull, dt)) : wrap(trunc(x / y), dt);
    else *r = x / y;
  } else if (!strcmp(op, "remainder")) *r = in ? (y == 0 ? x : fmod(x, y)) : fmod(x, y);
  else if (!strcmp(op, "maximum")) *r = hmax(x, y);
  else if (!strcmp(op, "minimum")) *r = hmin(x, y);
  else if (!strcmp(op, "power")) *r = wrap(pow(x, y), dt);
  else if (!strcmp(op, "atan2")) *r = atan2(x, y);
  else if (!strcmp(op, "negate")) *r = wrap(-x, dt);
  else if (!strcmp(op, "abs")) *r = fabs(x);
  else if (!strcmp(op, "sign")) *r = isnan(x) ? x : (x > 0) - (x < 0);
  else if (!strcmp(op, "exponential")) *r = exp(x);
  else if (!strcmp(op, "exponential-minus-one")) *r = expm1(x);
  else if (!strcmp(op, "log")) *r = log(x);
  else if (!strcmp(op, "log-plus-one")) *r = log1p(x);
  else if (!strcmp(op, "sqrt")) *r = sqrt(x);
  else if (!strcmp(op, "rsqrt")) *r = 1 / sqrt(x);
  else if (!strcmp(op, "cbrt")) *r = cbrt(x);
  else if (!strcmp(op, "tanh")) *r = tanh(x);
  else if (!strcmp(op, "tan")) *r = tan(x);
  else if (!strcmp(op, "sine")) *r = sin(x);
  else if (!strcmp(op, "cosine")) *r = cos(x);
  else if (!strcmp(op, "logistic")) *r = 1 / (1 + exp(-x));
  else if (!strcmp(op, "erf")) *r = erf(x);
  else if (!strcmp(op, "floor")) *r = floor(x);
  else if (!strcmp(op, "ceil")) *r = ceil(x);
  else if (!strcmp(op, "round-nearest-afz")) *r = round(x);
  else if (!strcmp(op, "round-nearest-even")) *r = nearbyint(x);
  else if (!strcmp(op, "is-finite")) *r = isfinite(x) != 0;
  else if (!strcmp(op, "clamp")) *r = hmin(hmax(y, x), na > 2 ? a[2] : y);
  else if (!strcmp(op, "select")) *r = x != 0 ? y : (na > 2 ? a[2] : 0);
  else if (!strcmp(op, "convert") || !strcmp(op, "copy") || !strcmp(op, "reduce-precision"))
    *r = dt == GOPT_DT_BOOL ? x != 0 : in || !dt_int(dt) ? x : wrap(isnan(x) ? 0 : x, dt);
  else if (!strcmp(op, "bitcast-convert")) *r = bitcast1(x, adt, dt);
  else if (!strcmp(op, "compare")) {
    if (!cmp(dir, x, y, &c)) return 0;
    *r = c;
  } else if (!strcmp(op, "and")) *r = from_bits(to_bits(x, dt) & to_bits(y, dt), dt);
  else if (!strcmp(op, "or")) *r = from_bits(to_bits(x, dt) | to_bits(y, dt), dt);
  else if (!strcmp(op, "xor")) *r = from_bits(to_bits(x, dt) ^ to_bits(y, dt), dt);
  else if (!strcmp(op, "not")) *r = dt == GOPT_DT_BOOL ? x == 0 : from_bits(~to_bits(x, dt), dt);
  else if (!strcmp(op, "popcnt")) *r = __builtin_popcountll(to_bits(x, dt));
  else if (!strncmp(op, "shift-", 6)) {
    int w = dt_bits(dt);
    uint64_t u = to_bits(x, dt), s = to_bits(y, dt);
    if (!strcmp(op, "shift-left")) *r = s >= (uint64_t)w ? 0 : from_bits(u << s, dt);
    else if (!strcmp(op, "shift-right-logical")) *r = s >= (uint64_t)w ? 0 : from_bits(u >> s, dt);
    else if (!strcmp(op, "shift-right-arithmetic"))
      *r = s >= (uint64_t)w ? (x < 0 ? -1 : 0) : floor(x / ldexp(1, (int)s));
    else return 0;
  } else return 0;
  return 1;
}

static int known_elementwise(const char *op) {
  double a[3] = {1, 1, 1}, r;
  return scalar_op(op, GOPT_DT_INT32, GOPT_DT_INT32, "EQ", a, 3, &r) ||
         scalar_op(op, GOPT_DT_FLOAT, GOPT_DT_FLOAT, "EQ", a, 3, &r);
}

/* ---- computations interpreted per element (reduce's to_apply) -------------------------------- */

typedef struct scomp {
  const gopt_graph *s;
  int32_t *order;
  int64_t n_order;
  double *val; /* per tensor of s */
} scomp;

static void scomp_free(scomp *c) {
  if (!c) return;
  free(c->order);
  free(c->val);
}

/* Prepares computation s (scalar parameters) for scomp_eval; 0, or an error naming what it lacks. */
static int scomp_init(scomp *c, const gopt_graph *s, gopt_error *err) {
  memset(c, 0, sizeof *c);
  c->s = s;
  c->order = malloc((s->nodes.n + 1) * sizeof *c->order);
  c->val = calloc(s->tensors.n + 1, sizeof *c->val);
  if (!c->order || !c->val) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  c->n_order = gopt_graph_topo(s, c->order, err);
  if (c->n_order < 0) return (int)c->n_order;
  for (size_t t = 0; t < s->tensors.n; t++) { /* scalar constants */
    const gopt_tensor *tt = &s->tensors.a[t];
    if (!(tt->flags & GOPT_T_CONST)) continue;
    const void *d = gopt_tensor_data(s, (int32_t)t);
    if (!d || gopt_tensor_numel(s, (int32_t)t) != 1) return gopt_error_set(err, GOPT_EUNSUP, "computation '%s': a non-scalar constant", gopt_graph_str(s, s->name));
    double v = 0;
    switch (tt->dtype) {
      case GOPT_DT_FLOAT: v = *(const float *)d; break;
      case GOPT_DT_DOUBLE: v = *(const double *)d; break;
      case GOPT_DT_INT32: v = *(const int32_t *)d; break;
      case GOPT_DT_INT64: v = (double)*(const int64_t *)d; break;
      case GOPT_DT_UINT32: v = *(const uint32_t *)d; break;
      case GOPT_DT_BOOL: case GOPT_DT_UINT8: v = *(const uint8_t *)d; break;
      case GOPT_DT_INT8: v = *(const int8_t *)d; break;
      default: return gopt_error_set(err, GOPT_EUNSUP, "computation '%s': constant of dtype %s", gopt_graph_str(s, s->name), gopt_dtype_name(tt->dtype));
    }
    c->val[t] = v;
  }
  for (int64_t i = 0; i < c->n_order; i++) {
    int32_t n = c->order[i];
    const char *op = hop(s, n);
    if (op && (!strcmp(op, "tuple") || !strcmp(op, "get-tuple-element") || known_elementwise(op))) continue;
    return gopt_error_set(err, GOPT_EUNSUP, "computation '%s': op '%s' cannot be interpreted per element",
                          gopt_graph_str(s, s->name), gopt_node_type(s, n));
  }
  return GOPT_OK;
}

/* Evaluates the computation on scalar parameters in[0..n_in) into out[0..outputs). */
static void scomp_eval(scomp *c, const double *in, double *out) {
  const gopt_graph *s = c->s;
  for (size_t i = 0; i < s->inputs.n; i++) c->val[s->inputs.a[i]] = in[i];
  for (int64_t i = 0; i < c->n_order; i++) {
    int32_t n = c->order[i];
    const gopt_node *nd = &s->nodes.a[n];
    const char *op = hop(s, n);
    double a[8] = {0};
    int na = nd->n_in < 8 ? nd->n_in : 8;
    for (int j = 0; j < na; j++) {
      int32_t t = gopt_node_input(s, n, j);
      a[j] = t >= 0 ? c->val[t] : 0;
    }
    if (!strcmp(op, "tuple") || !strcmp(op, "get-tuple-element")) {
      int64_t off = strcmp(op, "tuple") ? gopt_node_get_int(s, n, "hlo.leaf_offset", 0) : 0;
      for (int j = 0; j < nd->n_out; j++) {
        int32_t t = gopt_node_input(s, n, (int)off + j);
        c->val[gopt_node_output(s, n, j)] = t >= 0 ? c->val[t] : 0;
      }
      continue;
    }
    int32_t y = gopt_node_output(s, n, 0), x0 = gopt_node_input(s, n, 0);
    int adt = x0 >= 0 ? s->tensors.a[x0].dtype : s->tensors.a[y].dtype;
    double r = 0;
    scalar_op(op, s->tensors.a[y].dtype, adt, gopt_node_get_string(s, n, "direction", ""), a, na, &r);
    c->val[y] = r;
  }
  for (size_t i = 0; i < s->outputs.n; i++) out[i] = c->val[s->outputs.a[i]];
}

/* ---- reference kernels ----------------------------------------------------------------------- */

/* Multi-index of flat index o in t's shape. */
static void unravel(const rt *t, int64_t o, int64_t *idx) {
  for (int i = t->rank - 1; i >= 0; i--) {
    idx[i] = t->d[i] ? o % t->d[i] : 0;
    o = t->d[i] ? o / t->d[i] : 0;
  }
}
static int64_t ravel(const rt *t, const int64_t *idx) {
  int64_t o = 0;
  for (int i = 0; i < t->rank; i++) o = o * t->d[i] + idx[i];
  return o;
}

static int f_elementwise(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  const char *op = hop(G, NODE), *dir = gopt_node_get_string(G, NODE, "direction", "");
  double a[3];
  int na = nin < 3 ? nin : 3;
  for (int64_t o = 0; o < out[0].n; o++) {
    for (int j = 0; j < na; j++) a[j] = in[j].v[in[j].n == out[0].n ? o : ref_bcast_index(&in[j], &out[0], o)];
    if (!scalar_op(op, out[0].dt, in[na > 1 && !strcmp(op, "select") ? 1 : 0].dt, dir, a, na, &out[0].v[o]))
      return ex_node_error(x, NODE, err, GOPT_EUNSUP, "op not supported by the executor");
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
  int64_t idx[GOPT_MAX_RANK], j[GOPT_MAX_RANK];
  for (int64_t o = 0; o < out[0].n; o++) {
    unravel(&out[0], o, idx);
    for (size_t i = 0; i < nd; i++) j[i] = idx[dims[i]];
    out[0].v[o] = in[0].v[ravel(&in[0], j)];
  }
  return GOPT_OK;
}

/* Parses slice="{[a:b(:s)], ...}" into start/stride per dim; 0 or -1. */
static int parse_slice(const char *s, int rank, int64_t *st, int64_t *sd) {
  int k = 0;
  for (const char *q = s; q && (q = strchr(q, '[')); k++) {
    char *e;
    if (k >= rank) return -1;
    st[k] = strtoll(q + 1, &e, 10);
    if (*e != ':') return -1;
    strtoll(e + 1, &e, 10);
    sd[k] = 1;
    if (*e == ':') sd[k] = strtoll(e + 1, &e, 10);
    if (*e != ']' || sd[k] < 1) return -1;
    q = e;
  }
  return k == rank ? 0 : -1;
}

static int f_slice(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int64_t st[GOPT_MAX_RANK], sd[GOPT_MAX_RANK], idx[GOPT_MAX_RANK];
  if (parse_slice(gopt_node_get_string(G, NODE, "slice", ""), in[0].rank, st, sd))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "bad slice attribute");
  for (int64_t o = 0; o < out[0].n; o++) {
    unravel(&out[0], o, idx);
    for (int i = 0; i < in[0].rank; i++) {
      idx[i] = st[i] + idx[i] * sd[i];
      if (idx[i] >= in[0].d[i]) return ex_node_error(x, NODE, err, GOPT_EINVAL, "slice out of bounds");
    }
    out[0].v[o] = in[0].v[ravel(&in[0], idx)];
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

/* dot with dimension numbers: result dims are batch, lhs free, rhs free (XLA's order). */
static int f_dot(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  const char *key[4] = {"lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims"};
  const int64_t *d[4];
  size_t c[4];
  for (int i = 0; i < 4; i++) d[i] = gopt_node_get_ints(G, NODE, key[i], &c[i]);
  if (nin != 2 || c[0] != c[1] || c[2] != c[3])
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
  int64_t cd[GOPT_MAX_RANK], ci[GOPT_MAX_RANK], nct = 1, oi[GOPT_MAX_RANK], ia[GOPT_MAX_RANK], ib[GOPT_MAX_RANK];
  for (int i = 0; i < nc; i++) {
    cd[i] = in[0].d[d[2][i]];
    nct *= cd[i];
  }
  if (no != out[0].rank) return ex_node_error(x, NODE, err, GOPT_EINVAL, "dot result rank %d, expected %d", out[0].rank, no);
  for (int64_t o = 0; o < out[0].n; o++) {
    unravel(&out[0], o, oi);
    double acc = 0;
    for (int64_t q = 0; q < nct; q++) {
      int64_t r = q;
      for (int i = nc - 1; i >= 0; i--) {
        ci[i] = r % cd[i];
        r /= cd[i];
      }
      for (int i = 0; i < in[0].rank; i++) ia[i] = role[0][i] >= 0 ? oi[role[0][i]] : ci[-1 - role[0][i]];
      for (int i = 0; i < in[1].rank; i++) ib[i] = role[1][i] >= 0 ? oi[role[1][i]] : ci[-1 - role[1][i]];
      acc += in[0].v[ravel(&in[0], ia)] * in[1].v[ravel(&in[1], ib)];
    }
    out[0].v[o] = acc;
  }
  return GOPT_OK;
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

static int run_leaves(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  int64_t off = strcmp(hop(G, NODE), "tuple") ? gopt_node_get_int(G, NODE, "hlo.leaf_offset", 0) : 0;
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
    int32_t t = k->in[i];
    gopt_host_tensor h = {0};
    h.dtype = ex_dtype(x, t);
    h.rank = ex_rank(x, t);
    memcpy(h.dims, ex_dims(x, t), (size_t)h.rank * sizeof *h.dims);
    h.data = ex_data(x, t);
    h.nbytes = tbytes(x, t);
    rc = gopt_exec_set_input(s, i, &h, err);
  }
  if (!rc) rc = gopt_exec_run(s, err);
  for (size_t i = 0; i < gopt_exec_n_outputs(s) && !rc; i++) {
    gopt_host_tensor h = {0};
    rc = gopt_exec_get_output(s, i, &h, err);
    if (!rc && h.nbytes != tbytes(x, k->out[i])) rc = ex_node_error(x, NODE, err, GOPT_EINVAL, "result %zu has the wrong size", i);
    if (!rc) memcpy(ex_data(x, k->out[i]), h.data, h.nbytes);
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
  if (gopt_exec_n_inputs(e) != (size_t)k->n_in || gopt_exec_n_outputs(e) != (size_t)k->n_out) {
    gopt_exec_free(e);
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "operands/results do not match the computation's parameters/results");
  }
  k->st = e;
  k->fini = sub_fini;
  k->run = run_sub;
  return GOPT_OK;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static ref_fn ref_kernel(const gopt_graph *g, int32_t n) {
  const char *op = hop(g, n);
  if (!op) return NULL;
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
  if (!strcmp(op, "custom-call") && strstr(gopt_node_get_string(g, n, "custom_call_target", ""), "cuda_threefry2x32"))
    return f_threefry;
  if (known_elementwise(op) && g->nodes.a[n].n_out == 1) return f_elementwise;
  return NULL;
}

int ex_hlo_handles(const gopt_exec *x, int32_t n) {
  const char *op = hop(x->g, n);
  if (!op) return 0;
  if (!strcmp(op, "tuple") || !strcmp(op, "get-tuple-element")) return 1;
  if (!strcmp(op, "call") || !strcmp(op, "fusion")) return callee(x->g, n) != NULL;
  return ref_kernel(x->g, n) != NULL;
}

int ex_prepare_hlo(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const char *op = hop(G, NODE);
  if (!strcmp(op, "tuple") || !strcmp(op, "get-tuple-element")) {
    k->run = run_leaves;
    return GOPT_OK;
  }
  if (!strcmp(op, "call") || !strcmp(op, "fusion")) return prepare_sub(x, k, err);
  if (!strcmp(op, "reduce")) { /* the computation must be interpretable: say so now */
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
