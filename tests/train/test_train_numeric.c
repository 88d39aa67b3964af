/* test_train_numeric.c: the training-graph builder's gradient rules checked numerically. Each small
 * forward graph (IR API, parameters with seeded values) is copied; gopt_train_build_ex turns one
 * copy into a training step whose parameter gradients (info.grad_of) become graph outputs, and
 * gopt's CPU executor runs it. The reference is independent of the builder: central finite
 * differences of the loss (the sum over outputs of each output's mean, docs/TRAINING.md) computed
 * here from the forward copy's outputs, run by the executor for param +- eps, element by element.
 * Covered: MatMul + Add + Relu (an MLP), grouped strided Conv + Tanh, Softmax, LayerNormalization,
 * broadcasting Mul / Div / Sub, ReduceMean over one axis, x / ReduceL2(x) (keepdims=1), ScatterND
 * assigning into a parameter, Einsum (attention-shaped, and three operands with an implicit
 * output), Max / Min / Mean, PRelu, ReduceMax / ReduceMin / GlobalMaxPool, ConvTranspose,
 * InstanceNormalization, DepthToSpace / SpaceToDepth, Trilu, CumSum, Tile, ReduceSumSquare,
 * GatherElements, GatherND, TopK, ScatterElements. Not covered: rules whose gradient ops have no executor kernel
 * (ElementwiseGrad, Gelu/ErfGrad, BatchNormGrad, pooling, Gather/Slice/Pad/ResizeGrad, LSTMGrad;
 * docs/TRAINING.md section 6), and the optimizer updates (removed before the run).
 * Float32 execution: eps 1e-2 on values of order 1; agreement within a few 1e-3 relative. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec/exec_graph.h"
#include "gopt/exec.h"
#include "gopt/graph.h"
#include "gopt/train.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define I(...) ((const int32_t[]){__VA_ARGS__})
#define NARGS(...) ((int)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)))
/* op(g, type, name, out, inputs...) */
#define OP(g, type, name, out, ...) node(g, type, name, NARGS(__VA_ARGS__), I(__VA_ARGS__), out)

#define SEED 20261128u
#define EPS 1e-2
#define RTOL 3e-3 /* of the larger of |analytic|, |finite difference| */
#define ATOL 2e-3 /* of the largest |finite difference| of the parameter (float32 noise) */

/* Uniform in [lo, hi) from exec_graph.h's xorshift (seeded with SEED in main). */
static double uniform(double lo, double hi) { return lo + (hi - lo) * (frand() + 1.0) / 2.0; }

static int32_t act(gopt_graph *g, const char *name, int rank, const int64_t *d) {
  return tensor(g, name, GOPT_DT_FLOAT, rank, d);
}
/* A parameter with seeded values uniform in [lo, hi). */
static int32_t param(gopt_graph *g, const char *name, int rank, const int64_t *d, double lo, double hi) {
  int32_t t = act(g, name, rank, d);
  int64_t n = gopt_tensor_numel(g, t);
  float *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = (float)uniform(lo, hi);
  gopt_tensor_set_const(g, t, v, (size_t)n * sizeof *v, NULL);
  free(v);
  g->tensors.a[t].flags |= GOPT_T_PARAM;
  return t;
}
static int32_t input(gopt_graph *g, const char *name, int rank, const int64_t *d) {
  int32_t t = act(g, name, rank, d);
  gopt_graph_add_input(g, t);
  return t;
}
/* Runs g on the seeded input values; fills outs[0..n_out) (caller clears). 0 on success. */
static int run_graph(const gopt_graph *g, gopt_host_tensor *outs, size_t n_out, const char *label) {
  gopt_exec_opts o = {0};
  o.threads = 1;
  o.seed = SEED;
  gopt_exec *x = NULL;
  gopt_error err = {0};
  int rc = gopt_exec_new(g, &o, &x, NULL, &err);
  if (!rc) rc = gopt_exec_random_inputs(x, SEED, &err);
  if (!rc) rc = gopt_exec_run(x, &err);
  CHECK_MSG(!rc, "%s: executor: %s", label, err.msg);
  CHECK_MSG(rc || gopt_exec_n_outputs(x) == n_out, "%s: outputs", label);
  for (size_t i = 0; !rc && i < n_out; i++) rc = gopt_exec_get_output(x, i, &outs[i], &err);
  gopt_exec_free(x);
  return rc;
}

