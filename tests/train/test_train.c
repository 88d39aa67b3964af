/* test_train.c: gopt_train_build on small forward graphs built with the IR API (an MLP, a conv
 * net, a shared weight, a tensor with two consumers, an embedding + LayerNorm attention block, an
 * LSTM, a conv-1d/classifier op mix, ReduceL2's normalisation, a ScatterND assignment), checked against facts derived by hand for each graph: which
 * tensors must (not) get gradients, backward op counts and kinds, liveness of activations, update
 * ordering, optimizer state, errors for unsupported ops, agreement of ops_train_infer with
 * the builder's shapes, and hand-computed costs. Structure only: the gradient values are checked
 * against finite differences, run by the executor, in test_train_numeric.c. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/graph.h"
#include "gopt/ops.h"
#include "gopt/train.h"
#include "ops/ops_train.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define I(...) ((const int32_t[]){__VA_ARGS__})
#define NARGS(...) ((int)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)))
/* op(g, type, name, out, inputs...) */
#define OP(g, type, name, out, ...) add_op(g, type, name, NARGS(__VA_ARGS__), I(__VA_ARGS__), out)

static int32_t tf(gopt_graph *g, const char *name, int dt, int rank, const int64_t *d) {
  int32_t t = gopt_graph_add_tensor(g, name, dt, rank, d, NULL);
  CHECK_MSG(t >= 0, "tensor %s", name);
  return t;
}
static int32_t act(gopt_graph *g, const char *name, int rank, const int64_t *d) {
  return tf(g, name, GOPT_DT_FLOAT, rank, d);
}
static int32_t param(gopt_graph *g, const char *name, int rank, const int64_t *d) {
  int32_t t = act(g, name, rank, d);
  size_t nb = (size_t)gopt_tensor_numel(g, t) * 4;
  gopt_tensor_set_const(g, t, NULL, nb, NULL);
  g->tensors.a[t].flags |= GOPT_T_PARAM;
  return t;
}
static int32_t input(gopt_graph *g, const char *name, int dt, int rank, const int64_t *d) {
  int32_t t = tf(g, name, dt, rank, d);
  gopt_graph_add_input(g, t);
  return t;
}
static int32_t cfloat(gopt_graph *g, const char *name, float v) {
  int32_t t = act(g, name, 0, NULL);
  gopt_tensor_set_const(g, t, &v, sizeof v, NULL);
  return t;
}
static int32_t cints(gopt_graph *g, const char *name, int n, const int64_t *v) {
  int64_t d = n;
  int32_t t = tf(g, name, GOPT_DT_INT64, 1, &d);
  gopt_tensor_set_const(g, t, v, (size_t)n * 8, NULL);
  return t;
}
static int32_t add_op(gopt_graph *g, const char *type, const char *name, int nin, const int32_t *in,
                      int32_t out) {
  gopt_error err = {0};
  int32_t n = gopt_graph_add_node(g, type, name, nin, in, 1, &out, &err);
  CHECK_MSG(n >= 0, "%s: %s", name, err.msg);
  return n;
}

static int32_t T(const gopt_graph *g, const char *name) {
  int32_t t = gopt_graph_find_tensor(g, name);
  CHECK_MSG(t >= 0, "no tensor %s", name);
  return t;
}

static int same_shape(const gopt_graph *g, int32_t a, int32_t b) {
  const gopt_tensor *x = &g->tensors.a[a], *y = &g->tensors.a[b];
  if (x->dtype != y->dtype || x->rank != y->rank || ((x->flags ^ y->flags) & GOPT_T_NOSHAPE)) return 0;
  return memcmp(gopt_tensor_dims(g, a), gopt_tensor_dims(g, b), x->rank * sizeof(int64_t)) == 0;
}

static int used_by_grad(const gopt_graph *g, int32_t t) {
  for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use)
    if (g->nodes.a[g->slots.a[s].node].flags & GOPT_N_GRAD) return 1;
  return 0;
}

static int count_type(const gopt_graph *g, size_t from, const char *type, uint16_t flag) {
  int c = 0;
  for (size_t n = from; n < g->nodes.n; n++)
    if (gopt_node_alive(g, (int32_t)n) && (g->nodes.a[n].flags & flag) &&
        !strcmp(gopt_node_type(g, (int32_t)n), type))
      c++;
  return c;
}

static int count_state(const gopt_graph *g) {
  int c = 0;
  for (size_t t = 0; t < g->tensors.n; t++)
    if (g->tensors.a[t].flags & GOPT_T_STATE) c++;
  return c;
}

/* The update node reading parameter p (as input 0), -1 when none; *count = how many. */
static int32_t update_of(const gopt_graph *g, int32_t p, int *count) {
  int32_t u = -1;
  *count = 0;
  for (int32_t s = p >= 0 ? g->tensors.a[p].first_use : -1; s >= 0; s = g->slots.a[s].next_use) {
    int32_t n = g->slots.a[s].node;
    if ((g->nodes.a[n].flags & GOPT_N_UPDATE) && gopt_node_input(g, n, 0) == p) { u = n; (*count)++; }
  }
  return u;
}

