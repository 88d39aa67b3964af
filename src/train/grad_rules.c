/* grad_rules.c: per-op gradient rules of the training-graph builder: which inputs of each forward
 * op are differentiable, and the backward ops that compute their gradients (standard ONNX ops
 * where cheap, gopt's training ops of op_list_train.h elsewhere). Semantics: docs/TRAINING.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_internal.h"

int tb_diff_mask(const tb *b, int32_t n, uint32_t *mask) {
  const gopt_graph *g = b->g;
  int nin = g->nodes.a[n].n_in;
  uint32_t floats = 0;
  for (int i = 0; i < nin; i++) {
    int32_t t = gopt_node_input(g, n, i);
    if (t >= 0 && tb_is_float(g->tensors.a[t].dtype)) floats |= 1u << (i < 31 ? i : 31);
  }
  *mask = floats;
  switch (g->nodes.a[n].op) {
    /* unary, gradient w.r.t. input 0 only */
    case GOPT_OP_RELU: case GOPT_OP_LEAKY_RELU: case GOPT_OP_ELU: case GOPT_OP_SELU:
    case GOPT_OP_CELU: case GOPT_OP_SIGMOID: case GOPT_OP_HARD_SIGMOID: case GOPT_OP_HARD_SWISH:
    case GOPT_OP_TANH: case GOPT_OP_EXP: case GOPT_OP_LOG: case GOPT_OP_SQRT:
    case GOPT_OP_RECIPROCAL: case GOPT_OP_NEG: case GOPT_OP_ABS: case GOPT_OP_ERF:
    case GOPT_OP_GELU: case GOPT_OP_SIN: case GOPT_OP_COS: case GOPT_OP_SOFTPLUS:
    case GOPT_OP_SOFTSIGN: case GOPT_OP_MISH: case GOPT_OP_CLIP: case GOPT_OP_IDENTITY:
    case GOPT_OP_DROPOUT: case GOPT_OP_EXPAND: case GOPT_OP_RESHAPE: case GOPT_OP_FLATTEN:
    case GOPT_OP_SQUEEZE: case GOPT_OP_UNSQUEEZE: case GOPT_OP_TRANSPOSE: case GOPT_OP_SPLIT:
    case GOPT_OP_SLICE: case GOPT_OP_GATHER: case GOPT_OP_PAD: case GOPT_OP_RESIZE:
    case GOPT_OP_UPSAMPLE: case GOPT_OP_REDUCE_MEAN: case GOPT_OP_REDUCE_SUM: case GOPT_OP_REDUCE_L2:
    case GOPT_OP_SOFTMAX: case GOPT_OP_LOG_SOFTMAX: case GOPT_OP_GLOBAL_AVG_POOL:
    case GOPT_OP_MAX_POOL: case GOPT_OP_AVERAGE_POOL:
      *mask = floats & 1u;
      return 1;
    case GOPT_OP_CAST: {
      int32_t o = tb_out(g, n, 0);
      *mask = (o >= 0 && tb_is_float(g->tensors.a[o].dtype)) ? (floats & 1u) : 0;
      return 1;
    }
    /* zero gradient almost everywhere, or integer/boolean results: the gradient stops here */
    case GOPT_OP_CONSTANT: case GOPT_OP_FLOOR: case GOPT_OP_CEIL: case GOPT_OP_ROUND:
    case GOPT_OP_SIGN: case GOPT_OP_NOT: case GOPT_OP_ISNAN: case GOPT_OP_EQUAL:
    case GOPT_OP_LESS: case GOPT_OP_LESS_OR_EQUAL: case GOPT_OP_GREATER:
    case GOPT_OP_GREATER_OR_EQUAL: case GOPT_OP_AND: case GOPT_OP_OR: case GOPT_OP_XOR:
    case GOPT_OP_SHAPE_OF: case GOPT_OP_SIZE: case GOPT_OP_CONSTANT_OF_SHAPE: case GOPT_OP_RANGE:
    case GOPT_OP_NON_ZERO: case GOPT_OP_ONE_HOT: case GOPT_OP_ARGMAX: case GOPT_OP_ARGMIN:
      *mask = 0;
      return 1;
    case GOPT_OP_ADD: case GOPT_OP_SUB: case GOPT_OP_MUL: case GOPT_OP_DIV: case GOPT_OP_POW:
    case GOPT_OP_SUM: case GOPT_OP_CONCAT:
      return 1;
    case GOPT_OP_WHERE:
      *mask = floats & 6u;
      return 1;
    case GOPT_OP_SCATTER_ND:
      *mask = floats & 5u;  /* data and updates; not the indices */
      return 1;
    case GOPT_OP_LAYER_NORM: case GOPT_OP_BATCH_NORM: case GOPT_OP_CONV: case GOPT_OP_GEMM:
    case GOPT_OP_CONV_TRANSPOSE: case GOPT_OP_INSTANCE_NORM:
      *mask = floats & 7u;  /* BatchNormalization's running mean/var are not trained */
      return 1;
    case GOPT_OP_MATMUL:
      *mask = floats & 3u;
      return 1;
    case GOPT_OP_EINSUM: /* every operand (grad_einsum.c says which equations it cannot do) */
    case GOPT_OP_MAX: case GOPT_OP_MIN: case GOPT_OP_MEAN: case GOPT_OP_PRELU:
      return 1;
    case GOPT_OP_REDUCE_MAX: case GOPT_OP_REDUCE_MIN: case GOPT_OP_GLOBAL_MAX_POOL:
    case GOPT_OP_DEPTH_TO_SPACE: case GOPT_OP_SPACE_TO_DEPTH: case GOPT_OP_TRILU: case GOPT_OP_CUMSUM:
    case GOPT_OP_REDUCE_SUM_SQUARE: case GOPT_OP_TILE: case GOPT_OP_GATHER_ELEMENTS: case GOPT_OP_GATHER_ND:
    case GOPT_OP_TOPK:
      *mask = floats & 1u;
      return 1;
    case GOPT_OP_SCATTER_ELEMENTS:
      *mask = floats & 5u;  /* data and updates; not the indices */
      return 1;
    case GOPT_OP_LSTM: case GOPT_OP_GRU: case GOPT_OP_RNN:
      *mask = floats & 0xEFu;  /* all but sequence_lens */
      return 1;
    default:
      return 0;
  }
}

