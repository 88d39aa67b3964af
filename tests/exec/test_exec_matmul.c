/* test_exec_matmul.c: MatMul with constant weights (k_dnnl.c: weights packed once into oneDNN's
 * layout) and, under --layouts auto, its bias Add and following ops run as the matmul's bias and
 * post-ops (exec_layout.c). Graph: x[2,5,24] -> MatMul W[24,40] -> Add(b[40], .) -> Relu ->
 * Add(., r) (r a second input: a sum post-op), and beside it x -> MatMul V[24,40] -> Add(. , c[1,40])
 * -> Tanh whose bias-added tensor is also a graph output (so only the bias is absorbed), and
 * 2x -> MatMul W (the same weight as the first: an unrolled RNN's steps share theirs) -> Add(b) ->
 * Sigmoid. Both modes against a double-precision loop (1e-5), auto absorbing exactly 6 nodes,
 * plain none; W is packed once for both its MatMuls (copies = readers - 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_graph.h"
#include "gopt/exec.h"
#include "gopt/ops.h"

enum { B = 2, T = 5, K = 24, N = 40, M = B * T };

static float xv[M * K], rv[M * N], W[K * N], V[K * N], bv[N], cv[N];
enum { N_OUT = 4 };

static int32_t konst(gopt_graph *g, const char *name, int rank, const int64_t *dims, float *v, size_t n) {
  gopt_error err = {0};
  for (size_t i = 0; i < n; i++) v[i] = frand();
  int32_t t = tensor(g, name, GOPT_DT_FLOAT, rank, dims);
  CHECK_MSG(gopt_tensor_set_const(g, t, v, n * sizeof(float), &err) == 0, "%s", err.msg);
  return t;
}

static gopt_graph *build(int32_t *outs) {
  gopt_graph *g = gopt_graph_new("mm");
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int64_t xd[3] = {B, T, K}, yd[3] = {B, T, N}, wd[2] = {K, N}, bd[1] = {N}, cd[2] = {1, N};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 3, xd), r = tensor(g, "r", GOPT_DT_FLOAT, 3, yd);
  gopt_graph_add_input(g, x);
  gopt_graph_add_input(g, r);
  int32_t w = konst(g, "W", 2, wd, W, K * N), v = konst(g, "V", 2, wd, V, K * N);
  int32_t b = konst(g, "b", 1, bd, bv, N), c = konst(g, "c", 2, cd, cv, N);
  const char *names[11] = {"mm1", "ab", "relu", "y1", "mm2", "ac", "y2", "x2", "mm3", "ab3", "y3"};
  int32_t t[11];
  for (int i = 0; i < 11; i++) t[i] = tensor(g, names[i], GOPT_DT_FLOAT, 3, i == 7 ? xd : yd);
  node(g, "MatMul", "n_mm1", 2, (int32_t[]){x, w}, t[0]);
  node(g, "Add", "n_ab", 2, (int32_t[]){b, t[0]}, t[1]); /* bias first: either slot */
  node(g, "Relu", "n_relu", 1, (int32_t[]){t[1]}, t[2]);
  node(g, "Add", "n_y1", 2, (int32_t[]){t[2], r}, t[3]);
  node(g, "MatMul", "n_mm2", 2, (int32_t[]){x, v}, t[4]);
  node(g, "Add", "n_ac", 2, (int32_t[]){t[4], c}, t[5]);
  node(g, "Tanh", "n_y2", 1, (int32_t[]){t[5]}, t[6]);
  node(g, "Add", "n_x2", 2, (int32_t[]){x, x}, t[7]);
  node(g, "MatMul", "n_mm3", 2, (int32_t[]){t[7], w}, t[8]);
  node(g, "Add", "n_ab3", 2, (int32_t[]){t[8], b}, t[9]);
  node(g, "Sigmoid", "n_y3", 1, (int32_t[]){t[9]}, t[10]);
  outs[0] = t[3], outs[1] = t[6], outs[2] = t[5], outs[3] = t[10];
  for (int i = 0; i < N_OUT; i++) gopt_graph_add_output(g, outs[i]);
  finish(g);
  return g;
}