/* Invariants every training graph must satisfy, checked from the graph itself. */
static void check_invariants(gopt_graph *g, const gopt_train_info *info, const char *label) {
  gopt_error err = {0};
  int rc = gopt_graph_validate(g, &err);
  CHECK_MSG(rc == 0, "%s: validate: %s", label, err.msg);
  int32_t *order = malloc(g->nodes.n * sizeof *order);
  int32_t *pos = malloc(g->nodes.n * sizeof *pos);
  int64_t cnt = gopt_graph_topo(g, order, &err);
  CHECK_MSG(cnt == (int64_t)gopt_graph_node_count(g), "%s: topo", label);
  for (int64_t k = 0; k < cnt; k++) pos[order[k]] = (int32_t)k;
  /* the loss is a scalar float graph output */
  CHECK(info->loss >= 0 && g->tensors.a[info->loss].rank == 0 &&
        (g->tensors.a[info->loss].flags & GOPT_T_OUTPUT));
  /* parameters: one gradient of the parameter's shape, one update after it, .updated an output */
  size_t trained = 0;
  for (size_t t = 0; t < info->n_fwd_tensors; t++) {
    if (!(g->tensors.a[t].flags & GOPT_T_PARAM)) continue;
    int32_t gr = info->grad_of[t];
    int nu = 0;
    int32_t u = update_of(g, (int32_t)t, &nu);
    if (gr < 0) {
      CHECK_MSG(nu == 0, "%s: frozen parameter %s is updated", label, gopt_graph_str(g, g->tensors.a[t].name));
      continue;
    }
    trained++;
    CHECK_MSG(same_shape(g, gr, (int32_t)t), "%s: gradient of %s", label, gopt_graph_str(g, g->tensors.a[t].name));
    CHECK_MSG(nu == 1, "%s: %d updates of %s", label, nu, gopt_graph_str(g, g->tensors.a[t].name));
    if (u < 0) continue;
    CHECK(gopt_node_input(g, u, 1) == gr);
    int32_t up = gopt_node_output(g, u, 0);
    char want[300];
    snprintf(want, sizeof want, "%s.updated", gopt_graph_str(g, g->tensors.a[t].name));
    CHECK(!strcmp(gopt_graph_str(g, g->tensors.a[up].name), want));
    CHECK(g->tensors.a[up].flags & GOPT_T_OUTPUT);
    CHECK(same_shape(g, up, (int32_t)t));
    for (int k = 0; k < g->nodes.a[u].n_out; k++)
      CHECK(g->tensors.a[gopt_node_output(g, u, k)].flags & GOPT_T_OUTPUT);
    /* after the gradient's producer and after every partial feeding an accumulation */
    int32_t gp = g->tensors.a[gr].producer;
    if (gp >= 0) {
      CHECK(pos[u] > pos[gp]);
      if (!strcmp(gopt_node_type(g, gp), "Sum"))
        for (int k = 0; k < g->nodes.a[gp].n_in; k++) {
          int32_t pp = g->tensors.a[gopt_node_input(g, gp, k)].producer;
          CHECK(pp < 0 || pos[u] > pos[pp]);
        }
    }
  }
  CHECK_EQ_INT(trained, info->n_params);
  /* every gradient has its tensor's dtype and shape */
  for (size_t t = 0; t < info->n_grad_of; t++)
    if (info->grad_of[t] >= 0)
      CHECK_MSG(same_shape(g, info->grad_of[t], (int32_t)t), "%s: gradient of %s has another shape",
                label, gopt_graph_str(g, g->tensors.a[t].name));
  /* added nodes: flagged by role, gradient nodes named grad/..., outputs typed and shaped */
  size_t ngrad = 0, nupd = 0, nloss = 0;
  for (size_t n = info->n_fwd_nodes; n < g->nodes.n; n++) {
    uint16_t f = g->nodes.a[n].flags;
    if (f & GOPT_N_GRAD) {
      ngrad++;
      CHECK_MSG(!strncmp(gopt_node_name(g, (int32_t)n), "grad/", 5), "%s: node %s", label,
                gopt_node_name(g, (int32_t)n));
    } else if (f & GOPT_N_UPDATE) {
      nupd++;
    } else {
      nloss++;
    }
    for (int k = 0; k < g->nodes.a[n].n_out; k++) {
      int32_t o = gopt_node_output(g, (int32_t)n, k);
      CHECK(g->tensors.a[o].dtype != GOPT_DT_UNDEFINED && !(g->tensors.a[o].flags & GOPT_T_NOSHAPE));
    }
  }
  CHECK_EQ_INT(ngrad, info->n_grad_nodes);
  CHECK_EQ_INT(nupd, info->n_update_nodes);
  CHECK_EQ_INT(nloss, info->n_loss_nodes);
  CHECK_EQ_INT(nupd, info->n_params);
  /* ops_train_infer reproduces what the builder set, for every training op */
  int ntrain = 0;
  for (size_t n = info->n_fwd_nodes; n < g->nodes.n; n++) {
    if (!ops_train_kind(g, (int32_t)n)) continue;
    ntrain++;
    int no = g->nodes.a[n].n_out;
    gopt_graph *ref = gopt_graph_clone(g);
    for (int k = 0; k < no; k++) {
      int32_t o = gopt_node_output(g, (int32_t)n, k);
      g->tensors.a[o].dtype = GOPT_DT_UNDEFINED;
      gopt_tensor_set_shape(g, o, -1, NULL);
    }
    err.code = 0;
    rc = ops_train_infer(g, (int32_t)n, &err);
    CHECK_MSG(rc == 1, "%s: infer %s: %s", label, gopt_node_name(g, (int32_t)n), err.msg);
    for (int k = 0; k < no; k++) {
      int32_t o = gopt_node_output(g, (int32_t)n, k);
      const gopt_tensor *a = &g->tensors.a[o], *b = &ref->tensors.a[o];
      int same = a->dtype == b->dtype && a->rank == b->rank && !(a->flags & GOPT_T_NOSHAPE) &&
                 !memcmp(gopt_tensor_dims(g, o), gopt_tensor_dims(ref, o), a->rank * sizeof(int64_t));
      CHECK_MSG(same, "%s: infer of %s output %d disagrees with the builder", label,
                gopt_node_name(g, (int32_t)n), k);
    }
    gopt_graph_free(ref);
    gopt_cost c;
    CHECK(ops_train_cost(g, (int32_t)n, &c) == 1 && c.flops >= 0 && c.bytes_written > 0);
  }
  CHECK_MSG(ntrain > 0, "%s: no training ops", label);
  /* The op registry's shape inference over the whole training graph (standard ops by its own
   * rules, training ops through ops_train_infer) agrees with the builder: same dtypes and
   * ranks, equal concrete dims, symbolic where the builder is symbolic (a flattened product may
   * get another symbol). */
  gopt_graph *re = gopt_graph_clone(g);
  gopt_infer_opts io = {0, 0};
  rc = gopt_infer_shapes(re, &io, &err);
  CHECK_MSG(rc == 0, "%s: re-inference: %s", label, err.msg);
  for (size_t n = info->n_fwd_nodes; rc == 0 && n < re->nodes.n; n++)
    for (int k = 0; k < re->nodes.a[n].n_out; k++) {
      int32_t o = gopt_node_output(re, (int32_t)n, k);
      const gopt_tensor *a = &re->tensors.a[o], *b = &g->tensors.a[o];
      int same = a->dtype == b->dtype && a->rank == b->rank && !(a->flags & GOPT_T_NOSHAPE);
      for (int i = 0; same && i < a->rank; i++) {
        int64_t x = gopt_tensor_dims(re, o)[i], y = gopt_tensor_dims(g, o)[i];
        same = (x >= 0 || y >= 0) ? x == y : 1;
      }
      CHECK_MSG(same, "%s: re-inferred shape of %s differs", label, gopt_graph_str(g, b->name));
    }
  gopt_graph_free(re);
  free(order);
  free(pos);
}

static void check_has_grad(const gopt_graph *g, const gopt_train_info *info, const char *const *names,
                           int want, const char *label) {
  for (int i = 0; names[i]; i++) {
    int32_t t = T(g, names[i]);
    if (t < 0) continue;
    CHECK_MSG((info->grad_of[t] >= 0) == want, "%s: %s should %shave a gradient", label, names[i],
              want ? "" : "not ");
  }
}

static gopt_graph *build(gopt_graph *g, const char *opt, gopt_train_info *info) {
  gopt_train_opts o;
  gopt_train_opts_init(&o);
  o.optimizer = opt;
  gopt_error err = {0};
  int rc = gopt_train_build_ex(g, &o, info, &err);
  CHECK_MSG(rc == 0, "build: %s", err.msg);
  return g;
}

/* ---- MLP: MatMul + Add + Relu + MatMul + Softmax, symbolic batch -------------------------------- */
static gopt_graph *mlp(void) {
  gopt_graph *g = gopt_graph_new("mlp");
  int64_t B = GOPT_DIM_SYM(gopt_graph_symbol(g, "batch"));
  int32_t x = input(g, "x", GOPT_DT_FLOAT, 2, D(B, 784));
  int32_t w1 = param(g, "W1", 2, D(784, 128)), b1 = param(g, "b1", 1, D(128));
  int32_t w2 = param(g, "W2", 2, D(128, 10));
  int32_t h1 = act(g, "h1", 2, D(B, 128)), h2 = act(g, "h2", 2, D(B, 128)), h3 = act(g, "h3", 2, D(B, 128));
  int32_t h4 = act(g, "h4", 2, D(B, 10)), y = act(g, "y", 2, D(B, 10));
  OP(g, "MatMul", "fc1", h1, x, w1);
  OP(g, "Add", "bias1", h2, h1, b1);
  OP(g, "Relu", "relu1", h3, h2);
  OP(g, "MatMul", "fc2", h4, h3, w2);
  int32_t sm = OP(g, "Softmax", "softmax", y, h4);
  gopt_node_set_int(g, sm, "axis", -1);
  gopt_graph_add_output(g, y);
  return g;
}

