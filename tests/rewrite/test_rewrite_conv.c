/* test_rewrite_conv.c: convolution rewrites. merge_group_conv (TASO's merge of group convs) halves
 * a conv's groups with a block-diagonal weight: the rewritten graph's output equals a brute-force
 * double-precision grouped convolution computed here and the original graph's (executor), twice
 * in a row (4 -> 2 -> 1 groups). A conv rule in the generator's form (linearity in the weight:
 * Conv(x, w1) + Conv(x, w2) -> Conv(x, w1 + w2), with the attributes exporters write) is verified,
 * matches a hand-built graph once and keeps its output; the same rule with a wrong target fails
 * numerical verification. enlarge_merge_conv of a 1x3 and a 3x1 conv (Inception-v3's pair, both
 * "same" padded) gives one 3x3 conv padded 1 on each side whose Split outputs equal the two convs'
 * (the larger kernel's pads, 0 and 1, made its output 6x8 from 8x8). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/exec.h"
#include "gopt/ops.h"
#include "gopt/rewrite.h"

#define CONV_ATTRS "\"attrs\":{\"dilations\":[1,1],\"group\":1,\"kernel_shape\":[3,3],\"pads\":[1,1,1,1],\"strides\":[1,1]}"
#define SHAPES "\"shapes\":[{\"x0\":[1,4,4,4],\"x1\":[4,4,3,3],\"x2\":[4,4,3,3]},{\"x0\":[1,6,5,5],\"x1\":[6,6,3,3],\"x2\":[6,6,3,3]}]"
static const char k_rules[] =
    "{\"rules\": ["
    "{\"name\":\"conv_linear_w\",\"vars\":3,"
    " \"src\":{\"ops\":[{\"op\":\"Conv\",\"in\":[\"x0\",\"x1\"]," CONV_ATTRS "},{\"op\":\"Conv\",\"in\":[\"x0\",\"x2\"]," CONV_ATTRS "},"
    "  {\"op\":\"Add\",\"in\":[\"o0\",\"o1\"]}],\"out\":[\"o2\"]},"
    " \"dst\":{\"ops\":[{\"op\":\"Add\",\"in\":[\"x1\",\"x2\"]},{\"op\":\"Conv\",\"in\":[\"x0\",\"o0\"]," CONV_ATTRS "}],\"out\":[\"o1\"]},"
    SHAPES ",\"verified\":true},"
    "{\"name\":\"conv_wrong\",\"vars\":3,"
    " \"src\":{\"ops\":[{\"op\":\"Conv\",\"in\":[\"x0\",\"x1\"]," CONV_ATTRS "},{\"op\":\"Conv\",\"in\":[\"x0\",\"x2\"]," CONV_ATTRS "},"
    "  {\"op\":\"Add\",\"in\":[\"o0\",\"o1\"]}],\"out\":[\"o2\"]},"
    " \"dst\":{\"ops\":[{\"op\":\"Mul\",\"in\":[\"x1\",\"x2\"]},{\"op\":\"Conv\",\"in\":[\"x0\",\"o0\"]," CONV_ATTRS "}],\"out\":[\"o1\"]},"
    SHAPES ",\"verified\":true}"
    "]}";

static size_t rule_index(const gopt_ruleset *rs, const char *name) {
  for (size_t i = 0; i < gopt_ruleset_count(rs); i++)
    if (!strcmp(gopt_ruleset_rule_name(rs, i), name)) return i;
  return (size_t)-1;
}

/* A constant with deterministic values in [-1, 1). */
static int32_t weight(gopt_graph *g, const char *name, int rank, const int64_t *d, unsigned salt) {
  int32_t t = gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, rank, d, NULL);
  int64_t n = 1;
  for (int k = 0; k < rank; k++) n *= d[k];
  float *v = malloc(sizeof *v * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = (float)((i * 37 + salt * 11) % 29) / 14.5f - 1.0f;
  gopt_tensor_set_const(g, t, v, sizeof *v * (size_t)n, NULL);
  free(v);
  return t;
}

