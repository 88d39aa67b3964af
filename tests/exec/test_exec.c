/* test_exec.c: the executor against independent references: tensor files written by numpy/onnx,
 * a fused elementwise group against a double-precision C loop and against the unfused run, the
 * buffer planner's peak for two op orders against a brute-force lifetime simulation, profiling
 * with the cost database, run-time shapes (a Range whose length is an input), random weights,
 * Transpose and Slice (whose strided copy merges dims) against index-by-index loops, and
 * the error paths (unsupported op, bad input shape, non-elementwise fusion group, the first NaN). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "exec_graph.h"
#include "gopt/costdb.h"
#include "gopt/exec.h"
#include "gopt/ops.h"

#define IO "tests/exec/data/io/"

/* ---- tensor files ------------------------------------------------------------------------------------ */

static void test_io(void) {
  gopt_error err = {0};
  gopt_host_tensor t;
  const char *f32[] = {IO "f32.npy", IO "f32.pb", IO "f32_typed.pb"};
  for (int k = 0; k < 3; k++) {
    CHECK_MSG(gopt_exec_tensor_read(f32[k], &t, &err) == 0, "%s", err.msg);
    CHECK_EQ_INT(t.dtype, GOPT_DT_FLOAT);
    CHECK_EQ_INT(t.rank, 3);
    CHECK(t.dims[0] == 2 && t.dims[1] == 3 && t.dims[2] == 4);
    int ok = t.data != NULL;
    for (int i = 0; ok && i < 24; i++) ok = ((float *)t.data)[i] == 0.5f * (float)i;
    CHECK_MSG(ok, "%s: values differ from numpy's arange(24)*0.5", f32[k]);
    gopt_host_tensor_clear(&t);
  }
  const char *i64[] = {IO "i64.npy", IO "i64.pb", IO "i64_typed.pb"};
  for (int k = 0; k < 3; k++) {
    CHECK_MSG(gopt_exec_tensor_read(i64[k], &t, &err) == 0, "%s", err.msg);
    CHECK(t.dtype == GOPT_DT_INT64 && t.rank == 2 && t.dims[0] == 1 && t.dims[1] == 3);
    CHECK(t.data && ((int64_t *)t.data)[0] == -3 && ((int64_t *)t.data)[2] == (int64_t)1 << 40);
    gopt_host_tensor_clear(&t);
  }
  CHECK(gopt_exec_tensor_read(IO "bool.npy", &t, &err) == 0);
  CHECK(t.dtype == GOPT_DT_BOOL && t.rank == 1 && ((uint8_t *)t.data)[1] == 0 && ((uint8_t *)t.data)[2] == 1);
  gopt_host_tensor_clear(&t);
  CHECK(gopt_exec_tensor_read(IO "scalar.pb", &t, &err) == 0);
  CHECK(t.dtype == GOPT_DT_FLOAT && t.rank == 0 && ((float *)t.data)[0] == 2.5f);
  gopt_host_tensor_clear(&t);
  CHECK(gopt_exec_tensor_read(IO "scalar.npy", &t, &err) == 0 && t.rank == 0);
  gopt_host_tensor_clear(&t);
  /* round trip through our writers: bytes of .npy equal numpy's after reading back */
  char dir[] = "/tmp/gopt_exec_io_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char p1[256], p2[256];
  snprintf(p1, sizeof p1, "%s/a.npy", dir);
  snprintf(p2, sizeof p2, "%s/a.pb", dir);
  CHECK(gopt_exec_tensor_read(IO "f32.npy", &t, &err) == 0);
  CHECK(gopt_exec_tensor_write(p1, &t, &err) == 0);
  CHECK(gopt_exec_tensor_write(p2, &t, &err) == 0);
  gopt_host_tensor a, b;
  CHECK(gopt_exec_tensor_read(p1, &a, &err) == 0 && gopt_exec_tensor_read(p2, &b, &err) == 0);
  CHECK(a.nbytes == t.nbytes && !memcmp(a.data, t.data, t.nbytes) && a.rank == 3);
  CHECK(b.nbytes == t.nbytes && !memcmp(b.data, t.data, t.nbytes) && b.rank == 3);
  gopt_host_tensor_clear(&a);
  gopt_host_tensor_clear(&b);
  gopt_host_tensor_clear(&t);
  /* malformed files fail with the file name */
  CHECK(gopt_exec_tensor_read(IO "missing.npy", &t, &err) != 0);
  snprintf(p1, sizeof p1, "%s/bad.npy", dir);
  FILE *f = fopen(p1, "wb");
  if (f) {
    fputs("\x93NUMPY\x01\x00\x10\x00{'descr': '>f4'", f);
    fclose(f);
  }
  CHECK(gopt_exec_tensor_read(p1, &t, &err) != 0 && strstr(err.msg, "bad.npy"));
  unlink(p1);
  snprintf(p1, sizeof p1, "%s/a.npy", dir);
  unlink(p1);
  unlink(p2);
  rmdir(dir);
}

