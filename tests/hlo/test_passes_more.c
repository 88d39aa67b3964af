/* test_passes_more.c: the passes added after the first ten (algsimp's slice/concat rules,
 * broadcast-folding, reshape-mover, dot_decomposer, dot_merger, operand_upcaster,
 * simplify-while-loops) on hand-written HLO: each rewrite's structure (op counts, the operands
 * and attributes of what it builds) and output equality with the module before the pass on random
 * inputs; the while loops (which the executor does not run) against values worked by hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hlo_test_util.h"
#include "gopt/exec.h"
#include "gopt/hlo.h"
#include "gopt/passes.h"

static int pass_output_is(const gopt_graph *g, int32_t t) {
  for (size_t i = 0; i < g->outputs.n; i++)
    if (g->outputs.a[i] == t) return 1;
  return 0;
}

static int32_t find_node(const gopt_graph *g, const char *type) {
  for (size_t n = 0; n < g->nodes.n; n++)
    if (gopt_node_alive(g, (int32_t)n) && !strcmp(gopt_node_type(g, (int32_t)n), type)) return (int32_t)n;
  return -1;
}

/* Runs pass name on text's module; checks that the result computes what the module did. */
static gopt_graph *apply_checked(const char *text, const char *name, gopt_pass_stats *st) {
  gopt_graph *g = load(text), *h = NULL;
  gopt_error err = {0};
  if (!g) return NULL;
  int rc = gopt_pass_run(gopt_pass_find(name), g, &h, st, &err);
  CHECK_MSG(rc == 0 && h, "%s: %s", name, err.msg);
  char msg[600];
  if (h) CHECK_MSG(gopt_exec_same_outputs(g, h, 7, 1e-5, 1e-5, msg, sizeof msg) == 1, "%s: %s", name, msg);
  gopt_graph_free(g);
  return h;
}

static void slice_concat_rules(void) {
  gopt_pass_stats st;
  /* R15 slice of slice: rows 1..6 then every 2nd from 2 = rows 3, 5; cols 0,2,4 then 1..2 = 2, 4 */
  gopt_graph *h = apply_checked("HloModule s\nENTRY e {\n  x = f32[8,6] parameter(0)\n"
                                "  a = f32[6,3] slice(x), slice={[1:7], [0:6:2]}\n"
                                "  ROOT b = f32[2,2] slice(a), slice={[2:6:2], [1:3]}\n}\n", "algsimp", &st);
  if (h) {
    CHECK_EQ_INT(count_type(h, "hlo::slice"), 1);
    int32_t s = find_node(h, "hlo::slice");
    CHECK(s >= 0 && !strcmp(gopt_node_get_string(h, s, "slice", ""), "{[3:6:2], [2:5:2]}"));
    CHECK(s >= 0 && (h->tensors.a[gopt_node_input(h, s, 0)].flags & GOPT_T_INPUT));
  }
  gopt_graph_free(h);
  /* R18 adjacent slices concatenated -> one slice, here the whole operand (R10) */
  h = apply_checked("HloModule s\nENTRY e {\n  x = f32[8,6] parameter(0)\n  a = f32[3,6] slice(x), slice={[0:3], [0:6]}\n"
                    "  b = f32[5,6] slice(x), slice={[3:8], [0:6]}\n  ROOT c = f32[8,6] concatenate(a, b), dimensions={0}\n}\n",
                    "algsimp", &st);
  if (h) CHECK(count_type(h, "hlo::slice") == 0 && count_type(h, "hlo::concatenate") == 0 && h->nodes.n == 0);
  gopt_graph_free(h);
  /* R16 slice of a concatenate inside one operand: columns 7..8 of [x|y] are y's 1..2 */
  h = apply_checked("HloModule s\nENTRY e {\n  x = f32[8,6] parameter(0)\n  y = f32[8,4] parameter(1)\n"
                    "  c = f32[8,10] concatenate(x, y), dimensions={1}\n  ROOT s = f32[8,2] slice(c), slice={[0:8], [7:9]}\n}\n",
                    "algsimp", &st);
  if (h) {
    int32_t s = find_node(h, "hlo::slice");
    CHECK_EQ_INT(count_type(h, "hlo::concatenate"), 0);
    CHECK(s >= 0 && !strcmp(gopt_node_get_string(h, s, "slice", ""), "{[0:8:1], [1:3:1]}"));
  }
  gopt_graph_free(h);
  /* R17 nested concatenates along one dimension flatten; zero-sized operands go */
  h = apply_checked("HloModule s\nENTRY e {\n  x = f32[2,3] parameter(0)\n  y = f32[2,4] parameter(1)\n  z = f32[2,0] parameter(2)\n"
                    "  c = f32[2,7] concatenate(x, y), dimensions={1}\n  ROOT d = f32[2,10] concatenate(c, z, x), dimensions={1}\n}\n",
                    "algsimp", &st);
  if (h) {
    int32_t c = find_node(h, "hlo::concatenate");
    CHECK_EQ_INT(count_type(h, "hlo::concatenate"), 1);
    CHECK(c >= 0 && h->nodes.a[c].n_in == 3);
  }
  gopt_graph_free(h);
}

