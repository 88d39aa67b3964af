/* pass_algsimp.c: the algebraic simplifier (its rules are listed below and in docs/PASSES.md),
 * transpose folding into dot, and constant folding of elementwise ops and broadcasts. Each rule
 * fires only when the result has exactly the type of the value it replaces. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_hlo.h"
#include "passes/passes_internal.h"

/* 1 when the INTS attribute key of n is 0,1,...,k-1 (k = its count) and k == rank. */
static int is_iota_attr(const gopt_graph *g, int32_t n, const char *key, int rank) {
  size_t k = 0;
  const int64_t *d = gopt_node_get_ints(g, n, key, &k);
  if ((int)k != rank || (!d && k)) return 0;
  for (size_t i = 0; i < k; i++)
    if (d[i] != (int64_t)i) return 0;
  return 1;
}

/* 1 when slice node n starts at 0 with stride 1 everywhere and ends at x's dims (all of x). */
static int full_slice(const gopt_graph *g, int32_t n, int32_t x) {
  int r = g->tensors.a[x].rank;
  int64_t st[GOPT_MAX_RANK], li[GOPT_MAX_RANK], sd[GOPT_MAX_RANK];
  if (r > GOPT_MAX_RANK || ops_hlo_slice(g, n, r, st, li, sd)) return 0;
  for (int i = 0; i < r; i++)
    if (st[i] != 0 || sd[i] != 1 || li[i] != gopt_tensor_dims(g, x)[i]) return 0;
  return 1;
}

/* The rules; returns the tensor that replaces n's output, or -1 when no rule applies. */
static int32_t simplify(pctx *p, int32_t n) {
  gopt_graph *g = p->g;
  const char *op = pass_op(g, n);
  const gopt_node *nd = &g->nodes.a[n];
  if (!op || nd->n_out != 1) return -1;
  int32_t y = gopt_node_output(g, n, 0);
  int32_t a = nd->n_in > 0 ? gopt_node_input(g, n, 0) : -1, b = nd->n_in > 1 ? gopt_node_input(g, n, 1) : -1;
  int32_t pa = a >= 0 ? g->tensors.a[a].producer : -1;
  int fl = g->tensors.a[y].dtype == GOPT_DT_FLOAT || g->tensors.a[y].dtype == GOPT_DT_DOUBLE;
  /* R1 x+0, 0+x -> x (integers; floats too: -0 + 0 = +0 differs only in sign of zero, as XLA) */
  if (!strcmp(op, "add")) {
    if (pass_all_equal(g, b, 0) && pass_same_type(g, a, y)) return a;
    if (pass_all_equal(g, a, 0) && pass_same_type(g, b, y)) return b;
  }
  /* R2 x-0 -> x */
  if (!strcmp(op, "subtract") && pass_all_equal(g, b, 0) && pass_same_type(g, a, y)) return a;
  /* R3 x*1, 1*x -> x */
  if (!strcmp(op, "multiply")) {
    if (pass_all_equal(g, b, 1) && pass_same_type(g, a, y)) return a;
    if (pass_all_equal(g, a, 1) && pass_same_type(g, b, y)) return b;
  }
  /* R4 x/1 -> x */
  if (!strcmp(op, "divide") && pass_all_equal(g, b, 1) && pass_same_type(g, a, y)) return a;
  /* R5 max(x,x), min(x,x), and(x,x), or(x,x) -> x */
  if ((!strcmp(op, "maximum") || !strcmp(op, "minimum") || !strcmp(op, "and") || !strcmp(op, "or")) &&
      a == b && pass_same_type(g, a, y))
    return a;
  /* R6 negate(negate(x)), not(not(x)) -> x */
  if ((!strcmp(op, "negate") || !strcmp(op, "not")) && pa >= 0 && pass_is(g, pa, op) &&
      pass_same_type(g, gopt_node_input(g, pa, 0), y))
    return gopt_node_input(g, pa, 0);
  /* R7 reshape/bitcast/copy/convert to the same type -> x */
  if ((!strcmp(op, "reshape") || !strcmp(op, "bitcast") || !strcmp(op, "copy") || !strcmp(op, "convert")) &&
      nd->n_in == 1 && pass_same_type(g, a, y))
    return a;
  /* R8 reshape(reshape(x)) -> reshape(x) (rewired in place below) */
  /* R9 transpose with the identity permutation, broadcast with dimensions 0..r-1 -> x */
  if ((!strcmp(op, "transpose") || !strcmp(op, "broadcast")) && pass_same_type(g, a, y) &&
      is_iota_attr(g, n, "dimensions", g->tensors.a[a].rank))
    return a;
  /* R10 slice of the whole operand -> x */
  if (!strcmp(op, "slice") && pass_same_type(g, a, y) && full_slice(g, n, a)) return a;
  /* R11 concatenate of one operand -> x */
  if (!strcmp(op, "concatenate") && nd->n_in == 1 && pass_same_type(g, a, y)) return a;
  /* R12 pad with no padding -> x */
  if (!strcmp(op, "pad") && pass_same_type(g, a, y)) {
    const char *pd = gopt_node_get_string(g, n, "padding", "");
    int zero = *pd != 0;
    for (const char *q = pd; *q && zero; q++) zero = *q == '0' || *q == '_' || *q == 'x';
    if (zero) return a;
  }
  /* R13 select(true, a, b) -> a; select(false, a, b) -> b; select(p, a, a) -> a */
  if (!strcmp(op, "select") && nd->n_in == 3) {
    int32_t c = gopt_node_input(g, n, 2);
    if (b == c && pass_same_type(g, b, y)) return b;
    if (pass_all_equal(g, a, 1) && pass_same_type(g, b, y)) return b;
    if (pass_all_equal(g, a, 0) && pass_same_type(g, c, y)) return c;
  }
  /* R14 x*0 -> 0 (integers only: NaN*0 is NaN) */
  if (!strcmp(op, "multiply") && !fl && g->tensors.a[y].dtype != GOPT_DT_FLOAT16 &&
      g->tensors.a[y].dtype != GOPT_DT_BFLOAT16) {
    if (pass_all_equal(g, b, 0) && pass_same_type(g, b, y)) return b;
    if (pass_all_equal(g, a, 0) && pass_same_type(g, a, y)) return a;
  }
  return -1;
}