/* ---- fusion ----------------------------------------------------------------------------------------------- */

enum { A = 3, B = 64, C = 33 };

/* x[A,B,C]; t1 = x*c1[B,1]; t2 = t1+c2[]; t3 = sigmoid(t2); t4 = t3*x; t5 = tanh(t4); y = t5-t1;
 * z = relu(t3) (outside the group). */
static gopt_graph *chain_graph(float *c1, float *c2) {
  gopt_graph *g = gopt_graph_new("chain");
  gopt_error err = {0};
  int64_t xd[3] = {A, B, C}, cd[2] = {B, 1};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 3, xd);
  gopt_graph_add_input(g, x);
  int32_t k1 = tensor(g, "c1", GOPT_DT_FLOAT, 2, cd), k2 = tensor(g, "c2", GOPT_DT_FLOAT, 0, NULL);
  CHECK(gopt_tensor_set_const(g, k1, c1, B * sizeof(float), &err) == 0);
  CHECK(gopt_tensor_set_const(g, k2, c2, sizeof(float), &err) == 0);
  int32_t t[8];
  const char *names[] = {"t1", "t2", "t3", "t4", "t5", "y", "z"};
  for (int i = 0; i < 7; i++) t[i] = tensor(g, names[i], GOPT_DT_FLOAT, 3, xd);
  node(g, "Mul", "mul1", 2, (int32_t[]){x, k1}, t[0]);
  node(g, "Add", "add2", 2, (int32_t[]){t[0], k2}, t[1]);
  node(g, "Sigmoid", "sig3", 1, (int32_t[]){t[1]}, t[2]);
  node(g, "Mul", "mul4", 2, (int32_t[]){t[2], x}, t[3]);
  node(g, "Tanh", "tanh5", 1, (int32_t[]){t[3]}, t[4]);
  node(g, "Sub", "sub6", 2, (int32_t[]){t[4], t[0]}, t[5]);
  node(g, "Relu", "relu7", 1, (int32_t[]){t[2]}, t[6]);
  gopt_graph_add_output(g, t[5]);
  gopt_graph_add_output(g, t[6]);
  finish(g);
  return g;
}

static int run_graph(const gopt_graph *g, const gopt_exec_opts *o, const gopt_host_tensor *in,
                     gopt_host_tensor *out, size_t n_out, size_t *peak, gopt_error *err) {
  gopt_exec *x = NULL;
  int rc = gopt_exec_new(g, o, &x, NULL, err);
  if (!rc && in) rc = gopt_exec_set_input(x, 0, in, err);
  if (!rc && !in) rc = gopt_exec_random_inputs(x, 1, err);
  if (!rc) rc = gopt_exec_run(x, err);
  for (size_t i = 0; !rc && i < n_out; i++) rc = gopt_exec_get_output(x, i, &out[i], err);
  if (!rc && peak) *peak = gopt_exec_peak_bytes(x);
  gopt_exec_free(x);
  return rc;
}

