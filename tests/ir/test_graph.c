/* test_graph.c: the graph IR: building, attributes, use lists, editing, topological order, cycle
 * detection, validation, the structural hash's invariances, compaction, cloning (also without
 * large constants' bytes) and adopting a constant's buffer. Expected
 * values are derived by hand from the small graphs built here. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/graph.h"
#include "gopt/ops.h"

static int32_t T(gopt_graph *g, const char *name, int64_t a, int64_t b) {
  int64_t d[2] = {a, b};
  return gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, 2, d, NULL);
}

/* x -> relu -> r; x,w -> matmul -> m; r,m -> add -> y (a diamond). */
static gopt_graph *diamond(int reversed_names) {
  gopt_graph *g = gopt_graph_new("diamond");
  int32_t x = T(g, reversed_names ? "in" : "x", 4, 8);
  int32_t w = T(g, reversed_names ? "weight" : "w", 8, 8);
  float wd[64];
  for (int i = 0; i < 64; i++) wd[i] = (float)i;
  gopt_tensor_set_const(g, w, wd, sizeof wd, NULL);
  int32_t r = T(g, reversed_names ? "a" : "r", 4, 8);
  int32_t m = T(g, reversed_names ? "b" : "m", 4, 8);
  int32_t y = T(g, reversed_names ? "out" : "y", 4, 8);
  gopt_graph_add_input(g, x);
  int32_t in_mm[2] = {x, w}, in_add[2] = {r, m};
  if (reversed_names) { /* different storage order, same structure */
    gopt_graph_add_node(g, "MatMul", "mm2", 2, in_mm, 1, &m, NULL);
    gopt_graph_add_node(g, "Relu", "relu2", 1, &x, 1, &r, NULL);
  } else {
    gopt_graph_add_node(g, "Relu", "relu", 1, &x, 1, &r, NULL);
    gopt_graph_add_node(g, "MatMul", "mm", 2, in_mm, 1, &m, NULL);
  }
  gopt_graph_add_node(g, "Add", "add", 2, in_add, 1, &y, NULL);
  gopt_graph_add_output(g, y);
  return g;
}

static void test_build_and_topo(void) {
  gopt_graph *g = diamond(0);
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_graph_validate(g, &err), 0);
  CHECK_EQ_INT(gopt_graph_node_count(g), 3);
  CHECK_EQ_INT(gopt_graph_edge_count(g), 2); /* relu->add, mm->add */
  int32_t order[3];
  CHECK_EQ_INT(gopt_graph_topo(g, order, &err), 3);
  CHECK_EQ_INT(order[2], 2); /* add last */
  int32_t x = gopt_graph_find_tensor(g, "x");
  CHECK_EQ_INT(gopt_tensor_use_count(g, x), 2);
  CHECK_EQ_INT(g->nodes.a[0].op, GOPT_OP_RELU);
  CHECK_EQ_INT(g->nodes.a[1].op, GOPT_OP_MATMUL);
  CHECK_EQ_INT(gopt_tensor_numel(g, x), 32);
  CHECK(gopt_graph_find_tensor(g, "nope") == -1);
  /* duplicate tensor names are rejected */
  CHECK(T(g, "x", 1, 1) == -1);
  gopt_graph_free(g);
}

