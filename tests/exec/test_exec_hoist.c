/* test_exec_hoist.c: constant-step hoisting (exec_hoist.c, --layouts auto) and Dropout run as a
 * copy. A graph whose mask chain (ConstantOfShape, Equal, Not, Cast, Where, as swin_t builds its
 * attention masks) reads only constants and then meets the input x: under auto exactly the seven
 * constant nodes run at plan time (the Add and Dropout reading x do not), the outputs equal plain's
 * bitwise and a hand-computed reference, and two runs give the same result. A Dropout in training
 * mode with ratio 0 and an unread mask (swin_t's) is the identity; with ratio 0.5 in training mode
 * it is refused (random) rather than run as a copy; gopt_exec_fusable (no executor) calls the
 * ratio-0 one fusable. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_graph.h"
#include "gopt/exec.h"
#include "gopt/ops.h"

enum { R = 6, C = 7, N = R * C };

/* y = Dropout(x + Where(Not(Equal(m, 0)), -100, 0) cast through float, ratio, training_mode), with
 * m = ConstantOfShape([R, C]) + k (k a constant [R, C] of 0s and 1s). */
static gopt_graph *mask_graph(float ratio) {
  gopt_graph *g = gopt_graph_new("hoist");
  gopt_error err = {0};
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int64_t d[2] = {R, C}, d1[1] = {2};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 2, d);
  gopt_graph_add_input(g, x);
  static const int64_t shp[2] = {R, C};
  static float kv[N];
  for (int i = 0; i < N; i++) kv[i] = (float)(i % 3 == 0);
  int32_t ks = const_tensor(g, "shape", GOPT_DT_INT64, 1, d1, shp, sizeof shp);
  int32_t kk = const_tensor(g, "k", GOPT_DT_FLOAT, 2, d, kv, sizeof kv);
  float zero = 0.0f, m100 = -100.0f;
  uint8_t yes = 1;
  int32_t k0 = const_tensor(g, "zero", GOPT_DT_FLOAT, 0, NULL, &zero, sizeof zero);
  int32_t km = const_tensor(g, "m100", GOPT_DT_FLOAT, 0, NULL, &m100, sizeof m100);
  int32_t kr = const_tensor(g, "ratio", GOPT_DT_FLOAT, 0, NULL, &ratio, sizeof ratio);
  int32_t kt = const_tensor(g, "train", GOPT_DT_BOOL, 0, NULL, &yes, sizeof yes);
  int32_t zs = tensor(g, "zs", GOPT_DT_FLOAT, 2, d), m = tensor(g, "m", GOPT_DT_FLOAT, 2, d);
  int32_t eq = tensor(g, "eq", GOPT_DT_BOOL, 2, d), ne = tensor(g, "ne", GOPT_DT_BOOL, 2, d);
  int32_t nf = tensor(g, "nf", GOPT_DT_FLOAT, 2, d), nb = tensor(g, "nb", GOPT_DT_BOOL, 2, d);
  int32_t mask = tensor(g, "mask", GOPT_DT_FLOAT, 2, d), s = tensor(g, "s", GOPT_DT_FLOAT, 2, d);
  int32_t y = tensor(g, "y", GOPT_DT_FLOAT, 2, d), dm = tensor(g, "dmask", GOPT_DT_BOOL, 2, d);
  node(g, "ConstantOfShape", "cos", 1, (int32_t[]){ks}, zs);
  node(g, "Add", "madd", 2, (int32_t[]){zs, kk}, m);
  node(g, "Equal", "eq", 2, (int32_t[]){m, k0}, eq);
  node(g, "Not", "not", 1, (int32_t[]){eq}, ne);
  node(g, "Cast", "cast", 1, (int32_t[]){ne}, nf);
  gopt_node_set_int(g, (int32_t)g->nodes.n - 1, "to", GOPT_DT_FLOAT);
  node(g, "Cast", "castb", 1, (int32_t[]){nf}, nb);
  gopt_node_set_int(g, (int32_t)g->nodes.n - 1, "to", GOPT_DT_BOOL);
  node(g, "Where", "where", 3, (int32_t[]){nb, km, k0}, mask);
  node(g, "Add", "xadd", 2, (int32_t[]){x, mask}, s);
  CHECK(gopt_graph_add_node(g, "Dropout", "drop", 3, (int32_t[]){s, kr, kt}, 2, (int32_t[]){y, dm}, &err) >= 0);
  gopt_graph_add_output(g, y);
  finish(g);
  return g;
}

/* Runs g with layouts mode on x; returns 0 and fills y (N floats) and *hoisted, or the error code. */
static int run(const gopt_graph *g, int layouts, const float *x, float *y, size_t *hoisted, gopt_error *err) {
  gopt_exec *ex = NULL;
  gopt_exec_opts o = {.threads = 1, .seed = 1, .layouts = layouts};
  int rc = gopt_exec_new(g, &o, &ex, NULL, err);
  gopt_host_tensor in = {.dtype = GOPT_DT_FLOAT, .rank = 2, .dims = {R, C}, .data = (void *)x,
                         .nbytes = N * sizeof(float)};
  gopt_host_tensor out = {0};
  for (int rep = 0; rep < 2 && !rc; rep++) { /* the second run must not depend on the first */
    rc = gopt_exec_set_input(ex, 0, &in, err);
    if (!rc) rc = gopt_exec_run(ex, err);
  }
  if (!rc) rc = gopt_exec_get_output(ex, 0, &out, err);
  if (!rc) memcpy(y, out.data, N * sizeof(float));
  if (hoisted) *hoisted = gopt_exec_n_hoisted(ex);
  gopt_host_tensor_clear(&out);
  gopt_exec_free(ex);
  return rc;
}

int main(void) {
  float x[N], want[N], plain[N], aut[N];
  for (int i = 0; i < N; i++) {
    x[i] = frand() * 3.0f;
    want[i] = x[i] + (i % 3 == 0 ? -100.0f : 0.0f); /* mask -100 where k != 0 */
  }
  gopt_graph *g = mask_graph(0.0f);
  gopt_error err = {0};
  size_t hp = 99, ha = 0;
  CHECK_MSG(run(g, GOPT_EXEC_LAYOUT_PLAIN, x, plain, &hp, &err) == 0, "%s", err.msg);
  CHECK_MSG(run(g, GOPT_EXEC_LAYOUT_AUTO, x, aut, &ha, &err) == 0, "%s", err.msg);
  CHECK_EQ_INT(hp, 0);
  CHECK_EQ_INT(ha, 7); /* ConstantOfShape, madd, Equal, Not, Cast, Cast, Where; not xadd, Dropout */
  int bad = 0;
  for (int i = 0; i < N; i++) bad += plain[i] != want[i] || aut[i] != want[i];
  CHECK_MSG(bad == 0, "%d of %d values differ from x + mask", bad, N);
  /* asked without an executor (auto fusion): the ratio-0 Dropout is a fusable copy */
  int32_t drop = (int32_t)g->nodes.n - 1;
  CHECK(!strcmp(gopt_node_type(g, drop), "Dropout") && gopt_exec_fusable(g, drop));
  gopt_graph_free(g);
  /* a random Dropout is refused, not copied */
  g = mask_graph(0.5f);
  int rc = run(g, GOPT_EXEC_LAYOUT_AUTO, x, aut, NULL, &err);
  CHECK_MSG(rc != 0 && strstr(err.msg, "drop") && strstr(err.msg, "random"), "ratio 0.5 in training: %s",
            rc ? err.msg : "ran");
  gopt_graph_free(g);
  return check_exit("test_exec_hoist");
}