static void test_fusion(void) {
  float c1[B], c2 = 0.25f;
  for (int i = 0; i < B; i++) c1[i] = frand();
  gopt_graph *g = chain_graph(c1, &c2);
  gopt_error err = {0};
  gopt_host_tensor in = {.dtype = GOPT_DT_FLOAT, .rank = 3, .dims = {A, B, C}};
  in.nbytes = A * B * C * sizeof(float);
  in.data = malloc(in.nbytes);
  float *xv = in.data;
  for (int i = 0; i < A * B * C; i++) xv[i] = 3.0f * frand();
  /* reference in double */
  double *ry = malloc(sizeof(double) * A * B * C), *rz = malloc(sizeof(double) * A * B * C);
  for (int a = 0; a < A; a++)
    for (int b = 0; b < B; b++)
      for (int c = 0; c < C; c++) {
        int i = (a * B + b) * C + c;
        double t1 = (double)xv[i] * c1[b], t3 = 1.0 / (1.0 + exp(-(t1 + c2)));
        ry[i] = tanh(t3 * xv[i]) - t1;
        rz[i] = t3 > 0 ? t3 : 0;
      }
  int32_t *group = malloc(g->nodes.n * sizeof *group);
  for (size_t i = 0; i < g->nodes.n; i++) group[i] = i < 6 ? 0 : -1;
  gopt_exec_opts plain = {.threads = 2}, fused = {.threads = 2, .group = group};
  gopt_host_tensor o1[2] = {0}, o2[2] = {0};
  CHECK_MSG(run_graph(g, &plain, &in, o1, 2, NULL, &err) == 0, "%s", err.msg);
  CHECK_MSG(run_graph(g, &fused, &in, o2, 2, NULL, &err) == 0, "%s", err.msg);
  double e_ref = 0, e_fu = 0;
  for (int i = 0; o1[0].data && o2[0].data && i < A * B * C; i++) {
    e_ref = fmax(e_ref, fabs(((float *)o2[0].data)[i] - ry[i]));
    e_ref = fmax(e_ref, fabs(((float *)o2[1].data)[i] - rz[i]));
    e_fu = fmax(e_fu, fabs(((float *)o2[0].data)[i] - ((float *)o1[0].data)[i]));
    e_fu = fmax(e_fu, fabs(((float *)o2[1].data)[i] - ((float *)o1[1].data)[i]));
  }
  CHECK_NEAR(e_ref, 0, 1e-5);
  CHECK_NEAR(e_fu, 0, 1e-6);
  /* the fused run has 2 steps (group + relu) */
  gopt_exec *x = NULL;
  CHECK(gopt_exec_new(g, &fused, &x, NULL, &err) == 0);
  CHECK_EQ_INT(x ? gopt_exec_n_steps(x) : 0, 2);
  gopt_exec_free(x);
  /* automatic fusion finds the same chain (t3 feeds two ops, so it splits there) */
  int32_t ng = gopt_exec_auto_fusion(g, group);
  CHECK(ng >= 1);
  gopt_exec_opts autof = {.threads = 1, .group = group};
  gopt_host_tensor o3[2] = {0};
  CHECK_MSG(run_graph(g, &autof, &in, o3, 2, NULL, &err) == 0, "%s", err.msg);
  CHECK(o3[0].data && o1[0].data && !memcmp(o3[0].data, o1[0].data, o1[0].nbytes));
  CHECK_EQ_INT(ng, 2); /* {add2, sig3} and {mul4, tanh5, sub6}: t1 and t3 have two readers */
  /* profiling: every step measured once, then all cached */
  for (size_t i = 0; i < g->nodes.n; i++) group[i] = i < 6 ? 0 : -1;
  gopt_costdb *db = gopt_costdb_new("test", 2);
  CHECK(gopt_exec_new(g, &fused, &x, NULL, &err) == 0);
  gopt_exec_profile p = {0};
  CHECK(x && gopt_exec_set_input(x, 0, &in, &err) == 0);
  CHECK_MSG(x && gopt_exec_profile_run(x, 2, 5, db, &p, &err) == 0, "%s", err.msg);
  CHECK_EQ_INT(p.n_steps, 2);
  CHECK_EQ_INT(p.n_measured, 2);
  CHECK_EQ_INT(gopt_costdb_size(db), 2);
  CHECK(p.seconds > 0 && p.steps && p.steps[0].seconds > 0 && p.peak_bytes > 0);
  gopt_exec_profile_clear(&p);
  CHECK(x && gopt_exec_profile_run(x, 1, 3, db, &p, &err) == 0);
  CHECK_EQ_INT(p.n_measured, 0);
  CHECK(p.steps && p.steps[0].cached && p.steps[1].cached);
  gopt_exec_profile_clear(&p);
  gopt_exec_free(x);
  gopt_costdb_free(db);
  for (int i = 0; i < 2; i++) {
    gopt_host_tensor_clear(&o1[i]);
    gopt_host_tensor_clear(&o2[i]);
    gopt_host_tensor_clear(&o3[i]);
  }
  free(group);
  free(ry);
  free(rz);
  gopt_host_tensor_clear(&in);
  gopt_graph_free(g);
}

