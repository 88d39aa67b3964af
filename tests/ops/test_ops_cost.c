/* test_ops_cost.c: cost facts (FLOPs, bytes, params) of conv, matmul, gemm, elementwise and shape
 * ops, and graph totals, against formulas written out here by hand (docs/OPS.md conventions). */
#include <string.h>

#include "check.h"
#include "gopt/graph.h"
#include "gopt/ops.h"

static gopt_error err;

static int32_t tensor(gopt_graph *g, const char *name, int dt, int rank, const int64_t *d) {
  return gopt_graph_add_tensor(g, name, dt, rank, d, &err);
}

static int32_t weight(gopt_graph *g, const char *name, int rank, const int64_t *d) {
  int32_t t = tensor(g, name, GOPT_DT_FLOAT, rank, d);
  gopt_tensor_set_const(g, t, NULL, (size_t)gopt_tensor_numel(g, t) * 4, &err);
  g->tensors.a[t].flags |= GOPT_T_PARAM | GOPT_T_INIT;
  return t;
}

static int32_t node(gopt_graph *g, const char *type, int nin, const int32_t *in, int32_t out) {
  return gopt_graph_add_node(g, type, NULL, nin, in, 1, &out, &err);
}

static void infer(gopt_graph *g) {
  gopt_infer_opts o = {0, 1};
  int rc = gopt_infer_shapes(g, &o, &err);
  CHECK_MSG(rc == 0, "inference failed: %s", err.msg);
}