/* ---- rule helpers ------------------------------------------------------------------------------ */

/* Gradient for input i computed by a one-output op whose result is shaped like the broadcast
 * output `full_like`, then summed down to input i's shape. Records the partial. */
static int bcast_partial(tb *b, int32_t n, int i, const char *type, int n_in, const int32_t *in,
                         int32_t full_like) {
  char nm[32], full[40];
  int32_t x = tb_in(b->g, n, i);
  tb_dname(i, nm, sizeof nm);
  int red = tb_reduce_needed(b, full_like, x);
  snprintf(full, sizeof full, "%s_full", nm);
  int32_t t = tb_op_like(b, type, red ? full : nm, n_in, in, full_like);
  TRY(t);
  if (red) TRY(t = tb_reduce_to(b, t, x, nm));
  return tb_partial(b, x, t);
}

/* Partial for input i that is d summed down to input i's shape (d itself when not broadcast). */
static int reduce_partial(tb *b, int32_t n, int i, int32_t d) {
  char nm[32];
  int32_t x = tb_in(b->g, n, i), t;
  TRY(t = tb_reduce_to(b, d, x, tb_dname(i, nm, sizeof nm)));
  return tb_partial(b, x, t);
}

static int32_t producer_of(const tb *b, int32_t t) { return b->g->tensors.a[t].producer; }

/* Sets a string attribute from a value that may point into the graph's string table (copied
 * first: interning can move the table). */
static void set_str(gopt_graph *g, int32_t node, const char *attr, const char *v) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v);
  gopt_node_set_string(g, node, attr, buf);
}

/* Non-negative axis for rank r (a in [-r, r)); -1 when out of range. */
static int64_t norm_axis(int64_t a, int r) {
  if (a < 0) a += r;
  return (a < 0 || a >= r) ? -1 : a;
}

/* Integer values of a constant int64/int32 tensor t into out (at most max); -1 when not constant. */
int tb_const_ints(const gopt_graph *g, int32_t t, int64_t *out, int max) {
  const void *p = t >= 0 ? gopt_tensor_data(g, t) : NULL;
  if (!p) return -1;
  int dt = g->tensors.a[t].dtype;
  int64_t cnt = gopt_tensor_numel(g, t);
  if (cnt > max) return -1;
  for (int64_t k = 0; k < cnt; k++) {
    if (dt == GOPT_DT_INT64) memcpy(&out[k], (const char *)p + k * 8, 8);
    else if (dt == GOPT_DT_INT32) { int32_t v; memcpy(&v, (const char *)p + k * 4, 4); out[k] = v; }
    else return -1;
  }
  return (int)cnt;
}

/* Flattened size of dims[0..k): a concrete number, or a symbol named like "batch*32". */
static int64_t flat_dim(tb *b, const int64_t *dims, int k) {
  int64_t c = 1;
  char name[512] = "";
  size_t p = 0;
  for (int i = 0; i < k; i++) {
    if (dims[i] >= 0) { c *= dims[i]; continue; }
    uint32_t s = GOPT_DIM_SYM_ID(dims[i]);
    const char *sn = s < b->g->syms.n ? gopt_graph_str(b->g, b->g->syms.a[s]) : "?";
    p += (size_t)snprintf(name + p, p < sizeof name ? sizeof name - p : 0, "%s%s", p ? "*" : "", sn);
    if (p >= sizeof name) p = sizeof name - 1;
  }
  if (!p) return c;
  if (c != 1) snprintf(name + p, sizeof name - p, "*%lld", (long long)c);
  return GOPT_DIM_SYM(gopt_graph_symbol(b->g, name));
}

/* Transpose of t swapping its last two axes. */
static int32_t swap_last2(tb *b, int32_t t, const char *what) {
  const gopt_graph *g = b->g;
  int r = g->tensors.a[t].rank;
  int64_t dims[GOPT_MAX_RANK], perm[GOPT_MAX_RANK];
  memcpy(dims, gopt_tensor_dims(g, t), (size_t)r * sizeof *dims);
  for (int i = 0; i < r; i++) perm[i] = i;
  perm[r - 2] = r - 1;
  perm[r - 1] = r - 2;
  int64_t tmp = dims[r - 2];
  dims[r - 2] = dims[r - 1];
  dims[r - 1] = tmp;
  int32_t o = tb_op(b, "Transpose", what, 1, &t, g->tensors.a[t].dtype, r, dims);
  if (o >= 0) gopt_node_set_ints(b->g, producer_of(b, o), "perm", perm, (size_t)r);
  return o;
}