/* ---- order and peak memory ------------------------------------------------------------------------------ */

enum { N = 1000 };

/* x[N]; a1 = x + Z[4,N]; a2 = mean(a1, 0); b1 = x + W[2,N]; b2 = mean(b1, 0); y = a2 + b2. */
static gopt_graph *branch_graph(int32_t nodes[5]) {
  gopt_graph *g = gopt_graph_new("branches");
  gopt_error err = {0};
  int64_t d1[1] = {N}, d4[2] = {4, N}, d2[2] = {2, N};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 1, d1);
  gopt_graph_add_input(g, x);
  static float zv[4 * N], wv[2 * N];
  for (int i = 0; i < 4 * N; i++) zv[i] = frand();
  for (int i = 0; i < 2 * N; i++) wv[i] = frand();
  int32_t z = tensor(g, "Z", GOPT_DT_FLOAT, 2, d4), w = tensor(g, "W", GOPT_DT_FLOAT, 2, d2);
  CHECK(gopt_tensor_set_const(g, z, zv, sizeof zv, &err) == 0);
  CHECK(gopt_tensor_set_const(g, w, wv, sizeof wv, &err) == 0);
  int32_t a1 = tensor(g, "a1", GOPT_DT_FLOAT, 2, d4), a2 = tensor(g, "a2", GOPT_DT_FLOAT, 1, d1);
  int32_t b1 = tensor(g, "b1", GOPT_DT_FLOAT, 2, d2), b2 = tensor(g, "b2", GOPT_DT_FLOAT, 1, d1);
  int32_t y = tensor(g, "y", GOPT_DT_FLOAT, 1, d1);
  int64_t ax0 = 0;
  nodes[0] = node(g, "Add", "a1", 2, (int32_t[]){x, z}, a1);
  nodes[1] = node(g, "ReduceMean", "a2", 1, (int32_t[]){a1}, a2);
  gopt_node_set_ints(g, nodes[1], "axes", &ax0, 1);
  gopt_node_set_int(g, nodes[1], "keepdims", 0);
  nodes[2] = node(g, "Add", "b1", 2, (int32_t[]){x, w}, b1);
  nodes[3] = node(g, "ReduceMean", "b2", 1, (int32_t[]){b1}, b2);
  gopt_node_set_ints(g, nodes[3], "axes", &ax0, 1);
  gopt_node_set_int(g, nodes[3], "keepdims", 0);
  nodes[4] = node(g, "Add", "y", 2, (int32_t[]){a2, b2}, y);
  gopt_graph_add_output(g, y);
  finish(g);
  return g;
}

/* Brute-force peak: every non-constant tensor is live from its production (inputs: from the
 * start) to the end of the last step that reads it (graph outputs: to the end). */
static size_t simulate_peak(const gopt_graph *g, const int32_t *order, size_t n) {
  size_t nt = g->tensors.n, peak = 0;
  for (size_t s = 0; s <= n; s++) {
    size_t live = 0;
    for (size_t t = 0; t < nt; t++) {
      const gopt_tensor *tt = &g->tensors.a[t];
      if (tt->flags & GOPT_T_CONST) continue;
      long born = -1, last = -2;
      if (tt->producer >= 0)
        for (size_t q = 0; q < n; q++)
          if (order[q] == tt->producer) born = (long)q;
      if (tt->producer < 0 && !(tt->flags & GOPT_T_INPUT)) continue;
      for (size_t q = 0; q < n; q++)
        for (int j = 0; j < g->nodes.a[order[q]].n_in; j++)
          if (gopt_node_input(g, order[q], j) == (int32_t)t) last = (long)q;
      for (size_t o = 0; o < g->outputs.n; o++)
        if (g->outputs.a[o] == (int32_t)t) last = (long)n;
      if (last < born) last = born;
      /* during step s (0-based), live: born <= s <= last */
      if ((long)s >= born && (long)s <= last && s < n) live += (size_t)gopt_tensor_numel(g, (int32_t)t) * 4;
    }
    if (live > peak) peak = live;
  }
  return peak;
}

