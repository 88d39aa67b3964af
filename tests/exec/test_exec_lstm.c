/* test_exec_lstm.c: the executor's LSTM kernel (k_misc.c: one sgemm for the input part of every
 * step with both biases folded in, one sgemm per step for the recurrent part, and the gate math in
 * k_vec.inc compiled per instruction set) against a double-precision loop written from the ONNX
 * specification's equations, under every instruction set this CPU runs: a bidirectional LSTM
 * with biases, peepholes and initial states (hidden size 37, not a multiple of any vector width),
 * a reverse one without biases, and a batch-first (layout 1) one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_graph.h"
#include "gopt/exec.h"
#include "gopt/ops.h"

enum { T = 5, B = 3, I = 7, H = 37, G = 4 * H };

typedef struct lstm_case {
  const char *direction;
  int layout, bias, peep, init;
} lstm_case;

static double sig(double v) { return 1.0 / (1.0 + exp(-v)); }

/* The ONNX LSTM for direction d (gates i, o, f, c): writes Y [T, dirs, B, H] (time-major) and
 * the final h and c [dirs, B, H]. x is [T, B, I] time-major. */
static void lstm_ref(const lstm_case *lc, int dirs, const float *x, const float *W, const float *R,
                     const float *Bi, const float *P, const float *h0, const float *c0, double *Y,
                     double *Yh, double *Yc) {
  for (int d = 0; d < dirs; d++) {
    int rev = !strcmp(lc->direction, "reverse") || d == 1;
    for (int b = 0; b < B; b++) {
      double h[H], c[H], gt[G];
      for (int j = 0; j < H; j++) {
        h[j] = lc->init ? h0[(d * B + b) * H + j] : 0.0;
        c[j] = lc->init ? c0[(d * B + b) * H + j] : 0.0;
      }
      for (int s = 0; s < T; s++) {
        int t = rev ? T - 1 - s : s;
        for (int q = 0; q < G; q++) {
          double v = lc->bias ? (double)Bi[d * 2 * G + q] + Bi[d * 2 * G + G + q] : 0.0;
          for (int i = 0; i < I; i++) v += (double)x[(t * B + b) * I + i] * W[(d * G + q) * I + i];
          for (int k = 0; k < H; k++) v += h[k] * R[(d * G + q) * H + k];
          gt[q] = v;
        }
        for (int j = 0; j < H; j++) {
          const float *p = lc->peep ? P + d * 3 * H : NULL;
          double it = sig(gt[j] + (p ? p[j] * c[j] : 0.0));
          double ft = sig(gt[2 * H + j] + (p ? p[2 * H + j] * c[j] : 0.0));
          double cn = ft * c[j] + it * tanh(gt[3 * H + j]);
          double ot = sig(gt[H + j] + (p ? p[H + j] * cn : 0.0));
          c[j] = cn;
          h[j] = ot * tanh(cn);
          Y[((t * dirs + d) * B + b) * H + j] = h[j];
        }
      }
      for (int j = 0; j < H; j++) Yh[(d * B + b) * H + j] = h[j], Yc[(d * B + b) * H + j] = c[j];
    }
  }
}

static int32_t konst(gopt_graph *g, const char *name, int rank, const int64_t *dims, float *v, size_t n) {
  gopt_error err = {0};
  for (size_t i = 0; i < n; i++) v[i] = frand() * 0.6f;
  int32_t t = tensor(g, name, GOPT_DT_FLOAT, rank, dims);
  CHECK_MSG(gopt_tensor_set_const(g, t, v, n * sizeof(float), &err) == 0, "%s", err.msg);
  return t;
}

/* Builds the case's one-LSTM graph (weights drawn into the arrays), runs it under every ISA and
 * compares Y, Y_h and Y_c with lstm_ref. */