static void conv_attrs(gopt_graph *g, int32_t n, int64_t k, int64_t group) {
  int64_t two[2] = {1, 1}, ks[2] = {k, k}, pads[4] = {k / 2, k / 2, k / 2, k / 2};
  gopt_node_set_ints(g, n, "dilations", two, 2);
  gopt_node_set_int(g, n, "group", group);
  gopt_node_set_ints(g, n, "kernel_shape", ks, 2);
  gopt_node_set_ints(g, n, "pads", pads, 4);
  gopt_node_set_ints(g, n, "strides", two, 2);
}

/* x [1, 8, 6, 6] -> Conv(w [8, 2, 3, 3], b [8], group 4, pads 1) -> y. */
static gopt_graph *gconv_graph(void) {
  gopt_graph *g = gopt_graph_new("gconv");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[4] = {1, 8, 6, 6}, wd[4] = {8, 2, 3, 3}, bd[1] = {8};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 4, xd, NULL);
  int32_t y = gopt_graph_add_tensor(g, "y", GOPT_DT_FLOAT, 4, xd, NULL);
  int32_t in[3] = {x, weight(g, "w", 4, wd, 1), weight(g, "b", 1, bd, 2)};
  gopt_graph_add_input(g, x);
  conv_attrs(g, gopt_graph_add_node(g, "Conv", "conv", 3, in, 1, &y, NULL), 3, 4);
  gopt_graph_add_output(g, y);
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
  return g;
}

/* The first output of h on input x (numel floats); NULL on failure. */
static float *run_graph(const gopt_graph *h, const float *x, size_t numel) {
  gopt_exec *e = NULL;
  gopt_exec_opts eo = {1, 1, NULL, 0, NULL, 0};
  gopt_error err = {0};
  gopt_host_tensor in = {GOPT_DT_FLOAT, 4, {1, 8, 6, 6}, (void *)x, numel * sizeof *x, NULL}, out = {0};
  float *r = NULL;
  if (gopt_exec_new(h, &eo, &e, NULL, &err) == 0 && gopt_exec_set_input(e, 0, &in, &err) == 0 &&
      gopt_exec_run(e, &err) == 0 && gopt_exec_get_output(e, 0, &out, &err) == 0 && out.nbytes == numel * sizeof *r) {
    r = malloc(out.nbytes);
    memcpy(r, out.data, out.nbytes);
  }
  CHECK_MSG(r != NULL, "executor: %s", err.msg);
  gopt_host_tensor_clear(&out);
  gopt_exec_free(e);
  return r;
}

/* Brute-force grouped conv of the graph's x, w, b (group 4, 3x3, pads 1, stride 1) in double. */
static void brute_gconv(const gopt_graph *g, const float *x, double *y) {
  const float *w = gopt_tensor_data(g, gopt_graph_find_tensor(g, "w"));
  const float *b = gopt_tensor_data(g, gopt_graph_find_tensor(g, "b"));
  for (int o = 0; o < 8; o++)
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 6; j++) {
        double s = b[o];
        for (int c = 0; c < 2; c++)
          for (int u = 0; u < 3; u++)
            for (int v = 0; v < 3; v++) {
              int yy = i + u - 1, xx = j + v - 1;
              if (yy >= 0 && yy < 6 && xx >= 0 && xx < 6)
                s += (double)x[((o / 2) * 2 + c) * 36 + yy * 6 + xx] * w[((o * 2 + c) * 3 + u) * 3 + v];
            }
        y[o * 36 + i * 6 + j] = s;
      }
}

