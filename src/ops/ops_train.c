/* ops_train.c: shape and cost rules of gopt's training op kinds (gopt/op_list_train.h): the
 * gradient ops and optimizer updates gopt_train_build emits. Ops are recognised by type name, so
 * these rules work whether or not op_list.h lists the training kinds. Semantics and cost
 * conventions: docs/TRAINING.md. */
#include <string.h>

#include "gopt/ops.h"
#include "ops/ops_train.h"

enum {
  TK_NONE = 0,
#define GOPT_OP(e, name, cls) TK_##e,
#include "gopt/op_list_train.h"
#undef GOPT_OP
  TK_COUNT
};

static const char *const tk_names[TK_COUNT] = {
  "",
#define GOPT_OP(e, name, cls) name,
#include "gopt/op_list_train.h"
#undef GOPT_OP
};

/* The op kind of each training kind (op_list.h includes op_list_train.h). */
static const int tk_ops[TK_COUNT] = {
  GOPT_OP_OPAQUE,
#define GOPT_OP(e, name, cls) GOPT_OP_##e,
#include "gopt/op_list_train.h"
#undef GOPT_OP
};

/* A node's kind is set from its type name (gopt_op_from_name), so a known kind is compared as a
 * number: this runs for every node costed or shape-inferred (it was 12% of an rl search in
 * strcmp). An opaque node's name is compared: also one flagged GOPT_N_OPAQUE whose kind only
 * gives its kernel's class (an HLO instruction: ops_hlo_set_kind), which is never a training op. */
int ops_train_kind(const gopt_graph *g, int32_t n) {
  int op = g->nodes.a[n].op;
  if (op != GOPT_OP_OPAQUE && !(g->nodes.a[n].flags & GOPT_N_OPAQUE)) {
    for (int k = 1; k < TK_COUNT; k++)
      if (tk_ops[k] == op) return k;
    return TK_NONE;
  }
  const char *type = gopt_node_type(g, n);
  if (!type || !*type) return TK_NONE;
  for (int k = 1; k < TK_COUNT; k++)
    if (strcmp(tk_names[k], type) == 0) return k;
  return TK_NONE;
}

static int32_t in_t(const gopt_graph *g, int32_t n, int i) {
  return i < g->nodes.a[n].n_in ? gopt_node_input(g, n, i) : -1;
}

/* A shape: rank < 0 = unknown. */
typedef struct tshape {
  int rank;
  int64_t d[GOPT_MAX_RANK];
} tshape;

static int shape_of_tensor(const gopt_graph *g, int32_t t, tshape *s) {
  s->rank = -1;
  if (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE)) return -1;
  s->rank = g->tensors.a[t].rank;
  memcpy(s->d, gopt_tensor_dims(g, t), (size_t)s->rank * sizeof *s->d);
  return 0;
}

/* The shape a shape tensor st holds: the values of an int64 constant, or, when st is made by a
 * Shape op (without start/end), the shape of that op's input (symbolic dims kept). */
static int shape_from_shape_tensor(const gopt_graph *g, int32_t st, tshape *s) {
  s->rank = -1;
  if (st < 0) return -1;
  const gopt_tensor *x = &g->tensors.a[st];
  const void *p = gopt_tensor_data(g, st);
  if (p && x->dtype == GOPT_DT_INT64 && x->rank == 1 && gopt_tensor_is_static(g, st)) {
    int64_t cnt = gopt_tensor_dims(g, st)[0];
    if (cnt > GOPT_MAX_RANK) return -1;
    s->rank = (int)cnt;
    memcpy(s->d, p, (size_t)cnt * sizeof *s->d);
    return 0;
  }
  int32_t pn = x->producer;
  if (pn >= 0 && gopt_node_alive(g, pn) && strcmp(gopt_node_type(g, pn), "Shape") == 0 &&
      !gopt_node_attr(g, pn, "start") && !gopt_node_attr(g, pn, "end"))
    return shape_of_tensor(g, in_t(g, pn, 0), s);
  return -1;
}