static void test_mlp(void) {
  gopt_graph *g = mlp();
  gopt_train_info info;
  build(g, "sgd", &info);
  check_invariants(g, &info, "mlp");
  /* By hand: loss ReduceMean (1); backward: Shape(y) (y's batch dim is symbolic) feeding
   * ReduceMeanGrad, SoftmaxGrad, fc2: Gemm dX + Gemm dW, ReluGrad, bias1: ReduceSum for b1 (h1's
   * gradient is dY itself), fc1: Gemm dW only (x is an input) = 8; updates: W1, b1, W2 = 3. */
  CHECK_EQ_INT(gopt_graph_node_count(g), 5 + 1 + 8 + 3);
  CHECK_EQ_INT(info.n_grad_nodes, 8);
  CHECK_EQ_INT(count_type(g, 5, "Shape", GOPT_N_GRAD), 1);
  CHECK_EQ_INT(count_type(g, 5, "ReduceMeanGrad", GOPT_N_GRAD), 1);
  CHECK_EQ_INT(count_type(g, 5, "SoftmaxGrad", GOPT_N_GRAD), 1);
  CHECK_EQ_INT(count_type(g, 5, "Gemm", GOPT_N_GRAD), 3);
  CHECK_EQ_INT(count_type(g, 5, "ReluGrad", GOPT_N_GRAD), 1);
  CHECK_EQ_INT(count_type(g, 5, "ReduceSum", GOPT_N_GRAD), 1);
  CHECK_EQ_INT(count_type(g, 5, "SGDUpdate", GOPT_N_UPDATE), 3);
  CHECK_EQ_INT(info.n_params, 3);
  CHECK_EQ_INT(info.n_frozen, 0);
  static const char *const with[] = {"W1", "b1", "W2", "h1", "h2", "h3", "h4", "y", "loss", NULL};
  static const char *const without[] = {"x", NULL};
  check_has_grad(g, &info, with, 1, "mlp");
  check_has_grad(g, &info, without, 0, "mlp");
  /* liveness: backward ops read the activations they need */
  CHECK(used_by_grad(g, T(g, "x")));   /* dW1 = x^T dh1 */
  CHECK(used_by_grad(g, T(g, "h3")));  /* ReluGrad(dY, Y) and dW2 = h3^T dh4 */
  CHECK(used_by_grad(g, T(g, "y")));   /* SoftmaxGrad(dY, Y) */
  CHECK(!used_by_grad(g, T(g, "h2"))); /* nothing needs the pre-activation */
  /* the output gradient is a real op shaped like the output; the seed is a constant 1 */
  int32_t dy = info.grad_of[T(g, "y")];
  CHECK(dy >= 0 && g->tensors.a[dy].producer >= 0 &&
        !strcmp(gopt_node_type(g, g->tensors.a[dy].producer), "ReduceMeanGrad"));
  CHECK(info.seed >= 0 && (g->tensors.a[info.seed].flags & GOPT_T_CONST) &&
        *(const float *)gopt_tensor_data(g, info.seed) == 1.0f);
  /* the symbolic batch dim is carried into the gradients */
  int32_t dh1 = info.grad_of[T(g, "h1")];
  CHECK(dh1 >= 0 && GOPT_DIM_IS_SYM(gopt_tensor_dims(g, dh1)[0]));
  /* costs: SGD 2 flops/element, reads param + grad, writes the updated param */
  int nu = 0;
  int32_t u = update_of(g, T(g, "W1"), &nu);
  gopt_cost c;
  CHECK(u >= 0 && ops_train_cost(g, u, &c) == 1);
  CHECK_NEAR(c.flops, 2.0 * 784 * 128, 0);
  CHECK_NEAR(c.bytes_read, 2.0 * 784 * 128 * 4, 0);
  CHECK_NEAR(c.bytes_written, 784.0 * 128 * 4, 0);
  CHECK_EQ_INT(c.params, 784 * 128);
  /* a forward op is not a training op */
  CHECK_EQ_INT(ops_train_cost(g, 0, &c), 0);
  gopt_error err = {0};
  CHECK_EQ_INT(ops_train_infer(g, 0, &err), 0);
  gopt_train_info_free(&info);
  gopt_graph_free(g);
}

/* ---- optimizers: state tensors and update outputs ------------------------------------------------- */
static void test_optimizers(void) {
  static const char *const opts[3] = {"sgd", "momentum", "adam"};
  for (int k = 0; k < 3; k++) {
    gopt_graph *g = mlp();
    size_t nout0 = g->outputs.n;
    gopt_train_info info;
    build(g, opts[k], &info);
    check_invariants(g, &info, opts[k]);
    /* per parameter: k state tensors (none, velocity, Adam m and v) and k+1 update outputs */
    CHECK_EQ_INT(count_state(g), 3 * k);
    for (size_t n = info.n_fwd_nodes; n < g->nodes.n; n++)
      if (g->nodes.a[n].flags & GOPT_N_UPDATE) {
        CHECK_EQ_INT(g->nodes.a[n].n_out, k + 1);
        for (int i = 0; i < g->nodes.a[n].n_in; i++) {
          int32_t t = gopt_node_input(g, (int32_t)n, i);
          if (g->tensors.a[t].flags & GOPT_T_STATE) {
            CHECK(same_shape(g, t, gopt_node_input(g, (int32_t)n, 0)));
            CHECK(gopt_tensor_data(g, t) == NULL);
          }
        }
      }
    CHECK_EQ_INT(g->outputs.n, nout0 + 1 + 3 * (size_t)(k + 1)); /* loss + updated tensors */
    if (k == 2) {
      int nu = 0;
      int32_t u = update_of(g, T(g, "W2"), &nu);
      gopt_cost c;
      CHECK(u >= 0 && ops_train_cost(g, u, &c) == 1);
      CHECK_NEAR(c.flops, 10.0 * 128 * 10, 0);
      CHECK(!strcmp(gopt_node_type(g, u), "AdamUpdate"));
      CHECK(T(g, "W2.adam_m") >= 0 && T(g, "W2.adam_v.updated") >= 0);
    }
    gopt_train_info_free(&info);
    gopt_graph_free(g);
  }
  gopt_graph *g = mlp();
  gopt_train_opts o;
  gopt_train_opts_init(&o);
  o.optimizer = "rmsprop";
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_train_build(g, &o, &err), GOPT_EINVAL);
  CHECK(strstr(err.msg, "rmsprop") != NULL);
  gopt_graph_free(g);
}

/* ---- conv net: Conv+Relu+Conv+BatchNorm+Relu+MaxPool+Flatten+Gemm ------------------------------ */
static void test_convnet(void) {
  gopt_graph *g = gopt_graph_new("convnet");
  int32_t x = input(g, "x", GOPT_DT_FLOAT, 4, D(2, 3, 8, 8));
  int32_t w1 = param(g, "W1", 4, D(4, 3, 3, 3)), b1 = param(g, "B1", 1, D(4));
  int32_t w2 = param(g, "W2", 4, D(8, 4, 3, 3));
  int32_t s = param(g, "bn_s", 1, D(8)), bb = param(g, "bn_b", 1, D(8));
  int32_t mean = param(g, "bn_mean", 1, D(8)), var = param(g, "bn_var", 1, D(8));
  int32_t wf = param(g, "Wf", 2, D(10, 128)), cf = param(g, "Cf", 1, D(10));
  int32_t c1 = act(g, "c1", 4, D(2, 4, 8, 8)), r1 = act(g, "r1", 4, D(2, 4, 8, 8));
  int32_t c2 = act(g, "c2", 4, D(2, 8, 8, 8)), bn = act(g, "bn", 4, D(2, 8, 8, 8));
  int32_t r2 = act(g, "r2", 4, D(2, 8, 8, 8)), p = act(g, "p", 4, D(2, 8, 4, 4));
  int32_t f = act(g, "f", 2, D(2, 128)), lo = act(g, "logits", 2, D(2, 10));
  int32_t n;
  n = OP(g, "Conv", "conv1", c1, x, w1, b1);
  gopt_node_set_ints(g, n, "pads", D(1, 1, 1, 1), 4);
  gopt_node_set_ints(g, n, "kernel_shape", D(3, 3), 2);
  OP(g, "Relu", "relu1", r1, c1);
  n = OP(g, "Conv", "conv2", c2, r1, w2);
  gopt_node_set_ints(g, n, "pads", D(1, 1, 1, 1), 4);
  OP(g, "BatchNormalization", "bn", bn, c2, s, bb, mean, var);
  OP(g, "Relu", "relu2", r2, bn);
  n = OP(g, "MaxPool", "pool", p, r2);
  gopt_node_set_ints(g, n, "kernel_shape", D(2, 2), 2);
  gopt_node_set_ints(g, n, "strides", D(2, 2), 2);
  OP(g, "Flatten", "flatten", f, p);
  n = OP(g, "Gemm", "fc", lo, f, wf, cf);
  gopt_node_set_int(g, n, "transB", 1);
  gopt_graph_add_output(g, lo);
  size_t nf = g->nodes.n;
  gopt_train_info info;
  build(g, NULL, &info);
  check_invariants(g, &info, "convnet");
  CHECK_EQ_INT(info.n_params, 7);
  CHECK_EQ_INT(info.n_frozen, 2); /* running mean and variance */
  static const char *const with[] = {"W1", "B1", "W2", "bn_s", "bn_b", "Wf", "Cf", "c1", "r1", "c2",
                                     "bn", "r2", "p", "f", "logits", NULL};
  static const char *const without[] = {"x", "bn_mean", "bn_var", NULL};
  check_has_grad(g, &info, with, 1, "convnet");
  check_has_grad(g, &info, without, 0, "convnet");
  CHECK_EQ_INT(count_type(g, nf, "ConvGradWeight", GOPT_N_GRAD), 2);
  CHECK_EQ_INT(count_type(g, nf, "ConvGradInput", GOPT_N_GRAD), 1); /* not for conv1: x is an input */
  CHECK_EQ_INT(count_type(g, nf, "BatchNormGrad", GOPT_N_GRAD), 1);
  CHECK_EQ_INT(count_type(g, nf, "MaxPoolGrad", GOPT_N_GRAD), 1);
  CHECK_EQ_INT(count_type(g, nf, "ReluGrad", GOPT_N_GRAD), 2);
  CHECK_EQ_INT(count_type(g, nf, "Reshape", GOPT_N_GRAD), 1);   /* Flatten */
  CHECK_EQ_INT(count_type(g, nf, "Gemm", GOPT_N_GRAD), 2);
  CHECK_EQ_INT(count_type(g, nf, "ReduceSum", GOPT_N_GRAD), 2); /* conv1 bias, Gemm C */
  /* liveness */
  CHECK(used_by_grad(g, x));  /* ConvGradWeight of conv1 */
  CHECK(used_by_grad(g, r1)); /* ReluGrad and ConvGradWeight of conv2 */
  CHECK(used_by_grad(g, c2)); /* BatchNormGrad reads X */
  CHECK(used_by_grad(g, r2)); /* MaxPoolGrad reads X */
  CHECK(used_by_grad(g, f));  /* dWf */
  CHECK(!used_by_grad(g, p));
  /* costs of the conv gradients equal the forward convs' FLOPs (2 * |Y| * C * kh * kw) */
  for (size_t k = nf; k < g->nodes.n; k++) {
    gopt_cost c;
    const char *ty = gopt_node_type(g, (int32_t)k);
    if (!strcmp(ty, "ConvGradInput")) {
      CHECK(ops_train_cost(g, (int32_t)k, &c) == 1);
      CHECK_NEAR(c.flops, 2.0 * (2 * 8 * 8 * 8) * 4 * 9, 0);
      /* reads dY, W, the 4-element shape; writes dX */
      CHECK_NEAR(c.bytes_read, (2.0 * 8 * 64 + 8 * 4 * 9) * 4 + 4 * 8, 0);
      CHECK_NEAR(c.bytes_written, 2.0 * 4 * 64 * 4, 0);
      CHECK_EQ_INT(c.params, 8 * 4 * 9);
    } else if (!strcmp(ty, "ConvGradWeight") && gopt_node_input(g, (int32_t)k, 1) == x) {
      CHECK(ops_train_cost(g, (int32_t)k, &c) == 1);
      CHECK_NEAR(c.flops, 2.0 * (2 * 4 * 64) * 3 * 9, 0);
    } else if (!strcmp(ty, "MaxPoolGrad")) {
      CHECK(ops_train_cost(g, (int32_t)k, &c) == 1);
      CHECK_NEAR(c.flops, 2.0 * 8 * 16 * 4, 0);
    }
  }
  gopt_train_info_free(&info);
  gopt_graph_free(g);
}

