/* test_eqsat.c: the eqsat rewrite method (Tensat): ILP extraction equals the brute-force optimum
 * (every choice of one e-node per e-class enumerated) on the e-graph of a 4-matmul chain
 * saturated with associativity; Tensat's cycle filtering removes the e-node a cyclic rewrite
 * (Relu(Relu(x)) = Relu(x)) creates, and the ILP's order constraints keep extraction acyclic
 * without it; merging two matmuls where one's input depends on the other is filtered; eqsat's result is never costlier than greedy's on small graphs where it saturates,
 * and computes the same outputs; a deliberately wrong rule forced into eqsat is caught by the
 * output comparison; a rewrite that maps an output to one of its fragment's inputs
 * (concat_of_split) converts back to a valid, cheaper graph; extraction costs a contiguous Split
 * as free like the simulator, so eqsat merges parallel convs as greedy does; large weights and
 * those rewrites derive from them stay out of the e-graph and are computed for the extracted
 * graph only (recipes run again, one reading another's result). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/ops.h"
#include "gopt/rewrite.h"
#include "gopt/sim.h"
#include "rewrite/rw_egraph.h"

/* Associativity both ways; Relu idempotence (a rewrite whose union makes a cycle); a wrong rule
 * (Relu -> Neg) claimed verified. */
static const char k_rules[] =
    "{\"rules\": ["
    "{\"name\":\"assoc_lr\",\"vars\":3,"
    " \"src\":{\"ops\":[{\"op\":\"MatMul\",\"in\":[\"x0\",\"x1\"]},{\"op\":\"MatMul\",\"in\":[\"o0\",\"x2\"]}],\"out\":[\"o1\"]},"
    " \"dst\":{\"ops\":[{\"op\":\"MatMul\",\"in\":[\"x1\",\"x2\"]},{\"op\":\"MatMul\",\"in\":[\"x0\",\"o0\"]}],\"out\":[\"o1\"]},"
    " \"shapes\":[{\"x0\":[3,4],\"x1\":[4,5],\"x2\":[5,2]}],\"verified\":true},"
    "{\"name\":\"assoc_rl\",\"vars\":3,"
    " \"src\":{\"ops\":[{\"op\":\"MatMul\",\"in\":[\"x1\",\"x2\"]},{\"op\":\"MatMul\",\"in\":[\"x0\",\"o0\"]}],\"out\":[\"o1\"]},"
    " \"dst\":{\"ops\":[{\"op\":\"MatMul\",\"in\":[\"x0\",\"x1\"]},{\"op\":\"MatMul\",\"in\":[\"o0\",\"x2\"]}],\"out\":[\"o1\"]},"
    " \"shapes\":[{\"x0\":[3,4],\"x1\":[4,5],\"x2\":[5,2]}],\"verified\":true},"
    "{\"name\":\"relu_idem\",\"vars\":1,"
    " \"src\":{\"ops\":[{\"op\":\"Relu\",\"in\":[\"x0\"]},{\"op\":\"Relu\",\"in\":[\"o0\"]}],\"out\":[\"o1\"]},"
    " \"dst\":{\"ops\":[{\"op\":\"Relu\",\"in\":[\"x0\"]}],\"out\":[\"o0\"]},"
    " \"shapes\":[{\"x0\":[4,4]}],\"verified\":true},"
    "{\"name\":\"wrong_relu_neg\",\"vars\":1,"
    " \"src\":{\"ops\":[{\"op\":\"Relu\",\"in\":[\"x0\"]}],\"out\":[\"o0\"]},"
    " \"dst\":{\"ops\":[{\"op\":\"Neg\",\"in\":[\"x0\"]}],\"out\":[\"o0\"]},"
    " \"shapes\":[{\"x0\":[4,4]}],\"verified\":true}"
    "]}";

static int32_t tensor(gopt_graph *g, const char *name, int64_t a, int64_t b) {
  int64_t d[2] = {a, b};
  return gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, 2, d, NULL);
}

