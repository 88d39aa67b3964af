/* test_ops_values.c: value propagation with symbolic dims in the patterns transformer exports use
 * (Shape/Gather/Range/ConstantOfShape/Equal/Where/Expand, flatten-and-restore Reshapes), and
 * --batch binding: after gopt_graph_bind_symbol + re-inference with folding, shapes are fully
 * concrete and the shape computations are folded. Expectations are written out by hand: the input
 * symbols ("batch", "seq") must survive; the bound shapes equal numpy's (stated literally).
 * Masks and shapes built by assignment and triangle ops: values fold through ScatterND and Trilu
 * into Reshape targets (expected values worked out with numpy, stated literally). */
#include <string.h>

#include "check.h"
#include "gopt/graph.h"
#include "gopt/ops.h"
#include "ir/ir_internal.h"

static gopt_error err;
static gopt_graph *g;

static int32_t T(const char *name, int dt, int rank, const int64_t *d) {
  int32_t t = gopt_graph_add_tensor(g, name, dt, rank, d, &err);
  CHECK_MSG(t >= 0, "%s", err.msg);
  return t;
}

static int32_t cI64(const char *name, int rank, const int64_t *d, const int64_t *v, size_t n) {
  int32_t t = T(name, GOPT_DT_INT64, rank, d);
  gopt_tensor_set_const(g, t, v, n * 8, &err);
  g->tensors.a[t].flags |= GOPT_T_INIT;
  return t;
}

static int32_t N(const char *type, const char *name, int nin, const int32_t *in, const char *out) {
  int32_t o = T(out, GOPT_DT_UNDEFINED, -1, NULL);
  int32_t n = gopt_graph_add_node(g, type, name, nin, in, 1, &o, &err);
  CHECK_MSG(n >= 0, "%s", err.msg);
  return n;
}

static int32_t tout(int32_t n) { return gopt_node_output(g, n, 0); }

/* 1 when dim i of tensor `name` is the symbol `sym` (or the value `v` when sym is NULL). */
static int dim_is(const char *name, int i, const char *sym, int64_t v) {
  int32_t t = gopt_graph_find_tensor(g, name);
  if (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE) || i >= g->tensors.a[t].rank) return 0;
  int64_t d = gopt_tensor_dims(g, t)[i];
  if (!sym) return d == v;
  return d < 0 && strcmp(gopt_graph_str(g, g->syms.a[GOPT_DIM_SYM_ID(d)]), sym) == 0;
}

static int rank_of(const char *name) {
  int32_t t = gopt_graph_find_tensor(g, name);
  return (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE)) ? -1 : g->tensors.a[t].rank;
}

static int32_t node_named(const char *name) {
  for (size_t n = 0; n < g->nodes.n; n++)
    if (strcmp(gopt_node_name(g, (int32_t)n), name) == 0) return (int32_t)n;
  return -1;
}

/* Reshape targets computed through ScatterND and Trilu:
 *   ScatterND([1,1,1], [[0],[2]], [4,6]) = [4,1,6]                (numpy: a[[0,2]] = [4,6])
 *   Gather(Reshape(Trilu([[2,3],[5,7]], upper), [4]), [0,1,3]) = [2,3,7]   (np.triu) */