int main(void) {
  gopt_graph *g = gopt_graph_new("cost");
  gopt_graph_set_opset(g, "", 13);

  /* Conv 1x3x32x32 * 8x3x3x3, stride 2, pad 1, bias -> 1x8x16x16 */
  int64_t xd[] = {1, 3, 32, 32}, wd[] = {8, 3, 3, 3}, bd[] = {8};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 4, xd), w = weight(g, "w", 4, wd), b = weight(g, "b", 1, bd);
  gopt_graph_add_input(g, x);
  int32_t y = tensor(g, "y", GOPT_DT_FLOAT, -1, NULL);
  int32_t cin[] = {x, w, b};
  int32_t conv = node(g, "Conv", 3, cin, y);
  int64_t two[] = {2, 2}, ones4[] = {1, 1, 1, 1};
  gopt_node_set_ints(g, conv, "strides", two, 2);
  gopt_node_set_ints(g, conv, "pads", ones4, 4);

  /* grouped conv without bias: 1x4x8x8 * 6x2x3x3, group 2, pad 1 -> 1x6x8x8 */
  int64_t gxd[] = {1, 4, 8, 8}, gwd[] = {6, 2, 3, 3};
  int32_t gx = tensor(g, "gx", GOPT_DT_FLOAT, 4, gxd), gw = weight(g, "gw", 4, gwd);
  gopt_graph_add_input(g, gx);
  int32_t gy = tensor(g, "gy", GOPT_DT_FLOAT, -1, NULL);
  int32_t gin[] = {gx, gw};
  int32_t gconv = node(g, "Conv", 2, gin, gy);
  gopt_node_set_int(g, gconv, "group", 2);
  gopt_node_set_ints(g, gconv, "pads", ones4, 4);

  /* MatMul [2,1,3,4] x [5,4,6] -> [2,5,3,6] */
  int64_t ad[] = {2, 1, 3, 4}, bmd[] = {5, 4, 6};
  int32_t a = tensor(g, "a", GOPT_DT_FLOAT, 4, ad), bm = tensor(g, "bm", GOPT_DT_FLOAT, 3, bmd);
  gopt_graph_add_input(g, a);
  gopt_graph_add_input(g, bm);
  int32_t mm_out = tensor(g, "mm", GOPT_DT_FLOAT, -1, NULL);
  int32_t mmin[] = {a, bm};
  int32_t mm = node(g, "MatMul", 2, mmin, mm_out);

  /* Gemm A[4,3]^T (M=3,K=4) x B[5,4]^T (N=5) + C[5] */
  int64_t gad[] = {4, 3}, gbd[] = {5, 4}, gcd[] = {5};
  int32_t ga = tensor(g, "ga", GOPT_DT_FLOAT, 2, gad), gb = weight(g, "gb", 2, gbd), gc = weight(g, "gc", 1, gcd);
  gopt_graph_add_input(g, ga);
  int32_t gm_out = tensor(g, "gm", GOPT_DT_FLOAT, -1, NULL);
  int32_t gmin[] = {ga, gb, gc};
  int32_t gemm = node(g, "Gemm", 3, gmin, gm_out);
  gopt_node_set_int(g, gemm, "transA", 1);
  gopt_node_set_int(g, gemm, "transB", 1);

  /* Add [2,3] + [3] (float), Exp [2,3], Reshape [2,3] -> [6] */
  int64_t p23[] = {2, 3}, p3[] = {3}, p1[] = {1};
  int32_t ea = tensor(g, "ea", GOPT_DT_FLOAT, 2, p23), eb = tensor(g, "eb", GOPT_DT_FLOAT, 1, p3);
  gopt_graph_add_input(g, ea);
  gopt_graph_add_input(g, eb);
  int32_t sum = tensor(g, "sum", GOPT_DT_FLOAT, -1, NULL), ex = tensor(g, "ex", GOPT_DT_FLOAT, -1, NULL);
  int32_t addin[] = {ea, eb};
  int32_t add = node(g, "Add", 2, addin, sum);
  int32_t exp_ = node(g, "Exp", 1, &sum, ex);
  int32_t shp = tensor(g, "shp", GOPT_DT_INT64, 1, p1);
  int64_t m1 = -1;
  gopt_tensor_set_const(g, shp, &m1, 8, &err);
  g->tensors.a[shp].flags |= GOPT_T_INIT; /* an int64 initializer: counted by params like onnx's count */
  int32_t rs = tensor(g, "rs", GOPT_DT_FLOAT, -1, NULL);
  int32_t rsin[] = {ex, shp};
  int32_t reshape = node(g, "Reshape", 2, rsin, rs);

  /* LSTM: seq 5, batch 2, input 10, hidden 16, forward */
  int64_t lxd[] = {5, 2, 10}, lwd[] = {1, 64, 10}, lrd[] = {1, 64, 16};
  int32_t lx = tensor(g, "lx", GOPT_DT_FLOAT, 3, lxd), lw = weight(g, "lw", 3, lwd), lr = weight(g, "lr", 3, lrd);
  gopt_graph_add_input(g, lx);
  int32_t ly = tensor(g, "ly", GOPT_DT_FLOAT, -1, NULL);
  int32_t lin[] = {lx, lw, lr};
  int32_t lstm = node(g, "LSTM", 3, lin, ly);
  gopt_node_set_int(g, lstm, "hidden_size", 16);

  /* Gather: an embedding table [1000,64] read by 10 int64 indices -> [10,64] */
  int64_t ed[] = {1000, 64}, idd[] = {10};
  int32_t emb = weight(g, "emb", 2, ed), ids = tensor(g, "ids", GOPT_DT_INT64, 1, idd);
  gopt_graph_add_input(g, ids);
  int32_t rows = tensor(g, "rows", GOPT_DT_FLOAT, -1, NULL);
  int32_t gain[] = {emb, ids};
  int32_t gather = node(g, "Gather", 2, gain, rows);

  infer(g);
  gopt_cost c;

  gopt_node_cost(g, conv, &c);
  double n = 1, cout = 8, oh = 16, ow = 16, cin_g = 3, kh = 3, kw = 3;
  CHECK_NEAR(c.flops, 2 * n * cout * oh * ow * cin_g * kh * kw + n * cout * oh * ow, 0);
  CHECK_EQ_INT(c.params, 8 * 3 * 3 * 3 + 8);
  CHECK_NEAR(c.bytes_read, (1 * 3 * 32 * 32 + 8 * 3 * 3 * 3 + 8) * 4.0, 0);
  CHECK_NEAR(c.bytes_written, 1 * 8 * 16 * 16 * 4.0, 0);

  gopt_node_cost(g, gconv, &c);
  CHECK_NEAR(c.flops, 2.0 * 1 * 6 * 8 * 8 * (4 / 2) * 3 * 3, 0);

  gopt_node_cost(g, mm, &c);
  CHECK_NEAR(c.flops, 2.0 * (2 * 5) * 3 * 6 * 4, 0); /* 2*M*N*K per broadcast batch */
  CHECK_EQ_INT(c.params, 0);

  gopt_node_cost(g, gemm, &c);
  CHECK_NEAR(c.flops, 2.0 * 3 * 5 * 4 + 3 * 5, 0);
  CHECK_EQ_INT(c.params, 5 * 4 + 5);

  gopt_node_cost(g, add, &c);
  CHECK_NEAR(c.flops, 6, 0);
  CHECK_NEAR(c.bytes_read, (6 + 3) * 4.0, 0);
  CHECK_NEAR(c.bytes_written, 6 * 4.0, 0);

  gopt_node_cost(g, exp_, &c);
  CHECK_NEAR(c.flops, 4.0 * 6, 0);

  gopt_node_cost(g, reshape, &c);
  CHECK_NEAR(c.flops, 0, 0);
  CHECK_NEAR(c.bytes_read + c.bytes_written, 0, 0);

  gopt_node_cost(g, lstm, &c);
  /* per step and direction: 4 gates x (2*batch*hidden*(input+hidden) + 4*batch*hidden) */
  CHECK_NEAR(c.flops, 5.0 * 1 * 4 * (2.0 * 2 * 16 * (10 + 16) + 4.0 * 2 * 16), 0);

  gopt_graph_stats s;
  gopt_graph_stats_compute(g, &s);
  int64_t want_params = (8 * 27 + 8) + (6 * 2 * 9) + (20 + 5) + 1 + (64 * 10 + 64 * 16) + 1000 * 64;
  CHECK_EQ_INT(s.params, want_params);
  CHECK_EQ_INT(s.param_bytes, (want_params - 1) * 4 + 8);
  CHECK_EQ_INT(s.nodes, 9);
  double total = 0;
  for (int32_t k = 0; k < 8; k++) {
    gopt_node_cost(g, k, &c);
    total += c.flops;
  }
  CHECK_NEAR(s.flops, total, 0);

  gopt_cost gcost;
  gopt_node_cost(g, gather, &gcost);
  CHECK_NEAR(gcost.bytes_written, 10 * 64 * 4, 0);
  CHECK_NEAR(gcost.bytes_read, 10 * 64 * 4 + 10 * 8, 0); /* the rows gathered and the indices */
  CHECK_EQ_INT(gcost.params, 1000 * 64);
  gopt_graph_free(g);
  return check_exit("test_ops_cost");
}