static void broadcast_folding(void) {
  gopt_pass_stats st;
  /* B1 broadcast(broadcast(v)) -> broadcast(v), dimensions composed: v[4] -> [4,3] (dims {0}) -> [2,4,3] */
  gopt_graph *h = apply_checked("HloModule b\nENTRY e {\n  v = f32[4] parameter(0)\n  a = f32[4,3] broadcast(v), dimensions={0}\n"
                                "  ROOT b = f32[2,4,3] broadcast(a), dimensions={1,2}\n}\n", "broadcast-folding", &st);
  if (h) {
    int32_t b = find_node(h, "hlo::broadcast");
    size_t k = 0;
    const int64_t *d = b >= 0 ? gopt_node_get_ints(h, b, "dimensions", &k) : NULL;
    CHECK_EQ_INT(count_type(h, "hlo::broadcast"), 1);
    CHECK(d && k == 1 && d[0] == 1);
  }
  gopt_graph_free(h);
  /* B3 add(broadcast(u), broadcast(v)) with one mapping -> broadcast(add(u, v)); exp too */
  h = apply_checked("HloModule b\nENTRY e {\n  u = f32[4] parameter(0)\n  v = f32[4] parameter(1)\n"
                    "  a = f32[3,4] broadcast(u), dimensions={1}\n  b = f32[3,4] broadcast(v), dimensions={1}\n"
                    "  s = f32[3,4] add(a, b)\n  ROOT x = f32[3,4] exponential(s)\n}\n", "broadcast-folding", &st);
  if (h) {
    int32_t add = find_node(h, "hlo::add");
    CHECK_EQ_INT(count_type(h, "hlo::broadcast"), 1);
    CHECK(add >= 0 && h->tensors.a[gopt_node_output(h, add, 0)].rank == 1);
    CHECK(st.ops_after < st.ops_before);
  }
  gopt_graph_free(h);
  /* B2 reshape of a broadcast scalar is a broadcast of it */
  h = apply_checked("HloModule b\nENTRY e {\n  s = f32[] parameter(0)\n  a = f32[2,6] broadcast(s), dimensions={}\n"
                    "  ROOT r = f32[3,4] reshape(a)\n}\n", "broadcast-folding", &st);
  if (h) CHECK(count_type(h, "hlo::reshape") == 0 && count_type(h, "hlo::broadcast") == 1);
  gopt_graph_free(h);
}