static void test_order(void) {
  int32_t nd[5];
  gopt_graph *g = branch_graph(nd);
  gopt_error err = {0};
  int32_t o1[5] = {nd[0], nd[1], nd[2], nd[3], nd[4]};
  int32_t o2[5] = {nd[2], nd[0], nd[1], nd[3], nd[4]};
  gopt_exec_opts e1 = {.threads = 1, .order = o1, .n_order = 5}, e2 = {.threads = 1, .order = o2, .n_order = 5};
  gopt_host_tensor y1 = {0}, y2 = {0};
  size_t p1 = 0, p2 = 0;
  CHECK_MSG(run_graph(g, &e1, NULL, &y1, 1, &p1, &err) == 0, "%s", err.msg);
  CHECK_MSG(run_graph(g, &e2, NULL, &y2, 1, &p2, &err) == 0, "%s", err.msg);
  size_t u = N * sizeof(float);
  CHECK_EQ_INT(p1, 6 * u); /* x + a1 + a2 */
  CHECK_EQ_INT(p2, 7 * u); /* b1 + a1 + a2 (x freed after a1) */
  CHECK_EQ_INT(p1, simulate_peak(g, o1, 5));
  CHECK_EQ_INT(p2, simulate_peak(g, o2, 5));
  CHECK(y1.data && y2.data && !memcmp(y1.data, y2.data, y1.nbytes));
  gopt_host_tensor_clear(&y1);
  gopt_host_tensor_clear(&y2);
  /* an order that runs a consumer before its producer is rejected, naming both */
  int32_t bad[5] = {nd[1], nd[0], nd[2], nd[3], nd[4]};
  gopt_exec_opts e3 = {.threads = 1, .order = bad, .n_order = 5};
  gopt_exec *x = NULL;
  CHECK(gopt_exec_new(g, &e3, &x, NULL, &err) == GOPT_EINVAL && !x);
  CHECK_MSG(strstr(err.msg, "'a2'") && strstr(err.msg, "'a1'"), "%s", err.msg);
  /* a fusion group with a reduction is rejected with the node named */
  int32_t *group = malloc(g->nodes.n * sizeof *group);
  for (size_t i = 0; i < g->nodes.n; i++) group[i] = -1;
  group[nd[0]] = group[nd[1]] = 0;
  gopt_exec_opts e4 = {.threads = 1, .group = group};
  CHECK(gopt_exec_new(g, &e4, &x, NULL, &err) == GOPT_EUNSUP && !x);
  CHECK_MSG(strstr(err.msg, "'a2'") && strstr(err.msg, "ReduceMean") && strstr(err.msg, "fusion group"), "%s", err.msg);
  free(group);
  gopt_graph_free(g);
}

/* ---- errors, NaN, random weights ----------------------------------------------------------------------- */

static char warned[1024];
static void warn_fn(const char *msg, void *user) {
  (void)user;
  snprintf(warned, sizeof warned, "%s", msg);
}