static void node(gopt_graph *g, const char *type, const char *name, int32_t a, int32_t b, int32_t out) {
  int32_t in[2] = {a, b};
  CHECK(gopt_graph_add_node(g, type, name, b >= 0 ? 2 : 1, in, 1, &out, NULL) >= 0);
}

static void finish(gopt_graph *g) {
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
}

/* y = ((A B) C) D with shapes that make another order much cheaper. */
static gopt_graph *chain4(void) {
  gopt_graph *g = gopt_graph_new("chain4");
  gopt_graph_set_opset(g, "", 17);
  int32_t A = tensor(g, "A", 1024, 16), B = tensor(g, "B", 16, 1024), C = tensor(g, "C", 1024, 16);
  int32_t D = tensor(g, "D", 16, 1024);
  int32_t ab = tensor(g, "ab", 1024, 1024), abc = tensor(g, "abc", 1024, 16), y = tensor(g, "y", 1024, 1024);
  gopt_graph_add_input(g, A);
  gopt_graph_add_input(g, B);
  gopt_graph_add_input(g, C);
  gopt_graph_add_input(g, D);
  node(g, "MatMul", "m1", A, B, ab);
  node(g, "MatMul", "m2", ab, C, abc);
  node(g, "MatMul", "m3", abc, D, y);
  gopt_graph_add_output(g, y);
  finish(g);
  return g;
}

/* y = Relu(Relu(x)). */
static gopt_graph *relu2(void) {
  gopt_graph *g = gopt_graph_new("relu2");
  gopt_graph_set_opset(g, "", 17);
  int32_t x = tensor(g, "x", 64, 64), a = tensor(g, "a", 64, 64), y = tensor(g, "y", 64, 64);
  gopt_graph_add_input(g, x);
  node(g, "Relu", "r1", x, -1, a);
  node(g, "Relu", "r2", a, -1, y);
  gopt_graph_add_output(g, y);
  finish(g);
  return g;
}

/* ---- brute force ------------------------------------------------------------------------------ */

typedef struct bf {
  const rw_egraph *e;
  const double *cost;
  int32_t *cls;     /* the classes with members */
  int ncls;
  int32_t *pick;    /* per class: index of the chosen member */
  double best;
} bf;

/* Objective of the current picks (sum over distinct needed e-nodes), INFINITY when cyclic. */
static double bf_eval(bf *b, int32_t c, uint8_t *color, uint8_t *counted) {
  const rw_egraph *e = b->e;
  if (e->cleaf[c] >= 0 || color[c] == 2) return 0;
  if (color[c] == 1) return INFINITY;
  color[c] = 1;
  int32_t n = e->mnode[e->mstart[c] + b->pick[c]];
  double v = 0;
  if (e->state[n] != EG_LIVE) v = INFINITY;
  if (!counted[n]) v += b->cost[n], counted[n] = 1;
  for (int k = 0; k < e->s->nodes.a[n].n_in && v < INFINITY; k++)
    v += bf_eval(b, rw_eg_tclass(e, gopt_node_input(e->s, n, k)), color, counted);
  color[c] = 2;
  return v;
}

static void bf_rec(bf *b, int i) {
  const rw_egraph *e = b->e;
  if (i == b->ncls) {
    uint8_t *color = calloc(e->nc + 1, 1), *counted = calloc(e->s->nodes.n + 1, 1);
    double v = 0;
    for (size_t r = 0; r < e->n_roots; r++) v += bf_eval(b, rw_eg_find(e, e->roots[r]), color, counted);
    if (v < b->best) b->best = v;
    free(color);
    free(counted);
    return;
  }
  int32_t c = b->cls[i];
  for (int32_t m = 0; m < e->mstart[c + 1] - e->mstart[c]; m++) {
    b->pick[c] = m;
    bf_rec(b, i + 1);
  }
}

/* The extraction's per-e-node costs, as rw_extract computes them (V100 kernel time + 1e-9). */
static double *costs(const rw_egraph *e) {
  gopt_cluster *c = NULL;
  gopt_sim *s = NULL;
  double *cost = calloc(e->s->nodes.n + 1, sizeof *cost);
  CHECK(gopt_cluster_parse("V100", &c, NULL) == 0);
  CHECK(gopt_sim_new(e->s, c, NULL, &s, NULL) == 0);
  for (size_t n = 0; s && n < e->s->nodes.n; n++) cost[n] = 1e-9 + gopt_sim_node_time(s, (int32_t)n, 0);
  gopt_sim_free(s);
  gopt_cluster_free(c);
  return cost;
}

