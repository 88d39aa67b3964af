/* grad_select.c: gradient rules of the ops whose gradient a comparison routes, built from standard
 * ONNX ops (Equal, Cast, Less, Where, Sum, Mul, Div, Reshape) and summed down to each input's shape where it was
 * broadcast:
 *   Max, Min            d x_i = dY * [x_i == Y] / (number of inputs equal to Y): a tie splits
 *                       dY evenly, as PyTorch's maximum / minimum do
 *   Mean                d x_i = dY / (number of inputs)
 *   PRelu               dX = Where(X < 0, dY * slope, dY); d slope = Where(X < 0, dY * X, 0)
 *   ReduceMax/Min,      dX = [X == Y'] * dY' / (ties in the window), Y' and dY' the output and
 *   GlobalMaxPool         its gradient reshaped to the kept-dims shape (static shapes only); a
 *                       tie splits dY evenly, as PyTorch's amax / amin do
 * Semantics: docs/TRAINING.md. */
#include "train/train_internal.h"

/* Records t (shaped like the broadcast output) summed down to x's shape as x's partial. */
static int partial_to(tb *b, int32_t x, int32_t t, const char *what) {
  if (tb_reduce_needed(b, t, x)) TRY(t = tb_reduce_to(b, t, x, what));
  return tb_partial(b, x, t);
}

/* Where(c, v, 0) shaped like `like`. */
static int32_t where0(tb *b, const char *what, int32_t c, int32_t v, int32_t like) {
  int32_t z = tb_const_scalar(b, "zero", b->g->tensors.a[like].dtype, 0.0);
  if (z < 0) return -1;
  int32_t in[3] = {c, v, z};
  return tb_op_like(b, "Where", what, 3, in, like);
}

/* Bool tensor `a OP b` shaped like `like` (OP: Equal or Less). */
static int32_t compare(tb *b, const char *op, const char *what, int32_t a, int32_t c, int32_t like) {
  const gopt_tensor *t = &b->g->tensors.a[like];
  int64_t dims[GOPT_MAX_RANK];
  for (int i = 0; i < t->rank; i++) dims[i] = gopt_tensor_dims(b->g, like)[i];
  int32_t in[2] = {a, c};
  return tb_op(b, op, what, 2, in, GOPT_DT_BOOL, t->rank, dims);
}

/* 1.0 where `a OP c` holds, else 0.0, shaped and typed like `like` (OP: Equal). */
static int32_t indicator(tb *b, const char *what, int32_t a, int32_t c, int32_t like) {
  int32_t m = compare(b, "Equal", "is_out", a, c, like);
  if (m < 0) return -1;
  int32_t t = tb_op_like(b, "Cast", what, 1, &m, like);
  if (t >= 0) gopt_node_set_int(b->g, b->g->tensors.a[t].producer, "to", b->g->tensors.a[like].dtype);
  return t;
}

/* Max / Min: each input equal to the output gets dY divided by how many are (PyTorch's split of a
 * tie), summed down to its shape. */
static int rule_max_min(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  int k = (int)g->nodes.a[n].n_in;
  if (k > 32) return tb_fail(b, GOPT_EUNSUP, "%s of more than 32 inputs has no gradient rule", gopt_node_type(g, n));
  int32_t y = tb_out(g, n, 0), eq[32], cnt, share, t;
  char nm[32];
  for (int i = 0; i < k; i++) TRY(eq[i] = indicator(b, "is_out_f", tb_in(g, n, i), y, d));
  TRY(cnt = tb_op_like(b, "Sum", "ties", k, eq, d));
  int32_t in[2] = {d, cnt};
  TRY(share = tb_op_like(b, "Div", "share", 2, in, d));
  for (int i = 0; i < k; i++) {
    if (!NEED(i)) continue;
    in[0] = share, in[1] = eq[i];
    TRY(t = tb_op_like(b, "Mul", "routed", 2, in, d));
    TRY(partial_to(b, tb_in(g, n, i), t, tb_dname(i, nm, sizeof nm)));
  }
  return 0;
}