static void test_errors(void) {
  gopt_error err = {0};
  int64_t d[2] = {2, 3};
  /* unsupported op: named with its type */
  gopt_graph *g = gopt_graph_new("bad");
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 2, d), y = tensor(g, "y", GOPT_DT_FLOAT, 2, d);
  gopt_graph_add_input(g, x);
  node(g, "Multinomial", "weird_node", 1, &x, y); /* random sampling: no kernel */
  gopt_graph_add_output(g, y);
  gopt_exec *ex = NULL;
  CHECK(gopt_exec_new(g, NULL, &ex, NULL, &err) == GOPT_EUNSUP && !ex);
  CHECK_MSG(strstr(err.msg, "weird_node") && strstr(err.msg, "Multinomial"), "%s", err.msg);
  gopt_graph_free(g);

  /* wrong input shape and dtype; NaN from Sqrt reported with the node */
  g = gopt_graph_new("nan");
  x = tensor(g, "x", GOPT_DT_FLOAT, 2, d);
  int32_t s = tensor(g, "s", GOPT_DT_FLOAT, 2, d), r = tensor(g, "r", GOPT_DT_FLOAT, 2, d);
  gopt_graph_add_input(g, x);
  node(g, "Relu", "relu_ok", 1, &x, r);
  node(g, "Sqrt", "sqrt_node", 1, (int32_t[]){x}, s);
  gopt_graph_add_output(g, s);
  gopt_graph_add_output(g, r);
  finish(g);
  gopt_exec_opts o = {.threads = 1, .check_nan = 1};
  CHECK(gopt_exec_new(g, &o, &ex, NULL, &err) == 0);
  gopt_host_tensor in = {.dtype = GOPT_DT_FLOAT, .rank = 2, .dims = {3, 2}, .nbytes = 24};
  float v[6] = {1, -1, 4, 9, -2, 0};
  in.data = v;
  CHECK(ex && gopt_exec_set_input(ex, 0, &in, &err) == GOPT_ESHAPE);
  CHECK_MSG(strstr(err.msg, "'x'") && strstr(err.msg, "FLOAT[2,3]") && strstr(err.msg, "FLOAT[3,2]"), "%s", err.msg);
  in.dims[0] = 2;
  in.dims[1] = 3;
  in.dtype = GOPT_DT_INT32;
  CHECK(ex && gopt_exec_set_input(ex, 0, &in, &err) == GOPT_ESHAPE && strstr(err.msg, "INT32"));
  in.dtype = GOPT_DT_FLOAT;
  CHECK(ex && gopt_exec_run(ex, &err) == GOPT_EINVAL); /* input not set */
  CHECK(ex && gopt_exec_set_input(ex, 0, &in, &err) == 0);
  gopt_set_warn_handler(warn_fn, NULL);
  warned[0] = 0;
  CHECK(ex && gopt_exec_run(ex, &err) == 0);
  gopt_set_warn_handler(NULL, NULL);
  CHECK_MSG(strstr(warned, "sqrt_node") && strstr(warned, "NaN") && strstr(warned, "2 non-finite"), "warning: %s", warned);
  gopt_exec_free(ex);
  gopt_graph_free(g);

  /* data-less weights: deterministic per seed, counted */
  g = gopt_graph_new("weights");
  int64_t xd[2] = {4, 8}, wd[2] = {8, 5}, yd[2] = {4, 5};
  x = tensor(g, "x", GOPT_DT_FLOAT, 2, xd);
  int32_t w = tensor(g, "w", GOPT_DT_FLOAT, 2, wd);
  y = tensor(g, "y", GOPT_DT_FLOAT, 2, yd);
  CHECK(gopt_tensor_set_const(g, w, NULL, 8 * 5 * sizeof(float), &err) == 0);
  gopt_graph_add_input(g, x);
  node(g, "MatMul", "mm", 2, (int32_t[]){x, w}, y);
  gopt_graph_add_output(g, y);
  finish(g);
  gopt_host_tensor r1 = {0}, r2 = {0}, r3 = {0};
  gopt_exec_opts s1 = {.threads = 1, .seed = 5}, s2 = {.threads = 1, .seed = 6};
  size_t nrand = 0;
  CHECK(gopt_exec_new(g, &s1, &ex, &nrand, &err) == 0);
  CHECK_EQ_INT(nrand, 1);
  gopt_exec_free(ex);
  CHECK(run_graph(g, &s1, NULL, &r1, 1, NULL, &err) == 0);
  CHECK(run_graph(g, &s1, NULL, &r2, 1, NULL, &err) == 0);
  CHECK(run_graph(g, &s2, NULL, &r3, 1, NULL, &err) == 0);
  CHECK(r1.data && r2.data && r3.data && !memcmp(r1.data, r2.data, r1.nbytes));
  CHECK(r1.data && r3.data && memcmp(r1.data, r3.data, r1.nbytes) != 0);
  gopt_host_tensor_clear(&r1);
  gopt_host_tensor_clear(&r2);
  gopt_host_tensor_clear(&r3);
  gopt_graph_free(g);
  gopt_exec_free(NULL);
  gopt_host_tensor_clear(NULL);
  gopt_exec_profile_clear(NULL);
}

/* Run-time shapes: y = Range(0, n, 1) * 2 where n is an input scalar. The length of y depends on
 * n's value: no static shape before the inputs are known (the executor refuses the graph), then
 * gopt_exec_complete_shapes with n = 5 gives y [5] and the run computes [0, 2, 4, 6, 8]; with a
 * tensor of the wrong dtype it completes nothing. */