/* ---- shared weight and a tensor with two consumers: accumulation --------------------------------- */
static void test_accumulation(void) {
  gopt_graph *g = gopt_graph_new("shared");
  int32_t x = input(g, "x", GOPT_DT_FLOAT, 2, D(4, 8));
  int32_t w = param(g, "W", 2, D(8, 8));
  int32_t h = act(g, "h", 2, D(4, 8)), r = act(g, "r", 2, D(4, 8)), o = act(g, "o", 2, D(4, 8));
  OP(g, "MatMul", "mm1", h, x, w);
  OP(g, "Relu", "relu", r, h);
  OP(g, "MatMul", "mm2", o, r, w);
  gopt_graph_add_output(g, o);
  gopt_train_info info;
  build(g, "sgd", &info);
  check_invariants(g, &info, "shared");
  int32_t gw = info.grad_of[w];
  CHECK(gw >= 0 && g->tensors.a[gw].producer >= 0);
  if (gw >= 0 && g->tensors.a[gw].producer >= 0) {
    int32_t sn = g->tensors.a[gw].producer;
    CHECK(!strcmp(gopt_node_type(g, sn), "Sum") && g->nodes.a[sn].n_in == 2);
    CHECK(g->nodes.a[sn].flags & GOPT_N_GRAD);
    CHECK(!strcmp(gopt_graph_str(g, g->tensors.a[gw].name), "grad/W"));
  }
  CHECK_EQ_INT(info.n_params, 1);
  gopt_train_info_free(&info);
  gopt_graph_free(g);

  g = gopt_graph_new("two_consumers");
  x = input(g, "x", GOPT_DT_FLOAT, 2, D(4, 8));
  w = param(g, "W", 2, D(8, 8));
  h = act(g, "h", 2, D(4, 8));
  int32_t a = act(g, "a", 2, D(4, 8)), s = act(g, "s", 2, D(4, 8));
  o = act(g, "o", 2, D(4, 8));
  OP(g, "MatMul", "mm", h, x, w);
  OP(g, "Relu", "relu", a, h);
  OP(g, "Sigmoid", "sig", s, h);
  OP(g, "Add", "add", o, a, s);
  gopt_graph_add_output(g, o);
  build(g, "sgd", &info);
  check_invariants(g, &info, "two_consumers");
  int32_t gh = info.grad_of[h];
  CHECK(gh >= 0 && g->tensors.a[gh].producer >= 0);
  if (gh >= 0 && g->tensors.a[gh].producer >= 0) {
    int32_t sn = g->tensors.a[gh].producer;
    CHECK(!strcmp(gopt_node_type(g, sn), "Sum") && g->nodes.a[sn].n_in == 2);
    int relu = 0, sig = 0;
    for (int k = 0; k < g->nodes.a[sn].n_in; k++) {
      const char *ty = gopt_node_type(g, g->tensors.a[gopt_node_input(g, sn, k)].producer);
      relu += !strcmp(ty, "ReluGrad");
      sig += !strcmp(ty, "SigmoidGrad");
    }
    CHECK(relu == 1 && sig == 1);
  }
  CHECK(used_by_grad(g, a) && used_by_grad(g, s)); /* ReluGrad(Y), SigmoidGrad(Y) */
  /* Add passes dY through to both operands without ops: they share the output's gradient */
  CHECK(info.grad_of[a] == info.grad_of[o] && info.grad_of[s] == info.grad_of[o]);
  gopt_train_info_free(&info);
  gopt_graph_free(g);
}

