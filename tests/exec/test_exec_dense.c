/* test_exec_dense.c: the layout pass's two DenseNet patterns. The Concat -> BatchNormalization
 * (-> Relu) chain (k_concat_bn.c), which writes the normalised channels straight from the Concat's
 * inputs, and the pool-first transition: a 1x1 Conv (with bias) -> Pad of nothing -> AveragePool
 * 2x2 stride 2 run as the pool, then the conv on a quarter of the pixels. Against a double-precision
 * loop of the whole graph: the pass's run (the chains as three steps, the chain's output kept in
 * the convs' layout), the run without the pass, and the chains named as fusion groups under
 * --layouts plain. gopt_exec_group_kind calls each chain (the Concat's with or without its Relu) a
 * chain and gopt_exec_auto_plan reports it as one step. The Concats' inputs mix layouts: two conv
 * outputs in oneDNN's layout (channels-last on an AVX-512 host; blocked by 8 with
 * ONEDNN_MAX_CPU_ISA=AVX2, the second registration of this test) and the graph input in plain NCHW,
 * with channel counts that leave a block-aligned and an unaligned offset.
 * Graph: x[2,8,6,6] -> A = Conv3x3(x) [16 ch], B = Conv1x1(x) [12 ch];
 *   Concat(A, B, x) [36] -> BatchNorm -> Relu -> Conv1x1 + bias [4] -> Pad 0 -> AveragePool 2x2/2 -> y;
 *   Concat(B, A) [28] -> BatchNorm -> y2 (a graph output, so plain). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_graph.h"
#include "gopt/exec.h"

enum { NB = 2, CX = 8, CA = 16, CB = 12, CC = CA + CB + CX, C2 = CB + CA, CY = 4, HW = 6, PIX = HW * HW, HP = HW / 2 };
enum { N_CONVA, N_CONVB, N_CAT, N_BN, N_RELU, N_CONVC, N_PAD, N_POOL, N_CAT2, N_BN2, N_COUNT };

static float wa[CA * CX * 9], wb[CB * CX], wc[CY * CC], bc[CY], bnp[4][CC], bnp2[4][C2], xin[NB * CX * PIX];

static void fill(float *v, int n, float lo, float span) {
  for (int i = 0; i < n; i++) v[i] = lo + span * 0.5f * (frand() + 1.0f);
}

/* Conv of k x k weights w [co, ci, k, k] (padding k / 2), with bias b unless NULL. */
static int32_t conv(gopt_graph *g, const char *name, int32_t x, const float *w, const float *b, int co, int ci, int k,
                    int32_t out) {
  int64_t wd[4] = {co, ci, k, k}, bd[1] = {co};
  char wn[32];
  snprintf(wn, sizeof wn, "%s_w", name);
  int32_t in[3] = {x, const_tensor(g, wn, GOPT_DT_FLOAT, 4, wd, w, (size_t)(co * ci * k * k) * sizeof(float))};
  snprintf(wn, sizeof wn, "%s_b", name);
  if (b) in[2] = const_tensor(g, wn, GOPT_DT_FLOAT, 1, bd, b, (size_t)co * sizeof(float));
  int32_t n = node(g, "Conv", name, b ? 3 : 2, in, out);
  int64_t p = k / 2;
  gopt_node_set_ints(g, n, "pads", (int64_t[]){p, p, p, p}, 4);
  return n;
}

/* BatchNormalization of c channels with scale, bias, mean, variance p[0..3]. */
static int32_t bn(gopt_graph *g, const char *name, int32_t x, const float *const *p, int c, int32_t out) {
  int64_t cd[1] = {c};
  int32_t in[5] = {x};
  for (int i = 0; i < 4; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "%s_p%d", name, i);
    in[i + 1] = const_tensor(g, nm, GOPT_DT_FLOAT, 1, cd, p[i], (size_t)c * sizeof(float));
  }
  return node(g, "BatchNormalization", name, 5, in, out);
}

static int32_t act(gopt_graph *g, const char *name, int c, int hw) {
  int64_t d[4] = {NB, c, hw, hw};
  return tensor(g, name, GOPT_DT_FLOAT, 4, d);
}