/* The brute-force optimum over every choice of one member per class. */
static double brute_force(const rw_egraph *e, const double *cost) {
  bf b = {e, cost, calloc(e->nc + 1, sizeof(int32_t)), 0, calloc(e->nc + 1, sizeof(int32_t)), INFINITY};
  for (size_t c = 0; c < e->nc; c++)
    if (rw_eg_find(e, (int32_t)c) == (int32_t)c && e->cleaf[c] < 0 && e->mstart[c + 1] > e->mstart[c])
      b.cls[b.ncls++] = (int32_t)c;
  bf_rec(&b, 0);
  free(b.cls);
  free(b.pick);
  return b.best;
}

/* Extracts with mode, checks the objective against the optimum and the graph against g. */
static void check_extraction(const rw_egraph *e, const gopt_graph *g, int mode, double opt, int exact) {
  rw_extraction x;
  gopt_error err = {0};
  CHECK_MSG(rw_extract(e, NULL, mode, 20, 0, &x, &err) == 0, "%s", err.msg);
  if (exact) CHECK_NEAR(x.objective, opt, 1e-9 * opt);
  else CHECK(x.objective >= opt * (1 - 1e-9));
  if (mode & RW_X_ILP) CHECK_MSG(x.used_ilp && strstr(x.how, "ilp (optimal"), "%s", x.how);
  gopt_graph *h = NULL;
  CHECK_MSG(rw_eg_to_graph(e, &x, &h, &err) == 0, "%s", err.msg);
  if (h) CHECK_MSG(gopt_rewrite_compare(g, h, 3, 1e-4, 1e-4, NULL, &err) == 0, "%s", err.msg);
  gopt_graph_free(h);
  rw_extraction_clear(&x);
}

/* ILP extraction equals brute force on the saturated e-graph of a 4-matmul chain (all five
 * association orders, shared sub-products). */
static void test_bruteforce(const gopt_ruleset *rs) {
  gopt_graph *g = chain4();
  rw_egraph e;
  char stop[32] = "";
  gopt_error err = {0};
  CHECK(rw_eg_init(&e, g, &err) == 0);
  CHECK_MSG(rw_eq_saturate(&e, rs, 10000, 60, stop, sizeof stop, &err) == 0, "%s", err.msg);
  CHECK_MSG(!strcmp(stop, "saturated"), "%s", stop);
  double *cost = costs(&e);
  double opt = brute_force(&e, cost);
  size_t multi = 0;
  for (size_t c = 0; c < e.nc; c++) multi += e.mstart[c + 1] - e.mstart[c] > 1;
  CHECK(multi >= 2); /* the root and (B C) D / A (B C) ... have alternatives */
  CHECK(opt < INFINITY);
  check_extraction(&e, g, RW_X_ILP | RW_X_TOPO, opt, 1);
  check_extraction(&e, g, RW_X_ILP, opt, 1);
  check_extraction(&e, g, 0, opt, 0); /* greedy: never below the optimum */
  /* the optimum is well below the input order's cost: (A B) is 1024x1024, A (B C) is 1024x16 */
  double input = 0;
  for (size_t n = 0; n < 3; n++) input += cost[n];
  CHECK(opt < input * 0.9);
  free(cost);
  rw_eg_clear(&e);
  gopt_graph_free(g);
}

/* Relu(Relu(x)) = Relu(x) merges the outer Relu's class with its child's: the outer Relu would
 * read its own class. Cycle filtering removes it; unfiltered, the ILP's order constraints still
 * extract the acyclic choice (as brute force does). */