/* ---- embedding + LayerNorm + 2-head attention + Erf-GELU MLP, symbolic batch ---------------------- */
static void test_transformer(void) {
  gopt_graph *g = gopt_graph_new("block");
  gopt_opset os = {gopt_graph_intern(g, ""), 17};
  g->opsets.a = NULL;
  gopt_graph_reserve(g, 64);
  int64_t B = GOPT_DIM_SYM(gopt_graph_symbol(g, "batch"));
  int32_t ids = input(g, "ids", GOPT_DT_INT64, 2, D(B, 16));
  int32_t E = param(g, "E", 2, D(100, 32)), pos = param(g, "pos", 2, D(16, 32));
  int32_t g1 = param(g, "ln_g", 1, D(32)), b1 = param(g, "ln_b", 1, D(32));
  int32_t wq = param(g, "Wq", 2, D(32, 32)), wk = param(g, "Wk", 2, D(32, 32)), wv = param(g, "Wv", 2, D(32, 32));
  int32_t w1 = param(g, "W1", 2, D(32, 64)), w2 = param(g, "W2", 2, D(64, 32));
  int32_t mask = tf(g, "mask", GOPT_DT_BOOL, 2, D(16, 16));
  unsigned char mb[256];
  for (int i = 0; i < 256; i++) mb[i] = (unsigned char)((i % 16) <= (i / 16));
  gopt_tensor_set_const(g, mask, mb, sizeof mb, NULL);
  int32_t scale = cfloat(g, "scale", 4.0f), neg = cfloat(g, "neg", -1e9f);
  int32_t sqrt2 = cfloat(g, "sqrt2", 1.4142135f), one = cfloat(g, "one", 1.0f), half = cfloat(g, "half", 0.5f);
  int32_t heads = cints(g, "heads_shape", 4, D(0, 16, 2, 16)), flat = cints(g, "flat_shape", 3, D(0, 16, 32));
  int32_t emb = act(g, "emb", 3, D(B, 16, 32)), e2 = act(g, "e2", 3, D(B, 16, 32)), ln = act(g, "ln", 3, D(B, 16, 32));
  const char *qkv[3] = {"q", "k", "v"};
  int32_t w3[3] = {wq, wk, wv}, hh[3];
  for (int i = 0; i < 3; i++) {
    char nm[32];
    int32_t p = act(g, qkv[i], 3, D(B, 16, 32));
    snprintf(nm, sizeof nm, "%s_r", qkv[i]);
    int32_t pr = act(g, nm, 4, D(B, 16, 2, 16));
    snprintf(nm, sizeof nm, "%s_h", qkv[i]);
    /* q, v: [B,2,16,16] (perm 0,2,1,3); k: [B,2,16,16] transposed (perm 0,2,3,1) */
    hh[i] = act(g, nm, 4, D(B, 2, 16, 16));
  (void)p; (void)pr;
  }
  int32_t s = act(g, "scores", 4, D(B, 2, 16, 16)), sd = act(g, "scaled", 4, D(B, 2, 16, 16));
  int32_t sm = act(g, "masked", 4, D(B, 2, 16, 16)), pr = act(g, "probs", 4, D(B, 2, 16, 16));
  int32_t at = act(g, "attn", 4, D(B, 2, 16, 16)), att = act(g, "attn_t", 4, D(B, 16, 2, 16));
  int32_t af = act(g, "attn_f", 3, D(B, 16, 32)), res = act(g, "res", 3, D(B, 16, 32));
  int32_t f1 = act(g, "f1", 3, D(B, 16, 64)), hd = act(g, "hdiv", 3, D(B, 16, 64));
  int32_t er = act(g, "erf", 3, D(B, 16, 64)), ep = act(g, "erf1", 3, D(B, 16, 64));
  int32_t m1 = act(g, "gm1", 3, D(B, 16, 64)), ge = act(g, "gelu", 3, D(B, 16, 64));
  int32_t out = act(g, "out", 3, D(B, 16, 32));
  int32_t n;
  n = OP(g, "Gather", "embed", emb, E, ids);
  gopt_node_set_int(g, n, "axis", 0);
  OP(g, "Add", "add_pos", e2, emb, pos);
  n = OP(g, "LayerNormalization", "ln", ln, e2, g1, b1);
  gopt_node_set_int(g, n, "axis", -1);
  gopt_node_set_float(g, n, "epsilon", 1e-5);
  for (int i = 0; i < 3; i++) {
    char nm[32], nm2[32];
    OP(g, "MatMul", qkv[i], T(g, qkv[i]), ln, w3[i]);
    snprintf(nm, sizeof nm, "%s_r", qkv[i]);
    snprintf(nm2, sizeof nm2, "%s_reshape", qkv[i]);
    OP(g, "Reshape", nm2, T(g, nm), T(g, qkv[i]), heads);
    snprintf(nm2, sizeof nm2, "%s_transpose", qkv[i]);
    n = OP(g, "Transpose", nm2, hh[i], T(g, nm));
    gopt_node_set_ints(g, n, "perm", i == 1 ? D(0, 2, 3, 1) : D(0, 2, 1, 3), 4);
  }
  OP(g, "MatMul", "qk", s, hh[0], hh[1]);
  OP(g, "Div", "scale", sd, s, scale);
  OP(g, "Where", "mask", sm, mask, sd, neg);
  n = OP(g, "Softmax", "softmax", pr, sm);
  gopt_node_set_int(g, n, "axis", -1);
  OP(g, "MatMul", "pv", at, pr, hh[2]);
  n = OP(g, "Transpose", "merge_t", att, at);
  gopt_node_set_ints(g, n, "perm", D(0, 2, 1, 3), 4);
  OP(g, "Reshape", "merge", af, att, flat);
  OP(g, "Add", "residual", res, af, ln);
  OP(g, "MatMul", "ffn1", f1, res, w1);
  OP(g, "Div", "gelu_div", hd, f1, sqrt2);
  OP(g, "Erf", "gelu_erf", er, hd);
  OP(g, "Add", "gelu_add", ep, er, one);
  OP(g, "Mul", "gelu_mul", m1, f1, ep);
  OP(g, "Mul", "gelu_half", ge, m1, half);
  OP(g, "MatMul", "ffn2", out, ge, w2);
  gopt_graph_add_output(g, out);
  (void)os;
  size_t nf = g->nodes.n;
  gopt_train_info info;
  build(g, "adam", &info);
  check_invariants(g, &info, "block");
  CHECK_EQ_INT(info.n_params, 9);
  static const char *const with[] = {"E", "pos", "ln_g", "ln_b", "Wq", "Wk", "Wv", "W1", "W2", "emb",
                                     "e2", "ln", "q", "k", "v", "q_h", "k_h", "v_h", "scores",
                                     "scaled", "masked", "probs", "attn", "attn_t", "attn_f", "res",
                                     "f1", "hdiv", "erf", "erf1", "gm1", "gelu", "out", NULL};
  static const char *const without[] = {"ids", "mask", "scale", "neg", "sqrt2", "one", "half",
                                        "heads_shape", "flat_shape", NULL};
  check_has_grad(g, &info, with, 1, "block");
  check_has_grad(g, &info, without, 0, "block");
  CHECK_EQ_INT(count_type(g, nf, "GatherGrad", GOPT_N_GRAD), 1);
  CHECK_EQ_INT(count_type(g, nf, "LayerNormGrad", GOPT_N_GRAD), 1);
  CHECK_EQ_INT(count_type(g, nf, "SoftmaxGrad", GOPT_N_GRAD), 1);
  CHECK_EQ_INT(count_type(g, nf, "ErfGrad", GOPT_N_GRAD), 1);
  CHECK(count_type(g, nf, "Where", GOPT_N_GRAD) == 1);
  CHECK(count_type(g, nf, "Transpose", GOPT_N_GRAD) >= 4); /* 4 inverse transposes (+ MatMul's) */
  CHECK(count_type(g, nf, "Reshape", GOPT_N_GRAD) >= 4);
  /* ln feeds q, k, v and the residual: its gradient is one Sum of four partials */
  int32_t gl = info.grad_of[ln];
  CHECK(gl >= 0 && g->tensors.a[gl].producer >= 0 &&
        !strcmp(gopt_node_type(g, g->tensors.a[gl].producer), "Sum") &&
        g->nodes.a[g->tensors.a[gl].producer].n_in == 4);
  /* E's gradient is the GatherGrad output, reading the indices */
  int32_t ge_ = info.grad_of[E];
  CHECK(ge_ >= 0 && !strcmp(gopt_node_type(g, g->tensors.a[ge_].producer), "GatherGrad"));
  CHECK(used_by_grad(g, ids));
  CHECK(used_by_grad(g, e2));   /* LayerNormGrad reads X */
  CHECK(used_by_grad(g, pr));   /* SoftmaxGrad reads Y; dV = P^T dA */
  CHECK(used_by_grad(g, hd));   /* ErfGrad reads X */
  CHECK(used_by_grad(g, f1));   /* Mul's gradient reads the other operand */
  CHECK(!used_by_grad(g, sm));  /* Softmax's input is not needed */
  /* the symbolic batch dim reaches the gradient of the embedding output */
  int32_t gemb = info.grad_of[emb];
  CHECK(gemb >= 0 && gopt_tensor_dims(g, gemb)[0] == B);
  gopt_train_info_free(&info);
  gopt_graph_free(g);
}

/* ---- LSTM (seq2seq style) -------------------------------------------------------------------------- */
static void test_lstm(void) {
  gopt_graph *g = gopt_graph_new("lstm");
  int64_t B = GOPT_DIM_SYM(gopt_graph_symbol(g, "batch"));
  int32_t x = input(g, "x", GOPT_DT_FLOAT, 3, D(5, B, 8));
  int32_t w = param(g, "W", 3, D(1, 64, 8)), r = param(g, "R", 3, D(1, 64, 16));
  int32_t bb = param(g, "Bias", 2, D(1, 128)), wo = param(g, "Wo", 2, D(16, 4));
  int32_t y = act(g, "Y", 4, D(5, 1, B, 16)), yh = act(g, "Y_h", 3, D(1, B, 16));
  int32_t ys = act(g, "ys", 3, D(5, B, 16)), o = act(g, "o", 3, D(5, B, 4));
  int32_t ax = cints(g, "axes1", 1, D(1));
  gopt_error err = {0};
  int32_t n = gopt_graph_add_node(g, "LSTM", "lstm", 4, I(x, w, r, bb), 2, I(y, yh), &err);
  CHECK(n >= 0);
  gopt_node_set_int(g, n, "hidden_size", 16);
  OP(g, "Squeeze", "squeeze", ys, y, ax);
  OP(g, "MatMul", "proj", o, ys, wo);
  gopt_graph_add_output(g, o);
  size_t nf = g->nodes.n;
  gopt_train_info info;
  build(g, "momentum", &info);
  check_invariants(g, &info, "lstm");
  CHECK_EQ_INT(info.n_params, 4);
  CHECK_EQ_INT(count_type(g, nf, "LSTMGrad", GOPT_N_GRAD), 1);
  CHECK(used_by_grad(g, x) && used_by_grad(g, y)); /* gates are recomputed from X and Y */
  CHECK(info.grad_of[x] < 0 && info.grad_of[yh] < 0 && info.grad_of[y] >= 0);
  /* the projection's weight gradient flattens [5,batch,16] to [5*batch,16] */
  CHECK(info.grad_of[wo] >= 0 && !strcmp(gopt_node_type(g, g->tensors.a[info.grad_of[wo]].producer), "Gemm"));
  gopt_train_info_free(&info);
  gopt_graph_free(g);
}