/* The loss of forward graph f: sum over its outputs of each output's mean. */
static double fwd_loss(const gopt_graph *f, const char *label) {
  size_t n = f->outputs.n;
  gopt_host_tensor outs[8];
  memset(outs, 0, sizeof outs);
  double loss = NAN;
  if (n <= 8 && !run_graph(f, outs, n, label)) {
    loss = 0;
    for (size_t i = 0; i < n; i++) {
      int64_t cnt = gopt_host_tensor_numel(&outs[i]);
      double s = 0;
      for (int64_t k = 0; k < cnt; k++) s += ((const float *)outs[i].data)[k];
      loss += s / (double)cnt;
    }
  }
  for (size_t i = 0; i < n && i < 8; i++) gopt_host_tensor_clear(&outs[i]);
  return loss;
}

/* Turns a copy of f into a training step whose outputs are the loss and each parameter's gradient
 * (update ops removed: only the gradients are checked), runs it, and compares every element of
 * every parameter's gradient with the central difference of fwd_loss. f's parameter values are
 * restored afterwards. Returns the number of parameter elements checked. */
static int check_grads(gopt_graph *f, const char *label) {
  gopt_graph *t = gopt_graph_clone(f);
  gopt_train_info info;
  gopt_error err = {0};
  int rc = gopt_train_build_ex(t, NULL, &info, &err);
  CHECK_MSG(rc == 0, "%s: build: %s", label, err.msg);
  int32_t params[8];
  size_t np = 0;
  for (size_t p = 0; !rc && p < info.n_fwd_tensors; p++)
    if ((f->tensors.a[p].flags & GOPT_T_PARAM) && np < 8) params[np++] = (int32_t)p;
  for (size_t n = info.n_fwd_nodes; !rc && n < t->nodes.n; n++)
    if (gopt_node_alive(t, (int32_t)n) && (t->nodes.a[n].flags & GOPT_N_UPDATE)) gopt_graph_remove_node(t, (int32_t)n);
  t->outputs.n = 0;
  if (!rc) gopt_graph_add_output(t, info.loss);
  for (size_t i = 0; !rc && i < np; i++) {
    CHECK_MSG(info.grad_of[params[i]] >= 0, "%s: no gradient for %s", label, gopt_graph_str(f, f->tensors.a[params[i]].name));
    gopt_graph_add_output(t, info.grad_of[params[i]]);
  }
  gopt_host_tensor outs[9];
  memset(outs, 0, sizeof outs);
  int checked = 0;
  if (!rc && !run_graph(t, outs, np + 1, label)) {
    double l0 = fwd_loss(f, label);
    CHECK_MSG(fabs(((const float *)outs[0].data)[0] - l0) <= 1e-5 * (1 + fabs(l0)), "%s: loss %g vs %g", label,
              ((const float *)outs[0].data)[0], l0);
    for (size_t i = 0; i < np; i++) {
      int32_t p = params[i];
      int64_t n = gopt_tensor_numel(f, p);
      const char *pname = gopt_graph_str(f, f->tensors.a[p].name);
      float *v = malloc((size_t)n * sizeof *v);
      double *fd = malloc((size_t)n * sizeof *fd), scale = 0;
      memcpy(v, gopt_tensor_data(f, p), (size_t)n * sizeof *v);
      for (int64_t k = 0; k < n; k++) {
        float keep = v[k];
        double lp, lm;
        v[k] = (float)(keep + EPS);
        gopt_tensor_set_const(f, p, v, (size_t)n * sizeof *v, NULL);
        lp = fwd_loss(f, label);
        v[k] = (float)(keep - EPS);
        gopt_tensor_set_const(f, p, v, (size_t)n * sizeof *v, NULL);
        lm = fwd_loss(f, label);
        fd[k] = (lp - lm) / ((double)(float)(keep + EPS) - (double)(float)(keep - EPS));
        v[k] = keep;
        if (fabs(fd[k]) > scale) scale = fabs(fd[k]);
      }
      gopt_tensor_set_const(f, p, v, (size_t)n * sizeof *v, NULL);
      CHECK_MSG(gopt_host_tensor_numel(&outs[i + 1]) == n, "%s: gradient of %s has the wrong size", label, pname);
      double worst = 0;
      for (int64_t k = 0; k < n && gopt_host_tensor_numel(&outs[i + 1]) == n; k++) {
        double a = ((const float *)outs[i + 1].data)[k];
        double tol = RTOL * fmax(fabs(a), fabs(fd[k])) + ATOL * scale + 1e-6;
        if (fabs(a - fd[k]) / tol > worst) worst = fabs(a - fd[k]) / tol;
        CHECK_MSG(fabs(a - fd[k]) <= tol, "%s: d loss / d %s[%lld]: rule %.7g, finite difference %.7g", label,
                  pname, (long long)k, a, fd[k]);
        checked++;
      }
      if (getenv("GOPT_TEST_VERBOSE"))
        fprintf(stderr, "%s: %s: %lld elements, worst error %.3f of tolerance\n", label, pname, (long long)n, worst);
      free(v);
      free(fd);
    }
  }
  for (size_t i = 0; i < np + 1 && i < 9; i++) gopt_host_tensor_clear(&outs[i]);
  gopt_train_info_free(&info);
  gopt_graph_free(t);
  CHECK_MSG(checked > 0, "%s: nothing checked", label);
  return checked;
}

