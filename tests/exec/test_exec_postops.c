/* test_exec_postops.c: the extended post-ops a fusion decision may add to a Conv/MatMul step on the
 * host target (oneDNN binary post-ops, GELU), never taken by the executor's own plan.
 * Graph: f[3,4,8] -> MatMul(W1[8,16]) -> Add(b1) -> GELU as PyTorch exports it (Div sqrt2, Erf,
 * Add 1, Mul, Mul 0.5) -> g1 -> MatMul(W2[16,8]) -> Add(b2) -> Mul(gamma[8]) -> Add(f) (sum) ->
 * Add(r[3,4,8], a graph input: a second same-shape operand, a binary add) -> y1 (g1 is a graph
 * output too); x[1,4,5,5] -> Conv(pads 1) -> Mul(c[1,6,1,1]) -> Add(d[6,1,1]) -> Relu ->
 * Max(0.25) -> y2.
 * Legal (gopt_exec_group_kind CHAIN): the matmul with its bias and the whole GELU, the second
 * matmul with bias, per-column Mul, sum and binary Add, the conv with per-channel Mul/Add, Relu and
 * a scalar Max. Not legal: part of a GELU, a Sub whose right operand is the chain's value. The
 * executor's own plan (gopt_exec_auto_plan) takes none of these nodes beyond bias and sum. The
 * grouped run takes 3 steps and equals the unfused run (the binary post-ops bit for bit here; GELU
 * within 2e-6: oneDNN's erf is not gopt's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_graph.h"
#include "exec_groups.h"
#include "gopt/ops.h"

enum { N_MM1, N_B1, N_DIV, N_ERF, N_ADD1, N_MULX, N_HALF, N_MM2, N_B2, N_GAM, N_RES, N_R, N_CONV, N_MC,
       N_AD, N_RELU, N_MAX, N_SUB, N_COUNT };

static float W1[8 * 16], b1[16], W2[16 * 8], b2[8], gam[8], Wc[6 * 4 * 9], cv[6], dv[6];

static gopt_graph *build(int32_t *nd) {
  gopt_graph *g = gopt_graph_new("postops");
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int64_t fd[3] = {3, 4, 8}, hd[3] = {3, 4, 16}, w1d[2] = {8, 16}, w2d[2] = {16, 8}, b1d[1] = {16}, b2d[1] = {8};
  int64_t xd[4] = {1, 4, 5, 5}, yd[4] = {1, 6, 5, 5}, wcd[4] = {6, 4, 3, 3}, cd[4] = {1, 6, 1, 1}, dd[3] = {6, 1, 1};
  float s2 = 1.41421356f, one = 1.0f, half = 0.5f, quarter = 0.25f;
  int32_t f = tensor(g, "f", GOPT_DT_FLOAT, 3, fd), r = tensor(g, "r", GOPT_DT_FLOAT, 3, fd);
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 4, xd);
  gopt_graph_add_input(g, f);
  gopt_graph_add_input(g, r);
  gopt_graph_add_input(g, x);
  int32_t w1 = const_tensor(g, "W1", GOPT_DT_FLOAT, 2, w1d, W1, sizeof W1);
  int32_t bb1 = const_tensor(g, "b1", GOPT_DT_FLOAT, 1, b1d, b1, sizeof b1);
  int32_t w2 = const_tensor(g, "W2", GOPT_DT_FLOAT, 2, w2d, W2, sizeof W2);
  int32_t bb2 = const_tensor(g, "b2", GOPT_DT_FLOAT, 1, b2d, b2, sizeof b2);
  int32_t ga = const_tensor(g, "gamma", GOPT_DT_FLOAT, 1, b2d, gam, sizeof gam);
  int32_t ks2 = const_tensor(g, "sqrt2", GOPT_DT_FLOAT, 0, NULL, &s2, sizeof s2);
  int32_t k1 = const_tensor(g, "one", GOPT_DT_FLOAT, 0, NULL, &one, sizeof one);
  int32_t kh = const_tensor(g, "half", GOPT_DT_FLOAT, 0, NULL, &half, sizeof half);
  int32_t kq = const_tensor(g, "quarter", GOPT_DT_FLOAT, 0, NULL, &quarter, sizeof quarter);
  int32_t wc = const_tensor(g, "Wc", GOPT_DT_FLOAT, 4, wcd, Wc, sizeof Wc);
  int32_t c = const_tensor(g, "c", GOPT_DT_FLOAT, 4, cd, cv, sizeof cv);
  int32_t d = const_tensor(g, "d", GOPT_DT_FLOAT, 3, dd, dv, sizeof dv);
  int32_t t[17];
  const char *names[17] = {"h", "hb", "hd", "he", "ha", "hm", "g1", "q", "qb", "qg", "qr", "y1",
                           "c1", "c2", "c3", "c4", "y2"};
  for (int i = 0; i < 17; i++) t[i] = tensor(g, names[i], GOPT_DT_FLOAT, i < 7 ? 3 : i < 12 ? 3 : 4,
                                             i < 7 ? hd : i < 12 ? fd : yd);
  nd[N_MM1] = node(g, "MatMul", "mm1", 2, (int32_t[]){f, w1}, t[0]);
  nd[N_B1] = node(g, "Add", "b1", 2, (int32_t[]){t[0], bb1}, t[1]);
  nd[N_DIV] = node(g, "Div", "div", 2, (int32_t[]){t[1], ks2}, t[2]);
  nd[N_ERF] = node(g, "Erf", "erf", 1, (int32_t[]){t[2]}, t[3]);
  nd[N_ADD1] = node(g, "Add", "add1", 2, (int32_t[]){t[3], k1}, t[4]);
  nd[N_MULX] = node(g, "Mul", "mulx", 2, (int32_t[]){t[1], t[4]}, t[5]);
  nd[N_HALF] = node(g, "Mul", "half", 2, (int32_t[]){t[5], kh}, t[6]);
  nd[N_MM2] = node(g, "MatMul", "mm2", 2, (int32_t[]){t[6], w2}, t[7]);
  nd[N_B2] = node(g, "Add", "b2", 2, (int32_t[]){bb2, t[7]}, t[8]);
  nd[N_GAM] = node(g, "Mul", "gam", 2, (int32_t[]){t[8], ga}, t[9]);
  nd[N_RES] = node(g, "Add", "res", 2, (int32_t[]){t[9], f}, t[10]);
  nd[N_R] = node(g, "Add", "addr", 2, (int32_t[]){r, t[10]}, t[11]);
  nd[N_CONV] = node(g, "Conv", "conv", 2, (int32_t[]){x, wc}, t[12]);
  gopt_node_set_ints(g, nd[N_CONV], "pads", (int64_t[]){1, 1, 1, 1}, 4);
  gopt_node_set_ints(g, nd[N_CONV], "kernel_shape", (int64_t[]){3, 3}, 2);
  nd[N_MC] = node(g, "Mul", "mc", 2, (int32_t[]){t[12], c}, t[13]);
  nd[N_AD] = node(g, "Add", "ad", 2, (int32_t[]){d, t[13]}, t[14]);
  nd[N_RELU] = node(g, "Relu", "relu", 1, (int32_t[]){t[14]}, t[15]);
  nd[N_MAX] = node(g, "Max", "max", 2, (int32_t[]){t[15], kq}, t[16]);
  int64_t sd[3] = {3, 4, 8};
  int32_t ys = tensor(g, "ys", GOPT_DT_FLOAT, 3, sd);
  nd[N_SUB] = node(g, "Sub", "sub", 2, (int32_t[]){r, t[11]}, ys); /* the chain's value on the right */
  gopt_graph_add_output(g, t[6]);
  gopt_graph_add_output(g, ys);
  gopt_graph_add_output(g, t[16]);
  finish(g);
  return g;
}