static void test_case(const lstm_case *lc) {
  enum { DM = 2 };
  static float x[T * B * I], xin[T * B * I], W[DM * G * I], R[DM * G * H], Bi[DM * 2 * G], P[DM * 3 * H];
  static float h0[DM * B * H], c0[DM * B * H];
  static double Y[T * DM * B * H], Yh[DM * B * H], Yc[DM * B * H];
  int dirs = !strcmp(lc->direction, "bidirectional") ? 2 : 1;
  gopt_graph *g = gopt_graph_new("lstm");
  gopt_error err = {0};
  CHECK(gopt_graph_set_opset(g, "", 14) == 0);
  for (int i = 0; i < T * B * I; i++) x[i] = frand() * 2.0f;
  int64_t xd[3] = {T, B, I}, xd1[3] = {B, T, I};
  int32_t tx = tensor(g, "x", GOPT_DT_FLOAT, 3, lc->layout ? xd1 : xd);
  gopt_graph_add_input(g, tx);
  int32_t in[8] = {tx, konst(g, "W", 3, (int64_t[]){dirs, G, I}, W, (size_t)dirs * G * I),
                   konst(g, "R", 3, (int64_t[]){dirs, G, H}, R, (size_t)dirs * G * H), -1, -1, -1, -1, -1};
  int64_t sd[3] = {dirs, B, H}, sd1[3] = {B, dirs, H};
  if (lc->bias) in[3] = konst(g, "B", 2, (int64_t[]){dirs, 2 * G}, Bi, (size_t)dirs * 2 * G);
  if (lc->init) {
    in[5] = konst(g, "h0", 3, sd, h0, (size_t)dirs * B * H);
    in[6] = konst(g, "c0", 3, sd, c0, (size_t)dirs * B * H);
  }
  if (lc->peep) in[7] = konst(g, "P", 2, (int64_t[]){dirs, 3 * H}, P, (size_t)dirs * 3 * H);
  int64_t yd[4] = {T, dirs, B, H}, yd1[4] = {B, T, dirs, H};
  int32_t out[3] = {tensor(g, "Y", GOPT_DT_FLOAT, 4, lc->layout ? yd1 : yd),
                    tensor(g, "Y_h", GOPT_DT_FLOAT, 3, lc->layout ? sd1 : sd),
                    tensor(g, "Y_c", GOPT_DT_FLOAT, 3, lc->layout ? sd1 : sd)};
  int32_t n = gopt_graph_add_node(g, "LSTM", "lstm", lc->peep ? 8 : lc->init ? 7 : 4, in, 3, out, &err);
  CHECK_MSG(n >= 0, "%s", err.msg);
  gopt_node_set_int(g, n, "hidden_size", H);
  gopt_node_set_int(g, n, "layout", lc->layout);
  gopt_node_set_string(g, n, "direction", lc->direction);
  for (int i = 0; i < 3; i++) gopt_graph_add_output(g, out[i]);
  finish(g);
  /* the reference reads x time-major; the model gets it batch-first under layout 1 */
  for (int t = 0; t < T; t++)
    for (int b = 0; b < B; b++)
      memcpy(xin + (lc->layout ? (b * T + t) : (t * B + b)) * I, x + (t * B + b) * I, I * sizeof(float));
  lstm_ref(lc, dirs, x, W, R, Bi, P, h0, c0, Y, Yh, Yc);
  static const char *const isas[] = {"baseline", "avx2", "avx512"};
  for (int k = 0; k < 3; k++) {
    setenv("GOPT_ISA", isas[k], 1);
    gopt_exec *ex = NULL;
    gopt_exec_opts o = {.threads = 1, .seed = 1};
    int rc = gopt_exec_new(g, &o, &ex, NULL, &err);
    unsetenv("GOPT_ISA");
    if (rc && strstr(err.msg, "does not support")) {
      CHECK_MSG(k > 0, "the baseline kernels must run everywhere");
      continue;
    }
    CHECK_MSG(rc == 0, "%s", err.msg);
    gopt_host_tensor hin = {.dtype = GOPT_DT_FLOAT, .rank = 3, .data = xin, .nbytes = sizeof xin};
    memcpy(hin.dims, lc->layout ? xd1 : xd, sizeof xd);
    gopt_host_tensor got[3];
    memset(got, 0, sizeof got);
    if (!rc) rc = gopt_exec_set_input(ex, 0, &hin, &err);
    if (!rc) rc = gopt_exec_run(ex, &err);
    for (int i = 0; !rc && i < 3; i++) rc = gopt_exec_get_output(ex, i, &got[i], &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    int64_t bad = 0;
    double worst = 0;
    for (int i = 0; !rc && i < 3; i++) {
      const float *y = got[i].data;
      int64_t m = gopt_host_tensor_numel(&got[i]);
      for (int64_t e = 0; e < m; e++) {
        /* map the output element back to the reference's time-major index */
        double want;
        int64_t j = e % H, r = e / H;
        if (i == 0) {
          int64_t d = r % dirs, tb = r / dirs; /* [T,dirs,B,H] or [B,T,dirs,H] */
          int64_t t = lc->layout ? tb % T : tb / B, b = lc->layout ? tb / T : tb % B;
          if (!lc->layout) d = (r / B) % dirs, t = r / (B * dirs), b = r % B;
          want = Y[((t * dirs + d) * B + b) * H + j];
        } else {
          int64_t d = lc->layout ? r % dirs : r / B, b = lc->layout ? r / dirs : r % B;
          want = (i == 1 ? Yh : Yc)[(d * B + b) * H + j];
        }
        double diff = fabs(y[e] - want);
        if (diff > worst) worst = diff;
        if (!(diff <= 1e-5 + 1e-5 * fabs(want))) bad++;
      }
    }
    CHECK_MSG(bad == 0, "LSTM %s layout %d on %s: %lld values off the double reference (worst %g)",
              lc->direction, lc->layout, isas[k], (long long)bad, worst);
    for (int i = 0; i < 3; i++) gopt_host_tensor_clear(&got[i]);
    gopt_exec_free(ex);
  }
  gopt_graph_free(g);
}

int main(void) {
  static const lstm_case cases[] = {
      {"bidirectional", 0, 1, 1, 1},
      {"reverse", 0, 0, 0, 1},
      {"forward", 1, 1, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_case(&cases[i]);
  return check_exit("test_exec_lstm");
}
