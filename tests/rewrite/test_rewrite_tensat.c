/* test_rewrite_tensat.c: the built-ins added for Tensat's models, on hand-built graphs:
 * sink_unary_below_concat (Concat of one unary op's outputs -> the op after the Concat),
 * swap_unary_maxpool (Relu/Sigmoid/Tanh before a MaxPool -> after it),
 * merge_parallel_matmul_batched (two MatMuls sharing a 2-D input -> one MatMul over stacked
 * constant operands and a Split on axis 0), merge_matmul_add (x W1 + h W2 -> [x h] [W1; W2],
 * two such cells at once, sharing one Concat) and merge_separable_sum (the sum of two separable
 * convs on one input -> one grouped conv with interleaved channels and one pointwise conv). Each
 * application computes the same outputs as the
 * input (gopt's executor on random inputs, weights with data); the cases they must not match are
 * not matched; the batched merge is cheaper under the simulator where merge_parallel_matmul's
 * Split on the last axis (a copy) makes it dearer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/ops.h"
#include "gopt/rewrite.h"

static int32_t rule_of(const gopt_ruleset *rs, const char *name) {
  for (size_t i = 0; i < gopt_ruleset_count(rs); i++)
    if (!strcmp(gopt_ruleset_rule_name(rs, i), name)) return (int32_t)i;
  CHECK_MSG(0, "no built-in %s", name);
  return -1;
}

static size_t n_matches(const gopt_graph *g, const gopt_ruleset *rs, const char *name) {
  gopt_rewrite_match *ms = NULL;
  size_t n = 0;
  CHECK(gopt_rewrite_find(g, rs, rule_of(rs, name), &ms, &n, NULL) == 0);
  free(ms);
  return n;
}

/* Applies the first match of `name`; the result must compute g's outputs. */
static gopt_graph *apply_first(const gopt_graph *g, const gopt_ruleset *rs, const char *name) {
  gopt_rewrite_match *ms = NULL;
  size_t n = 0;
  gopt_graph *h = NULL;
  gopt_error err = {0};
  CHECK(gopt_rewrite_find(g, rs, rule_of(rs, name), &ms, &n, NULL) == 0);
  CHECK_MSG(n >= 1, "%s: no match", name);
  if (n >= 1 && gopt_rewrite_apply(g, rs, &ms[0], &h, NULL, &err) == 0) {
    CHECK_MSG(gopt_rewrite_compare(g, h, 11, 1e-5, 1e-6, NULL, &err) == 0, "%s: %s", name, err.msg);
  } else if (n >= 1) {
    CHECK_MSG(0, "%s: %s", name, err.msg);
  }
  free(ms);
  return h;
}

static int32_t t4(gopt_graph *g, const char *name, int64_t c, int64_t hw) {
  int64_t d[4] = {1, c, hw, hw};
  return gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, 4, d, NULL);
}

static int32_t op1(gopt_graph *g, const char *type, const char *name, int32_t x, int32_t y) {
  return gopt_graph_add_node(g, type, name, 1, &x, 1, &y, NULL);
}

/* Concat(u(a), u2(b)) on the channel axis -> out; with extra, u(a) is a graph output too. */
static gopt_graph *concat_graph(const char *u, const char *u2, int extra) {
  gopt_graph *g = gopt_graph_new("concat");
  gopt_graph_set_opset(g, "", 17);
  int32_t a = t4(g, "a", 3, 5), b = t4(g, "b", 2, 5), ua = t4(g, "ua", 3, 5), ub = t4(g, "ub", 2, 5);
  int32_t y = t4(g, "y", 5, 5);
  gopt_graph_add_input(g, a);
  gopt_graph_add_input(g, b);
  op1(g, u, "u0", a, ua);
  op1(g, u2, "u1", b, ub);
  int32_t in[2] = {ua, ub};
  int32_t c = gopt_graph_add_node(g, "Concat", "cat", 2, in, 1, &y, NULL);
  gopt_node_set_int(g, c, "axis", 1);
  gopt_graph_add_output(g, y);
  if (extra) gopt_graph_add_output(g, ua);
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
  return g;
}