static int set_out(gopt_graph *g, int32_t n, int i, int dtype, const tshape *s, gopt_error *err) {
  if (i >= g->nodes.a[n].n_out) return 0;
  int32_t t = gopt_node_output(g, n, i);
  tshape c = *s; /* s may alias g->dims, which set_shape can move */
  g->tensors.a[t].dtype = (uint8_t)dtype;
  int rc = gopt_tensor_set_shape(g, t, c.rank, c.d);
  if (rc)
    return gopt_error_set(err, rc, "node '%s' (op %s): cannot set output shape",
                          gopt_node_name(g, n), gopt_node_type(g, n));
  return 0;
}

static int fail(gopt_graph *g, int32_t n, gopt_error *err, const char *what) {
  return gopt_error_set(err, GOPT_ESHAPE, "node '%s' (op %s): %s", gopt_node_name(g, n),
                        gopt_node_type(g, n), what);
}

/* Output i shaped like input j (dtype of input dt_in). */
static int out_like(gopt_graph *g, int32_t n, int i, int j, int dt_in, gopt_error *err) {
  tshape s;
  int32_t t = in_t(g, n, j), td = in_t(g, n, dt_in);
  if (shape_of_tensor(g, t, &s) || td < 0) return fail(g, n, err, "an input has no shape");
  return set_out(g, n, i, g->tensors.a[td].dtype, &s, err);
}

/* Output 0 shaped by the shape tensor at input j, dtype of input 0. */
static int out_from_shape(gopt_graph *g, int32_t n, int j, gopt_error *err) {
  tshape s;
  if (shape_from_shape_tensor(g, in_t(g, n, j), &s))
    return fail(g, n, err, "the shape input is neither an int64 constant nor a Shape op");
  if (in_t(g, n, 0) < 0) return fail(g, n, err, "missing gradient input");
  return set_out(g, n, 0, g->tensors.a[in_t(g, n, 0)].dtype, &s, err);
}

/* LSTMGrad / GRUGrad and RNNGrad (gru: one state): dX, dW, dR like X, W, R; dB [D, 2 x W's rows] unless B is given;
 * the initial-state gradients (h, and c for LSTM) like those inputs, else [D, batch, H]. */
static int infer_rnn_grad(gopt_graph *g, int32_t n, int gru, gopt_error *err) {
  int32_t X = in_t(g, n, 0), W = in_t(g, n, 1), R = in_t(g, n, 2);
  tshape xs, ws, rs, s;
  if (shape_of_tensor(g, X, &xs) || shape_of_tensor(g, W, &ws) || shape_of_tensor(g, R, &rs) ||
      xs.rank != 3 || ws.rank != 3 || rs.rank != 3)
    return fail(g, n, err, "X, W and R must have rank 3");
  int dt = g->tensors.a[X].dtype, rc;
  if ((rc = set_out(g, n, 0, dt, &xs, err)) || (rc = set_out(g, n, 1, dt, &ws, err)) ||
      (rc = set_out(g, n, 2, dt, &rs, err)))
    return rc;
  if (shape_of_tensor(g, in_t(g, n, 3), &s)) {
    s.rank = 2;
    s.d[0] = ws.d[0];
    s.d[1] = ws.d[1] < 0 ? ws.d[1] : 2 * ws.d[1];
  }
  if ((rc = set_out(g, n, 3, dt, &s, err))) return rc;
  int layout = (int)gopt_node_get_int(g, n, "layout", 0);
  tshape h = {3, {ws.d[0], layout ? xs.d[0] : xs.d[1], rs.d[2]}};
  if (layout) { h.d[0] = xs.d[0]; h.d[1] = ws.d[0]; }
  for (int k = 0; k < (gru ? 1 : 2); k++) {
    if (shape_of_tensor(g, in_t(g, n, 5 + k), &s)) s = h;
    if ((rc = set_out(g, n, 4 + k, dt, &s, err))) return rc;
  }
  return 0;
}