/* Makes y g's output, checks g's gradients (check_grads) and frees g. */
static void check_and_free(gopt_graph *g, int32_t y, const char *label) {
  gopt_graph_add_output(g, y);
  check_grads(g, label);
  gopt_graph_free(g);
}

/* s * c for a new graph input c shaped like s (so that the loss is not constant in s). */
static int32_t weighted(gopt_graph *g, int32_t s) {
  const gopt_tensor *t = &g->tensors.a[s];
  int rank = t->rank;
  int64_t d[GOPT_MAX_RANK];
  memcpy(d, gopt_tensor_dims(g, s), (size_t)rank * sizeof *d);
  int32_t c = input(g, "c", rank, d), y = act(g, "y", rank, d);
  OP(g, "Mul", "weigh", y, s, c);
  return y;
}

/* ---- the graphs --------------------------------------------------------------------------------- */

/* MLP: Relu(x W1 + b1) W2 + b2. */
static void test_mlp(void) {
  gopt_graph *g = gopt_graph_new("mlp");
  int32_t x = input(g, "x", 2, D(3, 4)), w1 = param(g, "W1", 2, D(4, 6), -1, 1), b1 = param(g, "b1", 1, D(6), -1, 1);
  int32_t w2 = param(g, "W2", 2, D(6, 3), -1, 1), b2 = param(g, "b2", 1, D(3), -1, 1);
  int32_t h = act(g, "h", 2, D(3, 6)), hb = act(g, "hb", 2, D(3, 6)), r = act(g, "r", 2, D(3, 6));
  int32_t z = act(g, "z", 2, D(3, 3)), y = act(g, "y", 2, D(3, 3));
  OP(g, "MatMul", "fc1", h, x, w1);
  OP(g, "Add", "bias1", hb, h, b1);
  OP(g, "Relu", "relu", r, hb);
  OP(g, "MatMul", "fc2", z, r, w2);
  OP(g, "Add", "bias2", y, z, b2);
  check_and_free(g, y, "mlp");
}

/* Grouped (2 groups), strided, padded Conv with bias, then Tanh. */
static void test_conv(void) {
  gopt_graph *g = gopt_graph_new("conv");
  int32_t x = input(g, "x", 4, D(1, 4, 5, 5)), w = param(g, "W", 4, D(4, 2, 3, 3), -0.5, 0.5);
  int32_t b = param(g, "B", 1, D(4), -0.5, 0.5), c = act(g, "c", 4, D(1, 4, 3, 3)), y = act(g, "y", 4, D(1, 4, 3, 3));
  int32_t n = OP(g, "Conv", "conv", c, x, w, b);
  gopt_node_set_ints(g, n, "kernel_shape", D(3, 3), 2);
  gopt_node_set_ints(g, n, "pads", D(1, 1, 1, 1), 4);
  gopt_node_set_ints(g, n, "strides", D(2, 2), 2);
  gopt_node_set_int(g, n, "group", 2);
  OP(g, "Tanh", "tanh", y, c);
  check_and_free(g, y, "conv");
}

