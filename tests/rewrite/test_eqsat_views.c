/* test_eqsat_views.c: eqsat matches built-in rules through any member of their operands' e-classes
 * (the store's views, rw_view.c), not only through the tensors the store graph wires.
 *
 * Two parallel 3x3 convs of one input: merge_parallel_conv (first iteration) puts the outputs of
 * one merged conv's Split into the two convs' classes. Then
 * - Concat(conv0, conv1): in the store the Concat still reads the original convs, so
 *   concat_of_split, matched on the store graph alone (the old matcher), finds nothing; through
 *   the Split members it matches, and the Concat's class then holds the merged conv's output;
 * - Relu(conv0), Relu(conv1): hoist_unary_over_split needs a unary op on every Split output; the
 *   Relus read the original convs, so on the store it finds nothing; through the members the
 *   Relus' classes then hold the outputs of a Split of Relu(merged conv).
 * eqsat's written result uses concat_of_split, is cheaper and computes the input's outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/ops.h"
#include "gopt/rewrite.h"
#include "rewrite/rw_egraph.h"

/* x [1,32,28,28] -> two 3x3 convs (32 -> 32, pads 1, weights with data) -> Concat on channels
 * (concat = 1, one output) or a Relu on each (two outputs). */
static gopt_graph *two_convs(int concat) {
  gopt_graph *g = gopt_graph_new("views");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[4] = {1, 32, 28, 28}, wd[4] = {32, 32, 3, 3}, pads[4] = {1, 1, 1, 1};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 4, xd, NULL), y[2];
  gopt_graph_add_input(g, x);
  float *wv = malloc(32 * 32 * 9 * sizeof *wv);
  CHECK(wv != NULL);
  for (int j = 0; j < 2 && wv; j++) {
    char nm[8];
    for (int i = 0; i < 32 * 32 * 9; i++) wv[i] = (float)(((i + 5 * j) * 29 % 19) - 9) / 60.0f;
    snprintf(nm, sizeof nm, "w%d", j);
    int32_t in[2] = {x, gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 4, wd, NULL)};
    gopt_tensor_set_const(g, in[1], wv, 32 * 32 * 9 * sizeof *wv, NULL);
    snprintf(nm, sizeof nm, "y%d", j);
    y[j] = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, -1, NULL, NULL);
    snprintf(nm, sizeof nm, "c%d", j);
    int32_t c = gopt_graph_add_node(g, "Conv", nm, 2, in, 1, &y[j], NULL);
    CHECK(c >= 0 && gopt_node_set_ints(g, c, "pads", pads, 4) == 0);
  }
  free(wv);
  if (concat) {
    int32_t out = gopt_graph_add_tensor(g, "cat", GOPT_DT_FLOAT, -1, NULL, NULL);
    int32_t c = gopt_graph_add_node(g, "Concat", "concat", 2, y, 1, &out, NULL);
    CHECK(c >= 0 && gopt_node_set_int(g, c, "axis", 1) == 0);
    gopt_graph_add_output(g, out);
  } else {
    for (int j = 0; j < 2; j++) {
      char nm[8];
      snprintf(nm, sizeof nm, "r%d", j);
      int32_t out = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, -1, NULL, NULL);
      CHECK(gopt_graph_add_node(g, "Relu", nm, 1, &y[j], 1, &out, NULL) >= 0);
      gopt_graph_add_output(g, out);
    }
  }
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
  return g;
}

static int rule_index(const gopt_ruleset *rs, const char *name) {
  for (size_t i = 0; i < gopt_ruleset_count(rs); i++)
    if (!strcmp(gopt_ruleset_rule_name(rs, i), name)) return (int)i;
  return -1;
}

/* 1 when class c has a live member made by op `op` whose first input's class has a live member
 * made by op `below` (-1: any input). */
static int has_member(const rw_egraph *e, int32_t c, int op, int below) {
  for (int32_t i = e->mstart[c]; i < e->mstart[c + 1]; i++) {
    int32_t n = e->mnode[i];
    if (e->state[n] != EG_LIVE || e->s->nodes.a[n].op != op) continue;
    if (below < 0) return 1;
    int32_t cc = rw_eg_tclass(e, gopt_node_input(e->s, n, 0));
    if (has_member(e, cc, below, -1)) return 1;
  }
  return 0;
}

/* Saturates g's e-graph; the store-graph matcher (old) finds no match of rule `name`, while the
 * e-graph afterwards has what the rule gives through the members. */
static void check_views(int concat, const char *name) {
  gopt_ruleset *rs = gopt_ruleset_builtin();
  gopt_graph *g = two_convs(concat);
  gopt_error err = {0};
  rw_egraph e;
  CHECK_MSG(rw_eg_init(&e, g, &err) == 0, "%s", err.msg);
  CHECK_MSG(rw_eq_saturate(&e, rs, 10000, 30, NULL, 0, &err) == 0, "%s", err.msg);
  gopt_rewrite_match *ms = NULL;
  size_t nm = 0;
  int ri = rule_index(rs, name);
  CHECK(ri >= 0 && gopt_rewrite_find(e.s, rs, ri, &ms, &nm, &err) == 0);
  CHECK_MSG(nm == 0, "%s matches the store graph %zu times: the test no longer shows the members", name, nm);
  free(ms);
  int32_t out0 = rw_eg_tclass(&e, gopt_graph_find_tensor(e.s, concat ? "cat" : "r0"));
  CHECK(out0 >= 0);
  if (concat) /* the Concat's class holds the merged conv (concat_of_split) */
    CHECK_MSG(has_member(&e, out0, GOPT_OP_CONV, -1), "the Concat's class has no Conv: %s was not matched", name);
  else /* Relu(conv0)'s class holds a Split of a Relu (hoist_unary_over_split) */
    CHECK_MSG(has_member(&e, out0, GOPT_OP_SPLIT, GOPT_OP_RELU), "no Split of a Relu beside Relu(conv0): %s not matched",
              name);
  rw_eg_clear(&e);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

/* eqsat end to end on the Concat graph: cheaper, concat_of_split used, no Concat left, the same
 * outputs as the input. */
static void check_result(void) {
  gopt_ruleset *rs = gopt_ruleset_builtin();
  gopt_graph *g = two_convs(1);
  gopt_rewrite_opts o = {"eqsat", NULL, 0, 0, 30, 0, 1};
  gopt_rewrite_result re;
  gopt_error err = {0};
  CHECK_MSG(gopt_rewrite_search(g, rs, &o, &re, &err) == 0, "%s", err.msg);
  CHECK_MSG(re.cost_after < re.cost_before, "eqsat kept the input: %s", re.note);
  int used = 0, concats = 0;
  for (size_t i = 0; i < re.n_steps; i++)
    used |= !strcmp(gopt_ruleset_rule_name(rs, (size_t)re.steps[i].rule), "concat_of_split");
  CHECK_MSG(used, "concat_of_split not in the result: %s", re.note);
  for (size_t n = 0; re.graph && n < re.graph->nodes.n; n++)
    concats += gopt_node_alive(re.graph, (int32_t)n) && re.graph->nodes.a[n].op == GOPT_OP_CONCAT;
  CHECK(re.graph && concats == 0 && gopt_graph_validate(re.graph, &err) == 0);
  CHECK_MSG(re.graph && gopt_rewrite_compare(g, re.graph, 4, 1e-4, 1e-5, NULL, &err) == 0, "%s", err.msg);
  gopt_rewrite_result_clear(&re);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

int main(void) {
  check_views(1, "concat_of_split");
  check_views(0, "hoist_unary_over_split");
  check_result();
  return check_exit("test_eqsat_views");
}