/* GRU and RNN (layout 1, batch first, with an initial state; G gates of 16 units): one GRUGrad /
 * RNNGrad whose outputs have the forward inputs' shapes, the bias gradient [D, 2 G H]; the initial
 * state gets a gradient, X (an input) none. */
static void check_rnn(const char *type, int G) {
  char grad_type[16];
  snprintf(grad_type, sizeof grad_type, "%sGrad", type);
  gopt_graph *g = gopt_graph_new(type);
  int32_t x = input(g, "x", GOPT_DT_FLOAT, 3, D(2, 5, 8));
  int32_t w = param(g, "W", 3, D(1, 16 * G, 8)), r = param(g, "R", 3, D(1, 16 * G, 16));
  int32_t bb = param(g, "Bias", 2, D(1, 32 * G)), h0 = param(g, "h0", 3, D(2, 1, 16)), wo = param(g, "Wo", 2, D(16, 4));
  int32_t y = act(g, "Y", 4, D(2, 5, 1, 16)), yh = act(g, "Y_h", 3, D(2, 1, 16));
  int32_t ys = act(g, "ys", 3, D(2, 5, 16)), o = act(g, "o", 3, D(2, 5, 4));
  int32_t ax = cints(g, "axes2", 1, D(2));
  gopt_error err = {0};
  int32_t n = gopt_graph_add_node(g, type, "rnn", 6, I(x, w, r, bb, -1, h0), 2, I(y, yh), &err);
  CHECK_MSG(n >= 0, "%s", err.msg);
  gopt_node_set_int(g, n, "hidden_size", 16);
  gopt_node_set_int(g, n, "layout", 1);
  OP(g, "Squeeze", "squeeze", ys, y, ax);
  OP(g, "MatMul", "proj", o, ys, wo);
  gopt_graph_add_output(g, o);
  size_t nf = g->nodes.n;
  gopt_train_info info;
  build(g, "sgd", &info);
  check_invariants(g, &info, type);
  CHECK_EQ_INT(info.n_params, 5);
  CHECK_EQ_INT(count_type(g, nf, grad_type, GOPT_N_GRAD), 1);
  CHECK(info.grad_of[x] < 0 && info.grad_of[yh] < 0 && info.grad_of[y] >= 0 && info.grad_of[h0] >= 0);
  for (int32_t p = 0; p < 4; p++) { /* W R Bias h0: the gradient has the parameter's shape */
    int32_t t = (int32_t[]){w, r, bb, h0}[p], d = info.grad_of[t];
    CHECK_MSG(d >= 0 && g->tensors.a[d].rank == g->tensors.a[t].rank &&
                  !memcmp(gopt_tensor_dims(g, d), gopt_tensor_dims(g, t), (size_t)g->tensors.a[t].rank * sizeof(int64_t)),
              "%s: gradient %d", type, p);
  }
  gopt_train_info_free(&info);
  gopt_graph_free(g);
}
static void test_gru_rnn(void) {
  check_rnn("GRU", 3);
  check_rnn("RNN", 1);
}

/* ---- conv-1d / classifier op mix (WaveNet, MobileNet, segmentation ops), opset 13 ----------------- */
static void test_op_mix(void) {
  gopt_graph *g = gopt_graph_new("mix");
  gopt_opset os = {gopt_graph_intern(g, ""), 13};
  g->opsets.a = malloc(sizeof os);
  g->opsets.a[0] = os;
  g->opsets.n = g->opsets.cap = 1;
  int32_t x = input(g, "x", GOPT_DT_FLOAT, 3, D(1, 4, 16));
  int32_t w = param(g, "Wc", 3, D(8, 4, 3)), wf = param(g, "Wf", 2, D(8, 3));
  int32_t two = cfloat(g, "two", 2.0f), eps = cfloat(g, "eps", 1e-5f);
  int32_t cmin = cfloat(g, "cmin", 0.0f), cmax = cfloat(g, "cmax", 6.0f);
  int32_t c = act(g, "c", 3, D(1, 8, 16)), a = act(g, "a", 3, D(1, 4, 16)), b = act(g, "b", 3, D(1, 4, 16));
  int32_t ta = act(g, "ta", 3, D(1, 4, 16)), sb = act(g, "sb", 3, D(1, 4, 16)), gt = act(g, "gated", 3, D(1, 4, 16));
  int32_t pd = act(g, "padded", 3, D(1, 4, 18)), sl = act(g, "sliced", 3, D(1, 4, 16));
  int32_t cl = act(g, "clipped", 3, D(1, 4, 16)), hs = act(g, "hswish", 3, D(1, 4, 16));
  int32_t cc = act(g, "cat", 3, D(1, 8, 16)), mu = act(g, "mu", 3, D(1, 8, 1)), ce = act(g, "cen", 3, D(1, 8, 16));
  int32_t sq = act(g, "sq", 3, D(1, 8, 16)), va = act(g, "var", 3, D(1, 8, 1)), ve = act(g, "vare", 3, D(1, 8, 1));
  int32_t sd = act(g, "std", 3, D(1, 8, 1)), nz = act(g, "norm", 3, D(1, 8, 16));
  int32_t r4 = act(g, "r4", 4, D(1, 8, 4, 4)), ap = act(g, "ap", 4, D(1, 8, 2, 2)), rs = act(g, "rs", 4, D(1, 8, 4, 4));
  int32_t gp = act(g, "gap", 4, D(1, 8, 1, 1)), fl = act(g, "fl", 2, D(1, 8)), dr = act(g, "dr", 2, D(1, 8));
  int32_t lo = act(g, "lo", 2, D(1, 3)), ls = act(g, "ls", 2, D(1, 3));
  int32_t scales = tf(g, "scales", GOPT_DT_FLOAT, 1, D(4));
  float sv[4] = {1, 1, 2, 2};
  gopt_tensor_set_const(g, scales, sv, sizeof sv, NULL);
  int32_t n;
  n = OP(g, "Conv", "conv", c, x, w);
  gopt_node_set_ints(g, n, "dilations", D(2), 1);
  gopt_node_set_ints(g, n, "pads", D(2, 2), 2);
  gopt_error err = {0};
  n = gopt_graph_add_node(g, "Split", "split", 2, I(c, cints(g, "split_sz", 2, D(4, 4))), 2, I(a, b), &err);
  gopt_node_set_int(g, n, "axis", 1);
  OP(g, "Tanh", "tanh", ta, a);
  OP(g, "Sigmoid", "sigmoid", sb, b);
  OP(g, "Mul", "gate", gt, ta, sb);
  OP(g, "Pad", "pad", pd, gt, cints(g, "pads", 6, D(0, 0, 1, 0, 0, 1)));
  OP(g, "Slice", "slice", sl, pd, cints(g, "st", 1, D(1)), cints(g, "en", 1, D(17)), cints(g, "sax", 1, D(2)));
  OP(g, "Clip", "relu6", cl, sl, cmin, cmax);
  OP(g, "HardSwish", "hswish", hs, sl);
  n = OP(g, "Concat", "concat", cc, cl, hs);
  gopt_node_set_int(g, n, "axis", 1);
  n = OP(g, "ReduceMean", "mean", mu, cc);
  gopt_node_set_ints(g, n, "axes", D(-1), 1);
  OP(g, "Sub", "center", ce, cc, mu);
  OP(g, "Pow", "square", sq, ce, two);
  n = OP(g, "ReduceMean", "var", va, sq);
  gopt_node_set_ints(g, n, "axes", D(-1), 1);
  OP(g, "Add", "add_eps", ve, va, eps);
  OP(g, "Sqrt", "sqrt", sd, ve);
  OP(g, "Div", "normalize", nz, ce, sd);
  OP(g, "Reshape", "to4d", r4, nz, cints(g, "s4", 4, D(1, 8, 4, 4)));
  n = OP(g, "AveragePool", "avgpool", ap, r4);
  gopt_node_set_ints(g, n, "kernel_shape", D(2, 2), 2);
  gopt_node_set_ints(g, n, "strides", D(2, 2), 2);
  n = gopt_graph_add_node(g, "Resize", "resize", 3, I(ap, -1, scales), 1, &rs, &err);
  gopt_node_set_string(g, n, "mode", "linear");
  OP(g, "GlobalAveragePool", "gap", gp, rs);
  OP(g, "Flatten", "flatten", fl, gp);
  OP(g, "Dropout", "dropout", dr, fl);
  OP(g, "MatMul", "fc", lo, dr, wf);
  OP(g, "LogSoftmax", "logsoftmax", ls, lo);
  gopt_graph_add_output(g, ls);
  size_t nf = g->nodes.n;
  gopt_train_info info;
  build(g, "sgd", &info);
  check_invariants(g, &info, "mix");
  static const char *const with[] = {"c", "a", "b", "ta", "sb", "gated", "padded", "sliced", "clipped",
                                     "hswish", "cat", "mu", "cen", "sq", "var", "vare", "std", "norm",
                                     "r4", "ap", "rs", "gap", "fl", "dr", "lo", "ls", NULL};
  static const char *const without[] = {"x", "two", "eps", "cmin", "cmax", NULL};
  check_has_grad(g, &info, with, 1, "mix");
  check_has_grad(g, &info, without, 0, "mix");
  static const char *const kinds[] = {"ConvGradWeight", "TanhGrad", "SigmoidGrad", "PadGrad",
                                      "SliceGrad", "ElementwiseGrad", "AveragePoolGrad",
                                      "ResizeGrad", "GlobalAveragePoolGrad", "ReduceMeanGrad",
                                      "LogSoftmaxGrad", "Split", "Concat", "Neg", NULL};
  for (int i = 0; kinds[i]; i++)
    CHECK_MSG(count_type(g, nf, kinds[i], GOPT_N_GRAD) >= 1, "mix: no %s", kinds[i]);
  CHECK_EQ_INT(count_type(g, nf, "ConvGradInput", GOPT_N_GRAD), 0);
  /* ElementwiseGrad for Clip (reads min, max), HardSwish, Pow (reads the exponent), Sqrt (reads Y) */
  CHECK_EQ_INT(count_type(g, nf, "ElementwiseGrad", GOPT_N_GRAD), 4);
  CHECK(used_by_grad(g, cmax) && used_by_grad(g, two) && used_by_grad(g, sd));
  /* axes normalised on ReduceMeanGrad */
  for (size_t k = nf; k < g->nodes.n; k++)
    if (!strcmp(gopt_node_type(g, (int32_t)k), "ReduceMeanGrad") &&
        g->tensors.a[gopt_node_output(g, (int32_t)k, 0)].rank == 3) {
      size_t cnt = 0;
      const int64_t *ax = gopt_node_get_ints(g, (int32_t)k, "axes", &cnt);
      CHECK(ax && cnt == 1 && ax[0] == 2);
    }
  gopt_train_info_free(&info);
  gopt_graph_free(g);
}