static void reshape_mover(void) {
  gopt_pass_stats st;
  gopt_graph *h = apply_checked("HloModule r\nENTRY e {\n  x = f32[2,6] parameter(0)\n  y = f32[2,6] parameter(1)\n"
                                "  c = f32[] constant(2)\n  a = f32[12] reshape(x)\n  b = f32[12] reshape(y)\n"
                                "  k = f32[12] broadcast(c), dimensions={}\n  s = f32[12] add(a, b)\n"
                                "  ROOT m = f32[12] multiply(s, k)\n}\n", "reshape-mover", &st);
  if (h) {
    int32_t r = find_node(h, "hlo::reshape");
    CHECK_EQ_INT(count_type(h, "hlo::reshape"), 1); /* two reshapes became one, moved below both ops */
    CHECK(r >= 0 && pass_output_is(h, gopt_node_output(h, r, 0)));
    CHECK(st.ops_after < st.ops_before);
  }
  gopt_graph_free(h);
  h = apply_checked("HloModule r\nENTRY e {\n  x = f32[2,3] parameter(0)\n  y = f32[2,3] parameter(1)\n"
                    "  a = f32[3,2] transpose(x), dimensions={1,0}\n  b = f32[3,2] transpose(y), dimensions={1,0}\n"
                    "  ROOT s = f32[3,2] maximum(a, b)\n}\n", "reshape-mover", &st);
  if (h) CHECK(count_type(h, "hlo::transpose") == 1 && st.ops_after == st.ops_before - 1);
  gopt_graph_free(h);
}