static void test_cycle(const gopt_ruleset *rs) {
  gopt_graph *g = relu2();
  rw_egraph e;
  gopt_error err = {0};
  char stop[32] = "";
  CHECK(rw_eg_init(&e, g, &err) == 0);
  CHECK_MSG(rw_eq_saturate(&e, rs, 10000, 60, stop, sizeof stop, &err) == 0, "%s", err.msg);
  CHECK_EQ_INT(e.filtered, 1);
  CHECK(e.state[1] == EG_FILTERED); /* r2, whose child class is now its own */
  rw_extraction x;
  gopt_graph *h = NULL;
  CHECK(rw_extract(&e, NULL, RW_X_ILP | RW_X_TOPO, 20, 0, &x, &err) == 0);
  CHECK(rw_eg_to_graph(&e, &x, &h, &err) == 0);
  if (h) CHECK_EQ_INT(gopt_graph_node_count(h), 1);
  gopt_graph_free(h);
  rw_extraction_clear(&x);
  rw_eg_clear(&e);
  /* the same union by hand, no filtering: the ILP must not pick the self-reading Relu */
  CHECK(rw_eg_init(&e, g, &err) == 0);
  CHECK(rw_eg_union(&e, rw_eg_tclass(&e, gopt_graph_find_tensor(e.s, "a")),
                    rw_eg_tclass(&e, gopt_graph_find_tensor(e.s, "y"))) == 1);
  CHECK(rw_eg_rebuild(&e, &err) >= 0);
  CHECK_EQ_INT(e.filtered, 0);
  double *cost = costs(&e);
  double opt = brute_force(&e, cost);
  CHECK_NEAR(opt, cost[0], 1e-12);
  check_extraction(&e, g, RW_X_ILP | RW_X_TOPO, opt, 1);
  free(cost);
  rw_eg_clear(&e);
  /* through the search: one Relu, the note counts the filtered e-node */
  gopt_rewrite_opts o = {"eqsat", NULL, 0, 0, 30, 0, 1};
  gopt_rewrite_result r;
  CHECK(gopt_rewrite_search(g, rs, &o, &r, &err) == 0);
  CHECK(r.graph && gopt_graph_node_count(r.graph) == 1);
  CHECK_MSG(strstr(r.note, " 1 cyclic e-nodes filtered"), "%s", r.note);
  CHECK(r.n_steps == 1 && !strcmp(gopt_ruleset_rule_name(rs, (size_t)r.steps[0].rule), "relu_idem"));
  gopt_rewrite_result_clear(&r);
  gopt_graph_free(g);
}

/* MatMul(A, B1) = y1; B2 = Relu(y1); y2 = MatMul(A, B2): merging the two matmuls (a built-in
 * multi-pattern) would compute y1 from B2, which needs y1: the merged e-node is filtered as cyclic
 * and eqsat returns the input structure (greedy rejects the same application outright). */