int pass_algsimp(pctx *p) {
  gopt_graph *g = p->g;
  for (size_t n = 0; n < g->nodes.n; n++) { /* storage order is a valid order for imports */
    if (!gopt_node_alive(g, (int32_t)n)) continue;
    int32_t to = simplify(p, (int32_t)n);
    if (to == -1) to = pass_algsimp_slice(p, (int32_t)n);
    if (to == -2) return p->err->code ? p->err->code : GOPT_ENOMEM;
    if (to >= 0) {
      pass_replace(p, (int32_t)n, &to);
      continue;
    }
    /* R8: reshape(reshape(x)) reads x directly (the inner one may become dead) */
    if (pass_is(g, (int32_t)n, "reshape") && g->nodes.a[n].n_in == 1) {
      int32_t a = gopt_node_input(g, (int32_t)n, 0), pa = g->tensors.a[a].producer;
      if (pa >= 0 && pass_is(g, pa, "reshape") && g->nodes.a[pa].n_in == 1) {
        gopt_node_set_input(g, (int32_t)n, 0, gopt_node_input(g, pa, 0));
        p->st->rewrites++;
      }
    }
  }
  return 0;
}

/* Transpose folding: dot(transpose(a), b) reads a with the contracting and batch dimensions
 * mapped through the permutation, when a's remaining (free) dimensions keep their order (the
 * dot's output is unchanged); the same for the rhs. */
