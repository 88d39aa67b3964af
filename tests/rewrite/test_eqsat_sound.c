/* test_eqsat_sound.c: regression tests for two eqsat bugs found on the corpus. (1) A generated
 * rule verified only on square test shapes (gen_0175: Concat(x1, x0) = Concat of the swapped
 * halves of Split(Concat(x0, x1))) holds only when |x0| = |x1| on the axis, yet every output
 * shape matches at other shapes: applied at unequal shapes it merged e-classes computing different
 * values (vgg11, vgg19). Now such a rule is run at each match's shapes and rejected there.
 * (2) A built-in's fragment found its tensors by names the fragment kept cut to 63 characters, so
 * merge_group_conv lost its input on models with long tensor names (efficientnet_b0, lraspp).
 * Reference: every tensor of the saturated e-graph's store is computed by the executor and all
 * tensors of one e-class must hold the same values (the e-graph's invariant), and eqsat's
 * result computes the input's outputs (executor). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/exec.h"
#include "gopt/ops.h"
#include "gopt/rewrite.h"
#include "rewrite/rw_egraph.h"

/* gen_0175 as rules/rules.json had it (verified on x0 = x1 = [4, 4], proved by Z3). */
static const char k_split_rules[] =
    "{\"rules\": [{\"name\":\"gen_0175\",\"vars\":2,"
    " \"src\":{\"ops\":[{\"op\":\"Concat\",\"in\":[\"x1\",\"x0\"],\"attrs\":{\"axis\":1}}],\"out\":[\"o0\"]},"
    " \"dst\":{\"ops\":[{\"op\":\"Concat\",\"in\":[\"x0\",\"x1\"],\"attrs\":{\"axis\":1}},"
    "  {\"op\":\"Split\",\"in\":[\"o0\"],\"outputs\":2,\"attrs\":{\"axis\":1}},"
    "  {\"op\":\"Concat\",\"in\":[\"o1.1\",\"o1\"],\"attrs\":{\"axis\":1}}],\"out\":[\"o2\"]},"
    " \"shapes\":[{\"x0\":[4,4],\"x1\":[4,4]}],\"verified\":true}]}";

static const char k_gconv_rules[] = "{\"rules\": [{\"name\":\"merge_group_conv\",\"builtin\":true}]}";

static int32_t tensor(gopt_graph *g, const char *name, int rank, const int64_t *dims) {
  return gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, rank, dims, NULL);
}

static void finish(gopt_graph *g) {
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
}

/* Number of e-classes whose tensors (every float tensor a live store node writes) do not all hold
 * the same values on random inputs; -1 when the store cannot run. */
static int unsound_classes(const rw_egraph *e) {
  gopt_graph *g = gopt_graph_clone(e->s);
  gopt_exec *x = NULL;
  gopt_error err = {0};
  int bad = -1;
  g->outputs.n = 0;
  for (size_t n = 0; n < g->nodes.n; n++)
    for (int k = 0; gopt_node_alive(g, (int32_t)n) && k < g->nodes.a[n].n_out; k++) {
      int32_t t = gopt_node_output(g, (int32_t)n, k);
      if (g->tensors.a[t].dtype == GOPT_DT_FLOAT) CHECK(gopt_graph_add_output(g, t) == 0);
    }
  gopt_exec_opts eo = {1, 7, NULL, 0, NULL, 0};
  if (gopt_exec_new(g, &eo, &x, NULL, &err) || gopt_exec_random_inputs(x, 7, &err) || gopt_exec_run(x, &err)) {
    fprintf(stderr, "store does not run: %s\n", err.msg);
    goto done;
  }
  size_t no = gopt_exec_n_outputs(x);
  gopt_host_tensor *v = calloc(no + 1, sizeof *v);
  int32_t *first = malloc((e->nc + 1) * sizeof *first);
  for (size_t c = 0; c < e->nc; c++) first[c] = -1;
  bad = 0;
  for (size_t i = 0; i < no; i++) {
    CHECK(gopt_exec_get_output(x, i, &v[i], &err) == 0);
    int32_t c = rw_eg_tclass(e, gopt_exec_output_tensor(x, i));
    if (c < 0 || first[c] < 0) {
      if (c >= 0) first[c] = (int32_t)i;
      continue;
    }
    const gopt_host_tensor *a = &v[first[c]], *b = &v[i];
    int diff = a->nbytes != b->nbytes;
    for (int64_t j = 0; !diff && j < gopt_host_tensor_numel(a); j++) {
      float p = ((const float *)a->data)[j], q = ((const float *)b->data)[j];
      diff = !(fabsf(p - q) <= 1e-4f * (1 + fabsf(p)));
    }
    bad += diff;
  }
  for (size_t i = 0; i < no; i++) gopt_host_tensor_clear(&v[i]);
  free(v);
  free(first);
done:
  gopt_exec_free(x);
  gopt_graph_free(g);
  return bad;
}