int main(void) {
  for (int i = 0; i < M * K; i++) xv[i] = frand() * 2.0f;
  for (int i = 0; i < M * N; i++) rv[i] = frand();
  int32_t outs[N_OUT];
  gopt_graph *g = build(outs);
  static double want[N_OUT][M * N];
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double a = bv[n], c = cv[n], e = bv[n];
      for (int k = 0; k < K; k++) {
        a += (double)xv[m * K + k] * W[k * N + n], c += (double)xv[m * K + k] * V[k * N + n];
        e += 2.0 * xv[m * K + k] * W[k * N + n];
      }
      want[0][m * N + n] = (a > 0 ? a : 0) + rv[m * N + n];
      want[1][m * N + n] = tanh(c);
      want[2][m * N + n] = c;
      want[3][m * N + n] = 1.0 / (1.0 + exp(-e));
    }
  for (int mode = 0; mode < 2; mode++) {
    gopt_error err = {0};
    gopt_exec *ex = NULL;
    gopt_exec_opts o = {.threads = 1, .seed = 1, .layouts = mode ? GOPT_EXEC_LAYOUT_AUTO : GOPT_EXEC_LAYOUT_PLAIN};
    int rc = gopt_exec_new(g, &o, &ex, NULL, &err);
    gopt_host_tensor in[2] = {{.dtype = GOPT_DT_FLOAT, .rank = 3, .dims = {B, T, K}, .data = xv, .nbytes = sizeof xv},
                              {.dtype = GOPT_DT_FLOAT, .rank = 3, .dims = {B, T, N}, .data = rv, .nbytes = sizeof rv}};
    for (int i = 0; i < 2 && !rc; i++) rc = gopt_exec_set_input(ex, (size_t)i, &in[i], &err);
    if (!rc) rc = gopt_exec_run(ex, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    gopt_exec_layout_stats st;
    gopt_exec_layout_stats_get(ex, &st);
    CHECK_EQ_INT(st.post_op_nodes, mode ? 6 : 0); /* n_ab, n_relu, n_y1 into mm1; n_ac into mm2; n_ab3, n_y3 */
    size_t bytes = 0, readers = 0, copies = gopt_exec_packed_weights(ex, &bytes, &readers);
    printf("%s: %zu packed weight copies (%zu bytes), %zu readers\n", mode ? "auto" : "plain", copies, bytes, readers);
    if (!__builtin_cpu_supports("avx512f")) {
      /* oneDNN picks the weights' layout per CPU: its AVX-512 MatMul packs them, its AVX2 one
       * reads them plain, and then nothing is copied and no primitive reads a copy */
      CHECK_EQ_INT(readers, 0);
      CHECK_EQ_INT(bytes, 0);
    } else {
      CHECK_EQ_INT(readers, 3);  /* mm1, mm2, mm3 read packed weights */
      CHECK_EQ_INT(copies, 2);   /* W once for mm1 and mm3, V once */
      CHECK(bytes >= 2 * K * N * sizeof(float)); /* a packed layout may pad, never shrink */
    }
    for (int j = 0; j < N_OUT && !rc; j++) {
      gopt_host_tensor out = {0};
      CHECK_MSG(gopt_exec_get_output(ex, (size_t)j, &out, &err) == 0, "%s", err.msg);
      const float *y = out.data;
      int bad = 0;
      for (int i = 0; y && i < M * N; i++) bad += !(fabs(y[i] - want[j][i]) <= 1e-5 + 1e-5 * fabs(want[j][i]));
      CHECK_MSG(bad == 0, "output %d (%s): %d of %d values off the double reference", j, mode ? "auto" : "plain",
                bad, M * N);
      gopt_host_tensor_clear(&out);
    }
    gopt_exec_free(ex);
  }
  gopt_graph_free(g);
  return check_exit("test_exec_matmul");
}