static gopt_graph *build(int32_t *nd, int32_t *t_a, int32_t *t_r) {
  gopt_graph *g = gopt_graph_new("dense");
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int32_t x = act(g, "x", CX, HW), a = act(g, "a", CA, HW), b = act(g, "b", CB, HW), cat = act(g, "cat", CC, HW);
  int32_t n1 = act(g, "n1", CC, HW), r1 = act(g, "r1", CC, HW), c = act(g, "c", CY, HW), pc = act(g, "pc", CY, HW);
  int32_t y = act(g, "y", CY, HP), cat2 = act(g, "cat2", C2, HW), y2 = act(g, "y2", C2, HW);
  int64_t pd[1] = {8}, zeros[8] = {0};
  int32_t pads = const_tensor(g, "pads", GOPT_DT_INT64, 1, pd, zeros, sizeof zeros);
  gopt_graph_add_input(g, x);
  nd[N_CONVA] = conv(g, "conva", x, wa, NULL, CA, CX, 3, a);
  nd[N_CONVB] = conv(g, "convb", x, wb, NULL, CB, CX, 1, b);
  nd[N_CAT] = node(g, "Concat", "cat", 3, (int32_t[]){a, b, x}, cat);
  nd[N_BN] = bn(g, "bn", cat, (const float *[]){bnp[0], bnp[1], bnp[2], bnp[3]}, CC, n1);
  nd[N_RELU] = node(g, "Relu", "relu", 1, (int32_t[]){n1}, r1);
  nd[N_CONVC] = conv(g, "convc", r1, wc, bc, CY, CC, 1, c);
  nd[N_PAD] = node(g, "Pad", "pad", 2, (int32_t[]){c, pads}, pc);
  nd[N_POOL] = node(g, "AveragePool", "pool", 1, (int32_t[]){pc}, y);
  gopt_node_set_ints(g, nd[N_POOL], "kernel_shape", (int64_t[]){2, 2}, 2);
  gopt_node_set_ints(g, nd[N_POOL], "strides", (int64_t[]){2, 2}, 2);
  nd[N_CAT2] = node(g, "Concat", "cat2", 2, (int32_t[]){b, a}, cat2);
  nd[N_BN2] = bn(g, "bn2", cat2, (const float *[]){bnp2[0], bnp2[1], bnp2[2], bnp2[3]}, C2, y2);
  gopt_node_set_int(g, nd[N_CAT], "axis", 1);
  gopt_node_set_int(g, nd[N_CAT2], "axis", -3);
  gopt_graph_add_output(g, y);
  gopt_graph_add_output(g, y2);
  finish(g);
  *t_a = a;
  *t_r = r1;
  return g;
}

/* ---- the double-precision reference ---------------------------------------------------------------- */

/* out[n, o, p] = sum_c,k w[o, c, k] in[n, c, p + k - pad] (stride 1, zero padding). */
static void ref_conv(double *out, const double *in, const float *w, int co, int ci, int k) {
  int pad = k / 2;
  for (int n = 0; n < NB; n++)
    for (int o = 0; o < co; o++)
      for (int h = 0; h < HW; h++)
        for (int v = 0; v < HW; v++) {
          double s = 0;
          for (int c = 0; c < ci; c++)
            for (int i = 0; i < k; i++)
              for (int j = 0; j < k; j++) {
                int hh = h + i - pad, vv = v + j - pad;
                if (hh >= 0 && hh < HW && vv >= 0 && vv < HW)
                  s += (double)w[((o * ci + c) * k + i) * k + j] * in[((n * ci + c) * HW + hh) * HW + vv];
              }
          out[((n * co + o) * HW + h) * HW + v] = s;
        }
}