static void test_sink_concat(const gopt_ruleset *rs) {
  gopt_graph *g = concat_graph("Tanh", "Tanh", 0);
  gopt_graph *h = apply_first(g, rs, "sink_unary_below_concat");
  if (h) {
    CHECK_EQ_INT(gopt_graph_node_count(h), 2); /* Concat, then one Tanh */
    int32_t y = gopt_graph_find_tensor(h, "y");  /* the output keeps its name and shape */
    CHECK(y >= 0 && h->tensors.a[y].producer >= 0 && h->nodes.a[h->tensors.a[y].producer].op == GOPT_OP_TANH);
    CHECK(y >= 0 && gopt_tensor_dims(h, y)[1] == 5);
  }
  gopt_graph_free(h);
  gopt_graph_free(g);
  g = concat_graph("Tanh", "Relu", 0); /* different ops: no match */
  CHECK_EQ_INT(n_matches(g, rs, "sink_unary_below_concat"), 0);
  gopt_graph_free(g);
  g = concat_graph("Relu", "Relu", 1); /* a Relu output used outside the Concat: no match */
  CHECK_EQ_INT(n_matches(g, rs, "sink_unary_below_concat"), 0);
  gopt_graph_free(g);
}

/* u(x) -> MaxPool 3x3 stride 2 with pads (or AveragePool) -> y; with extra, u(x) is an output. */
static gopt_graph *pool_graph(const char *u, const char *pool, int extra) {
  gopt_graph *g = gopt_graph_new("pool");
  gopt_graph_set_opset(g, "", 17);
  int32_t x = t4(g, "x", 3, 9), r = t4(g, "r", 3, 9), y = t4(g, "y", 3, 5);
  gopt_graph_add_input(g, x);
  op1(g, u, "u", x, r);
  int32_t p = op1(g, pool, "pool", r, y);
  int64_t k[2] = {3, 3}, s[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
  gopt_node_set_ints(g, p, "kernel_shape", k, 2);
  gopt_node_set_ints(g, p, "strides", s, 2);
  gopt_node_set_ints(g, p, "pads", pads, 4);
  gopt_graph_add_output(g, y);
  if (extra) gopt_graph_add_output(g, r);
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
  return g;
}

static void test_swap_maxpool(const gopt_ruleset *rs) {
  const char *ops[3] = {"Relu", "Sigmoid", "Tanh"};
  for (int i = 0; i < 3; i++) {
    gopt_graph *g = pool_graph(ops[i], "MaxPool", 0);
    gopt_graph *h = apply_first(g, rs, "swap_unary_maxpool");
    if (h) { /* the pool now reads the graph input, the unary op writes the output */
      int32_t x = gopt_graph_find_tensor(h, "x"), y = gopt_graph_find_tensor(h, "y");
      int32_t p = h->tensors.a[y].producer, q = p >= 0 ? gopt_node_input(h, p, 0) : -1;
      CHECK_MSG(p >= 0 && !strcmp(gopt_node_type(h, p), ops[i]) && q >= 0 &&
                    h->nodes.a[h->tensors.a[q].producer].op == GOPT_OP_MAX_POOL &&
                    gopt_node_input(h, h->tensors.a[q].producer, 0) == x,
                "%s not after the pool", ops[i]);
    }
    gopt_graph_free(h);
    gopt_graph_free(g);
  }
  gopt_graph *g = pool_graph("Relu", "AveragePool", 0); /* an average does not commute with Relu */
  CHECK_EQ_INT(n_matches(g, rs, "swap_unary_maxpool"), 0);
  gopt_graph_free(g);
  g = pool_graph("Relu", "MaxPool", 1); /* the Relu output is used outside */
  CHECK_EQ_INT(n_matches(g, rs, "swap_unary_maxpool"), 0);
  gopt_graph_free(g);
}

static int32_t weight(gopt_graph *g, const char *name, int rank, const int64_t *d, float scale) {
  int32_t w = gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, rank, d, NULL);
  size_t n = 1;
  for (int i = 0; i < rank; i++) n *= (size_t)d[i];
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = scale * (float)((int)(i * 7 % 11) - 5);
  gopt_tensor_set_const(g, w, v, n * sizeof *v, NULL);
  free(v);
  return w;
}