static void test_cycle_merge(void) {
  gopt_ruleset *rs = gopt_ruleset_builtin();
  gopt_graph *g = gopt_graph_new("cyc");
  gopt_graph_set_opset(g, "", 17);
  int32_t A = tensor(g, "A", 64, 64), B1 = tensor(g, "B1", 64, 64), y1 = tensor(g, "y1", 64, 64);
  int32_t B2 = tensor(g, "B2", 64, 64), y2 = tensor(g, "y2", 64, 64);
  gopt_graph_add_input(g, A);
  gopt_graph_add_input(g, B1);
  node(g, "MatMul", "m1", A, B1, y1);
  node(g, "Relu", "r", y1, -1, B2);
  node(g, "MatMul", "m2", A, B2, y2);
  gopt_graph_add_output(g, y2);
  finish(g);
  rw_egraph e;
  gopt_error err = {0};
  CHECK(rw_eg_init(&e, g, &err) == 0);
  CHECK_MSG(rw_eq_saturate(&e, rs, 10000, 60, NULL, 0, &err) == 0, "%s", err.msg);
  CHECK(e.filtered >= 1);
  for (size_t n = 0; n < e.n_orig; n++) CHECK(e.state[n] != EG_FILTERED); /* the cycle runs through the merge */
  rw_eg_clear(&e);
  gopt_rewrite_opts o = {"eqsat", NULL, 0, 0, 30, 0, 1};
  gopt_rewrite_result r;
  CHECK(gopt_rewrite_search(g, rs, &o, &r, &err) == 0);
  CHECK(r.graph && gopt_graph_node_count(r.graph) == 3 && r.n_steps == 0);
  CHECK(r.graph && gopt_rewrite_compare(g, r.graph, 4, 1e-4, 1e-4, NULL, &err) == 0);
  gopt_rewrite_result_clear(&r);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

/* eqsat saturates these graphs, so its extraction is optimal for the sum of kernel times; on
 * chains (no parallelism) that is the simulated step, so eqsat's cost is <= greedy's. */
static void test_vs_greedy(const gopt_ruleset *rs) {
  gopt_graph *gs[2] = {chain4(), relu2()};
  for (int i = 0; i < 2; i++) {
    gopt_rewrite_opts og = {"greedy", NULL, 0, 100, 0, 0, 1}, oe = {"eqsat", NULL, 0, 0, 30, 0, 1};
    gopt_rewrite_result rg, re;
    gopt_error err = {0};
    CHECK(gopt_rewrite_search(gs[i], rs, &og, &rg, &err) == 0);
    CHECK(gopt_rewrite_search(gs[i], rs, &oe, &re, &err) == 0);
    CHECK_MSG(re.cost_after <= rg.cost_after * (1 + 1e-9), "%d: eqsat %g greedy %g", i, re.cost_after,
              rg.cost_after);
    CHECK(re.cost_after < re.cost_before);
    CHECK_MSG(gopt_rewrite_compare(gs[i], re.graph, 4, 1e-4, 1e-4, NULL, &err) == 0, "%s", err.msg);
    gopt_rewrite_result_clear(&rg);
    gopt_rewrite_result_clear(&re);
    gopt_graph_free(gs[i]);
  }
}

/* A wrong rule forced into eqsat (Relu -> Neg, claimed verified) gets into the extracted graph
 * when cheaper; the output comparison, which gopt rewrite runs before writing, catches it. */
static void test_wrong_rule(gopt_ruleset *rs, size_t wi) {
  gopt_ruleset_force_enable(rs, wi);
  gopt_error err = {0};
  CHECK(gopt_rule_verify(rs, wi, 1, &err) != 0); /* its verification fails: gopt rewrite drops it */
  gopt_ruleset_disable(rs, wi, "test: verification failed");
  gopt_graph *g = relu2();
  gopt_rewrite_opts o = {"eqsat", NULL, 0, 0, 30, 0, 1};
  gopt_rewrite_result r;
  CHECK(gopt_rewrite_search(g, rs, &o, &r, &err) == 0);
  for (size_t i = 0; i < r.n_steps; i++) CHECK(r.steps[i].rule != (int32_t)wi); /* never applied */
  CHECK(gopt_rewrite_compare(g, r.graph, 4, 1e-4, 1e-4, NULL, &err) == 0);
  gopt_rewrite_result_clear(&r);
  gopt_graph_free(g);
}

/* x -> Relu -> Split(axis 1, sizes 2 and 4) -> Concat(axis 1) -> Relu -> y. concat_of_split maps
 * the Concat's output to the Split's input, an input of the rewritten fragment (whose name the
 * rewrite swaps with the output's): the extracted graph must read the Relu's output, not a copy
 * of it that nothing produces (the conversion bug seen on Tensat's VGG-19). */
static void test_concat_of_split(void) {
  gopt_ruleset *rs = gopt_ruleset_builtin();
  gopt_graph *g = gopt_graph_new("cos");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[4] = {1, 6, 32, 32}, two = 2, sz[2] = {2, 4};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 4, xd, NULL);
  int32_t r = gopt_graph_add_tensor(g, "r", GOPT_DT_FLOAT, -1, NULL, NULL);
  int32_t k = gopt_graph_add_tensor(g, "sizes", GOPT_DT_INT64, 1, &two, NULL);
  int32_t sp[2] = {gopt_graph_add_tensor(g, "s0", GOPT_DT_FLOAT, -1, NULL, NULL),
                   gopt_graph_add_tensor(g, "s1", GOPT_DT_FLOAT, -1, NULL, NULL)};
  int32_t c = gopt_graph_add_tensor(g, "c", GOPT_DT_FLOAT, -1, NULL, NULL);
  int32_t y = gopt_graph_add_tensor(g, "y", GOPT_DT_FLOAT, -1, NULL, NULL);
  gopt_tensor_set_const(g, k, sz, sizeof sz, NULL);
  gopt_graph_add_input(g, x);
  node(g, "Relu", "r0", x, -1, r);
  int32_t in[2] = {r, k};
  gopt_node_set_int(g, gopt_graph_add_node(g, "Split", "split", 2, in, 2, sp, NULL), "axis", 1);
  node(g, "Concat", "cat", sp[0], sp[1], c);
  gopt_node_set_int(g, (int32_t)g->nodes.n - 1, "axis", 1);
  node(g, "Relu", "r1", c, -1, y);
  gopt_graph_add_output(g, y);
  finish(g);
  gopt_rewrite_opts o = {"eqsat", NULL, 0, 0, 30, 0, 1};
  gopt_rewrite_result re;
  gopt_error err = {0};
  CHECK_MSG(gopt_rewrite_search(g, rs, &o, &re, &err) == 0, "%s", err.msg);
  CHECK_MSG(re.cost_after < re.cost_before, "eqsat kept the input: %s", re.note);
  CHECK(re.graph && gopt_graph_validate(re.graph, &err) == 0);
  CHECK(re.graph && gopt_graph_node_count(re.graph) == 2); /* Relu, Relu */
  int used = 0;
  for (size_t i = 0; i < re.n_steps; i++) used |= !strcmp(gopt_ruleset_rule_name(rs, (size_t)re.steps[i].rule), "concat_of_split");
  CHECK(used);
  CHECK_MSG(re.graph && gopt_rewrite_compare(g, re.graph, 4, 1e-5, 1e-6, NULL, &err) == 0, "%s", err.msg);
  gopt_rewrite_result_clear(&re);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

/* Two 3x3 convs (weights with data) reading one input at batch 1: merge_parallel_conv makes one
 * conv and a Split into contiguous channel blocks, which the simulator's cost (greedy's) counts as
 * free views. eqsat's extraction costs it the same way, so eqsat merges them too (its summed
 * kernel time was higher with the Split's copy counted), reaching greedy's cost; and on this
 * graph, where one device runs the kernels back to back, its objective is the simulated step. */
static void test_parallel_conv(void) {
  gopt_ruleset *rs = gopt_ruleset_builtin();
  gopt_graph *g = gopt_graph_new("pconv");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[4] = {1, 32, 28, 28}, wd[4] = {32, 32, 3, 3}, pads[4] = {1, 1, 1, 1};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 4, xd, NULL);
  gopt_graph_add_input(g, x);
  float *wv = malloc(32 * 32 * 9 * sizeof *wv);
  for (int j = 0; j < 2 && wv; j++) {
    char nm[8];
    for (int i = 0; i < 32 * 32 * 9; i++) wv[i] = (float)(((i + 7 * j) * 37 % 17) - 8) / 50.0f;
    snprintf(nm, sizeof nm, "w%d", j);
    int32_t w = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 4, wd, NULL);
    gopt_tensor_set_const(g, w, wv, 32 * 32 * 9 * sizeof *wv, NULL);
    snprintf(nm, sizeof nm, "y%d", j);
    int32_t yj = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, -1, NULL, NULL);
    snprintf(nm, sizeof nm, "c%d", j);
    node(g, "Conv", nm, x, w, yj);
    gopt_node_set_ints(g, (int32_t)g->nodes.n - 1, "pads", pads, 4);
    gopt_graph_add_output(g, yj);
  }
  free(wv);
  finish(g);
  gopt_rewrite_opts og = {"greedy", NULL, 0, 100, 0, 0, 1}, oe = {"eqsat", NULL, 0, 0, 30, 0, 1};
  gopt_rewrite_result rg, re;
  gopt_error err = {0};
  CHECK(gopt_rewrite_search(g, rs, &og, &rg, &err) == 0);
  CHECK_MSG(gopt_rewrite_search(g, rs, &oe, &re, &err) == 0, "%s", err.msg);
  CHECK_MSG(rg.cost_after < rg.cost_before, "greedy did not merge: %g", rg.cost_after);
  CHECK_MSG(re.cost_after <= rg.cost_after * (1 + 1e-9), "eqsat %g greedy %g (%s)", re.cost_after,
            rg.cost_after, re.note);
  CHECK(rg.n_steps == 1 && re.n_steps == 1 &&
        !strcmp(gopt_ruleset_rule_name(rs, (size_t)re.steps[0].rule), "merge_parallel_conv"));
  CHECK_MSG(re.graph && gopt_rewrite_compare(g, re.graph, 4, 1e-4, 1e-5, NULL, &err) == 0, "%s", err.msg);
  /* the extraction's objective against the simulated step of the graph it converts to */
  rw_egraph e;
  rw_extraction xt;
  gopt_graph *h = NULL;
  CHECK(rw_eg_init(&e, g, &err) == 0);
  CHECK(rw_eq_saturate(&e, rs, 10000, 30, NULL, 0, &err) == 0);
  CHECK(rw_extract(&e, NULL, RW_X_ILP | RW_X_TOPO, 20, 0, &xt, &err) == 0);
  CHECK(rw_eg_to_graph(&e, &xt, &h, &err) == 0);
  double step = 0;
  CHECK(h && gopt_rewrite_cost(h, NULL, &step, &err) == 0);
  CHECK_MSG(fabs(xt.objective - step) <= 1e-6 * step + 1e-8, "objective %g, simulated step %g", xt.objective, step);
  gopt_graph_free(h);
  rw_extraction_clear(&xt);
  rw_eg_clear(&e);
  gopt_rewrite_result_clear(&rg);
  gopt_rewrite_result_clear(&re);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