static void test_runtime_shapes(void) {
  gopt_error err = {0};
  gopt_graph *g = gopt_graph_new("rt");
  int32_t n = tensor(g, "n", GOPT_DT_INT64, 0, NULL);
  gopt_graph_add_input(g, n);
  int32_t z = tensor(g, "zero", GOPT_DT_INT64, 0, NULL), o = tensor(g, "one", GOPT_DT_INT64, 0, NULL);
  int64_t zero = 0, one = 1, two = 2;
  CHECK(gopt_tensor_set_const(g, z, &zero, 8, &err) == 0 && gopt_tensor_set_const(g, o, &one, 8, &err) == 0);
  int32_t k2 = tensor(g, "two", GOPT_DT_INT64, 0, NULL);
  CHECK(gopt_tensor_set_const(g, k2, &two, 8, &err) == 0);
  int32_t r = tensor(g, "r", GOPT_DT_UNDEFINED, -1, NULL), y = tensor(g, "y", GOPT_DT_UNDEFINED, -1, NULL);
  node(g, "Range", "range", 3, (int32_t[]){z, n, o}, r);
  node(g, "Mul", "mul", 2, (int32_t[]){r, k2}, y);
  gopt_graph_add_output(g, y);
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  CHECK_MSG(gopt_infer_shapes(g, &io, &err) == 0, "%s", err.msg);
  CHECK(!gopt_tensor_is_static(g, y));
  gopt_exec *x = NULL;
  CHECK(gopt_exec_new(g, NULL, &x, NULL, &err) == GOPT_ESHAPE && !x);
  CHECK_MSG(strstr(err.msg, "no static shape"), "%s", err.msg);
  int64_t five = 5;
  gopt_host_tensor in = {.dtype = GOPT_DT_INT64, .rank = 0, .data = &five, .nbytes = 8};
  gopt_host_tensor bad = {.dtype = GOPT_DT_FLOAT, .rank = 0, .data = &five, .nbytes = 4};
  CHECK(gopt_exec_complete_shapes(g, &bad, 1, &io, &err) == 0);
  CHECK(gopt_exec_complete_shapes(g, &in, 1, &io, &err) >= 2);
  CHECK(gopt_tensor_is_static(g, y) && g->tensors.a[y].rank == 1 && gopt_tensor_dims(g, y)[0] == 5);
  gopt_host_tensor out = {0};
  CHECK_MSG(run_graph(g, NULL, &in, &out, 1, NULL, &err) == 0, "%s", err.msg);
  CHECK(out.dtype == GOPT_DT_INT64 && out.rank == 1 && out.dims[0] == 5);
  int ok = out.data != NULL;
  for (int i = 0; ok && i < 5; i++) ok = ((int64_t *)out.data)[i] == 2 * i;
  CHECK_MSG(ok, "Range(0, 5, 1) * 2 != [0, 2, 4, 6, 8]");
  gopt_host_tensor_clear(&out);
  gopt_graph_free(g);
}

/* ---- strided views ------------------------------------------------------------------------------------ */

enum { V0 = 1, V1 = 2, V2 = 6, V3 = 1, V4 = 5 };

/* y = op(x) for x of dims xd (rank 5) holding 0, 1, 2, ...: a Transpose (attrs: perm) or a Slice
 * (starts/ends/axes/steps as inputs); returns y's data (caller frees) and its dims in yd. */
static float *view_run(const char *op, const int64_t *xd, const int64_t *perm, const int64_t *sl, int64_t *yd) {
  gopt_error err = {0};
  gopt_graph *g = gopt_graph_new("view");
  gopt_graph_set_opset(g, "", 13);
  int64_t one = 1, nx = xd[0] * xd[1] * xd[2] * xd[3] * xd[4];
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 5, xd), y = tensor(g, "y", GOPT_DT_UNDEFINED, -1, NULL);
  gopt_graph_add_input(g, x);
  if (!strcmp(op, "Transpose")) {
    int32_t n = node(g, "Transpose", "t", 1, (int32_t[]){x}, y);
    gopt_node_set_ints(g, n, "perm", perm, 5);
  } else {
    int32_t in[5] = {x};
    const char *names[4] = {"starts", "ends", "axes", "steps"};
    for (int i = 0; i < 4; i++) in[i + 1] = const_tensor(g, names[i], GOPT_DT_INT64, 1, &one, &sl[i], 8);
    node(g, "Slice", "s", 5, in, y);
  }
  gopt_graph_add_output(g, y);
  finish(g);
  float *xv = malloc((size_t)nx * sizeof *xv);
  CHECK(xv != NULL);
  for (int64_t i = 0; xv && i < nx; i++) xv[i] = (float)i;
  gopt_host_tensor in = {.dtype = GOPT_DT_FLOAT, .rank = 5, .dims = {xd[0], xd[1], xd[2], xd[3], xd[4]},
                         .data = xv, .nbytes = (size_t)nx * sizeof *xv};
  gopt_host_tensor out = {0};
  CHECK_MSG(xv && run_graph(g, NULL, &in, &out, 1, NULL, &err) == 0, "%s: %s", op, err.msg);
  free(xv);
  for (int i = 0; i < 5; i++) yd[i] = out.dims[i];
  float *d = out.data;
  out.data = NULL;
  gopt_host_tensor_clear(&out);
  gopt_graph_free(g);
  return d;
}