/* x [M, K] times a rank-2 weight [K, N] and a second operand: a weight [K, N] (batched 0), a
 * weight [2, K, N] (1) or a graph input [K, N] (2); two outputs. */
static gopt_graph *mm_graph(int64_t M, int64_t K, int64_t N, int batched) {
  gopt_graph *g = gopt_graph_new("mm");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[2] = {M, K}, w1d[2] = {K, N}, w2d[3] = {2, K, N};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 2, xd, NULL);
  int32_t w1 = weight(g, "w1", 2, w1d, 0.1f);
  int32_t w2 = batched == 1 ? weight(g, "w2", 3, w2d, 0.05f)
               : batched == 2 ? gopt_graph_add_tensor(g, "w2", GOPT_DT_FLOAT, 2, w1d, NULL)
                              : weight(g, "w2", 2, w1d, 0.05f);
  if (batched == 2) gopt_graph_add_input(g, w2);
  int32_t y1 = gopt_graph_add_tensor(g, "y1", GOPT_DT_FLOAT, -1, NULL, NULL);
  int32_t y2 = gopt_graph_add_tensor(g, "y2", GOPT_DT_FLOAT, -1, NULL, NULL);
  gopt_graph_add_input(g, x);
  int32_t in1[2] = {x, w1}, in2[2] = {x, w2};
  gopt_graph_add_node(g, "MatMul", "mm1", 2, in1, 1, &y1, NULL);
  gopt_graph_add_node(g, "MatMul", "mm2", 2, in2, 1, &y2, NULL);
  gopt_graph_add_output(g, y1);
  gopt_graph_add_output(g, y2);
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
  return g;
}

static void test_batched_matmul(const gopt_ruleset *rs) {
  for (int batched = 0; batched < 2; batched++) {
    gopt_graph *g = mm_graph(5, 4, 3, batched);
    gopt_graph *h = apply_first(g, rs, "merge_parallel_matmul_batched");
    if (h) {
      size_t mms = 0;
      for (size_t i = 0; i < h->nodes.n; i++)
        mms += gopt_node_alive(h, (int32_t)i) && h->nodes.a[i].op == GOPT_OP_MATMUL;
      CHECK_EQ_INT(mms, 1);
      int32_t y2 = gopt_graph_find_tensor(h, "y2");
      CHECK_EQ_INT(h->tensors.a[y2].rank, batched ? 3 : 2);
    }
    gopt_graph_free(h);
    gopt_graph_free(g);
  }
  /* BERT's shape: 64 rows. One batched kernel and a free Split on axis 0 beat one MatMul plus a
   * Split on the last axis that copies (merge_parallel_matmul), which beats two kernels: at 64
   * rows the kernel floors dominate (the measured-GPU model of the GPU presets; under the old
   * roofline presets the copy cost more than the second kernel). */
  gopt_graph *g = mm_graph(64, 256, 256, 0);
  gopt_graph *b = apply_first(g, rs, "merge_parallel_matmul_batched");
  gopt_graph *p = apply_first(g, rs, "merge_parallel_matmul");
  double c0 = 0, cb = 0, cp = 0;
  CHECK(gopt_rewrite_cost(g, NULL, &c0, NULL) == 0);
  CHECK(b && gopt_rewrite_cost(b, NULL, &cb, NULL) == 0);
  CHECK(p && gopt_rewrite_cost(p, NULL, &cp, NULL) == 0);
  CHECK_MSG(cb < cp && cp < c0, "batched %g, two MatMuls %g, last-axis Split %g", cb, c0, cp);
  gopt_graph_free(b);
  gopt_graph_free(p);
  gopt_graph_free(g);
  g = mm_graph(5, 4, 3, 2); /* a right operand that is not a constant: no match */
  CHECK_EQ_INT(n_matches(g, rs, "merge_parallel_matmul_batched"), 0);
  gopt_graph_free(g);
}