int pass_transpose_folding(pctx *p) {
  gopt_graph *g = p->g;
  for (size_t n = 0; n < g->nodes.n; n++) {
    if (!gopt_node_alive(g, (int32_t)n) || !pass_is(g, (int32_t)n, "dot") || g->nodes.a[n].n_in != 2) continue;
    for (int side = 0; side < 2; side++) {
      int32_t t = gopt_node_input(g, (int32_t)n, side), pr = t >= 0 ? g->tensors.a[t].producer : -1;
      if (pr < 0 || !pass_is(g, pr, "transpose") || g->nodes.a[pr].n_in != 1) continue;
      size_t np, nc, nb;
      const int64_t *perm = gopt_node_get_ints(g, pr, "dimensions", &np);
      const char *ck = side ? "rhs_contracting_dims" : "lhs_contracting_dims";
      const char *bk = side ? "rhs_batch_dims" : "lhs_batch_dims";
      const int64_t *cd = gopt_node_get_ints(g, (int32_t)n, ck, &nc);
      const int64_t *bd = gopt_node_get_ints(g, (int32_t)n, bk, &nb);
      int r = g->tensors.a[t].rank, ok = perm && (int)np == r && nc + nb <= (size_t)r;
      int64_t c2[GOPT_MAX_RANK], b2[GOPT_MAX_RANK];
      unsigned char used[GOPT_MAX_RANK] = {0};
      for (size_t i = 0; ok && i < nc; i++) ok = cd[i] >= 0 && cd[i] < r && (c2[i] = perm[cd[i]], used[cd[i]] = 1);
      for (size_t i = 0; ok && i < nb; i++) ok = bd[i] >= 0 && bd[i] < r && (b2[i] = perm[bd[i]], used[bd[i]] = 1, 1);
      for (int i = 0, last = -1; ok && i < r; i++) /* free dims keep their order */
        if (!used[i]) {
          ok = perm[i] > last;
          last = (int)perm[i];
        }
      if (!ok) continue;
      int64_t c2copy[GOPT_MAX_RANK], b2copy[GOPT_MAX_RANK];
      memcpy(c2copy, c2, nc * sizeof *c2);
      memcpy(b2copy, b2, nb * sizeof *b2);
      if (gopt_node_set_ints(g, (int32_t)n, ck, c2copy, nc) || (nb && gopt_node_set_ints(g, (int32_t)n, bk, b2copy, nb)))
        return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
      gopt_node_set_input(g, (int32_t)n, side, gopt_node_input(g, pr, 0));
      ops_hlo_set_kind(g, (int32_t)n, 0); /* the einsum equation follows the new numbers */
      p->st->rewrites++;
    }
  }
  return 0;
}

/* ---- constant folding ------------------------------------------------------------------------ */

static int get_d(const void *d, int dt, int64_t i, double *v) {
  switch (dt) {
  case GOPT_DT_FLOAT: *v = ((const float *)d)[i]; return 1;
  case GOPT_DT_DOUBLE: *v = ((const double *)d)[i]; return 1;
  case GOPT_DT_INT32: *v = ((const int32_t *)d)[i]; return 1;
  case GOPT_DT_INT64: *v = (double)((const int64_t *)d)[i]; return 1;
  default: return 0;
  }
}

static void put_d(void *d, int dt, int64_t i, double v) {
  switch (dt) {
  case GOPT_DT_FLOAT: ((float *)d)[i] = (float)v; break;
  case GOPT_DT_DOUBLE: ((double *)d)[i] = v; break;
  case GOPT_DT_INT32: ((int32_t *)d)[i] = (int32_t)v; break;
  case GOPT_DT_INT64: ((int64_t *)d)[i] = (int64_t)v; break;
  default: break;
  }
}