/* Concat of parts (channels cs[i]) then BatchNorm p (eps 1e-5), max(., 0) with relu. */
static void ref_cat_bn(double *out, const double *const *parts, const int *cs, int n_parts, const float *p0,
                       const float *p1, const float *p2, const float *p3, int relu) {
  int C = 0;
  for (int i = 0; i < n_parts; i++) C += cs[i];
  for (int n = 0; n < NB; n++)
    for (int i = 0, off = 0; i < n_parts; off += cs[i++])
      for (int c = 0; c < cs[i]; c++)
        for (int q = 0; q < PIX; q++) {
          int oc = off + c;
          double v = (parts[i][(n * cs[i] + c) * PIX + q] - p2[oc]) / sqrt((double)p3[oc] + 1e-5) * p0[oc] + p1[oc];
          out[(n * C + oc) * PIX + q] = relu && v < 0 ? 0 : v;
        }
}

static void reference(const float *xf, double *y, double *y2) {
  static double x[NB * CX * PIX], a[NB * CA * PIX], b[NB * CB * PIX], r[NB * CC * PIX], c[NB * CY * PIX];
  for (int i = 0; i < NB * CX * PIX; i++) x[i] = xf[i];
  ref_conv(a, x, wa, CA, CX, 3);
  ref_conv(b, x, wb, CB, CX, 1);
  ref_cat_bn(r, (const double *[]){a, b, x}, (int[]){CA, CB, CX}, 3, bnp[0], bnp[1], bnp[2], bnp[3], 1);
  ref_conv(c, r, wc, CY, CC, 1);
  for (int n = 0; n < NB * CY; n++) /* bias, then the 2x2 average */
    for (int h = 0; h < HP; h++)
      for (int v = 0; v < HP; v++) {
        const double *q = c + (n * HW + 2 * h) * HW + 2 * v;
        y[(n * HP + h) * HP + v] = (q[0] + q[1] + q[HW] + q[HW + 1]) / 4 + bc[n % CY];
      }
  ref_cat_bn(y2, (const double *[]){b, a}, (int[]){CB, CA}, 2, bnp2[0], bnp2[1], bnp2[2], bnp2[3], 0);
}

/* Runs g (groups NULL: none) under the layout mode on input xin; checks both outputs against
 * the reference (relative to the largest value, 1e-5) and returns the number of steps; the
 * layouts of tensors a and r into la / lr. */
static int run_check(const gopt_graph *g, const int32_t *group, int layouts, int32_t ta, int32_t tr, char *la,
                     char *lr, const char *what) {
  gopt_error err = {0};
  gopt_exec *x = NULL;
  gopt_exec_opts o = {.threads = 1, .seed = 1, .group = group, .layouts = layouts};
  gopt_host_tensor in = {.dtype = GOPT_DT_FLOAT, .rank = 4, .dims = {NB, CX, HW, HW}, .data = xin,
                          .nbytes = sizeof xin},
                   out[2] = {{0}};
  CHECK_MSG(gopt_exec_new(g, &o, &x, NULL, &err) == 0 && gopt_exec_set_input(x, 0, &in, &err) == 0 &&
                gopt_exec_run(x, &err) == 0 && gopt_exec_get_output(x, 0, &out[0], &err) == 0 &&
                gopt_exec_get_output(x, 1, &out[1], &err) == 0,
            "%s: %s", what, err.msg);
  static double ref[2][NB * CC * PIX];
  reference(xin, ref[0], ref[1]);
  for (int k = 0; k < 2; k++) {
    const float *v = out[k].data;
    size_t n = out[k].nbytes / sizeof(float);
    CHECK_EQ_INT((int)n, k ? NB * C2 * PIX : NB * CY * HP * HP);
    double mx = 0, d = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(ref[k][i])), d = fmax(d, fabs(v[i] - ref[k][i]));
    CHECK_MSG(d <= 1e-5 * mx, "%s: output %d differs from the reference by %g (largest value %g)", what, k, d, mx);
  }
  gopt_exec_tensor_layout(x, ta, la, 32);
  gopt_exec_tensor_layout(x, tr, lr, 32);
  int steps = (int)gopt_exec_n_steps(x);
  gopt_host_tensor_clear(&out[0]);
  gopt_host_tensor_clear(&out[1]);
  gopt_exec_free(x);
  return steps;
}

static int kind_of(const gopt_graph *g, const int32_t *nd, const int *idx, int n) {
  int32_t mem[4];
  for (int i = 0; i < n; i++) mem[i] = nd[idx[i]];
  return gopt_exec_group_kind(g, mem, n);
}