/* An RNN step's cells: c_i = x W_i + h U_i (i < cells; the first as Gemm(h, U_0, x W_0) when
 * gemm), each an output. */
static gopt_graph *cells_graph(int cells, int gemm) {
  gopt_graph *g = gopt_graph_new("cells");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[2] = {2, 6}, hd[2] = {2, 4}, wd[2] = {6, 5}, ud[2] = {4, 5};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 2, xd, NULL);
  int32_t h = gopt_graph_add_tensor(g, "h", GOPT_DT_FLOAT, 2, hd, NULL);
  gopt_graph_add_input(g, x);
  gopt_graph_add_input(g, h);
  for (int i = 0; i < cells; i++) {
    char n[4][16];
    snprintf(n[0], 16, "w%d", i), snprintf(n[1], 16, "u%d", i), snprintf(n[2], 16, "xw%d", i);
    snprintf(n[3], 16, "c%d", i);
    int32_t w = weight(g, n[0], 2, wd, 0.1f + 0.01f * (float)i), u = weight(g, n[1], 2, ud, 0.07f);
    int32_t xw = gopt_graph_add_tensor(g, n[2], GOPT_DT_FLOAT, -1, NULL, NULL);
    int32_t c = gopt_graph_add_tensor(g, n[3], GOPT_DT_FLOAT, -1, NULL, NULL);
    int32_t in[3] = {x, w, -1};
    gopt_graph_add_node(g, "MatMul", n[2], 2, in, 1, &xw, NULL);
    if (gemm && i == 0) {
      int32_t gin[3] = {h, u, xw};
      gopt_graph_add_node(g, "Gemm", n[3], 3, gin, 1, &c, NULL);
    } else {
      int32_t hu = gopt_graph_add_tensor(g, NULL, GOPT_DT_FLOAT, -1, NULL, NULL);
      int32_t hin[2] = {h, u}, ain[2] = {xw, hu};
      gopt_graph_add_node(g, "MatMul", NULL, 2, hin, 1, &hu, NULL);
      gopt_graph_add_node(g, "Add", n[3], 2, ain, 1, &c, NULL);
    }
    gopt_graph_add_output(g, c);
  }
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
  return g;
}

static size_t count_op(const gopt_graph *g, int op) {
  size_t k = 0;
  for (size_t i = 0; i < g->nodes.n; i++) k += gopt_node_alive(g, (int32_t)i) && g->nodes.a[i].op == op;
  return k;
}

static void test_matmul_add(const gopt_ruleset *rs) {
  /* three cells: the first match takes two of them (one Concat, two MatMuls), the next one the
   * third, reusing that Concat */
  gopt_graph *g = cells_graph(3, 0);
  gopt_graph *h = apply_first(g, rs, "merge_matmul_add");
  if (h) {
    CHECK_EQ_INT(count_op(h, GOPT_OP_CONCAT), 1);
    CHECK_EQ_INT(count_op(h, GOPT_OP_ADD), 1);
    gopt_graph *k = apply_first(h, rs, "merge_matmul_add");
    if (k) {
      CHECK_EQ_INT(count_op(k, GOPT_OP_CONCAT), 1);
      CHECK_EQ_INT(count_op(k, GOPT_OP_ADD), 0);
      CHECK_EQ_INT(count_op(k, GOPT_OP_MATMUL), 3);
      CHECK(gopt_rewrite_compare(g, k, 13, 1e-5, 1e-6, NULL, NULL) == 0);
    }
    gopt_graph_free(k);
  }
  gopt_graph_free(h);
  gopt_graph_free(g);
  g = cells_graph(1, 1); /* the Gemm form */
  h = apply_first(g, rs, "merge_matmul_add");
  if (h) CHECK(count_op(h, GOPT_OP_GEMM) == 0 && count_op(h, GOPT_OP_MATMUL) == 1);
  gopt_graph_free(h);
  gopt_graph_free(g);
}