/* A weight of n floats named name, values from seed k. */
static int32_t weight(gopt_graph *g, const char *name, int rank, const int64_t *d, int k) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= d[i];
  float *v = malloc((size_t)n * sizeof *v);
  int32_t t = gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, rank, d, NULL);
  for (int64_t i = 0; v && i < n; i++) v[i] = (float)(((i * 31 + 7 * k) % 23) - 11) / 64.0f;
  CHECK(v && t >= 0 && gopt_tensor_set_const(g, t, v, (size_t)n * sizeof *v, NULL) == 0);
  free(v);
  return t;
}

/* Weights over RW_EG_LEAN bytes stay out of the e-graph and so do the weights rewrites derive from
 * them: y0 = x (s Transpose(W)) folds Transpose(W) (iteration 1) and then the Mul by s over that
 * folded constant (iteration 2: a recipe whose input is itself lazily folded); y1, y2 = x W1,
 * x W2 merge into one MatMul over their concatenated weights (built-ins computing the weights in
 * C).
 * The e-graph holds none of those bytes; the extracted graph has every weight's bytes, computed
 * by running the recipes again, and the same outputs as the input. */
static void test_lazy_weights(void) {
  gopt_ruleset *rs = gopt_ruleset_builtin();
  gopt_graph *g = gopt_graph_new("lazy");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[2] = {4, 160}, wd[2] = {160, 160}, one = 1;
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 2, xd, NULL);
  gopt_graph_add_input(g, x);
  int32_t w = weight(g, "w", 2, wd, 0), w1 = weight(g, "w1", 2, wd, 1), w2 = weight(g, "w2", 2, wd, 2);
  int32_t s = weight(g, "s", 1, &one, 3);
  int32_t t1 = tensor(g, "t1", 160, 160), t2 = tensor(g, "t2", 160, 160);
  int32_t y0 = tensor(g, "y0", 4, 160), y1 = tensor(g, "y1", 4, 160), y2 = tensor(g, "y2", 4, 160);
  node(g, "Transpose", "tr", w, -1, t1);
  node(g, "Mul", "mul", t1, s, t2);
  node(g, "MatMul", "m0", x, t2, y0);
  node(g, "MatMul", "m1", x, w1, y1);
  node(g, "MatMul", "m2", x, w2, y2);
  gopt_graph_add_output(g, y0);
  gopt_graph_add_output(g, y1);
  gopt_graph_add_output(g, y2);
  finish(g);
  CHECK(160 * 160 * sizeof(float) > RW_EG_LEAN);
  gopt_error err = {0};
  rw_egraph e;
  CHECK(rw_eg_init(&e, g, &err) == 0);
  CHECK(!gopt_tensor_data(e.s, w) && rw_eg_data(&e, w) == gopt_tensor_data(g, w)); /* read from g */
  CHECK_MSG(rw_eq_saturate(&e, rs, 10000, 30, NULL, 0, &err) == 0, "%s", err.msg);
  size_t lazy = 0, chained = 0;
  for (size_t t = 0; t < e.s->tensors.n; t++) {
    if (e.tlazy[t] < 0) continue;
    lazy++;
    CHECK(!gopt_tensor_data(e.s, (int32_t)t)); /* no bytes in the e-graph */
    const rw_lazy *z = &e.lazy[e.tlazy[t]];
    for (int i = 0; i < z->n_in; i++) chained += e.tlazy[z->in_s[i]] >= 0;
  }
  CHECK_MSG(lazy >= 3 && chained >= 1, "%zu lazily folded constants, %zu recipes reading one", lazy, chained);
  rw_eg_clear(&e);
  gopt_rewrite_opts o = {"eqsat", NULL, 0, 0, 30, 0, 1};
  gopt_rewrite_result r;
  CHECK_MSG(gopt_rewrite_search(g, rs, &o, &r, &err) == 0, "%s", err.msg);
  CHECK_MSG(r.cost_after < r.cost_before && !r.input_kept, "%s", r.note);
  int folded = 0, merged = 0;
  for (size_t i = 0; i < r.n_steps; i++) {
    const char *name = gopt_ruleset_rule_name(rs, (size_t)r.steps[i].rule);
    folded += !strcmp(name, "fold_constants");
    merged += !strncmp(name, "merge_parallel_matmul", 21);
  }
  CHECK_MSG(folded >= 1 && merged == 1, "%d folds, %d merges (%s)", folded, merged, r.note);
  for (size_t t = 0; r.graph && t < r.graph->tensors.n; t++)
    if ((r.graph->tensors.a[t].flags & GOPT_T_CONST) && gopt_tensor_use_count(r.graph, (int32_t)t))
      CHECK_MSG(gopt_tensor_data(r.graph, (int32_t)t), "constant '%s' has no bytes",
                gopt_graph_str(r.graph, r.graph->tensors.a[t].name));
  for (size_t n = 0; r.graph && n < r.graph->nodes.n; n++) /* folded into y0's weight */
    CHECK(r.graph->nodes.a[n].op != GOPT_OP_TRANSPOSE && r.graph->nodes.a[n].op != GOPT_OP_MUL);
  CHECK_MSG(r.graph && gopt_rewrite_compare(g, r.graph, 5, 1e-5, 1e-6, NULL, &err) == 0, "%s", err.msg);
  gopt_rewrite_result_clear(&r);
  gopt_graph_free(g);
  gopt_ruleset_free(rs);
}

int main(void) {
  gopt_ruleset *rs = NULL;
  gopt_error err = {0};
  CHECK_MSG(gopt_ruleset_parse(k_rules, "test", &rs, &err) == 0, "%s", err.msg);
  if (!rs) return check_exit("test_eqsat");
  size_t wi = 3;
  CHECK(!strcmp(gopt_ruleset_rule_name(rs, wi), "wrong_relu_neg"));
  gopt_ruleset_disable(rs, wi, "test: kept out of the other checks");
  test_bruteforce(rs);
  test_cycle(rs);
  test_cycle_merge();
  test_vs_greedy(rs);
  test_wrong_rule(rs, wi);
  test_concat_of_split();
  test_parallel_conv();
  test_lazy_weights();
  gopt_ruleset_free(rs);
  return check_exit("test_eqsat");
}