static void test_attrs(void) {
  gopt_graph *g = diamond(0);
  int64_t ks[2] = {3, 3};
  float fs[3] = {0.5f, 1.5f, 2.5f};
  const char *ss[2] = {"a", "bc"};
  CHECK_EQ_INT(gopt_node_set_int(g, 0, "axis", 1), 0);
  CHECK_EQ_INT(gopt_node_set_ints(g, 1, "kernel_shape", ks, 2), 0);
  CHECK_EQ_INT(gopt_node_set_int(g, 0, "axis", -1), 0); /* replace, moves nothing */
  CHECK_EQ_INT(gopt_node_set_floats(g, 0, "f", fs, 3), 0); /* node 0's range is not last: relocated */
  CHECK_EQ_INT(gopt_node_set_string(g, 2, "mode", "constant"), 0);
  CHECK_EQ_INT(gopt_node_set_strings(g, 2, "names", ss, 2), 0);
  CHECK_EQ_INT(gopt_node_get_int(g, 0, "axis", 0), -1);
  size_t n = 0;
  const int64_t *k = gopt_node_get_ints(g, 1, "kernel_shape", &n);
  CHECK(k && n == 2 && k[0] == 3 && k[1] == 3);
  const float *f = gopt_node_get_floats(g, 0, "f", &n);
  CHECK(f && n == 3 && f[2] == 2.5f);
  CHECK(!strcmp(gopt_node_get_string(g, 2, "mode", ""), "constant"));
  CHECK(gopt_node_attr(g, 0, "kernel_shape") == NULL);
  CHECK_EQ_INT(g->nodes.a[0].n_attr, 2);
  const gopt_attr *a = gopt_node_attr(g, 2, "names");
  CHECK(a && a->n == 2 && !strcmp(gopt_graph_str(g, g->strids.a[a->v.off + 1]), "bc"));
  gopt_graph_free(g);
}

static void test_hash(void) {
  gopt_graph *a = diamond(0), *b = diamond(1);
  /* Same structure, different names and storage order: equal hashes. */
  CHECK(gopt_graph_hash(a) == gopt_graph_hash(b));
  gopt_graph *c = gopt_graph_clone(a);
  CHECK(c && gopt_graph_hash(c) == gopt_graph_hash(a));
  /* An attribute changes it. */
  gopt_node_set_int(c, 0, "axis", 1);
  CHECK(gopt_graph_hash(c) != gopt_graph_hash(a));
  /* Constant bytes change it. */
  gopt_graph *d = gopt_graph_clone(a);
  float wd[64] = {0};
  gopt_tensor_set_const(d, gopt_graph_find_tensor(d, "w"), wd, sizeof wd, NULL);
  CHECK(gopt_graph_hash(d) != gopt_graph_hash(a));
  /* Swapping the Add's operands changes it (Add is not canonicalised as commutative). */
  gopt_graph *e = gopt_graph_clone(a);
  int32_t r = gopt_graph_find_tensor(e, "r"), m = gopt_graph_find_tensor(e, "m");
  gopt_node_set_input(e, 2, 0, m);
  gopt_node_set_input(e, 2, 1, r);
  CHECK(gopt_graph_hash(e) != gopt_graph_hash(a));
  gopt_graph_free(a);
  gopt_graph_free(b);
  gopt_graph_free(c);
  gopt_graph_free(d);
  gopt_graph_free(e);
}

static void test_edit_and_compact(void) {
  gopt_graph *g = diamond(0);
  gopt_error err = {0};
  uint64_t h0 = gopt_graph_hash(g);
  /* Insert an Identity between relu and add, then remove it again: hash returns. */
  int32_t r = gopt_graph_find_tensor(g, "r");
  int32_t r2 = T(g, "r2", 4, 8);
  int32_t id = gopt_graph_add_node(g, "Identity", "ident", 1, &r, 1, &r2, &err);
  CHECK(id == 3);
  CHECK_EQ_INT(gopt_node_set_input(g, 2, 0, r2), 0);
  CHECK_EQ_INT(gopt_tensor_use_count(g, r), 1);
  CHECK_EQ_INT(gopt_graph_validate(g, &err), 0);
  CHECK(gopt_graph_hash(g) != h0);
  CHECK_EQ_INT(gopt_graph_replace_uses(g, r2, r), 1);
  CHECK_EQ_INT(gopt_graph_remove_node(g, id), 0);
  CHECK_EQ_INT(gopt_graph_node_count(g), 3);
  CHECK_EQ_INT(gopt_graph_validate(g, &err), 0);
  CHECK(gopt_graph_hash(g) == h0);
  int32_t map[4];
  CHECK_EQ_INT(gopt_graph_compact(g, map), 0);
  CHECK_EQ_INT(g->nodes.n, 3);
  CHECK_EQ_INT(map[3], -1);
  CHECK(gopt_graph_find_tensor(g, "r2") == -1); /* unused, unproduced: dropped */
  CHECK_EQ_INT(gopt_graph_validate(g, &err), 0);
  CHECK(gopt_graph_hash(g) == h0);
  /* constants survive compaction with their bytes */
  int32_t w = gopt_graph_find_tensor(g, "w");
  CHECK(w >= 0 && ((const float *)gopt_tensor_data(g, w))[63] == 63.0f);
  /* Removing the matmul leaves add reading a dangling tensor: validate names it. */
  gopt_graph_remove_node(g, 1);
  CHECK(gopt_graph_validate(g, &err) == GOPT_EGRAPH);
  CHECK(strstr(err.msg, "'add'") != NULL && strstr(err.msg, "'m'") != NULL);
  /* Replacing graph output uses retargets the output list. */
  int32_t y = gopt_graph_find_tensor(g, "y");
  CHECK_EQ_INT(gopt_graph_replace_uses(g, y, r), 1);
  CHECK(g->outputs.a[0] == r && (g->tensors.a[r].flags & GOPT_T_OUTPUT));
  gopt_graph_free(g);
}