int ops_train_infer(gopt_graph *g, int32_t n, gopt_error *err) {
  int k = ops_train_kind(g, n), rc = 0;
  switch (k) {
    case TK_NONE: return 0;
    case TK_CONV_GRAD_INPUT: case TK_CONV_GRAD_WEIGHT: rc = out_from_shape(g, n, 2, err); break;
    case TK_RELU_GRAD: case TK_SIGMOID_GRAD: case TK_TANH_GRAD: case TK_GELU_GRAD:
    case TK_ERF_GRAD: case TK_ELEMENTWISE_GRAD: case TK_SOFTMAX_GRAD: case TK_LOG_SOFTMAX_GRAD:
      rc = out_like(g, n, 0, 0, 0, err);
      break;
    case TK_LAYER_NORM_GRAD: case TK_BATCH_NORM_GRAD:
      if (!(rc = out_like(g, n, 0, 1, 0, err)) && !(rc = out_like(g, n, 1, 2, 0, err)))
        rc = out_like(g, n, 2, 2, 0, err);
      break;
    case TK_MAX_POOL_GRAD: rc = out_like(g, n, 0, 1, 0, err); break;
    case TK_AVERAGE_POOL_GRAD: case TK_GLOBAL_AVG_POOL_GRAD: case TK_REDUCE_SUM_GRAD:
    case TK_REDUCE_MEAN_GRAD: case TK_SLICE_GRAD: case TK_PAD_GRAD: case TK_RESIZE_GRAD:
      rc = out_from_shape(g, n, 1, err);
      break;
    case TK_GATHER_GRAD: rc = out_from_shape(g, n, 2, err); break;
    case TK_LSTM_GRAD: rc = infer_rnn_grad(g, n, 0, err); break;
    case TK_GRU_GRAD: case TK_RNN_GRAD: rc = infer_rnn_grad(g, n, 1, err); break;
    case TK_SGD_UPDATE: rc = out_like(g, n, 0, 0, 0, err); break;
    case TK_MOMENTUM_UPDATE:
      if (!(rc = out_like(g, n, 0, 0, 0, err))) rc = out_like(g, n, 1, 2, 2, err);
      break;
    case TK_ADAM_UPDATE:
      if (!(rc = out_like(g, n, 0, 0, 0, err)) && !(rc = out_like(g, n, 1, 2, 2, err)))
        rc = out_like(g, n, 2, 3, 3, err);
      break;
    default: return 0;
  }
  return rc ? rc : 1;
}

/* ---- costs --------------------------------------------------------------------------------------- */

static double numel(const gopt_graph *g, int32_t t) {
  return t < 0 ? 0.0 : (double)gopt_tensor_numel(g, t);
}

static double dim(const gopt_graph *g, int32_t t, int i) {
  if (t < 0 || i >= g->tensors.a[t].rank) return 1.0;
  int64_t d = gopt_tensor_dims(g, t)[i];
  return d >= 0 ? (double)d : 1.0; /* symbolic dims count as 1 */
}

static double kernel_elems(const gopt_graph *g, int32_t n) {
  size_t cnt = 0;
  const int64_t *k = gopt_node_get_ints(g, n, "kernel_shape", &cnt);
  double e = 1.0;
  for (size_t i = 0; i < cnt; i++) e *= (double)k[i];
  return e;
}