/* ConvTranspose (grad_convt.c): grouped (2), strided, padded, output_padding 1, with bias, on a
 * parameter input so that dX is checked too, then Tanh. */
static void test_conv_transpose(void) {
  gopt_graph *g = gopt_graph_new("convt");
  int32_t x = param(g, "X", 4, D(1, 4, 3, 3), -1, 1), w = param(g, "W", 4, D(4, 3, 3, 3), -0.5, 0.5);
  int32_t b = param(g, "B", 1, D(6), -0.5, 0.5), c = act(g, "ct", 4, D(1, 6, 6, 6)), y = act(g, "ty", 4, D(1, 6, 6, 6));
  int32_t n = OP(g, "ConvTranspose", "convt", c, x, w, b);
  gopt_node_set_ints(g, n, "kernel_shape", D(3, 3), 2);
  gopt_node_set_ints(g, n, "pads", D(1, 1, 1, 1), 4);
  gopt_node_set_ints(g, n, "strides", D(2, 2), 2);
  gopt_node_set_ints(g, n, "output_padding", D(1, 1), 2);
  gopt_node_set_int(g, n, "group", 2);
  OP(g, "Tanh", "tanh", y, c);
  check_and_free(g, weighted(g, y), "conv transpose");
}

/* grad_move.c: DepthToSpace then SpaceToDepth (blocksize 2), DepthToSpace in CRD mode, Trilu (lower, k = 1), CumSum (reverse,
 * exclusive), Tile and ReduceSumSquare (keepdims=0), chained on parameters and weighted. */