static void test_merge_group_conv(void) {
  gopt_ruleset *rs = gopt_ruleset_builtin();
  size_t ri = rule_index(rs, "merge_group_conv");
  CHECK(ri != (size_t)-1);
  gopt_graph *g = gconv_graph();
  float x[288];
  double ref[288];
  for (int i = 0; i < 288; i++) x[i] = (float)((i * 53) % 41) / 20.0f - 1.0f;
  brute_gconv(g, x, ref);
  gopt_graph *cur = gopt_graph_clone(g);
  for (int64_t want = 2; want >= 1 && cur; want /= 2) {
    gopt_rewrite_match *ms = NULL;
    size_t n = 0;
    gopt_graph *h = NULL;
    gopt_error err = {0};
    int fl = 0;
    CHECK(gopt_rewrite_find(cur, rs, (int)ri, &ms, &n, NULL) == 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1) CHECK_MSG(gopt_rewrite_apply(cur, rs, &ms[0], &h, &fl, &err) == 0, "%s", err.msg);
    free(ms);
    gopt_graph_free(cur);
    cur = h;
    if (!h) break;
    CHECK(fl & GOPT_RW_WEIGHTS);
    CHECK(!(fl & GOPT_RW_NODATA));
    int32_t c = -1;
    for (size_t k = 0; k < h->nodes.n; k++)
      if (gopt_node_alive(h, (int32_t)k) && h->nodes.a[k].op == GOPT_OP_CONV) c = (int32_t)k;
    CHECK(c >= 0 && gopt_node_get_int(h, c, "group", 1) == want);
    CHECK(c >= 0 && gopt_tensor_dims(h, gopt_node_input(h, c, 1))[1] == 8 / want); /* block-diagonal */
    CHECK_MSG(gopt_rewrite_compare(g, h, 7, 1e-4, 1e-5, NULL, &err) == 0, "%s", err.msg);
    float *y = run_graph(h, x, 288);
    double worst = 0;
    for (int i = 0; y && i < 288; i++) worst = fmax(worst, fabs(y[i] - ref[i]));
    CHECK_MSG(y && worst < 1e-4, "groups %lld: max |y - brute force| = %g", (long long)want, worst);
    free(y);
  }
  /* group 1: nothing left to merge */
  if (cur) {
    gopt_rewrite_match *ms = NULL;
    size_t n = 0;
    CHECK(gopt_rewrite_find(cur, rs, (int)ri, &ms, &n, NULL) == 0);
    CHECK_EQ_INT(n, 0);
    free(ms);
  }
  gopt_graph_free(cur);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

/* x -> Conv(w1), Conv(w2) -> Add -> y (3x3, pads 1, the attributes exporters write). */
static gopt_graph *two_conv_graph(void) {
  gopt_graph *g = gopt_graph_new("twoconv");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[4] = {1, 4, 7, 7}, wd[4] = {4, 4, 3, 3};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 4, xd, NULL);
  int32_t a = gopt_graph_add_tensor(g, "a", GOPT_DT_FLOAT, 4, xd, NULL);
  int32_t b = gopt_graph_add_tensor(g, "b", GOPT_DT_FLOAT, 4, xd, NULL);
  int32_t y = gopt_graph_add_tensor(g, "y", GOPT_DT_FLOAT, 4, xd, NULL);
  gopt_graph_add_input(g, x);
  int32_t i1[2] = {x, weight(g, "w1", 4, wd, 3)}, i2[2] = {x, weight(g, "w2", 4, wd, 4)}, i3[2] = {a, b};
  conv_attrs(g, gopt_graph_add_node(g, "Conv", "c1", 2, i1, 1, &a, NULL), 3, 1);
  conv_attrs(g, gopt_graph_add_node(g, "Conv", "c2", 2, i2, 1, &b, NULL), 3, 1);
  gopt_graph_add_node(g, "Add", "add", 2, i3, 1, &y, NULL);
  gopt_graph_add_output(g, y);
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
  return g;
}