static int32_t gemm(tb *b, const char *what, int32_t p, int32_t q, int ta, int tb_, double alpha,
                    int32_t like) {
  int32_t in[2] = {p, q};
  int32_t o = tb_op_like(b, "Gemm", what, 2, in, like);
  if (o < 0) return -1;
  int32_t n = producer_of(b, o);
  if (ta) gopt_node_set_int(b->g, n, "transA", 1);
  if (tb_) gopt_node_set_int(b->g, n, "transB", 1);
  if (alpha != 1.0) gopt_node_set_float(b->g, n, "alpha", alpha);
  return o;
}

/* Gradient op of one output shaped like `like`, attributes copied from the forward node n. */
static int32_t grad_op(tb *b, int32_t n, const char *type, const char *what, int n_in,
                       const int32_t *in, int32_t like) {
  int32_t o = tb_op_like(b, type, what, n_in, in, like);
  if (o < 0) return -1;
  if (tb_copy_attrs(b, n, producer_of(b, o))) return -1;
  return o;
}

/* ---- rules --------------------------------------------------------------------------------------- */

static int rule_matmul(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  int32_t A = tb_in(g, n, 0), B = tb_in(g, n, 1);
  int ra = g->tensors.a[A].rank, rb = g->tensors.a[B].rank, rd = g->tensors.a[d].rank;
  if (ra < 2 || rb < 2)
    return tb_fail(b, GOPT_EUNSUP, "MatMul with a 1-D operand has no gradient rule");
  if (ra == 2 && rb == 2) {
    if NEED(0) { int32_t t; TRY(t = gemm(b, "d0", d, B, 0, 1, 1.0, A)); TRY(tb_partial(b, A, t)); }
    if NEED(1) { int32_t t; TRY(t = gemm(b, "d1", A, d, 1, 0, 1.0, B)); TRY(tb_partial(b, B, t)); }
    return 0;
  }
  int64_t dd[GOPT_MAX_RANK];
  memcpy(dd, gopt_tensor_dims(g, d), (size_t)rd * sizeof *dd);
  int64_t K = gopt_tensor_dims(g, A)[ra - 1];
  int dt = g->tensors.a[d].dtype;
  if NEED(0) { /* dA = dY @ B^T, summed over broadcast batch dims */
    int32_t bt, full;
    TRY(bt = swap_last2(b, B, "b_t"));
    int64_t fd[GOPT_MAX_RANK];
    memcpy(fd, dd, (size_t)rd * sizeof *fd);
    fd[rd - 1] = K;
    int32_t in[2] = {d, bt};
    int red = tb_reduce_needed_dims(b, fd, rd, A);
    TRY(full = tb_op(b, "MatMul", red ? "d0_full" : "d0", 2, in, dt, rd, fd));
    if (red) TRY(full = tb_reduce_to(b, full, A, "d0"));
    TRY(tb_partial(b, A, full));
  }
  if NEED(1) {
    int32_t t;
    if (rb == 2 && K >= 0 && dd[rd - 1] >= 0) { /* dB = flatten(A)^T @ flatten(dY) */
      int64_t N = dd[rd - 1];
      int64_t m = flat_dim(b, gopt_tensor_dims(g, A), ra - 1);
      int64_t sa[2] = {-1, K}, sd[2] = {-1, N}, da[2] = {m, K}, ddd[2] = {m, N};
      int32_t csa, csd, a2, d2;
      TRY(csa = tb_const_i64(b, "a_2d_shape", sa, 2));
      TRY(csd = tb_const_i64(b, "dy_2d_shape", sd, 2));
      int32_t ia[2] = {A, csa}, id[2] = {d, csd};
      TRY(a2 = tb_op(b, "Reshape", "a_2d", 2, ia, g->tensors.a[A].dtype, 2, da));
      TRY(d2 = tb_op(b, "Reshape", "dy_2d", 2, id, dt, 2, ddd));
      TRY(t = gemm(b, "d1", a2, d2, 1, 0, 1.0, B));
    } else { /* dB = A^T @ dY, summed over broadcast (or, for a 2-D B, all) batch dims */
      int32_t at;
      TRY(at = swap_last2(b, A, "a_t"));
      int64_t fd[GOPT_MAX_RANK];
      memcpy(fd, dd, (size_t)rd * sizeof *fd);
      fd[rd - 2] = K;
      int32_t in[2] = {at, d};
      int red = tb_reduce_needed_dims(b, fd, rd, B);
      TRY(t = tb_op(b, "MatMul", red ? "d1_full" : "d1", 2, in, dt, rd, fd));
      if (red) TRY(t = tb_reduce_to(b, t, B, "d1"));
    }
    TRY(tb_partial(b, B, t));
  }
  return 0;
}