static void test_move(void) {
  gopt_graph *g = gopt_graph_new("move");
  int32_t p = param(g, "P", 4, D(1, 8, 2, 3), -1, 1), q = param(g, "Q", 2, D(3, 4), -1, 1);
  int32_t ds = act(g, "ds", 4, D(1, 2, 4, 6)), sd = act(g, "sd", 4, D(1, 8, 2, 3)), tri = act(g, "tri", 2, D(3, 4));
  int32_t cs = act(g, "cs", 2, D(3, 4)), ti = act(g, "ti", 2, D(6, 8)), ss = act(g, "ss", 1, D(8)), o = act(g, "mo", 2, D(6, 8));
  int32_t n = OP(g, "DepthToSpace", "d2s", ds, p);
  gopt_node_set_int(g, n, "blocksize", 2);
  gopt_node_set_int(g, OP(g, "SpaceToDepth", "s2d", sd, ds), "blocksize", 2);
  int32_t k1 = const_tensor(g, "k1", GOPT_DT_INT64, 0, NULL, (const int64_t[]){1}, 8);
  int32_t ax1 = const_tensor(g, "ax1", GOPT_DT_INT64, 0, NULL, (const int64_t[]){1}, 8);
  int32_t reps = const_tensor(g, "reps", GOPT_DT_INT64, 1, D(2), D(2, 2), 16);
  gopt_node_set_int(g, OP(g, "Trilu", "tril", tri, q, k1), "upper", 0);
  n = OP(g, "CumSum", "cumsum", cs, tri, ax1);
  gopt_node_set_int(g, n, "reverse", 1);
  gopt_node_set_int(g, n, "exclusive", 1);
  OP(g, "Tile", "tile", ti, cs, reps);
  n = OP(g, "ReduceSumSquare", "rss", ss, sd);
  gopt_node_set_ints(g, n, "axes", D(0, 2, 3), 3);
  gopt_node_set_int(g, n, "keepdims", 0);
  OP(g, "Add", "add", o, ti, ss);
  check_and_free(g, weighted(g, o), "depth/space, trilu, cumsum, tile, sum square");

  /* TopK (k = 2 of 5 along axis 1; values 0.1 apart, so no step crosses the k-th) and
   * ScatterElements (reduction none, then add) along axis 1 */
  g = gopt_graph_new("topk_scatter");
  int32_t pt = param(g, "PT", 2, D(3, 5), -1, 1), da = param(g, "DA", 2, D(3, 4), -1, 1);
  int32_t up = param(g, "UP", 2, D(3, 2), -1, 1);
  float vt[15];
  for (int k = 0; k < 15; k++) vt[k] = (float)(((k * 4) % 15) - 7) * 0.1f;
  gopt_tensor_set_const(g, pt, vt, sizeof vt, NULL);
  int32_t tv = act(g, "topv", 2, D(3, 2)), tix = tensor(g, "topi", GOPT_DT_INT64, 2, D(3, 2));
  int32_t kk = const_tensor(g, "kk", GOPT_DT_INT64, 1, D(1), D(2), 8);
  int32_t si = const_tensor(g, "si", GOPT_DT_INT64, 2, D(3, 2), D(0, 2, 1, 3, 3, 0), 48);
  int32_t s1 = act(g, "sc_none", 2, D(3, 4)), s2 = act(g, "sc_add", 2, D(3, 4)), st = act(g, "sc_sum", 2, D(3, 4));
  gopt_error e2 = {0};
  n = gopt_graph_add_node(g, "TopK", "topk", 2, I(pt, kk), 2, I(tv, tix), &e2);
  CHECK_MSG(n >= 0, "%s", e2.msg);
  gopt_node_set_int(g, n, "axis", 1);
  gopt_node_set_int(g, OP(g, "ScatterElements", "sc1", s1, da, si, up), "axis", 1);
  n = OP(g, "ScatterElements", "sc2", s2, s1, si, tv);
  gopt_node_set_int(g, n, "axis", 1);
  gopt_node_set_string(g, n, "reduction", "add");
  OP(g, "Add", "sc_add2", st, s2, da);
  check_and_free(g, weighted(g, st), "topk, scatter elements");

  /* DepthToSpace in CRD mode (PyTorch's PixelShuffle), blocksize 2 */
  g = gopt_graph_new("d2s_crd");
  int32_t pc = param(g, "PC", 4, D(1, 8, 2, 3), -1, 1), dc = act(g, "dcrd", 4, D(1, 2, 4, 6));
  n = OP(g, "DepthToSpace", "d2s_crd", dc, pc);
  gopt_node_set_int(g, n, "blocksize", 2);
  gopt_node_set_string(g, n, "mode", "CRD");
  check_and_free(g, weighted(g, dc), "depth to space (CRD)");

  /* GatherElements (axis 1) and GatherND, each with repeated indices: the gradients add up */
  g = gopt_graph_new("gather_elements");
  int32_t a = param(g, "A", 2, D(3, 4), -1, 1), ge = act(g, "ge", 2, D(3, 2));
  int32_t ie = const_tensor(g, "ie", GOPT_DT_INT64, 2, D(3, 2), D(0, 0, 3, 1, 2, 2), 48);
  gopt_node_set_int(g, OP(g, "GatherElements", "gel", ge, a, ie), "axis", 1);
  check_and_free(g, weighted(g, ge), "gather elements");
  g = gopt_graph_new("gather_nd");
  int32_t bq = param(g, "B", 2, D(3, 4), -1, 1), gn = act(g, "gn", 1, D(3));
  int32_t inn = const_tensor(g, "inn", GOPT_DT_INT64, 2, D(3, 2), D(0, 1, 2, 3, 0, 1), 48);
  OP(g, "GatherND", "gnd", gn, bq, inn);
  check_and_free(g, weighted(g, gn), "gather nd");
}

/* InstanceNormalization (grad_instnorm.c) of a parameter input, with scale and bias, weighted. */
static void test_instance_norm(void) {
  gopt_graph *g = gopt_graph_new("instnorm");
  int32_t x = param(g, "X", 4, D(2, 3, 2, 3), -1, 1), sc = param(g, "scale", 1, D(3), 0.5, 1.5);
  int32_t bi = param(g, "B", 1, D(3), -0.5, 0.5), o = act(g, "in_out", 4, D(2, 3, 2, 3));
  gopt_node_set_float(g, OP(g, "InstanceNormalization", "inorm", o, x, sc, bi), "epsilon", 1e-5);
  check_and_free(g, weighted(g, o), "instance norm");
}