static void test_cycle(void) {
  gopt_graph *g = gopt_graph_new("cyc");
  gopt_error err = {0};
  int32_t a = T(g, "a", 1, 1), b = T(g, "b", 1, 1);
  int32_t n0 = gopt_graph_add_node(g, "Relu", "first", 1, &b, 1, &a, NULL);
  int32_t n1 = gopt_graph_add_node(g, "Relu", "second", 1, &a, 1, &b, NULL);
  CHECK(n0 == 0 && n1 == 1);
  int32_t order[2];
  CHECK(gopt_graph_topo(g, order, &err) == GOPT_EGRAPH);
  CHECK(strstr(err.msg, "cycle") && (strstr(err.msg, "'first'") || strstr(err.msg, "'second'")));
  CHECK(gopt_graph_validate(g, &err) == GOPT_EGRAPH);
  /* an output claimed twice is rejected */
  CHECK(gopt_graph_add_node(g, "Relu", "third", 1, &a, 1, &b, &err) == -1);
  CHECK(strstr(err.msg, "already defined") != NULL);
  gopt_graph_free(g);
}

static void test_symbols_and_shapes(void) {
  gopt_graph *g = gopt_graph_new("sym");
  uint32_t b = gopt_graph_symbol(g, "batch");
  CHECK(gopt_graph_symbol(g, "batch") == b);
  uint32_t u = gopt_graph_new_symbol(g);
  CHECK(u != b);
  int64_t d[3] = {GOPT_DIM_SYM(b), 3, GOPT_DIM_SYM(u)};
  int32_t t = gopt_graph_add_tensor(g, "x", GOPT_DT_INT64, 3, d, NULL);
  CHECK(!gopt_tensor_is_static(g, t));
  CHECK_EQ_INT(gopt_tensor_numel(g, t), 3);
  int64_t d4[4] = {1, 2, 3, 4};
  CHECK_EQ_INT(gopt_tensor_set_shape(g, t, 4, d4), 0);
  CHECK(gopt_tensor_is_static(g, t) && gopt_tensor_numel(g, t) == 24);
  CHECK_EQ_INT(gopt_tensor_set_shape(g, t, 17, d4), GOPT_EUNSUP);
  int32_t n = gopt_graph_add_tensor(g, NULL, GOPT_DT_FLOAT, -1, NULL, NULL);
  CHECK(n >= 0 && (g->tensors.a[n].flags & GOPT_T_NOSHAPE));
  CHECK(!strcmp(gopt_dtype_name(GOPT_DT_INT64), "INT64") && gopt_dtype_size(GOPT_DT_FLOAT16) == 2);
  CHECK(gopt_dtype_from_name("BFLOAT16") == GOPT_DT_BFLOAT16);
  gopt_graph_free(g);
  gopt_graph_free(NULL);
}