/* Gradient nodes from node `from` on of `type` reading tensor `in` at input `slot` whose output has
 * rank `rank` and last dimension `last`. */
static int count_grad_node(const gopt_graph *g, size_t from, const char *type, int slot, int32_t in,
                           int rank, int64_t last) {
  int c = 0;
  for (size_t k = from; k < g->nodes.n; k++) {
    int32_t out = gopt_node_output(g, (int32_t)k, 0);
    c += !strcmp(gopt_node_type(g, (int32_t)k), type) && gopt_node_input(g, (int32_t)k, slot) == in &&
         (g->nodes.a[k].flags & GOPT_N_GRAD) && g->tensors.a[out].rank == rank &&
         gopt_tensor_dims(g, out)[rank - 1] == last;
  }
  return c;
}

/* ---- ReduceL2 (F.normalize: x / ||x||, Swin V2's cosine attention) ------------------------------- */
/* dX = X * (dY / Y): one Div at Y's shape ([2, 1]) reading Y, one Mul at X's shape reading X; with
 * keepdims=0 the broadcast would need an Unsqueeze: refused, naming the op. */
static void test_reduce_l2(void) {
  for (int keep = 1; keep >= 0; keep--) {
    gopt_graph *g = gopt_graph_new("l2");
    int32_t x = input(g, "x", GOPT_DT_FLOAT, 2, D(2, 8)), w = param(g, "W", 2, D(8, 8));
    int32_t h = act(g, "h", 2, D(2, 8)), y = keep ? act(g, "nrm", 2, D(2, 1)) : act(g, "nrm", 1, D(2));
    int32_t o = act(g, "o", 2, D(2, 8));
    OP(g, "MatMul", "mm", h, x, w);
    int32_t n = OP(g, "ReduceL2", "l2", y, h);
    gopt_node_set_ints(g, n, "axes", D(-1), 1);
    gopt_node_set_int(g, n, "keepdims", keep);
    OP(g, "Div", "normalize", o, h, keep ? y : h);
    gopt_graph_add_output(g, o);
    if (!keep) {
      gopt_graph_add_output(g, y);
      gopt_error err = {0};
      CHECK_EQ_INT(gopt_train_build(g, NULL, &err), GOPT_EUNSUP);
      CHECK_MSG(strstr(err.msg, "'l2'") && strstr(err.msg, "keepdims=0"), "%s", err.msg);
      gopt_graph_free(g);
      continue;
    }
    size_t nf = g->nodes.n;
    gopt_train_info info;
    build(g, NULL, &info);
    check_invariants(g, &info, "l2");
    CHECK(info.grad_of[h] >= 0 && info.grad_of[y] >= 0 && info.grad_of[w] >= 0);
    int div_y = count_grad_node(g, nf, "Div", 1, y, 2, 1), mul_x = count_grad_node(g, nf, "Mul", 0, h, 2, 8);
    CHECK_EQ_INT(div_y, 1);
    CHECK_EQ_INT(mul_x, 1);
    gopt_train_info_free(&info);
    gopt_graph_free(g);
  }
}

/* ---- ScatterND (swin_v2_t zeroes a third of its qkv bias by assignment) --------------------------- */
/* dData: ScatterND(dY, indices, zeros of the updates' shape); dUpdates: GatherND(dY, indices). */
static void test_scatter_nd(void) {
  gopt_graph *g = gopt_graph_new("scatter");
  int32_t x = input(g, "x", GOPT_DT_FLOAT, 2, D(2, 6)), bias = param(g, "b", 1, D(6));
  int32_t upd = param(g, "u", 1, D(2));
  int32_t idx = tf(g, "idx", GOPT_DT_INT64, 2, D(2, 1));
  int64_t iv[2] = {2, 3};
  gopt_tensor_set_const(g, idx, iv, sizeof iv, NULL);
  int32_t bz = act(g, "bz", 1, D(6)), o = act(g, "o", 2, D(2, 6));
  OP(g, "ScatterND", "zero_k", bz, bias, idx, upd);
  OP(g, "Add", "add_bias", o, x, bz);
  gopt_graph_add_output(g, o);
  size_t nf = g->nodes.n;
  gopt_train_info info;
  build(g, NULL, &info);
  check_invariants(g, &info, "scatter");
  CHECK(info.grad_of[bias] >= 0 && info.grad_of[upd] >= 0 && info.grad_of[bz] >= 0);
  int sc = count_grad_node(g, nf, "ScatterND", 1, idx, 1, 6), ga = count_grad_node(g, nf, "GatherND", 1, idx, 1, 2);
  CHECK_EQ_INT(sc, 1);
  CHECK_EQ_INT(ga, 1);
  gopt_train_info_free(&info);
  gopt_graph_free(g);
}