/* y1 = Concat(a[2,4], b[2,8]) (gen_0175 does not hold: |a| != |b|), y2 = Concat(p, q) with
 * p, q [2,8] (it holds). */
static gopt_graph *concat_graph(void) {
  gopt_graph *g = gopt_graph_new("concat");
  gopt_graph_set_opset(g, "", 17);
  int64_t d4[2] = {2, 4}, d8[2] = {2, 8}, d12[2] = {2, 12}, d16[2] = {2, 16};
  int32_t a = tensor(g, "a", 2, d4), b = tensor(g, "b", 2, d8), p = tensor(g, "p", 2, d8), q = tensor(g, "q", 2, d8);
  int32_t y1 = tensor(g, "y1", 2, d12), y2 = tensor(g, "y2", 2, d16);
  int32_t in1[2] = {a, b}, in2[2] = {p, q};
  gopt_graph_add_input(g, a);
  gopt_graph_add_input(g, b);
  gopt_graph_add_input(g, p);
  gopt_graph_add_input(g, q);
  int32_t n1 = gopt_graph_add_node(g, "Concat", "cat_ab", 2, in1, 1, &y1, NULL);
  int32_t n2 = gopt_graph_add_node(g, "Concat", "cat_pq", 2, in2, 1, &y2, NULL);
  CHECK(n1 >= 0 && n2 >= 0);
  gopt_node_set_int(g, n1, "axis", 1);
  gopt_node_set_int(g, n2, "axis", 1);
  gopt_graph_add_output(g, y1);
  gopt_graph_add_output(g, y2);
  finish(g);
  return g;
}

/* The rule is rejected at the unequal match and applied at the equal one, by greedy's
 * application and in the e-graph, whose classes stay sound. */