/* How many elements of y (dims yd) differ from x[off + sum i_a st[a]] of x = 0, 1, 2, ..., visiting
 * every index i of y one by one; 1 when y is NULL (the run failed). */
static int view_bad(const float *y, const int64_t *yd, const int64_t *st, int64_t off) {
  int64_t n = yd[0] * yd[1] * yd[2] * yd[3] * yd[4];
  if (!y) return 1;
  int bad = 0;
  for (int64_t k = 0; k < n; k++) {
    int64_t rem = k, src = off;
    for (int a = 4; a >= 0; a--) {
      src += (rem % yd[a]) * st[a];
      rem /= yd[a];
    }
    bad += y[k] != (float)src;
  }
  return bad;
}

/* Transposes (a channel shuffle's 0,2,1,3,4, one that moves the last dim, one that keeps the order;
 * on x[1,3,70,1,130] two that take the blocked copy, tiles not dividing the dims, with the
 * contiguous source dim next to the last and two dims before it) and Slices (a channel range, a
 * strided one, a reversed one) against loops over every index. */
static void test_views(void) {
  static const int64_t perms[5][5] = {{0, 2, 1, 3, 4}, {4, 1, 3, 2, 0}, {0, 1, 2, 3, 4}, {0, 1, 4, 3, 2},
                                      {4, 1, 2, 3, 0}};
  static const int64_t small[5] = {V0, V1, V2, V3, V4}, big[5] = {1, 3, 70, 1, 130};
  for (int p = 0; p < 5; p++) {
    const int64_t *xd = p < 3 ? small : big;
    const int64_t xs[5] = {xd[1] * xd[2] * xd[3] * xd[4], xd[2] * xd[3] * xd[4], xd[3] * xd[4], xd[4], 1};
    int64_t yd[5], st[5], off = 0;
    for (int a = 0; a < 5; a++) st[a] = xs[perms[p][a]];
    float *y = view_run("Transpose", xd, perms[p], NULL, yd);
    int bad = view_bad(y, yd, st, off);
    CHECK_MSG(!bad, "Transpose perm %d: %d elements differ from the index loop", p, bad);
    free(y);
  }
  const int64_t xs[5] = {V1 * V2 * V3 * V4, V2 * V3 * V4, V3 * V4, V4, 1};
  static const int64_t slices[3][4] = {{1, 4, 2, 1}, {0, 5, 4, 2}, {-1, -100, 2, -2}}; /* starts, ends, axes, steps */
  for (int q = 0; q < 3; q++) {
    int64_t yd[5], st[5];
    const int64_t *sl = slices[q];
    int64_t dim = (int64_t[]){V0, V1, V2, V3, V4}[sl[2]], s0 = sl[0] < 0 ? sl[0] + dim : sl[0];
    for (int a = 0; a < 5; a++) st[a] = a == sl[2] ? xs[a] * sl[3] : xs[a];
    float *y = view_run("Slice", small, NULL, sl, yd);
    int bad = view_bad(y, yd, st, s0 * xs[sl[2]]);
    CHECK_MSG(!bad && yd[sl[2]] == 3, "Slice %d: %d elements differ, %lld along the axis", q, bad,
              (long long)yd[sl[2]]);
    free(y);
  }
}

int main(void) {
  test_io();
  test_views();
  test_runtime_shapes();
  test_fusion();
  test_order();
  test_errors();
  return check_exit("test_exec");
}