/* Softmax(x W) * c: the mean of a softmax alone is constant, so its outputs are weighted. */
static void test_softmax(void) {
  gopt_graph *g = gopt_graph_new("softmax");
  int32_t x = input(g, "x", 2, D(2, 5)), w = param(g, "W", 2, D(5, 5), -1, 1);
  int32_t h = act(g, "h", 2, D(2, 5)), s = act(g, "s", 2, D(2, 5));
  OP(g, "MatMul", "mm", h, x, w);
  gopt_node_set_int(g, OP(g, "Softmax", "softmax", s, h), "axis", -1);
  check_and_free(g, weighted(g, s), "softmax");
}

/* LayerNormalization(x W; gamma, beta) over the last axis, weighted by an input. */
static void test_layernorm(void) {
  gopt_graph *g = gopt_graph_new("layernorm");
  int32_t x = input(g, "x", 3, D(2, 3, 6)), w = param(g, "W", 2, D(6, 6), -1, 1);
  int32_t gm = param(g, "gamma", 1, D(6), 0.5, 1.5), be = param(g, "beta", 1, D(6), -1, 1);
  int32_t h = act(g, "h", 3, D(2, 3, 6)), l = act(g, "l", 3, D(2, 3, 6));
  OP(g, "MatMul", "mm", h, x, w);
  int32_t n = OP(g, "LayerNormalization", "ln", l, h, gm, be);
  gopt_node_set_int(g, n, "axis", -1);
  gopt_node_set_float(g, n, "epsilon", 1e-5);
  check_and_free(g, weighted(g, l), "layernorm");
}

/* Einsum (grad_einsum.c): attention-shaped, softmax(einsum("bid,bjd->bij", Q x, K)) contracted
 * with V by "B I J, B J D -> B I D" (spaces, upper case), then a three-operand chain with an
 * implicit output "ij,jk,kl" (-> "il"). */
static void test_einsum(void) {
  gopt_graph *g = gopt_graph_new("einsum");
  int32_t x = input(g, "x", 3, D(2, 3, 4)), wq = param(g, "Wq", 2, D(4, 4), -1, 1);
  int32_t k = param(g, "K", 3, D(2, 5, 4), -1, 1), v = param(g, "V", 3, D(2, 5, 4), -1, 1);
  int32_t q = act(g, "q", 3, D(2, 3, 4)), sc = act(g, "scores", 3, D(2, 3, 5)), p = act(g, "p", 3, D(2, 3, 5));
  int32_t o = act(g, "o", 3, D(2, 3, 4));
  OP(g, "MatMul", "q_proj", q, x, wq);
  gopt_node_set_string(g, OP(g, "Einsum", "qk", sc, q, k), "equation", "bid,bjd->bij");
  gopt_node_set_int(g, OP(g, "Softmax", "softmax", p, sc), "axis", -1);
  gopt_node_set_string(g, OP(g, "Einsum", "pv", o, p, v), "equation", "B I J, B J D -> B I D");
  check_and_free(g, weighted(g, o), "einsum attention");

  g = gopt_graph_new("einsum3");
  int32_t a = param(g, "A", 2, D(3, 4), -1, 1), bb = param(g, "B", 2, D(4, 2), -1, 1);
  int32_t c = param(g, "C", 2, D(2, 5), -1, 1), y = act(g, "chain_out", 2, D(3, 5));
  gopt_node_set_string(g, OP(g, "Einsum", "chain", y, a, bb, c), "equation", "ij,jk,kl");
  check_and_free(g, weighted(g, y), "einsum chain");
}

/* Broadcasting: ReduceMean_axis1((x * p[3,1] / q[4] - r[1,1,4])^2), keepdims=0; parameters on both
 * sides of Div. */
static void test_broadcast(void) {
  gopt_graph *g = gopt_graph_new("bcast");
  int32_t x = input(g, "x", 3, D(2, 3, 4)), p = param(g, "p", 2, D(3, 1), -1, 1);
  int32_t q = param(g, "q", 1, D(4), 0.5, 1.5), r = param(g, "r", 3, D(1, 1, 4), -1, 1);
  int32_t m = act(g, "m", 3, D(2, 3, 4)), d = act(g, "d", 3, D(2, 3, 4)), e = act(g, "e", 3, D(2, 3, 4));
  int32_t sq = act(g, "sq", 3, D(2, 3, 4)), y = act(g, "y", 2, D(2, 4));
  OP(g, "Mul", "mul", m, x, p);
  OP(g, "Div", "div", d, m, q);
  OP(g, "Sub", "sub", e, d, r);
  OP(g, "Mul", "square", sq, e, e);
  int32_t n = OP(g, "ReduceMean", "mean", y, sq);
  gopt_node_set_ints(g, n, "axes", D(1), 1);
  gopt_node_set_int(g, n, "keepdims", 0);
  check_and_free(g, y, "bcast");
}