static int kind_of(const gopt_graph *g, const int32_t *nd, const int *idx, int n) {
  int32_t mem[12];
  for (int i = 0; i < n; i++) mem[i] = nd[idx[i]];
  return gopt_exec_group_kind(g, mem, n);
}

/* Runs g under the layout pass (random inputs from seed 5) with the groups (NULL: none); outputs
 * into out[3]; returns the number of steps, -1 on error. */
static int run(const gopt_graph *g, const int32_t *group, gopt_host_tensor *out, gopt_error *err) {
  return groups_run(g, group, GOPT_EXEC_LAYOUT_AUTO, 5, out, 3, err);
}

static double out_diff(const gopt_host_tensor *a, const gopt_host_tensor *b) {
  if (!a->data || !b->data || a->nbytes != b->nbytes) return INFINITY;
  double d = 0;
  for (size_t j = 0; j < a->nbytes / sizeof(float); j++)
    d = fmax(d, fabs((double)((const float *)a->data)[j] - ((const float *)b->data)[j]));
  return d;
}

int main(void) {
  for (size_t i = 0; i < sizeof W1 / sizeof *W1; i++) W1[i] = frand() * 0.5f;
  for (size_t i = 0; i < sizeof W2 / sizeof *W2; i++) W2[i] = frand() * 0.5f;
  for (size_t i = 0; i < sizeof Wc / sizeof *Wc; i++) Wc[i] = frand() * 0.3f;
  for (int i = 0; i < 16; i++) b1[i] = frand();
  for (int i = 0; i < 8; i++) b2[i] = frand(), gam[i] = frand();
  for (int i = 0; i < 6; i++) cv[i] = frand(), dv[i] = frand();
  int32_t nd[N_COUNT];
  gopt_graph *g = build(nd);
  static const int gelu[] = {N_MM1, N_B1, N_DIV, N_ERF, N_ADD1, N_MULX, N_HALF};
  static const int mm2[] = {N_MM2, N_B2, N_GAM, N_RES, N_R};
  static const int conv[] = {N_CONV, N_MC, N_AD, N_RELU, N_MAX};
  CHECK_EQ_INT(kind_of(g, nd, gelu, 7), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, mm2, 5), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, conv, 5), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, gelu, 4), GOPT_EXEC_GROUP_NONE); /* part of the GELU */
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_MM2, N_B2, N_GAM, N_RES, N_R, N_SUB}, 6), GOPT_EXEC_GROUP_NONE);
  /* the executor's own plan: bias and the sum only */
  int32_t *step_of = malloc(g->nodes.n * sizeof *step_of), *group = malloc(g->nodes.n * sizeof *group);
  CHECK(gopt_exec_auto_plan(g, step_of) == 0);
  CHECK_EQ_INT(step_of[nd[N_B1]], nd[N_MM1]);
  CHECK_EQ_INT(step_of[nd[N_DIV]], -1);
  CHECK_EQ_INT(step_of[nd[N_B2]], nd[N_MM2]);
  CHECK_EQ_INT(step_of[nd[N_GAM]], -1);
  CHECK_EQ_INT(step_of[nd[N_RES]], -1); /* the sum needs the Mul in the chain first */
  CHECK_EQ_INT(step_of[nd[N_AD]], -1);
  /* the groups run as one step each and compute what the unfused run computes */
  for (size_t i = 0; i < g->nodes.n; i++) group[i] = -1;
  for (int i = 0; i < 7; i++) group[nd[gelu[i]]] = 0;
  for (int i = 0; i < 5; i++) group[nd[mm2[i]]] = 1, group[nd[conv[i]]] = 2;
  gopt_error err = {0};
  gopt_host_tensor ref[3] = {{0}}, got[3] = {{0}};
  int s0 = run(g, NULL, ref, &err);
  CHECK_MSG(s0 > 0, "unfused: %s", err.msg);
  int s1 = run(g, group, got, &err);
  CHECK_MSG(s1 > 0, "fused: %s", err.msg);
  CHECK_EQ_INT(s1, 4); /* three chains and the Sub */
  double dg = out_diff(&ref[0], &got[0]), dy1 = out_diff(&ref[1], &got[1]), dy2 = out_diff(&ref[2], &got[2]);
  CHECK_MSG(dg <= 2e-6, "GELU chain differs from the unfused run by %g", dg);
  /* the second matmul reads the GELU output, so its result carries the GELU's ulps too */
  CHECK_MSG(dy1 <= 1e-5, "matmul chain with binary post-ops differs by %g", dy1);
  CHECK_MSG(dy2 == 0, "conv chain with binary post-ops differs by %g (expected bitwise equal)", dy2);
  /* the matmul chain alone, on the GELU computed unfused: bitwise */
  for (int i = 0; i < 7; i++) group[nd[gelu[i]]] = -1;
  for (int i = 0; i < 3; i++) gopt_host_tensor_clear(&got[i]);
  CHECK_MSG(run(g, group, got, &err) > 0, "fused: %s", err.msg);
  dy1 = out_diff(&ref[1], &got[1]);
  /* bitwise where oneDNN's MatMul applies the post-ops after the accumulation (AVX-512); its AVX2
   * GEMM may contract the bias into the accumulation: 1 ulp */
  CHECK_MSG(dy1 <= 2.5e-7, "matmul chain with binary post-ops differs by %g (expected <= 1 ulp)", dy1);
  for (int i = 0; i < 3; i++) {
    gopt_host_tensor_clear(&ref[i]);
    gopt_host_tensor_clear(&got[i]);
  }
  free(step_of);
  free(group);
  gopt_graph_free(g);
  return check_exit("test_exec_postops");
}