static void test_conv_rule(void) {
  gopt_ruleset *rs = NULL;
  gopt_error err = {0};
  CHECK_MSG(gopt_ruleset_parse(k_rules, "k_rules", &rs, &err) == 0, "%s", err.msg);
  if (!rs) return;
  size_t ri = rule_index(rs, "conv_linear_w"), wi = rule_index(rs, "conv_wrong");
  CHECK_MSG(gopt_rule_verify(rs, ri, 3, &err) == 0, "%s", err.msg);
  CHECK(gopt_rule_verify(rs, wi, 3, &err) != 0);
  gopt_graph *g = two_conv_graph();
  gopt_rewrite_match *ms = NULL;
  size_t n = 0;
  CHECK(gopt_rewrite_find(g, rs, (int)ri, &ms, &n, NULL) == 0);
  CHECK_EQ_INT(n, 1);
  if (n == 1) {
    gopt_graph *h = NULL;
    CHECK_MSG(gopt_rewrite_apply(g, rs, &ms[0], &h, NULL, &err) == 0, "%s", err.msg);
    if (h) {
      CHECK_EQ_INT(gopt_graph_node_count(h), 1); /* one Conv (the Add of constant weights folded) */
      CHECK_MSG(gopt_rewrite_compare(g, h, 5, 1e-4, 1e-5, NULL, &err) == 0, "%s", err.msg);
    }
    gopt_graph_free(h);
  }
  free(ms);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

/* x [1, 4, 8, 8] -> Conv 1x3 (pads 0,1) and Conv 3x1 (pads 1,0), each a graph output. */
static void test_enlarge_1x3_3x1(void) {
  gopt_ruleset *rs = gopt_ruleset_builtin();
  gopt_graph *g = gopt_graph_new("enlarge");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[4] = {1, 4, 8, 8}, wd[2][4] = {{4, 4, 1, 3}, {4, 4, 3, 1}}, pads[2][4] = {{0, 1, 0, 1}, {1, 0, 1, 0}};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 4, xd, NULL);
  gopt_graph_add_input(g, x);
  for (int j = 0; j < 2; j++) {
    char nm[8];
    snprintf(nm, sizeof nm, "w%d", j);
    int32_t in[2] = {x, weight(g, nm, 4, wd[j], 5u + (unsigned)j)};
    snprintf(nm, sizeof nm, "y%d", j);
    int32_t y = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, -1, NULL, NULL);
    snprintf(nm, sizeof nm, "c%d", j);
    int32_t c = gopt_graph_add_node(g, "Conv", nm, 2, in, 1, &y, NULL);
    CHECK(c >= 0 && gopt_node_set_ints(g, c, "pads", pads[j], 4) == 0);
    gopt_node_set_ints(g, c, "kernel_shape", wd[j] + 2, 2);
    gopt_graph_add_output(g, y);
  }
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
  gopt_error err = {0};
  gopt_rewrite_match *ms = NULL;
  size_t n = 0;
  CHECK(gopt_rewrite_find(g, rs, (int)rule_index(rs, "enlarge_merge_conv"), &ms, &n, NULL) == 0);
  CHECK_EQ_INT(n, 1);
  gopt_graph *h = NULL;
  if (n == 1) CHECK_MSG(gopt_rewrite_apply(g, rs, &ms[0], &h, NULL, &err) == 0, "%s", err.msg);
  for (size_t i = 0; h && i < h->nodes.n; i++) {
    if (!gopt_node_alive(h, (int32_t)i) || h->nodes.a[i].op != GOPT_OP_CONV) continue;
    size_t np = 0;
    const int64_t *p = gopt_node_get_ints(h, (int32_t)i, "pads", &np);
    CHECK(np == 4 && p[0] == 1 && p[1] == 1 && p[2] == 1 && p[3] == 1);
  }
  CHECK_MSG(h && gopt_rewrite_compare(g, h, 6, 1e-4, 1e-5, NULL, &err) == 0, "%s", err.msg);
  gopt_graph_free(h);
  free(ms);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

int main(void) {
  test_merge_group_conv();
  test_conv_rule();
  test_enlarge_1x3_3x1();
  return check_exit("test_rewrite_conv");
}