static void dots(void) {
  gopt_pass_stats st;
  /* dot_decomposer: batch dim 0 of a, 2 of b; contracting a's 2 with b's 0 -> [2, 3, 5] */
  gopt_graph *h = apply_checked("HloModule d\nENTRY e {\n  a = f32[2,3,4] parameter(0)\n  b = f32[4,5,2] parameter(1)\n"
                                "  ROOT d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={2}, "
                                "lhs_contracting_dims={2}, rhs_contracting_dims={0}\n}\n", "dot_decomposer", &st);
  if (h) {
    int32_t d = find_node(h, "hlo::dot");
    size_t k1 = 0, k2 = 0;
    const int64_t *lc = d >= 0 ? gopt_node_get_ints(h, d, "lhs_contracting_dims", &k1) : NULL;
    const int64_t *rc = d >= 0 ? gopt_node_get_ints(h, d, "rhs_contracting_dims", &k2) : NULL;
    CHECK_EQ_INT(count_type(h, "hlo::dot"), 1);
    CHECK(lc && rc && k1 == 1 && k2 == 1 && lc[0] == 2 && rc[0] == 1);
    CHECK_EQ_INT(count_type(h, "hlo::transpose"), 1); /* b [4,5,2] -> [2,4,5]; a is canonical already */
    gopt_graph *h2 = NULL;
    gopt_error err = {0};
    CHECK(gopt_pass_run(gopt_pass_find("dot_decomposer"), h, &h2, &st, &err) == 0 && st.rewrites == 0);
    gopt_graph_free(h2);
  }
  gopt_graph_free(h);
  /* dot_merger: x.A and x.B -> x.[A|B], sliced */
  const char *merge = "HloModule m\nENTRY e {\n  x = f32[4,8] parameter(0)\n  a = f32[8,3] parameter(1)\n  b = f32[8,5] parameter(2)\n"
                      "  d1 = f32[4,3] dot(x, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                      "  d2 = f32[4,5] dot(x, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                      "  ROOT t = (f32[4,3], f32[4,5]) tuple(d1, d2)\n}\n";
  h = apply_checked(merge, "dot_merger", &st);
  if (h) {
    CHECK_EQ_INT(count_type(h, "hlo::dot"), 1);
    CHECK_EQ_INT(count_type(h, "hlo::concatenate"), 1);
    CHECK_EQ_INT(count_type(h, "hlo::slice"), 2);
  }
  gopt_graph_free(h);
  /* not when one dot feeds the other */
  h = apply_checked("HloModule m\nENTRY e {\n  x = f32[4,4] parameter(0)\n  a = f32[4,4] parameter(1)\n"
                    "  d1 = f32[4,4] dot(x, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                    "  ROOT d2 = f32[4,4] dot(x, d1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n", "dot_merger", &st);
  if (h) CHECK(count_type(h, "hlo::dot") == 2 && st.rewrites == 0);
  gopt_graph_free(h);
  /* operand_upcaster: f32 x f32 -> f64 (a dot with its own result type, as loaded from the text)
   * gets converts to f64 */
  gopt_graph *g = load("HloModule u\nENTRY e {\n  x = f32[2,3] parameter(0)\n  y = f32[3,2] parameter(1)\n"
                       "  d = f64[2,2] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                       "  ROOT r = f32[2,2] convert(d)\n}\n");
  if (g) {
    gopt_error err = {0};
    CHECK(g->tensors.a[gopt_node_output(g, find_node(g, "hlo::dot"), 0)].dtype == GOPT_DT_DOUBLE);
    h = NULL;
    CHECK(gopt_pass_run(gopt_pass_find("operand_upcaster"), g, &h, &st, &err) == 0);
    int32_t d = h ? find_node(h, "hlo::dot") : -1;
    CHECK(h && count_type(h, "hlo::convert") == 3);
    CHECK(d >= 0 && h->tensors.a[gopt_node_input(h, d, 0)].dtype == GOPT_DT_DOUBLE &&
          h->tensors.a[gopt_node_input(h, d, 1)].dtype == GOPT_DT_DOUBLE);
    char msg[600];
    CHECK_MSG(h && gopt_exec_same_outputs(g, h, 7, 0, 0, msg, sizeof msg) == 1, "upcaster: %s", msg);
    gopt_graph_free(h);
    gopt_graph_free(g);
  }
}

/* A while loop: i from 0 while i < N, x doubled each round; the module returns x. */
static char *loop_module(int n, char *buf, size_t cap) {
  snprintf(buf, cap,
           "HloModule w\ncond {\n  p = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
           "  n = s32[] constant(%d)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
           "body {\n  p = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
           "  x = f32[4] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n  i2 = s32[] add(i, one)\n"
           "  x2 = f32[4] add(x, x)\n  ROOT t = (s32[], f32[4]) tuple(i2, x2)\n}\n"
           "ENTRY e {\n  x = f32[4] parameter(0)\n  z = s32[] constant(0)\n  t = (s32[], f32[4]) tuple(z, x)\n"
           "  w = (s32[], f32[4]) while(t), condition=cond, body=body\n  ROOT r = f32[4] get-tuple-element(w), index=1\n}\n",
           n);
  return buf;
}

static void while_loops(void) {
  char text[2048];
  float in[4] = {0}, out[4] = {0};
  for (int trips = 0; trips <= 2; trips++) {
    gopt_graph *g = load(loop_module(trips, text, sizeof text)), *h = NULL;
    gopt_error err = {0};
    gopt_pass_stats st;
    if (!g) continue;
    int rc = gopt_pipeline_run("simplify-while-loops,call-inliner,tuple-simplifier,dce", g, &h, NULL, NULL, &err);
    CHECK_MSG(rc == 0, "while: %s", err.msg);
    CHECK_EQ_INT(count_type(h, "hlo::while"), trips >= 2); /* 0 and 1 trips are known; 2 stays a loop */
    if (h) { /* x (trip count 0), x + x (1) or 4x (2: the executor runs the loop), against the inputs the executor drew */
      gopt_exec *x = NULL;
      gopt_exec_opts o = {0};
      gopt_host_tensor t = {0}, ti = {0};
      o.threads = 1;
      rc = gopt_exec_new(h, &o, &x, NULL, &err);
      if (!rc) rc = gopt_exec_random_inputs(x, 3, &err);
      if (!rc) rc = gopt_exec_run(x, &err);
      if (!rc) rc = gopt_exec_get_output(x, 0, &t, &err);
      CHECK_MSG(rc == 0, "while run: %s", err.msg);
      gopt_exec_free(x);
      /* the same random input through a module that is just the parameter */
      gopt_graph *idm = load("HloModule i\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT c = f32[4] copy(x)\n}\n");
      x = NULL;
      if (idm && !gopt_exec_new(idm, &o, &x, NULL, &err) && !gopt_exec_random_inputs(x, 3, &err) &&
          !gopt_exec_run(x, &err) && !gopt_exec_get_output(x, 0, &ti, &err) && !rc) {
        memcpy(in, ti.data, sizeof in);
        memcpy(out, t.data, sizeof out);
        for (int i = 0; i < 4; i++) CHECK_NEAR(out[i], (float)(1 << trips) * in[i], 1e-6);
      }
      gopt_exec_free(x);
      gopt_graph_free(idm);
      gopt_host_tensor_clear(&t);
      gopt_host_tensor_clear(&ti);
    }
    gopt_graph_free(h);
    h = NULL;
    CHECK(gopt_pass_run(gopt_pass_find("simplify-while-loops"), g, &h, &st, &err) == 0);
    CHECK_EQ_INT(st.rewrites, trips < 2);
    gopt_graph_free(h);
    gopt_graph_free(g);
  }
}

/* W3 (dead loop-carried elements): the state is (i, a, x, b, c); a passes through unchanged and
 * feeds only b, b feeds only itself, so both die together (neither the condition nor the
 * while's user reads them); x reads c, so c stays. After: the state is (i, x, c), the user's
 * index 2 becomes 1, the body loses a's and b's get-tuple-elements and b's add, and the
 * initial tuple loses its two dead elements (and b's negate). */
static const char dead_loop[] =
    "HloModule d\ncond {\n  p = (s32[], f32[4], f32[4], f32[4], f32[4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n  n = s32[] constant(3)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
    "body {\n  p = (s32[], f32[4], f32[4], f32[4], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
    "  a = f32[4] get-tuple-element(p), index=1\n  x = f32[4] get-tuple-element(p), index=2\n"
    "  b = f32[4] get-tuple-element(p), index=3\n  c = f32[4] get-tuple-element(p), index=4\n"
    "  one = s32[] constant(1)\n  i2 = s32[] add(i, one)\n  x2 = f32[4] multiply(x, c)\n  b2 = f32[4] add(b, a)\n"
    "  ROOT t = (s32[], f32[4], f32[4], f32[4], f32[4]) tuple(i2, a, x2, b2, c)\n}\n"
    "ENTRY e {\n  x = f32[4] parameter(0)\n  c = f32[4] parameter(1)\n  z = s32[] constant(0)\n"
    "  nb = f32[4] negate(c)\n  t = (s32[], f32[4], f32[4], f32[4], f32[4]) tuple(z, c, x, nb, c)\n"
    "  w = (s32[], f32[4], f32[4], f32[4], f32[4]) while(t), condition=cond, body=body\n"
    "  ROOT r = f32[4] get-tuple-element(w), index=2\n}\n";

static const gopt_graph *while_comp(const gopt_graph *g, const char *key) {
  int32_t w = find_node(g, "hlo::while");
  const gopt_attr *a = w >= 0 ? gopt_node_attr(g, w, key) : NULL;
  return a && a->kind == GOPT_ATTR_GRAPH ? g->subgraphs.a[a->v.graph] : NULL;
}

static void while_dead_elements(void) {
  gopt_graph *g = load(dead_loop), *h = NULL, *back = NULL;
  gopt_error err = {0};
  gopt_pass_stats st;
  if (!g) return;
  CHECK_EQ_INT(gopt_hlo_instruction_count(g), 22);
  CHECK(gopt_pass_run(gopt_pass_find("simplify-while-loops"), g, &h, &st, &err) == 0);
  int32_t w = h ? find_node(h, "hlo::while") : -1;
  const gopt_graph *b = h ? while_comp(h, "body") : NULL, *c = h ? while_comp(h, "condition") : NULL;
  CHECK(w >= 0 && b && c && st.rewrites == 1);
  if (w >= 0 && b && c) {
    CHECK_EQ_INT(h->nodes.a[w].n_in, 3);
    CHECK_EQ_INT(h->nodes.a[w].n_out, 3);
    CHECK_EQ_INT(b->inputs.n, 3);
    CHECK_EQ_INT(b->outputs.n, 3);
    CHECK_EQ_INT(c->inputs.n, 3);
    CHECK_EQ_INT(count_type(b, "hlo::get-tuple-element"), 3); /* i, x, c */
    CHECK_EQ_INT(count_type(b, "hlo::add"), 1);               /* b2 is gone */
    CHECK_EQ_INT(count_type(h, "hlo::negate"), 0);            /* only fed b's initial value */
    int32_t r = find_node(h, "hlo::get-tuple-element");
    CHECK(r >= 0 && gopt_node_get_int(h, r, "index", -1) == 1 && gopt_node_get_int(h, r, "hlo.leaf_offset", -1) == 1);
    /* the body's x2 = x * c reads state elements 1 and 2 now */
    int32_t mul = find_node(b, "hlo::multiply");
    for (int k = 0; mul >= 0 && k < 2; k++) {
      int32_t gte = b->tensors.a[gopt_node_input(b, mul, k)].producer;
      CHECK(gte >= 0 && gopt_node_get_int(b, gte, "index", -1) == k + 1);
    }
    CHECK(gopt_graph_find_tensor(h, "w#2") >= 0 && gopt_graph_find_tensor(h, "w#3") < 0);
    /* 22 instructions - (a, b, b2 in the body, negate in the entry) = 18;
     * the export re-imports with the same count and structure */
    CHECK_EQ_INT(gopt_hlo_instruction_count(h), 18);
    /* the executor runs while loops: x * c^3 before and after */
    char msg[600];
    CHECK_MSG(gopt_exec_same_outputs(g, h, 11, 0, 0, msg, sizeof msg) == 1, "dead elements: %s", msg);
    char *text = NULL;
    size_t len = 0;
    CHECK(gopt_hlo_save_mem(h, &text, &len, &err) == 0);
    CHECK_MSG(text && gopt_hlo_load_mem(text, len, "out.hlo", &back, &err) == 0, "re-import: %s", err.msg);
    CHECK(back && gopt_hlo_instruction_count(back) == 18 && count_type(back, "hlo::tuple") == 1);
    CHECK(text && strstr(text, "(s32[], f32[4], f32[4]) while"));
    free(text);
  }
  gopt_graph_free(back);
  gopt_graph_free(h);
  gopt_graph_free(g);
  /* when the user reads b instead, b and a (which feeds b) stay and x and c die: (i, a, b) */
  char text[2048];
  snprintf(text, sizeof text, "%s", dead_loop);
  char *ref = strstr(text, "get-tuple-element(w), index=2");
  if (ref) ref[strlen("get-tuple-element(w), index=")] = '3';
  g = load(text);
  h = NULL;
  CHECK(g && gopt_pass_run(gopt_pass_find("simplify-while-loops"), g, &h, &st, &err) == 0);
  w = h ? find_node(h, "hlo::while") : -1;
  b = h ? while_comp(h, "body") : NULL;
  CHECK(w >= 0 && h->nodes.a[w].n_in == 3 && b && count_type(b, "hlo::multiply") == 0 && count_type(b, "hlo::add") == 2);
  int32_t r = h ? find_node(h, "hlo::get-tuple-element") : -1;
  CHECK(r >= 0 && gopt_node_get_int(h, r, "index", -1) == 2);
  char msg[600];
  CHECK_MSG(h && gopt_exec_same_outputs(g, h, 12, 0, 0, msg, sizeof msg) == 1, "dead elements 2: %s", msg);
  gopt_graph_free(h);
  gopt_graph_free(g);
  /* the two-element loop of while_loops: i is read by the condition, x by the user: unchanged */
  g = load(loop_module(5, text, sizeof text));
  h = NULL;
  CHECK(g && gopt_pass_run(gopt_pass_find("simplify-while-loops"), g, &h, &st, &err) == 0 && st.rewrites == 0);
  gopt_graph_free(h);
  gopt_graph_free(g);
}

int main(void) {
  slice_concat_rules();
  broadcast_folding();
  reshape_mover();
  dots();
  while_loops();
  while_dead_elements();
  return check_exit("test_passes_more");
}