static int rule_gemm(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  int32_t A = tb_in(g, n, 0), B = tb_in(g, n, 1), C = tb_in(g, n, 2), t;
  double alpha = gopt_node_get_float(g, n, "alpha", 1.0), beta = gopt_node_get_float(g, n, "beta", 1.0);
  int ta = gopt_node_get_int(g, n, "transA", 0) != 0, tbb = gopt_node_get_int(g, n, "transB", 0) != 0;
  if NEED(0) {
    TRY(t = ta ? gemm(b, "d0", B, d, tbb, 1, alpha, A) : gemm(b, "d0", d, B, 0, !tbb, alpha, A));
    TRY(tb_partial(b, A, t));
  }
  if NEED(1) {
    TRY(t = tbb ? gemm(b, "d1", d, A, 1, ta, alpha, B) : gemm(b, "d1", A, d, !ta, 0, alpha, B));
    TRY(tb_partial(b, B, t));
  }
  if NEED(2) {
    TRY(t = tb_reduce_to(b, d, C, beta == 1.0 ? "d2" : "d2_unscaled"));
    if (beta != 1.0) {
      int32_t k, in[2];
      TRY(k = tb_const_scalar(b, "beta", g->tensors.a[d].dtype, beta));
      in[0] = t;
      in[1] = k;
      TRY(t = tb_op_like(b, "Mul", "d2", 2, in, C));
    }
    TRY(tb_partial(b, C, t));
  }
  return 0;
}

static int rule_conv(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  int32_t X = tb_in(g, n, 0), W = tb_in(g, n, 1), Bi = tb_in(g, n, 2), t, s;
  if NEED(0) {
    TRY(s = tb_shape_of(b, X));
    int32_t in[3] = {d, W, s};
    TRY(t = grad_op(b, n, "ConvGradInput", "d0", 3, in, X));
    TRY(tb_partial(b, X, t));
  }
  if NEED(1) {
    TRY(s = tb_shape_of(b, W));
    int32_t in[3] = {d, X, s};
    TRY(t = grad_op(b, n, "ConvGradWeight", "d1", 3, in, W));
    TRY(tb_partial(b, W, t));
  }
  if NEED(2) {
    int r = g->tensors.a[d].rank;
    int64_t axes[GOPT_MAX_RANK], bd[1];
    int na = 0;
    for (int i = 0; i < r; i++)
      if (i != 1) axes[na++] = i;
    bd[0] = gopt_tensor_dims(g, Bi)[0];
    TRY(t = tb_reduce_sum(b, d, axes, na, 0, "d2", 1, bd));
    TRY(tb_partial(b, Bi, t));
  }
  return 0;
}

/* Axes of a ReduceMean/ReduceSum (attribute, or constant input 1 in newer opsets), normalised;
 * *na = -1 when absent (all axes). Returns 0 or an error. */
int tb_reduce_axes(tb *b, int32_t n, int rank, int64_t *axes, int *na) {
  const gopt_graph *g = b->g;
  size_t cnt = 0;
  const int64_t *a = gopt_node_get_ints(g, n, "axes", &cnt);
  *na = -1;
  if (a) {
    if (cnt > GOPT_MAX_RANK) return tb_fail(b, GOPT_EUNSUP, "too many axes");
    for (size_t i = 0; i < cnt; i++) axes[i] = a[i];
    *na = (int)cnt;
  } else if (tb_in(g, n, 1) >= 0) {
    int k = tb_const_ints(g, tb_in(g, n, 1), axes, GOPT_MAX_RANK);
    if (k < 0) return tb_fail(b, GOPT_EUNSUP, "reduction axes are not a constant");
    *na = k;
  }
  for (int i = 0; i < *na; i++)
    if ((axes[i] = norm_axis(axes[i], rank)) < 0) return tb_fail(b, GOPT_ESHAPE, "axis out of range");
  return 0;
}