/* Element i of op applied to x (and y); 0 when the op or an integer case is not folded. */
static int eval(const char *op, int dt, double x, double y, double *r) {
  int in = dt == GOPT_DT_INT32 || dt == GOPT_DT_INT64;
  if (!strcmp(op, "add")) *r = x + y;
  else if (!strcmp(op, "subtract")) *r = x - y;
  else if (!strcmp(op, "multiply")) *r = x * y;
  else if (!strcmp(op, "divide")) {
    if (in && y == 0) return 0;
    *r = in ? trunc(x / y) : x / y;
  } else if (!strcmp(op, "maximum")) *r = x > y || isnan(x) ? x : y;
  else if (!strcmp(op, "minimum")) *r = x < y || isnan(x) ? x : y;
  else if (!strcmp(op, "negate")) *r = -x;
  else if (!strcmp(op, "abs")) *r = fabs(x);
  else if (!strcmp(op, "exponential") && !in) *r = exp(x);
  else if (!strcmp(op, "sqrt") && !in) *r = sqrt(x);
  else if (!strcmp(op, "rsqrt") && !in) *r = 1 / sqrt(x);
  else if (!strcmp(op, "log") && !in) *r = log(x);
  else return 0;
  if (in && (*r > 9e15 || *r < -9e15)) return 0; /* beyond exact doubles: leave it */
  return 1;
}

/* Folds elementwise ops on constants (same-shaped, f32/f64/s32/s64, at most 1<<16 elements).
 * Broadcasts are not folded (as in XLA's HloConstantFolding). */
int pass_constant_folding(pctx *p) {
  gopt_graph *g = p->g;
  size_t nn = g->nodes.n;
  for (size_t n = 0; n < nn; n++) {
    if (!gopt_node_alive(g, (int32_t)n) || g->nodes.a[n].n_out != 1) continue;
    const char *op = pass_op(g, (int32_t)n);
    const gopt_node *nd = &g->nodes.a[n];
    int32_t y = gopt_node_output(g, (int32_t)n, 0);
    int dt = g->tensors.a[y].dtype;
    int64_t ne = gopt_tensor_numel(g, y);
    if (!op || nd->n_in < 1 || nd->n_in > 2 || ne > (1 << 16) || !gopt_tensor_is_static(g, y)) continue;
    const void *d[2] = {NULL, NULL};
    int ok = 1;
    for (int i = 0; i < nd->n_in && ok; i++) {
      int32_t t = gopt_node_input(g, (int32_t)n, i);
      d[i] = t >= 0 && (g->tensors.a[t].flags & GOPT_T_CONST) ? gopt_tensor_data(g, t) : NULL;
      ok = d[i] && g->tensors.a[t].dtype == dt &&
           g->consts.a[g->tensors.a[t].cdata].nbytes >= (size_t)gopt_tensor_numel(g, t) * gopt_dtype_size(dt);
    }
    if (!ok) continue;
    int bcast = 0; /* broadcasts stay (as XLA: folding them only makes large constants) */
    if (!bcast)
      for (int i = 0; i < nd->n_in && ok; i++) ok = pass_same_type(g, gopt_node_input(g, (int32_t)n, i), y);
    if (!ok || (!bcast && !strcmp(op, "broadcast"))) continue;
    size_t es = gopt_dtype_size(dt);
    void *out = malloc((size_t)ne * es + 1);
    if (!out) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
    for (int64_t i = 0; i < ne && ok; i++) {
      double x = 0, z = 0, r = 0;
      ok = get_d(d[0], dt, bcast ? 0 : i, &x) && (nd->n_in < 2 || get_d(d[1], dt, i, &z));
      if (ok && bcast) r = x;
      else if (ok) ok = eval(op, dt, x, z, &r);
      if (ok) put_d(out, dt, i, r);
    }
    if (ok) {
      int64_t dims[GOPT_MAX_RANK];
      int rank = g->tensors.a[y].rank;
      if (rank) memcpy(dims, gopt_tensor_dims(g, y), (size_t)rank * sizeof *dims);
      int32_t c = gopt_graph_add_tensor(g, NULL, dt, rank, dims, p->err);
      if (c < 0 || gopt_tensor_set_const(g, c, out, (size_t)ne * es, p->err)) {
        free(out);
        return p->err->code ? p->err->code : GOPT_ENOMEM;
      }
      pass_replace(p, (int32_t)n, &c);
    }
    free(out);
  }
  return 0;
}