int ops_train_cost(const gopt_graph *g, int32_t n, gopt_cost *c) {
  int k = ops_train_kind(g, n);
  if (k == TK_NONE) return 0;
  memset(c, 0, sizeof *c);
  const gopt_node *nd = &g->nodes.a[n];
  for (int i = 0; i < nd->n_in; i++) {
    int32_t t = gopt_node_input(g, n, i);
    if (t < 0) continue;
    c->bytes_read += gopt_tensor_bytes(g, t);
    if (g->tensors.a[t].flags & GOPT_T_PARAM) c->params += gopt_tensor_numel(g, t);
  }
  for (int i = 0; i < nd->n_out; i++) {
    int32_t t = gopt_node_output(g, n, i);
    c->bytes_written += gopt_tensor_bytes(g, t);
  }
  int32_t dy = in_t(g, n, 0), out0 = nd->n_out ? gopt_node_output(g, n, 0) : -1;
  double ey = numel(g, dy), eo = numel(g, out0);
  switch (k) {
    case TK_CONV_GRAD_INPUT: { /* = forward conv: 2 * |Y| * (C/group) * prod(kernel) */
      int32_t w = in_t(g, n, 1);
      double kk = 1.0;
      for (int i = 2; w >= 0 && i < g->tensors.a[w].rank; i++) kk *= dim(g, w, i);
      c->flops = 2.0 * ey * dim(g, w, 1) * kk;
      break;
    }
    case TK_CONV_GRAD_WEIGHT: { /* output has W's shape */
      double kk = 1.0;
      for (int i = 2; i < g->tensors.a[out0].rank; i++) kk *= dim(g, out0, i);
      c->flops = 2.0 * ey * dim(g, out0, 1) * kk;
      break;
    }
    case TK_RELU_GRAD: c->flops = eo; break;
    case TK_SIGMOID_GRAD: case TK_TANH_GRAD: case TK_ELEMENTWISE_GRAD: c->flops = 3.0 * eo; break;
    case TK_GELU_GRAD: case TK_ERF_GRAD: c->flops = 5.0 * eo; break;
    case TK_SOFTMAX_GRAD: case TK_LOG_SOFTMAX_GRAD: c->flops = 4.0 * eo; break;
    case TK_LAYER_NORM_GRAD: case TK_BATCH_NORM_GRAD: c->flops = 8.0 * eo; break;
    case TK_MAX_POOL_GRAD: case TK_AVERAGE_POOL_GRAD: c->flops = ey * kernel_elems(g, n); break;
    case TK_GLOBAL_AVG_POOL_GRAD: case TK_REDUCE_SUM_GRAD: case TK_REDUCE_MEAN_GRAD:
      c->flops = eo;
      break;
    case TK_GATHER_GRAD: c->flops = ey; break;
    case TK_SLICE_GRAD: case TK_PAD_GRAD: c->flops = 0.0; break;
    case TK_RESIZE_GRAD: {
      const char *mode = gopt_node_get_string(g, n, "mode", "nearest");
      c->flops = ey * (!strcmp(mode, "cubic") ? 16.0 : !strcmp(mode, "linear") ? 4.0 : 1.0);
      break;
    }
    case TK_LSTM_GRAD: case TK_GRU_GRAD: case TK_RNN_GRAD: {
      int32_t x = in_t(g, n, 0), w = in_t(g, n, 1), r = in_t(g, n, 2);
      int layout = (int)gopt_node_get_int(g, n, "layout", 0);
      double T = dim(g, x, layout ? 1 : 0), B = dim(g, x, layout ? 0 : 1), I = dim(g, x, 2);
      double D = dim(g, w, 0), GH = dim(g, w, 1), H = dim(g, r, 2); /* GH: 4H (LSTM), 3H (GRU), H (RNN) */
      double mm = 2.0 * T * B * D * GH * (I + H); /* forward matmul FLOPs */
      /* gate recompute (1x) + input and weight gradients (2x) + elementwise gate math */
      c->flops = 3.0 * mm + (k == TK_LSTM_GRAD ? 30.0 : k == TK_GRU_GRAD ? 24.0 : 6.0) * T * B * D * H;
      break;
    }
    case TK_SGD_UPDATE:
      c->flops = (gopt_node_get_float(g, n, "weight_decay", 0.0) != 0.0 ? 4.0 : 2.0) * eo;
      break;
    case TK_MOMENTUM_UPDATE: c->flops = 4.0 * eo; break;
    case TK_ADAM_UPDATE: c->flops = 10.0 * eo; break;
    default: break;
  }
  return 1;
}