static int32_t conv(gopt_graph *g, const char *name, int32_t x, int32_t w, int32_t b, int64_t group, int64_t k) {
  int32_t y = gopt_graph_add_tensor(g, NULL, GOPT_DT_FLOAT, -1, NULL, NULL);
  int32_t in[3] = {x, w, b};
  int32_t n = gopt_graph_add_node(g, "Conv", name, b >= 0 ? 3 : 2, in, 1, &y, NULL);
  int64_t ks[2] = {k, k}, pads[4] = {k / 2, k / 2, k / 2, k / 2}, one[2] = {1, 1};
  gopt_node_set_int(g, n, "group", group);
  gopt_node_set_ints(g, n, "kernel_shape", ks, 2);
  gopt_node_set_ints(g, n, "pads", pads, 4);
  gopt_node_set_ints(g, n, "strides", one, 2);
  gopt_node_set_ints(g, n, "dilations", one, 2);
  return y;
}

/* P_a(G_a(x)) + P_b(G_b(x)): x [1, 4, 6, 6]; G_a 4 outputs and G_b 6 (2 and 3 per group) with
 * group ga_group / 2, 3x3; pointwise convs to 5 channels; biases on G_b, G_a and P_a. */
static gopt_graph *sep_graph(int64_t ga_group) {
  gopt_graph *g = gopt_graph_new("sep");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[4] = {1, 4, 6, 6}, wa[4] = {4, 4 / ga_group, 3, 3}, wb[4] = {6, 2, 3, 3};
  int64_t pa[4] = {5, 4, 1, 1}, pb[4] = {5, 6, 1, 1}, b4[1] = {4}, b6[1] = {6}, b5[1] = {5};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 4, xd, NULL);
  gopt_graph_add_input(g, x);
  int32_t ya = conv(g, "ga", x, weight(g, "wga", 4, wa, 0.1f), weight(g, "bga", 1, b4, 0.2f), ga_group, 3);
  int32_t yb = conv(g, "gb", x, weight(g, "wgb", 4, wb, 0.07f), weight(g, "bgb", 1, b6, 0.1f), 2, 3);
  ya = conv(g, "pa", ya, weight(g, "wpa", 4, pa, 0.1f), weight(g, "bpa", 1, b5, 0.3f), 1, 1);
  yb = conv(g, "pb", yb, weight(g, "wpb", 4, pb, 0.05f), -1, 1, 1);
  int32_t y = gopt_graph_add_tensor(g, "y", GOPT_DT_FLOAT, -1, NULL, NULL), in[2] = {ya, yb};
  gopt_graph_add_node(g, "Add", "sum", 2, in, 1, &y, NULL);
  gopt_graph_add_output(g, y);
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
  return g;
}

static void test_separable_sum(const gopt_ruleset *rs) {
  gopt_graph *g = sep_graph(2);
  gopt_graph *h = apply_first(g, rs, "merge_separable_sum");
  if (h) {
    CHECK_EQ_INT(gopt_graph_node_count(h), 2);
    CHECK_EQ_INT(count_op(h, GOPT_OP_CONV), 2);
  }
  gopt_graph_free(h);
  gopt_graph_free(g);
  g = sep_graph(1); /* different group counts: no match */
  CHECK_EQ_INT(n_matches(g, rs, "merge_separable_sum"), 0);
  gopt_graph_free(g);
}

int main(void) {
  gopt_ruleset *rs = gopt_ruleset_builtin();
  CHECK(rs != NULL);
  if (rs) {
    test_sink_concat(rs);
    test_swap_maxpool(rs);
    test_batched_matmul(rs);
    test_matmul_add(rs);
    test_separable_sum(rs);
  }
  gopt_ruleset_free(rs);
  return check_exit("test_rewrite_tensat");
}