/* ---- errors: an op without a gradient rule on / off the gradient path ----------------------------- */
static void test_unsupported(void) {
  gopt_graph *g = gopt_graph_new("reduceprod");
  int32_t x = input(g, "x", GOPT_DT_FLOAT, 2, D(4, 8));
  int32_t w = param(g, "W", 2, D(8, 8));
  int32_t h = act(g, "h", 2, D(4, 8)), v = act(g, "prods", 2, D(4, 1));
  OP(g, "MatMul", "mm", h, x, w);
  gopt_node_set_ints(g, OP(g, "ReduceProd", "my_prod", v, h), "axes", D(1), 1);
  gopt_graph_add_output(g, v);
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_train_build(g, NULL, &err), GOPT_EUNSUP);
  CHECK_MSG(strstr(err.msg, "'my_prod'") && strstr(err.msg, "ReduceProd"), "%s", err.msg);
  gopt_graph_free(g);

  /* an opaque op on the path */
  g = gopt_graph_new("opaque");
  x = input(g, "x", GOPT_DT_FLOAT, 2, D(4, 8));
  w = param(g, "W", 2, D(8, 8));
  h = act(g, "h", 2, D(4, 8));
  int32_t o = act(g, "o", 2, D(4, 8));
  OP(g, "MatMul", "mm", h, x, w);
  OP(g, "FancyAct", "fancy", o, h);
  gopt_graph_add_output(g, o);
  CHECK_EQ_INT(gopt_train_build(g, NULL, &err), GOPT_EUNSUP);
  CHECK_MSG(strstr(err.msg, "'fancy'") && strstr(err.msg, "FancyAct"), "%s", err.msg);
  gopt_graph_free(g);

  /* Einsum equations without a one-Einsum gradient (grad_einsum.c): one line each, naming the node */
  static const char *const bad_eq[3][2] = {{"ij,jk->k", "summed within operand 0"},
                                           {"ii,ij->ij", "repeats subscript 'i'"},
                                           {"...j,jk->...k", "ellipsis"}};
  for (int k = 0; k < 3; k++) {
    g = gopt_graph_new("einsum_bad");
    w = param(g, "W", 2, D(8, 8));
    int32_t w2 = param(g, "W2", 2, D(8, 8)), e = act(g, "e", k ? 2 : 1, k ? D(8, 8) : D(8));
    gopt_node_set_string(g, OP(g, "Einsum", "my_einsum", e, w, w2), "equation", bad_eq[k][0]);
    gopt_graph_add_output(g, e);
    CHECK_EQ_INT(gopt_train_build(g, NULL, &err), GOPT_EUNSUP);
    CHECK_MSG(strstr(err.msg, "'my_einsum'") && strstr(err.msg, bad_eq[k][1]) && !strchr(err.msg, '\n'), "%s", err.msg);
    gopt_graph_free(g);
  }

  /* ConvTranspose with output_shape (pads implied): one line */
  g = gopt_graph_new("convt_bad");
  x = input(g, "x", GOPT_DT_FLOAT, 4, D(1, 2, 3, 3));
  w = param(g, "W", 4, D(2, 2, 3, 3));
  o = act(g, "o", 4, D(1, 2, 6, 6));
  int32_t cn = OP(g, "ConvTranspose", "my_convt", o, x, w);
  gopt_node_set_ints(g, cn, "strides", D(2, 2), 2);
  gopt_node_set_ints(g, cn, "output_shape", D(6, 6), 2);
  gopt_graph_add_output(g, o);
  CHECK_EQ_INT(gopt_train_build(g, NULL, &err), GOPT_EUNSUP);
  CHECK_MSG(strstr(err.msg, "'my_convt'") && strstr(err.msg, "output_shape"), "%s", err.msg);
  gopt_graph_free(g);

  /* the same ops off the gradient path (no parameter upstream) are fine */
  g = gopt_graph_new("off_path");
  x = input(g, "x", GOPT_DT_FLOAT, 2, D(4, 8));
  w = param(g, "W", 2, D(8, 8));
  int32_t z = act(g, "z", 2, D(4, 8));
  o = act(g, "o", 2, D(4, 8));
  OP(g, "FancyAct", "fancy", z, x);
  OP(g, "MatMul", "mm", o, z, w);
  gopt_graph_add_output(g, o);
  gopt_train_info info;
  build(g, NULL, &info);
  check_invariants(g, &info, "off_path");
  CHECK(info.grad_of[z] < 0 && info.grad_of[w] >= 0);
  gopt_train_info_free(&info);
  gopt_graph_free(g);

  /* no parameter reaches the loss; no float output */
  g = gopt_graph_new("noparam");
  x = input(g, "x", GOPT_DT_FLOAT, 2, D(4, 8));
  o = act(g, "o", 2, D(4, 8));
  OP(g, "Relu", "relu", o, x);
  gopt_graph_add_output(g, o);
  CHECK_EQ_INT(gopt_train_build(g, NULL, &err), GOPT_EINVAL);
  gopt_graph_free(g);
  g = gopt_graph_new("intout");
  x = input(g, "x", GOPT_DT_FLOAT, 2, D(4, 8));
  w = param(g, "W", 2, D(8, 8));
  h = act(g, "h", 2, D(4, 8));
  int32_t am = tf(g, "am", GOPT_DT_INT64, 1, D(4));
  OP(g, "MatMul", "mm", h, x, w);
  OP(g, "ArgMax", "argmax", am, h);
  gopt_graph_add_output(g, am);
  CHECK_EQ_INT(gopt_train_build(g, NULL, &err), GOPT_EINVAL);
  CHECK(strstr(err.msg, "float output") != NULL);
  gopt_graph_free(g);
}

/* ---- two float outputs: the loss sums their means ---------------------------------------------------- */
static void test_two_outputs(void) {
  gopt_graph *g = gopt_graph_new("two_out");
  int32_t x = input(g, "x", GOPT_DT_FLOAT, 2, D(4, 8));
  int32_t w = param(g, "W", 2, D(8, 8));
  int32_t h = act(g, "h", 2, D(4, 8)), p = act(g, "p", 2, D(4, 8));
  OP(g, "MatMul", "mm", h, x, w);
  OP(g, "Tanh", "tanh", p, h);
  gopt_graph_add_output(g, h);
  gopt_graph_add_output(g, p);
  gopt_train_info info;
  build(g, NULL, &info);
  check_invariants(g, &info, "two_out");
  CHECK_EQ_INT(info.n_loss_nodes, 3); /* two ReduceMean + Sum */
  CHECK(!strcmp(gopt_node_type(g, g->tensors.a[info.loss].producer), "Sum"));
  /* h gets the gradient from its own mean and from tanh: accumulated */
  int32_t gh = info.grad_of[h];
  CHECK(gh >= 0 && !strcmp(gopt_node_type(g, g->tensors.a[gh].producer), "Sum"));
  gopt_train_info_free(&info);
  gopt_graph_free(g);
}

/* ---- a variadic op with more than 32 inputs: every input still gets its gradient ------------------- */
static void test_wide_concat(void) {
  gopt_graph *g = gopt_graph_new("wide");
  int32_t x = input(g, "x", GOPT_DT_FLOAT, 2, D(4, 8));
  int32_t w = param(g, "W", 2, D(8, 8));
  int32_t h = act(g, "h", 2, D(4, 8)), cat = act(g, "cat", 2, D(4, 40 * 8));
  int32_t parts[40];
  OP(g, "MatMul", "mm", h, x, w);
  for (int i = 0; i < 40; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "r%d", i);
    parts[i] = act(g, nm, 2, D(4, 8));
    OP(g, "Relu", nm, parts[i], h);
  }
  int32_t n = add_op(g, "Concat", "concat", 40, parts, cat);
  gopt_node_set_int(g, n, "axis", 1);
  gopt_graph_add_output(g, cat);
  gopt_train_info info;
  build(g, NULL, &info);
  check_invariants(g, &info, "wide");
  for (int i = 0; i < 40; i++) CHECK_MSG(info.grad_of[parts[i]] >= 0, "wide: part %d", i);
  int32_t gh = info.grad_of[h];
  CHECK(gh >= 0 && !strcmp(gopt_node_type(g, g->tensors.a[gh].producer), "Sum") &&
        g->nodes.a[g->tensors.a[gh].producer].n_in == 40);
  gopt_train_info_free(&info);
  gopt_graph_free(g);
}

int main(void) {
  test_mlp();
  test_optimizers();
  test_convnet();
  test_accumulation();
  test_transformer();
  test_lstm();
  test_gru_rnn();
  test_op_mix();
  test_reduce_l2();
  test_scatter_nd();
  test_unsupported();
  test_two_outputs();
  test_wide_concat();
  return check_exit("test_train");
}