int main(void) {
  fill(wa, CA * CX * 9, -0.3f, 0.6f);
  fill(wb, CB * CX, -0.5f, 1.0f);
  fill(wc, CY * CC, -0.3f, 0.6f);
  fill(bc, CY, -1.0f, 2.0f);
  fill(xin, NB * CX * PIX, -1.0f, 2.0f);
  for (int i = 0; i < 4; i++) fill(bnp[i], CC, i == 3 ? 0.5f : -1.0f, i == 3 ? 1.0f : 2.0f);
  for (int i = 0; i < 4; i++) fill(bnp2[i], C2, i == 3 ? 0.5f : -1.0f, i == 3 ? 1.0f : 2.0f);
  int32_t nd[N_COUNT], ta, tr;
  gopt_graph *g = build(nd, &ta, &tr);
  /* legality: the chain with or without its Relu, the BatchNorm pairing; nothing beyond */
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CAT, N_BN, N_RELU}, 3), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_RELU, N_CAT, N_BN}, 3), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CAT, N_BN}, 2), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CAT2, N_BN2}, 2), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_BN, N_RELU}, 2), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CAT, N_BN, N_RELU, N_CONVC}, 4), GOPT_EXEC_GROUP_NONE);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CAT, N_RELU}, 2), GOPT_EXEC_GROUP_NONE);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CAT, N_BN2}, 2), GOPT_EXEC_GROUP_NONE);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CONVC, N_PAD, N_POOL}, 3), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CONVC, N_POOL}, 2), GOPT_EXEC_GROUP_NONE);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CONVA, N_CAT}, 2), GOPT_EXEC_GROUP_NONE);
  /* the executor's own plan runs each chain as one step at the Concat */
  int32_t *step_of = malloc(g->nodes.n * sizeof *step_of);
  CHECK(gopt_exec_auto_plan(g, step_of) == 0);
  for (int i = N_CAT; i <= N_RELU; i++) CHECK_EQ_INT(step_of[nd[i]], nd[N_CAT]);
  CHECK_EQ_INT(step_of[nd[N_BN2]], nd[N_CAT2]);
  for (int i = N_CONVC; i <= N_POOL; i++) CHECK_EQ_INT(step_of[nd[i]], nd[N_CONVC]);
  free(step_of);
  /* the pass's run, the run without it and the chains as groups under plain, all against the reference */
  char la[32], lr[32];
  CHECK_EQ_INT(run_check(g, NULL, GOPT_EXEC_LAYOUT_AUTO, ta, tr, la, lr, "auto"), 5);
  printf("conv output layout %s, chain output layout %s\n", la, lr);
  CHECK_MSG(strcmp(la, "plain") && !strcmp(la, lr), "the chain's output is %s, the convs' %s", lr, la);
  const char *isa = getenv("ONEDNN_MAX_CPU_ISA");
  if (isa && !strcmp(isa, "AVX2")) CHECK_MSG(!strcmp(la, "aBcd8b"), "AVX2 conv layout %s, expected aBcd8b", la);
  CHECK_EQ_INT(run_check(g, NULL, GOPT_EXEC_LAYOUT_PLAIN, ta, tr, la, lr, "plain"), N_COUNT);
  int32_t *group = malloc(g->nodes.n * sizeof *group);
  for (size_t i = 0; i < g->nodes.n; i++) group[i] = -1;
  group[nd[N_CAT]] = group[nd[N_BN]] = group[nd[N_RELU]] = 0;
  group[nd[N_CAT2]] = group[nd[N_BN2]] = 1;
  group[nd[N_CONVC]] = group[nd[N_PAD]] = group[nd[N_POOL]] = 2;
  CHECK_EQ_INT(run_check(g, group, GOPT_EXEC_LAYOUT_PLAIN, ta, tr, la, lr, "plain, grouped"), 5);
  CHECK(!strcmp(lr, "plain"));
  free(group);
  gopt_graph_free(g);
  return check_exit("test_exec_dense");
}