int tb_emit(tb *b, int32_t n, const int32_t *dy, const unsigned char *need) {
  gopt_graph *g = b->g;
  int op = g->nodes.a[n].op, nout = g->nodes.a[n].n_out;
  int32_t x = tb_in(g, n, 0), y = tb_out(g, n, 0), d = dy[0], t;
  char nm[32];
  if (op != GOPT_OP_SPLIT && op != GOPT_OP_LSTM && op != GOPT_OP_GRU && op != GOPT_OP_RNN) {
    for (int i = 1; i < nout; i++)
      if (dy[i] >= 0)
        return tb_fail(b, GOPT_EUNSUP, "no gradient rule through output %d ('%s')", i,
                       gopt_graph_str(g, g->tensors.a[gopt_node_output(g, n, i)].name));
    if (d < 0) return 0;
  }
  switch (op) {
    case GOPT_OP_IDENTITY: case GOPT_OP_DROPOUT:
      return tb_partial(b, x, d);  /* the gradient passes through unchanged: no op */
    case GOPT_OP_RELU: {
      int32_t in[2] = {d, y};
      TRY(t = tb_op_like(b, "ReluGrad", "d0", 2, in, x));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_SIGMOID: case GOPT_OP_TANH: {
      int32_t in[2] = {d, y};
      TRY(t = tb_op_like(b, op == GOPT_OP_SIGMOID ? "SigmoidGrad" : "TanhGrad", "d0", 2, in, x));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_GELU: case GOPT_OP_ERF: {
      int32_t in[2] = {d, x};
      TRY(t = grad_op(b, n, op == GOPT_OP_GELU ? "GeluGrad" : "ErfGrad", "d0", 2, in, x));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_EXP: {
      int32_t in[2] = {d, y};
      TRY(t = tb_op_like(b, "Mul", "d0", 2, in, x));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_LOG: {
      int32_t in[2] = {d, x};
      TRY(t = tb_op_like(b, "Div", "d0", 2, in, x));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_NEG:
      TRY(t = tb_op_like(b, "Neg", "d0", 1, &d, x));
      return tb_partial(b, x, t);
    case GOPT_OP_SQRT: case GOPT_OP_RECIPROCAL: { /* derivative from the output */
      int32_t in[2] = {d, y};
      TRY(t = tb_op_like(b, "ElementwiseGrad", "d0", 2, in, x));
      set_str(g, producer_of(b, t), "op", gopt_node_type(g, n));
      gopt_node_set_string(g, producer_of(b, t), "saved", "output");
      return tb_partial(b, x, t);
    }
    case GOPT_OP_LEAKY_RELU: case GOPT_OP_ELU: case GOPT_OP_SELU: case GOPT_OP_CELU:
    case GOPT_OP_HARD_SIGMOID: case GOPT_OP_HARD_SWISH: case GOPT_OP_ABS: case GOPT_OP_SIN:
    case GOPT_OP_COS: case GOPT_OP_SOFTPLUS: case GOPT_OP_SOFTSIGN: case GOPT_OP_MISH:
    case GOPT_OP_CLIP: {
      /* ElementwiseGrad(dY, X, forward inputs 1.. (Clip's min, max)) */
      int nin = g->nodes.a[n].n_in;
      int32_t in[4] = {d, x, -1, -1};
      for (int i = 1; i < nin && i < 3; i++) in[1 + i] = tb_in(g, n, i);
      int k = 2;
      for (int i = 2; i < 4; i++)
        if (in[i] >= 0) k = i + 1;
      TRY(t = grad_op(b, n, "ElementwiseGrad", "d0", k, in, x));
      set_str(g, producer_of(b, t), "op", gopt_node_type(g, n));
      gopt_node_set_string(g, producer_of(b, t), "saved", "input");
      return tb_partial(b, x, t);
    }
    case GOPT_OP_CAST: {
      TRY(t = tb_op_like(b, "Cast", "d0", 1, &d, x));
      gopt_node_set_int(g, producer_of(b, t), "to", g->tensors.a[x].dtype);
      return tb_partial(b, x, t);
    }
    case GOPT_OP_ADD: case GOPT_OP_SUM:
      for (int i = 0; i < g->nodes.a[n].n_in; i++)
        if (NEED(i)) TRY(reduce_partial(b, n, i, d));
      return 0;
    case GOPT_OP_SUB:
      if NEED(0) TRY(reduce_partial(b, n, 0, d));
      if NEED(1) {
        int32_t B = tb_in(g, n, 1), r;
        TRY(r = tb_reduce_to(b, d, B, "d1_pos"));
        TRY(t = tb_op_like(b, "Neg", "d1", 1, &r, B));
        TRY(tb_partial(b, B, t));
      }
      return 0;
    case GOPT_OP_MUL: {
      int32_t A = tb_in(g, n, 0), B = tb_in(g, n, 1);
      if NEED(0) { int32_t in[2] = {d, B}; TRY(bcast_partial(b, n, 0, "Mul", 2, in, d)); }
      if NEED(1) { int32_t in[2] = {d, A}; TRY(bcast_partial(b, n, 1, "Mul", 2, in, d)); }
      return 0;
    }
    case GOPT_OP_DIV: {
      int32_t A = tb_in(g, n, 0), B = tb_in(g, n, 1), q, m, r;
      int32_t in[2] = {d, B};
      int red_a = tb_reduce_needed(b, d, A);
      TRY(q = tb_op_like(b, "Div", NEED(1) ? "dy_over_b" : red_a ? "d0_full" : "d0", 2, in, d));
      if NEED(0) TRY(reduce_partial(b, n, 0, q));
      if NEED(1) { /* dB = -sum(dY / B * Y) */
        int32_t in2[2] = {q, y};
        TRY(m = tb_op_like(b, "Mul", "d1_prod", 2, in2, d));
        TRY(r = tb_reduce_to(b, m, B, "d1_pos"));
        TRY(t = tb_op_like(b, "Neg", "d1", 1, &r, B));
        TRY(tb_partial(b, B, t));
      }
      return 0;
    }
    case GOPT_OP_POW: {
      int32_t X = tb_in(g, n, 0), E = tb_in(g, n, 1);
      if NEED(0) {
        int32_t in[3] = {d, X, E};
        int red = tb_reduce_needed(b, d, X);
        TRY(t = tb_op_like(b, "ElementwiseGrad", red ? "d0_full" : "d0", 3, in, d));
        gopt_node_set_string(g, producer_of(b, t), "op", "Pow");
        gopt_node_set_string(g, producer_of(b, t), "saved", "input");
        if (red) TRY(t = tb_reduce_to(b, t, X, "d0"));
        TRY(tb_partial(b, X, t));
      }
      if NEED(1) { /* dE = sum(dY * Y * log X) */
        int32_t lx, m, in1[2] = {d, y};
        TRY(lx = tb_op_like(b, "Log", "log_x", 1, &X, X));
        TRY(m = tb_op_like(b, "Mul", "dy_y", 2, in1, d));
        int32_t in2[2] = {m, lx};
        TRY(bcast_partial(b, n, 1, "Mul", 2, in2, d));
      }
      return 0;
    }
    case GOPT_OP_WHERE: {
      int32_t C = tb_in(g, n, 0), z;
      TRY(z = tb_const_scalar(b, "zero", g->tensors.a[d].dtype, 0.0));
      if NEED(1) { int32_t in[3] = {C, d, z}; TRY(bcast_partial(b, n, 1, "Where", 3, in, d)); }
      if NEED(2) { int32_t in[3] = {C, z, d}; TRY(bcast_partial(b, n, 2, "Where", 3, in, d)); }
      return 0;
    }
    case GOPT_OP_EXPAND:
      return reduce_partial(b, n, 0, d);
    case GOPT_OP_RESHAPE: case GOPT_OP_FLATTEN: case GOPT_OP_SQUEEZE: case GOPT_OP_UNSQUEEZE: {
      int32_t s;
      TRY(s = tb_shape_of(b, x));
      int32_t in[2] = {d, s};
      TRY(t = tb_op_like(b, "Reshape", "d0", 2, in, x));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_TRANSPOSE: {
      int r = g->tensors.a[x].rank;
      int64_t perm[GOPT_MAX_RANK], inv[GOPT_MAX_RANK];
      size_t cnt = 0;
      const int64_t *p = gopt_node_get_ints(g, n, "perm", &cnt);
      if (p && (int)cnt != r) return tb_fail(b, GOPT_ESHAPE, "perm has %zu entries for rank %d", cnt, r);
      for (int i = 0; i < r; i++) perm[i] = p ? p[i] : r - 1 - i;
      for (int i = 0; i < r; i++) {
        if (perm[i] < 0 || perm[i] >= r) return tb_fail(b, GOPT_ESHAPE, "bad perm");
        inv[perm[i]] = i;
      }
      TRY(t = tb_op_like(b, "Transpose", "d0", 1, &d, x));
      gopt_node_set_ints(g, producer_of(b, t), "perm", inv, (size_t)r);
      return tb_partial(b, x, t);
    }
    case GOPT_OP_CONCAT: {
      int nin = g->nodes.a[n].n_in, r = g->tensors.a[x].rank;
      int64_t axis = norm_axis(gopt_node_get_int(g, n, "axis", 0), r);
      if (axis < 0) return tb_fail(b, GOPT_ESHAPE, "axis out of range");
      int64_t *sizes = malloc((size_t)nin * sizeof *sizes);
      int32_t *outs = malloc((size_t)nin * sizeof *outs);
      int rc = 0;
      if (!sizes || !outs) { rc = tb_fail(b, GOPT_ENOMEM, "out of memory"); goto concat_done; }
      for (int i = 0; i < nin; i++) {
        int32_t xi = tb_in(g, n, i);
        sizes[i] = gopt_tensor_dims(g, xi)[axis];
        if (sizes[i] < 0) {
          rc = tb_fail(b, GOPT_EUNSUP, "gradient of a Concat along a symbolic dimension (input '%s')",
                       gopt_graph_str(g, g->tensors.a[xi].name));
          goto concat_done;
        }
        if ((outs[i] = tb_tensor_like(b, tb_dname(i, nm, sizeof nm), xi)) < 0) { rc = b->err->code; goto concat_done; }
      }
      int32_t in[2] = {d, -1};
      if (b->opset >= 13 && (in[1] = tb_const_i64(b, "split", sizes, nin)) < 0) { rc = b->err->code; goto concat_done; }
      int32_t sn = tb_node(b, "Split", b->opset >= 13 ? 2 : 1, in, nin, outs);
      if (sn < 0) { rc = b->err->code; goto concat_done; }
      gopt_node_set_int(g, sn, "axis", axis);
      if (b->opset < 13) gopt_node_set_ints(g, sn, "split", sizes, (size_t)nin);
      for (int i = 0; i < nin && !rc; i++)
        if (NEED(i)) rc = tb_partial(b, tb_in(g, n, i), outs[i]);
    concat_done:
      free(sizes);
      free(outs);
      return rc;
    }
    case GOPT_OP_SPLIT: {
      int r = g->tensors.a[x].rank;
      int64_t axis = norm_axis(gopt_node_get_int(g, n, "axis", 0), r);
      if (axis < 0) return tb_fail(b, GOPT_ESHAPE, "axis out of range");
      int32_t *in = malloc((size_t)nout * sizeof *in);
      int rc = 0;
      if (!in) return tb_fail(b, GOPT_ENOMEM, "out of memory");
      for (int i = 0; i < nout && !rc; i++) {
        in[i] = dy[i];
        if (in[i] >= 0) continue;
        int32_t yi = gopt_node_output(g, n, i);
        if (g->tensors.a[yi].dtype != GOPT_DT_FLOAT) {
          rc = tb_fail(b, GOPT_EUNSUP, "zero gradient of a non-FLOAT Split output");
          break;
        }
        char zn[32];
        snprintf(zn, sizeof zn, "zeros%d", i);
        if ((in[i] = tb_zeros_like(b, zn, yi)) < 0) rc = b->err->code;
      }
      if (!rc && (t = tb_op_like(b, "Concat", "d0", nout, in, x)) < 0) rc = b->err->code;
      if (!rc) gopt_node_set_int(g, producer_of(b, t), "axis", axis);
      free(in);
      return rc ? rc : tb_partial(b, x, t);
    }
    case GOPT_OP_SLICE: {
      int32_t s, in[6] = {d, -1, -1, -1, -1, -1};
      int k;
      TRY(s = tb_shape_of(b, x));
      in[1] = s;
      if (b->opset >= 10) {
        for (int i = 1; i < 5; i++) in[1 + i] = tb_in(g, n, i);
      } else {
        static const char *const an[3] = {"starts", "ends", "axes"};
        for (int i = 0; i < 3; i++) {
          size_t cnt = 0;
          const int64_t *v = gopt_node_get_ints(g, n, an[i], &cnt);
          if (!v) continue;
          int64_t tmp[GOPT_MAX_RANK];
          if (cnt > GOPT_MAX_RANK) return tb_fail(b, GOPT_EUNSUP, "too many slice axes");
          memcpy(tmp, v, cnt * sizeof *tmp);
          TRY(in[2 + i] = tb_const_i64(b, an[i], tmp, (int)cnt));
        }
      }
      for (k = 6; k > 2 && in[k - 1] < 0; k--) {}
      TRY(t = tb_op_like(b, "SliceGrad", "d0", k, in, x));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_PAD: {
      int32_t s, in[4] = {d, -1, -1, -1};
      TRY(s = tb_shape_of(b, x));
      in[1] = s;
      if (b->opset >= 11) {
        in[2] = tb_in(g, n, 1);
        in[3] = tb_in(g, n, 3);
      } else {
        size_t cnt = 0;
        const int64_t *v = gopt_node_get_ints(g, n, "pads", &cnt);
        int64_t tmp[2 * GOPT_MAX_RANK];
        if (!v || cnt > 2 * GOPT_MAX_RANK) return tb_fail(b, GOPT_ESHAPE, "Pad without a valid pads attribute");
        memcpy(tmp, v, cnt * sizeof *tmp);
        TRY(in[2] = tb_const_i64(b, "pads", tmp, (int)cnt));
      }
      TRY(t = tb_op_like(b, "PadGrad", "d0", in[3] >= 0 ? 4 : 3, in, x));
      set_str(g, producer_of(b, t), "mode", gopt_node_get_string(g, n, "mode", "constant"));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_GATHER: {
      int32_t s;
      TRY(s = tb_shape_of(b, x));
      int32_t in[3] = {d, tb_in(g, n, 1), s};
      TRY(t = tb_op_like(b, "GatherGrad", "d0", 3, in, x));
      int64_t axis = norm_axis(gopt_node_get_int(g, n, "axis", 0), g->tensors.a[x].rank);
      if (axis < 0) return tb_fail(b, GOPT_ESHAPE, "axis out of range");
      gopt_node_set_int(g, producer_of(b, t), "axis", axis);
      return tb_partial(b, x, t);
    }
    case GOPT_OP_RESIZE: case GOPT_OP_UPSAMPLE: case GOPT_OP_GLOBAL_AVG_POOL:
    case GOPT_OP_AVERAGE_POOL: {
      int32_t s;
      TRY(s = tb_shape_of(b, x));
      int32_t in[2] = {d, s};
      const char *type = op == GOPT_OP_GLOBAL_AVG_POOL ? "GlobalAveragePoolGrad"
                         : op == GOPT_OP_AVERAGE_POOL  ? "AveragePoolGrad"
                                                       : "ResizeGrad";
      TRY(t = grad_op(b, n, type, "d0", 2, in, x));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_MAX_POOL: {
      int32_t in[2] = {d, x};
      TRY(t = grad_op(b, n, "MaxPoolGrad", "d0", 2, in, x));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_REDUCE_MEAN: case GOPT_OP_REDUCE_SUM: {
      int64_t axes[GOPT_MAX_RANK];
      int na, rc;
      if ((rc = tb_reduce_axes(b, n, g->tensors.a[x].rank, axes, &na))) return rc;
      int32_t s;
      TRY(s = tb_shape_of(b, x));
      int32_t in[2] = {d, s};
      TRY(t = tb_op_like(b, op == GOPT_OP_REDUCE_MEAN ? "ReduceMeanGrad" : "ReduceSumGrad", "d0", 2,
                         in, x));
      int32_t gn = producer_of(b, t);
      if (na >= 0) gopt_node_set_ints(g, gn, "axes", axes, (size_t)na);
      gopt_node_set_int(g, gn, "keepdims", gopt_node_get_int(g, n, "keepdims", 1));
      if (gopt_node_get_int(g, n, "noop_with_empty_axes", 0))
        gopt_node_set_int(g, gn, "noop_with_empty_axes", 1);
      return tb_partial(b, x, t);
    }
    case GOPT_OP_SCATTER_ND: { /* dData: dY with zeros at the indices; dUpdates: dY gathered there */
      if (strcmp(gopt_node_get_string(g, n, "reduction", "none"), "none"))
        return tb_fail(b, GOPT_EUNSUP, "no gradient rule for ScatterND with a reduction");
      int32_t idx = tb_in(g, n, 1), upd = tb_in(g, n, 2), z;
      if NEED(0) {
        TRY(z = tb_zeros_like(b, "zeros", upd));
        int32_t in[3] = {d, idx, z};
        TRY(t = tb_op_like(b, "ScatterND", "d0", 3, in, x));
        TRY(tb_partial(b, x, t));
      }
      if NEED(2) {
        int32_t in[2] = {d, idx};
        TRY(t = tb_op_like(b, "GatherND", "d2", 2, in, upd));
        TRY(tb_partial(b, upd, t));
      }
      return 0;
    }
    case GOPT_OP_REDUCE_L2: { /* y = sqrt(sum x^2): dX = X * (dY / Y), Y broadcast over the axes */
      if (!gopt_node_get_int(g, n, "keepdims", 1))
        return tb_fail(b, GOPT_EUNSUP, "no gradient rule for ReduceL2 with keepdims=0");
      int32_t in[2] = {d, y}, q;
      TRY(q = tb_op_like(b, "Div", "dy_over_y", 2, in, y));
      int32_t in2[2] = {x, q};
      TRY(t = tb_op_like(b, "Mul", "d0", 2, in2, x));
      return tb_partial(b, x, t);
    }
    case GOPT_OP_SOFTMAX: case GOPT_OP_LOG_SOFTMAX: {
      int r = g->tensors.a[x].rank;
      int64_t axis = norm_axis(gopt_node_get_int(g, n, "axis", b->opset >= 13 ? -1 : 1), r);
      if (axis < 0) return tb_fail(b, GOPT_ESHAPE, "axis out of range");
      int32_t in[2] = {d, y};
      TRY(t = tb_op_like(b, op == GOPT_OP_SOFTMAX ? "SoftmaxGrad" : "LogSoftmaxGrad", "d0", 2, in, x));
      gopt_node_set_int(g, producer_of(b, t), "axis", axis);
      if (b->opset < 13) gopt_node_set_int(g, producer_of(b, t), "coerce_2d", 1);
      return tb_partial(b, x, t);
    }
    case GOPT_OP_LAYER_NORM: case GOPT_OP_BATCH_NORM: {
      int32_t scale = tb_in(g, n, 1), out[3], node;
      int ln = op == GOPT_OP_LAYER_NORM;
      int32_t in[5] = {d, x, scale, ln ? tb_out(g, n, 1) : -1, ln ? tb_out(g, n, 2) : -1};
      int k = in[4] >= 0 ? 5 : in[3] >= 0 ? 4 : 3;
      TRY(out[0] = tb_tensor_like(b, "d0", x));
      TRY(out[1] = tb_tensor_like(b, "d1", scale));
      TRY(out[2] = tb_tensor_like(b, "d2", scale));
      TRY(node = tb_node(b, ln ? "LayerNormGrad" : "BatchNormGrad", k, in, 3, out));
      if (tb_copy_attrs(b, n, node)) return b->err->code;
      for (int i = 0; i < 3; i++)
        if (NEED(i)) TRY(tb_partial(b, tb_in(g, n, i), out[i]));
      return 0;
    }
    case GOPT_OP_CONV: return rule_conv(b, n, d, need);
    case GOPT_OP_CONV_TRANSPOSE: return tb_rule_conv_transpose(b, n, d, need);
    case GOPT_OP_INSTANCE_NORM: return tb_rule_instance_norm(b, n, d, need);
    case GOPT_OP_MATMUL: return rule_matmul(b, n, d, need);
    case GOPT_OP_GEMM: return rule_gemm(b, n, d, need);
    case GOPT_OP_LSTM: case GOPT_OP_GRU: case GOPT_OP_RNN: return tb_rule_rnn(b, n, dy, need);
    case GOPT_OP_EINSUM: return tb_rule_einsum(b, n, d, need);
    case GOPT_OP_MAX: case GOPT_OP_MIN: case GOPT_OP_MEAN: case GOPT_OP_PRELU: case GOPT_OP_REDUCE_MAX:
    case GOPT_OP_REDUCE_MIN: case GOPT_OP_GLOBAL_MAX_POOL:
      return tb_rule_select(b, n, d, need);
    case GOPT_OP_DEPTH_TO_SPACE: case GOPT_OP_SPACE_TO_DEPTH: case GOPT_OP_TRILU: case GOPT_OP_CUMSUM:
    case GOPT_OP_REDUCE_SUM_SQUARE: case GOPT_OP_TILE: case GOPT_OP_GATHER_ELEMENTS: case GOPT_OP_GATHER_ND:
    case GOPT_OP_TOPK: case GOPT_OP_SCATTER_ELEMENTS:
      return tb_rule_move(b, n, d, need);
    default:
      return tb_fail(b, GOPT_EUNSUP, "no gradient rule");
  }
}