/* F.normalize: h / ReduceL2(h, axes=-1, keepdims=1), h = x W, weighted by an input. */
static void test_reduce_l2(void) {
  gopt_graph *g = gopt_graph_new("l2");
  int32_t x = input(g, "x", 2, D(2, 8)), w = param(g, "W", 2, D(8, 8), -1, 1);
  int32_t h = act(g, "h", 2, D(2, 8)), nrm = act(g, "nrm", 2, D(2, 1)), o = act(g, "o", 2, D(2, 8));
  OP(g, "MatMul", "mm", h, x, w);
  int32_t n = OP(g, "ReduceL2", "l2", nrm, h);
  gopt_node_set_ints(g, n, "axes", D(-1), 1);
  gopt_node_set_int(g, n, "keepdims", 1);
  OP(g, "Div", "normalize", o, h, nrm);
  check_and_free(g, weighted(g, o), "l2");
}

/* grad_select.c: Max and Min with broadcasting, Mean of three, PRelu with a per-channel slope,
 * ReduceMax (keepdims=0), ReduceMin (keepdims=1) and GlobalMaxPool. The selecting ops read explicit
 * values spaced wider than eps, so no finite-difference step crosses a tie. */
static void test_select(void) {
  gopt_graph *g = gopt_graph_new("maxmin");
  int32_t a = param(g, "A", 2, D(3, 4), -1, 1), bb = param(g, "B", 1, D(4), -1, 1), c = param(g, "C", 2, D(3, 4), -1, 1);
  /* values at least 0.025 apart across A, B and C, so that no +-eps step crosses a tie: A on
   * x.x5, B on x.x0, C on x.x25 / x.x75, shuffled so that each input wins somewhere */
  static const float va[12] = {-0.55f, 0.35f, -0.15f, 0.45f, 0.05f, -0.35f, 0.55f, -0.05f, 0.25f, -0.45f, 0.15f, -0.25f};
  static const float vb[4] = {0.1f, -0.2f, 0.3f, -0.4f}, vc[12] = {0.175f, -0.325f, 0.425f, -0.075f, -0.525f, 0.275f,
                                                               -0.175f, 0.025f, 0.475f, -0.425f, 0.125f, -0.275f};
  gopt_tensor_set_const(g, a, va, sizeof va, NULL);
  gopt_tensor_set_const(g, bb, vb, sizeof vb, NULL);
  gopt_tensor_set_const(g, c, vc, sizeof vc, NULL);
  int32_t mx = act(g, "mx", 2, D(3, 4)), mn = act(g, "mn", 2, D(3, 4)), me = act(g, "me", 2, D(3, 4));
  OP(g, "Max", "max", mx, a, bb);
  OP(g, "Min", "min", mn, mx, c);
  OP(g, "Mean", "mean", me, mn, a, c);
  check_and_free(g, weighted(g, me), "max min mean");

  g = gopt_graph_new("prelu");
  int32_t x = input(g, "x", 3, D(2, 3, 4)), w = param(g, "W", 2, D(4, 4), -1, 1), sl = param(g, "slope", 2, D(3, 1), 0.1, 0.5);
  int32_t h = act(g, "h", 3, D(2, 3, 4)), pr = act(g, "pr", 3, D(2, 3, 4));
  OP(g, "MatMul", "mm", h, x, w);
  OP(g, "PRelu", "prelu", pr, h, sl);
  check_and_free(g, weighted(g, pr), "prelu");

  g = gopt_graph_new("reduce_select");
  int32_t p = param(g, "P", 4, D(2, 3, 2, 2), -1, 1), rmax = act(g, "rmax", 2, D(2, 2)), rmin = act(g, "rmin", 4, D(2, 3, 1, 1));
  float vp[24]; /* distinct values 0.08 apart in a shuffled order (k * 7 mod 24): no tie within eps */
  for (int k = 0; k < 24; k++) vp[k] = (float)(((k * 7) % 24) - 11.5) * 0.08f;
  gopt_tensor_set_const(g, p, vp, sizeof vp, NULL);
  int32_t gmp = act(g, "gmp", 4, D(2, 3, 1, 1)), sum = act(g, "s", 4, D(2, 3, 1, 1)), o = act(g, "o", 4, D(2, 3, 2, 2));
  int32_t o2 = act(g, "o2", 4, D(2, 3, 2, 2));
  int32_t n = OP(g, "ReduceMax", "rmax", rmax, p);
  gopt_node_set_ints(g, n, "axes", D(1, 2), 2);
  gopt_node_set_int(g, n, "keepdims", 0);
  n = OP(g, "ReduceMin", "rmin", rmin, p);
  gopt_node_set_ints(g, n, "axes", D(2, 3), 2);
  gopt_node_set_int(g, n, "keepdims", 1);
  OP(g, "GlobalMaxPool", "gmp", gmp, p);
  OP(g, "Add", "add", sum, rmin, gmp);
  OP(g, "Mul", "mul", o, sum, p);
  OP(g, "Add", "add_max", o2, o, rmax); /* [2, 2] broadcast over the last two axes */
  check_and_free(g, weighted(g, o2), "reduce max/min, global max pool");

  /* exact two-way ties: the central difference there is 1/2 for each side, PyTorch's even split */
  g = gopt_graph_new("ties");
  int32_t ta = param(g, "TA", 2, D(2, 4), -1, 1), tb2 = param(g, "TB", 2, D(2, 4), -1, 1);
  static const float vta[8] = {0.5f, -0.3f, 0.5f, 0.1f, -0.2f, 0.7f, 0.4f, 0.7f};
  static const float vtb[8] = {0.5f, 0.2f, -0.6f, 0.1f, 0.3f, 0.7f, 0.4f, -0.1f};
  gopt_tensor_set_const(g, ta, vta, sizeof vta, NULL);
  gopt_tensor_set_const(g, tb2, vtb, sizeof vtb, NULL);
  int32_t tm = act(g, "tmax", 2, D(2, 4)), tr = act(g, "trow", 1, D(2)), tt = act(g, "tties", 2, D(2, 4));
  OP(g, "Max", "tie_max", tm, ta, tb2);
  n = OP(g, "ReduceMax", "tie_rmax", tr, ta);
  gopt_node_set_ints(g, n, "axes", D(1), 1);
  gopt_node_set_int(g, n, "keepdims", 0);
  int32_t tr2 = act(g, "trow2", 2, D(2, 1));
  OP(g, "Unsqueeze", "tie_unsq", tr2, tr, const_tensor(g, "tie_ax", GOPT_DT_INT64, 1, D(1), D(1), 8));
  OP(g, "Add", "tie_add", tt, tm, tr2);
  check_and_free(g, weighted(g, tt), "two-way ties");
}

/* ScatterND assigning parameter u into parameter b at [2] and [3] (swin_v2_t's qkv bias), times x. */
static void test_scatter_nd(void) {
  gopt_graph *g = gopt_graph_new("scatter");
  int32_t x = input(g, "x", 2, D(2, 6)), b = param(g, "b", 1, D(6), -1, 1), u = param(g, "u", 1, D(2), -1, 1);
  int32_t idx = gopt_graph_add_tensor(g, "idx", GOPT_DT_INT64, 2, D(2, 1), NULL);
  gopt_tensor_set_const(g, idx, D(2, 3), 2 * sizeof(int64_t), NULL);
  int32_t bz = act(g, "bz", 1, D(6)), y = act(g, "y", 2, D(2, 6));
  OP(g, "ScatterND", "assign", bz, b, idx, u);
  OP(g, "Mul", "scale", y, x, bz);
  check_and_free(g, y, "scatter");
}

int main(void) {
  rng = SEED;
  test_mlp();
  test_conv();
  test_conv_transpose();
  test_instance_norm();
  test_move();
  test_softmax();
  test_layernorm();
  test_broadcast();
  test_reduce_l2();
  test_scatter_nd();
  test_einsum();
  test_select();
  return check_exit("test_train_numeric");
}