static void test_scatter_trilu(void) {
  g = gopt_graph_new("values2");
  gopt_opset os = {gopt_graph_intern(g, ""), 16};
  GOPT_ARR_PUSH(g->opsets, os);
  int64_t d24[] = {24}, d42[] = {42}, three[] = {3}, two1[] = {2, 1}, two[] = {2}, sq[] = {2, 2}, one[] = {1};
  int32_t x = T("x", GOPT_DT_FLOAT, 1, d24), y = T("y", GOPT_DT_FLOAT, 1, d42);
  gopt_graph_add_input(g, x);
  gopt_graph_add_input(g, y);
  int64_t ones[] = {1, 1, 1}, idx[] = {0, 2}, upd[] = {4, 6}, m[] = {2, 3, 5, 7}, v4 = 4, gi[] = {0, 1, 3};
  int32_t base = cI64("base", 1, three, ones, 3), ix = cI64("ix", 2, two1, idx, 2);
  int32_t up = cI64("upd", 1, two, upd, 2), mat = cI64("mat", 2, sq, m, 4);
  int32_t flat = cI64("flat4", 1, one, &v4, 1), gix = cI64("gix", 1, three, gi, 3);
  int32_t sin[] = {base, ix, up};
  int32_t shp = tout(N("ScatterND", "scatter", 3, sin, "shp1"));
  int32_t r1[] = {x, shp};
  N("Reshape", "r1", 2, r1, "x3");
  int32_t tri = tout(N("Trilu", "triu", 1, &mat, "tri"));
  int32_t rf[] = {tri, flat};
  int32_t tf = tout(N("Reshape", "rf", 2, rf, "trif"));
  int32_t gin[] = {tf, gix};
  int32_t s2 = tout(N("Gather", "gt", 2, gin, "shp2"));
  gopt_node_set_int(g, node_named("gt"), "axis", 0);
  int32_t r2[] = {y, s2};
  N("Reshape", "r2", 2, r2, "y3");
  gopt_infer_opts o = {1, 1};
  int rc = gopt_infer_shapes(g, &o, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK(rank_of("x3") == 3 && dim_is("x3", 0, NULL, 4) && dim_is("x3", 1, NULL, 1) && dim_is("x3", 2, NULL, 6));
  CHECK(rank_of("y3") == 3 && dim_is("y3", 0, NULL, 2) && dim_is("y3", 1, NULL, 3) && dim_is("y3", 2, NULL, 7));
  gopt_graph_free(g);
  g = NULL;
}

int main(void) {
  test_scatter_trilu();
  g = gopt_graph_new("values");
  gopt_opset os = {gopt_graph_intern(g, ""), 13};
  GOPT_ARR_PUSH(g->opsets, os);
  int64_t B = GOPT_DIM_SYM(gopt_graph_symbol(g, "batch")), S = GOPT_DIM_SYM(gopt_graph_symbol(g, "seq"));
  int64_t one[] = {1}, three[] = {3}, two[] = {2};
  int64_t idsd[] = {B, S}, hd[] = {B, S, 768};
  int32_t ids = T("ids", GOPT_DT_INT64, 2, idsd), h = T("h", GOPT_DT_FLOAT, 3, hd);
  gopt_graph_add_input(g, ids);
  gopt_graph_add_input(g, h);
  int64_t v0 = 0, v1 = 1, vm1[] = {-1, -1, -1};
  int32_t c0 = cI64("c0", 0, NULL, &v0, 1), c1 = cI64("c1", 0, NULL, &v1, 1);
  int32_t ax0 = cI64("ax0", 1, one, &v0, 1), one1 = cI64("one1", 1, one, &v1, 1);
  int32_t negs = cI64("negs", 1, three, vm1, 3);

  /* seq = Shape(ids)[1]; positions = Range(0, seq, 1) -> [seq] */
  int32_t shp = tout(N("Shape", "shape_ids", 1, &ids, "shp"));
  int32_t gin[] = {shp, c1};
  int32_t seq = tout(N("Gather", "g_seq", 2, gin, "seq_v"));
  gopt_node_set_int(g, node_named("g_seq"), "axis", 0);
  int32_t gin0[] = {shp, c0};
  int32_t bat = tout(N("Gather", "g_bat", 2, gin0, "bat_v"));
  int32_t rin[] = {c0, seq, c1};
  N("Range", "range", 3, rin, "pos");

  /* causal mask: ConstantOfShape([seq, seq]) -> Trilu */
  int32_t u1in[] = {seq, ax0};
  int32_t useq = tout(N("Unsqueeze", "u_seq", 2, u1in, "useq"));
  int32_t u2in[] = {bat, ax0};
  int32_t ubat = tout(N("Unsqueeze", "u_bat", 2, u2in, "ubat"));
  int32_t cin[] = {useq, useq};
  int32_t mshape = tout(N("Concat", "c_mask", 2, cin, "mshape"));
  gopt_node_set_int(g, node_named("c_mask"), "axis", 0);
  int32_t mask = tout(N("ConstantOfShape", "cos", 1, &mshape, "mask0"));
  N("Trilu", "trilu", 1, &mask, "mask");

  /* Expand target torch-style: Where(Equal(shape, -1), 1, shape) with shape = [batch, 1, seq] */
  int32_t ein[] = {ubat, one1, useq};
  int32_t eshape = tout(N("Concat", "c_exp", 3, ein, "eshape"));
  gopt_node_set_int(g, node_named("c_exp"), "axis", 0);
  int32_t eqin[] = {eshape, negs};
  int32_t eq = tout(N("Equal", "eq", 2, eqin, "eqm"));
  int32_t win[] = {eq, one1, eshape};
  int32_t wshape = tout(N("Where", "where", 3, win, "wshape"));
  int64_t pd[] = {1, 1, S};
  int32_t pad = T("pm", GOPT_DT_FLOAT, 3, pd);
  gopt_graph_add_input(g, pad);
  int32_t xin[] = {pad, wshape};
  N("Expand", "expand", 2, xin, "emask");

  /* flatten [batch, seq, 768] -> [-1, 768], then restore with [batch, -1, 12, 64] */
  int64_t fl[] = {-1, 768}, tail[] = {-1, 12, 64};
  int32_t fls = cI64("fls", 1, two, fl, 2), tl = cI64("tl", 1, three, tail, 3);
  int32_t r1in[] = {h, fls};
  int32_t h2 = tout(N("Reshape", "r_flat", 2, r1in, "h2"));
  int32_t rcin[] = {ubat, tl};
  int32_t rshape = tout(N("Concat", "c_rest", 2, rcin, "rshape"));
  gopt_node_set_int(g, node_named("c_rest"), "axis", 0);
  int32_t r2in[] = {h2, rshape};
  N("Reshape", "r_rest", 2, r2in, "h4");
  int64_t fd[] = {B, 768 * 2};
  int32_t fx = T("fx", GOPT_DT_FLOAT, 2, fd);
  gopt_graph_add_input(g, fx);
  int32_t flin[] = {h};
  N("Flatten", "flat", 1, flin, "hf");
  gopt_node_set_int(g, node_named("flat"), "axis", 2);

  gopt_infer_opts o = {0, 1};
  int rc = gopt_infer_shapes(g, &o, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK(rank_of("pos") == 1 && dim_is("pos", 0, "seq", 0));
  CHECK(rank_of("mask") == 2 && dim_is("mask", 0, "seq", 0) && dim_is("mask", 1, "seq", 0));
  CHECK(rank_of("emask") == 3 && dim_is("emask", 0, "batch", 0) && dim_is("emask", 1, NULL, 1) &&
        dim_is("emask", 2, "seq", 0));
  CHECK(rank_of("h2") == 2 && dim_is("h2", 1, NULL, 768));
  CHECK(rank_of("h4") == 4 && dim_is("h4", 0, "batch", 0) && dim_is("h4", 1, "seq", 0) &&
        dim_is("h4", 2, NULL, 12) && dim_is("h4", 3, NULL, 64));
  {
    /* the flattened dim of h2 and of Flatten(h) is the same product symbol batch*seq */
    int32_t a = gopt_graph_find_tensor(g, "h2"), b = gopt_graph_find_tensor(g, "hf");
    CHECK(gopt_tensor_dims(g, a)[0] < 0 && gopt_tensor_dims(g, a)[0] == gopt_tensor_dims(g, b)[0]);
  }
  CHECK(gopt_graph_batch_symbol(g) != NULL && strcmp(gopt_graph_batch_symbol(g), "batch") == 0);

  /* bind batch=2, seq=5 and re-infer with folding: everything concrete, shape math folded */
  size_t nb = gopt_graph_bind_symbol(g, "batch", 2);
  CHECK(nb >= 3);
  CHECK(gopt_graph_bind_symbol(g, "seq", 5) >= 2);
  gopt_infer_opts of = {1, 1};
  rc = gopt_infer_shapes(g, &of, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  for (size_t t = 0; t < g->tensors.n; t++)
    CHECK_MSG(gopt_tensor_is_static(g, (int32_t)t), "tensor %s not static after binding",
              gopt_graph_str(g, g->tensors.a[t].name));
  CHECK(dim_is("h4", 0, NULL, 2) && dim_is("h4", 1, NULL, 5));
  CHECK(dim_is("h2", 0, NULL, 10));
  CHECK(dim_is("mask", 0, NULL, 5) && dim_is("emask", 0, NULL, 2) && dim_is("emask", 2, NULL, 5));
  CHECK(!gopt_node_alive(g, node_named("shape_ids")));
  CHECK(!gopt_node_alive(g, node_named("where")));
  CHECK(!gopt_node_alive(g, node_named("range")));
  CHECK(gopt_node_alive(g, node_named("expand")) && gopt_node_alive(g, node_named("r_rest")));
  {
    int32_t t = gopt_graph_find_tensor(g, "wshape");
    const int64_t *v = gopt_tensor_data(g, t);
    CHECK(v && v[0] == 2 && v[1] == 1 && v[2] == 5);
    t = gopt_graph_find_tensor(g, "pos");
    v = gopt_tensor_data(g, t);
    CHECK(v && v[0] == 0 && v[4] == 4);
  }
  rc = gopt_graph_validate(g, &err);
  CHECK_MSG(rc == 0, "graph invalid after folding: %s", err.msg);
  gopt_graph_free(g);
  return check_exit("test_ops_values");
}