static void test_split_rule_shapes(void) {
  gopt_ruleset *rs = NULL;
  gopt_error err = {0};
  CHECK_MSG(gopt_ruleset_parse(k_split_rules, "test", &rs, &err) == 0, "%s", err.msg);
  if (!rs) return;
  gopt_graph *g = concat_graph();
  gopt_rewrite_match *ms = NULL;
  size_t nm = 0;
  CHECK(gopt_rewrite_find(g, rs, 0, &ms, &nm, &err) == 0);
  CHECK_EQ_INT(nm, 2);
  int applied = 0, rejected = 0;
  for (size_t i = 0; i < nm; i++) {
    gopt_graph *h = NULL;
    gopt_error e2 = {0};
    const char *where = gopt_node_name(g, ms[i].nodes[0]);
    int rc = gopt_rewrite_apply(g, rs, &ms[i], &h, NULL, &e2);
    if (!strcmp(where, "cat_ab")) {
      rejected += rc != 0;
      CHECK_MSG(rc != 0 && strstr(e2.msg, "does not hold at the match's shapes"), "%s", e2.msg);
    } else {
      applied += rc == 0;
      CHECK_MSG(rc == 0, "%s", e2.msg);
      double d = 0;
      if (!rc) CHECK_MSG(gopt_rewrite_compare(g, h, 3, 1e-5, 1e-6, &d, &e2) == 0, "%s", e2.msg);
    }
    gopt_graph_free(h);
  }
  CHECK(applied == 1 && rejected == 1);
  free(ms);
  rw_egraph e;
  CHECK(rw_eg_init(&e, g, &err) == 0);
  size_t before = e.live;
  CHECK_MSG(rw_eq_saturate(&e, rs, 10000, 60, NULL, 0, &err) == 0, "%s", err.msg);
  CHECK(e.live > before); /* applied at cat_pq */
  CHECK_EQ_INT(unsound_classes(&e), 0);
  rw_eg_clear(&e);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

static const char k_long[] = "/features/features.7/features.7.0/block/block.0/block.0.2/Mul_output_0_long_name_";

/* x -> Relu (an 82-character output name) -> Conv with 4 groups (weights with data) -> y. */
static gopt_graph *gconv_graph(void) {
  gopt_graph *g = gopt_graph_new("gconv");
  gopt_graph_set_opset(g, "", 17);
  int64_t dx[4] = {1, 8, 12, 12}, dw[4] = {16, 2, 3, 3}, dy[4] = {1, 16, 12, 12};
  int32_t x = tensor(g, "x", 4, dx), r = tensor(g, k_long, 4, dx), w = tensor(g, "w", 4, dw);
  int32_t y = tensor(g, "y", 4, dy);
  float *wd = malloc(16 * 2 * 9 * sizeof *wd);
  for (int i = 0; i < 16 * 2 * 9; i++) wd[i] = (float)((i * 37 % 29) - 14) / 20.0f; /* deterministic, mixed signs */
  CHECK(gopt_tensor_set_const(g, w, wd, 16 * 2 * 9 * sizeof *wd, NULL) == 0);
  free(wd);
  gopt_graph_add_input(g, x);
  CHECK(gopt_graph_add_node(g, "Relu", "relu", 1, &x, 1, &r, NULL) >= 0);
  int32_t in[2] = {r, w};
  int32_t c = gopt_graph_add_node(g, "Conv", "gconv", 2, in, 1, &y, NULL);
  CHECK(c >= 0);
  int64_t k[2] = {3, 3}, pads[4] = {1, 1, 1, 1};
  gopt_node_set_int(g, c, "group", 4);
  gopt_node_set_ints(g, c, "kernel_shape", k, 2);
  gopt_node_set_ints(g, c, "pads", pads, 4);
  gopt_graph_add_output(g, y);
  finish(g);
  return g;
}

/* merge_group_conv in the e-graph reads the long-named tensor: the new Conv (2 groups) has its
 * input and shapes, the classes are sound, and eqsat's result computes the same outputs. */
static void test_gconv_long_names(void) {
  gopt_ruleset *rs = NULL;
  gopt_error err = {0};
  CHECK_MSG(gopt_ruleset_parse(k_gconv_rules, "test", &rs, &err) == 0, "%s", err.msg);
  if (!rs) return;
  gopt_graph *g = gconv_graph();
  rw_egraph e;
  CHECK(rw_eg_init(&e, g, &err) == 0);
  CHECK_MSG(rw_eq_saturate(&e, rs, 10000, 60, NULL, 0, &err) == 0, "%s", err.msg);
  int merged = 0, broken = 0;
  for (size_t n = 0; n < e.s->nodes.n; n++) {
    if (e.state[n] != EG_LIVE) continue;
    const gopt_node *nd = &e.s->nodes.a[n];
    int32_t in0 = gopt_node_input(e.s, (int32_t)n, 0);
    broken += in0 < 0 || (e.s->tensors.a[gopt_node_output(e.s, (int32_t)n, 0)].flags & GOPT_T_NOSHAPE);
    if (nd->op == GOPT_OP_CONV && gopt_node_get_int(e.s, (int32_t)n, "group", 1) == 2) {
      merged++;
      CHECK(in0 >= 0 && rw_eg_tclass(&e, in0) == rw_eg_tclass(&e, gopt_graph_find_tensor(e.s, k_long)));
    }
  }
  CHECK(merged >= 1);
  CHECK_EQ_INT(broken, 0);
  CHECK_EQ_INT(unsound_classes(&e), 0);
  rw_eg_clear(&e);
  gopt_rewrite_opts o = {"eqsat", NULL, 1.05, 0, 30, 0, 1, NULL, NULL, NULL};
  gopt_rewrite_result r;
  memset(&r, 0, sizeof r);
  CHECK_MSG(gopt_rewrite_search(g, rs, &o, &r, &err) == 0, "%s", err.msg);
  double d = 0;
  if (r.graph) CHECK_MSG(gopt_rewrite_compare(g, r.graph, 9, 1e-4, 1e-5, &d, &err) == 0, "%s", err.msg);
  gopt_rewrite_result_clear(&r);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

int main(void) {
  test_split_rule_shapes();
  test_gconv_long_names();
  return check_exit("test_eqsat_sound");
}