static int rule_mean(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  int32_t k, t;
  char nm[32];
  TRY(k = tb_const_scalar(b, "inv_n", g->tensors.a[d].dtype, 1.0 / g->nodes.a[n].n_in));
  int32_t in[2] = {d, k};
  TRY(t = tb_op_like(b, "Mul", "dy_over_n", 2, in, d));
  for (int i = 0; i < (int)g->nodes.a[n].n_in; i++)
    if (NEED(i)) TRY(partial_to(b, tb_in(g, n, i), t, tb_dname(i, nm, sizeof nm)));
  return 0;
}

static int rule_prelu(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  int32_t x = tb_in(g, n, 0), s = tb_in(g, n, 1), z, neg, t;
  TRY(z = tb_const_scalar(b, "zero", g->tensors.a[x].dtype, 0.0));
  TRY(neg = compare(b, "Less", "negative", x, z, x));
  if (NEED(0)) {
    int32_t in[2] = {d, s}, ds, w[3];
    TRY(ds = tb_op_like(b, "Mul", "dy_slope", 2, in, d));
    w[0] = neg, w[1] = ds, w[2] = d;
    TRY(t = tb_op_like(b, "Where", "d0", 3, w, x));
    TRY(tb_partial(b, x, t));
  }
  if (NEED(1)) {
    int32_t in[2] = {d, x}, dx;
    TRY(dx = tb_op_like(b, "Mul", "dy_x", 2, in, d));
    TRY(t = where0(b, "d1_full", neg, dx, d));
    TRY(partial_to(b, s, t, "d1"));
  }
  return 0;
}

/* ReduceMax / ReduceMin / GlobalMaxPool: Y and dY reshaped to the kept-dims shape, then routed. */
static int rule_reduce_select(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  if (!NEED(0)) return 0;
  int32_t x = tb_in(g, n, 0), y = tb_out(g, n, 0), t, m;
  int op = g->nodes.a[n].op, r = g->tensors.a[x].rank;
  const int64_t *xd = gopt_tensor_dims(g, x);
  int64_t keep[GOPT_MAX_RANK], axes[GOPT_MAX_RANK];
  int na = -1;
  for (int i = 0; i < r; i++) keep[i] = xd[i];
  if (op == GOPT_OP_GLOBAL_MAX_POOL) {
    na = 0;
    for (int i = 2; i < r; i++) axes[na++] = i;
  } else {
    int rc = tb_reduce_axes(b, n, r, axes, &na);
    if (rc) return rc;
    if (na < 0 || (na == 0 && !gopt_node_get_int(g, n, "noop_with_empty_axes", 0))) {
      na = r; /* all axes */
      for (int i = 0; i < r; i++) axes[i] = i;
    }
  }
  for (int i = 0; i < na; i++) keep[axes[i]] = 1;
  for (int i = 0; i < r; i++)
    if (keep[i] < 0) return tb_fail(b, GOPT_EUNSUP, "%s over a symbolic shape has no gradient rule", gopt_node_type(g, n));
  int keepdims = op == GOPT_OP_GLOBAL_MAX_POOL || gopt_node_get_int(g, n, "keepdims", 1);
  int32_t yk = y, dk = d;
  if (!keepdims) {
    int32_t sh, in[2];
    TRY(sh = tb_const_i64(b, "kept_shape", keep, r));
    in[0] = y, in[1] = sh;
    TRY(yk = tb_op(b, "Reshape", "y_kept", 2, in, g->tensors.a[y].dtype, r, keep));
    in[0] = d;
    TRY(dk = tb_op(b, "Reshape", "dy_kept", 2, in, g->tensors.a[d].dtype, r, keep));
  }
  int32_t cnt, in[2];
  TRY(m = indicator(b, "is_out_f", x, yk, x));
  TRY(cnt = tb_reduce_sum(b, m, axes, na, 1, "ties", r, keep));
  in[0] = dk, in[1] = cnt;
  TRY(t = tb_op(b, "Div", "share", 2, in, g->tensors.a[d].dtype, r, keep));
  in[0] = m, in[1] = t;
  TRY(t = tb_op_like(b, "Mul", "d0", 2, in, x));
  return tb_partial(b, x, t);
}

int tb_rule_select(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  switch (b->g->nodes.a[n].op) {
    case GOPT_OP_MAX: case GOPT_OP_MIN: return rule_max_min(b, n, d, need);
    case GOPT_OP_MEAN: return rule_mean(b, n, d, need);
    case GOPT_OP_PRELU: return rule_prelu(b, n, d, need);
    default: return rule_reduce_select(b, n, d, need);
  }
}