/* A long chain with a skip connection per step: topo order is a valid order and bytes per node
 * stay small. */
static void test_large_chain(void) {
  const int N = 200000;
  gopt_graph *g = gopt_graph_new("chain");
  gopt_graph_reserve(g, (size_t)N);
  int32_t prev = T(g, "in", 1, 16);
  gopt_graph_add_input(g, prev);
  char name[32];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "t%d", i);
    int32_t t = T(g, name, 1, 16);
    int32_t ins[2] = {prev, prev};
    gopt_graph_add_node(g, (i % 2) ? "Add" : "Mul", name, 2, ins, 1, &t, NULL);
    prev = t;
  }
  gopt_graph_add_output(g, prev);
  int32_t *order = malloc((size_t)N * sizeof *order);
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_graph_topo(g, order, &err), N);
  int ok = 1;
  for (int i = 0; i < N; i++) ok &= order[i] == i;
  CHECK(ok);
  CHECK_EQ_INT(gopt_graph_validate(g, &err), 0);
  size_t bytes = gopt_graph_memory(g, 0);
  CHECK_MSG(bytes / (size_t)N < 400, "%zu bytes per node", bytes / (size_t)N);
  free(order);
  gopt_graph_free(g);
}

/* gopt_graph_clone_lean leaves out the bytes of constants over the limit (their size kept) and
 * copies the others; gopt_tensor_adopt_const takes a buffer without copying it. */
static void test_clone_lean(void) {
  gopt_graph *g = diamond(0);
  int32_t w = gopt_graph_find_tensor(g, "w"), b = T(g, "b", 1, 4);
  float wd[64], bd[4] = {1, 2, 3, 4};
  for (int i = 0; i < 64; i++) wd[i] = (float)i;
  CHECK(gopt_tensor_set_const(g, w, wd, sizeof wd, NULL) == 0 && gopt_tensor_set_const(g, b, bd, sizeof bd, NULL) == 0);
  /* an attribute tensor over the limit (as ConstantOfShape's value) keeps its bytes: nothing
   * fills attributes in later (eqsat's conversion once lost gpt2_tiny's) */
  int32_t v = T(g, "v", 1, 16);
  CHECK(gopt_tensor_set_const(g, v, wd, 16 * sizeof(float), NULL) == 0 && gopt_node_set_tensor(g, 0, "value", v) == 0);
  gopt_graph *c = gopt_graph_clone_lean(g, 16);
  CHECK(c && !gopt_tensor_data(c, w) && (c->tensors.a[w].flags & GOPT_T_CONST) &&
        c->consts.a[c->tensors.a[w].cdata].nbytes == sizeof wd);
  CHECK(c && gopt_tensor_data(c, v) && !memcmp(gopt_tensor_data(c, v), wd, 16 * sizeof(float)));
  CHECK(c && gopt_tensor_data(c, b) && gopt_tensor_data(c, b) != gopt_tensor_data(g, b) &&
        !memcmp(gopt_tensor_data(c, b), bd, sizeof bd));
  CHECK(c && gopt_graph_hash(c) != gopt_graph_hash(g)); /* the bytes are part of the hash */
  float *own = malloc(sizeof wd);
  CHECK(own != NULL);
  if (c && own) {
    memcpy(own, wd, sizeof wd);
    CHECK(gopt_tensor_adopt_const(c, w, own, sizeof wd, NULL) == 0 && gopt_tensor_data(c, w) == own);
    CHECK(gopt_graph_hash(c) == gopt_graph_hash(g));
  }
  gopt_graph_free(c);
  gopt_graph_free(g);
}

int main(void) {
  test_build_and_topo();
  test_clone_lean();
  test_attrs();
  test_hash();
  test_edit_and_compact();
  test_cycle();
  test_symbols_and_shapes();
  test_large_chain();
  return check_exit("test_graph");
}
