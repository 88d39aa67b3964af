/* test_exec_padconv.c: a zero Pad before a Conv folded into the conv's padding by the layout pass
 * (exec_layout.c, --layouts auto; wavenet's causal pads). x[2,8,30] -> Pad (4 left on the time
 * axis, constant 0, pads as an input) -> Conv1d (k 3, dilation 2, bias) -> Relu, and beside it
 * the same with a Pad value of 1 (must not be folded). Plain (the Pad kernel, then the conv) and
 * auto against a double-precision loop (1e-5); auto absorbs exactly the zero Pad and both Relus. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_graph.h"
#include "gopt/exec.h"
#include "gopt/ops.h"

enum { B = 2, CI = 8, L = 30, CO = 6, KW = 3, DIL = 2, PADL = 4, LO = L + PADL - DIL * (KW - 1) };

static float xv[B * CI * L], W[CO * CI * KW], bv[CO];

/* Pad (value pv) -> Conv -> Relu on x; returns the Relu output tensor. */
static int32_t branch(gopt_graph *g, int32_t x, int32_t w, int32_t b, int32_t pads, float pv, const char *tag) {
  int64_t pd[3] = {B, CI, L + PADL}, yd[3] = {B, CO, LO}, sd[1] = {0};
  char nm[32];
  snprintf(nm, sizeof nm, "pv_%s", tag);
  int32_t v = const_tensor(g, nm, GOPT_DT_FLOAT, 0, sd, &pv, sizeof pv);
  snprintf(nm, sizeof nm, "padded_%s", tag);
  int32_t p = tensor(g, nm, GOPT_DT_FLOAT, 3, pd);
  snprintf(nm, sizeof nm, "conv_%s", tag);
  int32_t c = tensor(g, nm, GOPT_DT_FLOAT, 3, yd);
  snprintf(nm, sizeof nm, "y_%s", tag);
  int32_t y = tensor(g, nm, GOPT_DT_FLOAT, 3, yd);
  node(g, "Pad", "n_pad", 3, (int32_t[]){x, pads, v}, p);
  int32_t n = node(g, "Conv", "n_conv", 3, (int32_t[]){p, w, b}, c);
  gopt_node_set_ints(g, n, "dilations", (int64_t[]){DIL}, 1);
  gopt_node_set_ints(g, n, "kernel_shape", (int64_t[]){KW}, 1);
  node(g, "Relu", "n_relu", 1, (int32_t[]){c}, y);
  return y;
}

int main(void) {
  for (size_t i = 0; i < sizeof xv / sizeof *xv; i++) xv[i] = frand();
  for (size_t i = 0; i < sizeof W / sizeof *W; i++) W[i] = frand() * 0.5f;
  for (int i = 0; i < CO; i++) bv[i] = frand() * 0.1f;
  gopt_graph *g = gopt_graph_new("padconv");
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int64_t xd[3] = {B, CI, L}, wd[3] = {CO, CI, KW}, bd[1] = {CO}, pn[1] = {6};
  static const int64_t padv[6] = {0, 0, PADL, 0, 0, 0};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 3, xd);
  gopt_graph_add_input(g, x);
  int32_t w = const_tensor(g, "W", GOPT_DT_FLOAT, 3, wd, W, sizeof W);
  int32_t b = const_tensor(g, "b", GOPT_DT_FLOAT, 1, bd, bv, sizeof bv);
  int32_t pads = const_tensor(g, "pads", GOPT_DT_INT64, 1, pn, padv, sizeof padv);
  gopt_graph_add_output(g, branch(g, x, w, b, pads, 0.0f, "zero"));
  gopt_graph_add_output(g, branch(g, x, w, b, pads, 1.0f, "one"));
  finish(g);
  static double want[2][B * CO * LO];
  for (int o = 0; o < 2; o++)
    for (int n = 0; n < B; n++)
      for (int co = 0; co < CO; co++)
        for (int t = 0; t < LO; t++) {
          double a = bv[co];
          for (int ci = 0; ci < CI; ci++)
            for (int k = 0; k < KW; k++) {
              int s = t + k * DIL - PADL; /* index into x; < 0 reads the pad value */
              a += (double)W[(co * CI + ci) * KW + k] * (s >= 0 ? xv[(n * CI + ci) * L + s] : (double)o);
            }
          want[o][(n * CO + co) * LO + t] = a > 0 ? a : 0;
        }
  for (int mode = 0; mode < 2; mode++) {
    gopt_error err = {0};
    gopt_exec *ex = NULL;
    gopt_exec_opts op = {.threads = 1, .seed = 1, .layouts = mode ? GOPT_EXEC_LAYOUT_AUTO : GOPT_EXEC_LAYOUT_PLAIN};
    int rc = gopt_exec_new(g, &op, &ex, NULL, &err);
    gopt_host_tensor in = {.dtype = GOPT_DT_FLOAT, .rank = 3, .dims = {B, CI, L}, .data = xv, .nbytes = sizeof xv};
    if (!rc) rc = gopt_exec_set_input(ex, 0, &in, &err);
    if (!rc) rc = gopt_exec_run(ex, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    gopt_exec_layout_stats st;
    gopt_exec_layout_stats_get(ex, &st);
    CHECK_EQ_INT(st.post_op_nodes, mode ? 3 : 0); /* the zero Pad and both Relus; not the Pad of 1 */
    for (int j = 0; j < 2 && !rc; j++) {
      gopt_host_tensor out = {0};
      CHECK_MSG(gopt_exec_get_output(ex, (size_t)j, &out, &err) == 0, "%s", err.msg);
      const float *y = out.data;
      int bad = 0;
      for (int i = 0; y && i < B * CO * LO; i++) bad += !(fabs(y[i] - want[j][i]) <= 1e-5 + 1e-5 * fabs(want[j][i]));
      CHECK_MSG(bad == 0, "output %d (%s): %d of %d values off the double reference", j, mode ? "auto" : "plain",
                bad, B * CO * LO);
      gopt_host_tensor_clear(&out);
    }
    gopt_exec_free(ex);
  }
  gopt_graph_free(g);
  return check_exit("test_exec_padconv");
}
