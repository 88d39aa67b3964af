/* test_task_baselines.c: the heuristic baselines (baselines.h): every standard baseline of every
 * task returns a valid, deterministic vector on a zoo and a corpus model; METIS balances kernel
 * time over the devices (the expert placement has its own test in tests/baselines); m-ETF
 * splits a diamond's two branches over two devices when the transfer is cheap and keeps them
 * together when it is not;
 * the XLA and TVM fusion rules give the groups derived by hand on small graphs (classes, no
 * duplication of expensive producers, operand budget, 256-op limit, one conv per group). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/baselines.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"
#include "gopt/task.h"
#include "gopt/zoo.h"

/* ---- graph building helpers ---------------------------------------------------------------- */
static int32_t t2(gopt_graph *g, const char *name, int64_t a, int64_t b) {
  int64_t d[2] = {a, b};
  return gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, b ? 2 : 1, d, NULL);
}
static int32_t param(gopt_graph *g, const char *name, int64_t a, int64_t b) {
  int32_t t = t2(g, name, a, b);
  gopt_tensor_set_const(g, t, NULL, (size_t)(a * (b ? b : 1) * 4), NULL);
  g->tensors.a[t].flags |= GOPT_T_PARAM;
  return t;
}
static int32_t op1(gopt_graph *g, const char *type, const char *name, int32_t in, int32_t out) {
  return gopt_graph_add_node(g, type, name, 1, &in, 1, &out, NULL);
}
static int32_t op2(gopt_graph *g, const char *type, const char *name, int32_t a, int32_t b, int32_t out) {
  int32_t in[2] = {a, b};
  return gopt_graph_add_node(g, type, name, 2, in, 1, &out, NULL);
}

/* Groups of a baseline on the fusion task as "a,b|c,d" (node names by id; groups by first node). */
static void groups_of(const gopt_graph *g, const gopt_cluster *c, const char *method, char *out, size_t outn) {
  gopt_error err = {0};
  gopt_env *e = NULL;
  gopt_decisions d;
  memset(&d, 0, sizeof d);
  out[0] = 0;
  gopt_env_opts o = {.task = GOPT_TASK_FUSION};
  int rc = gopt_env_new(g, c, &o, &e, &err);
  double *x = e ? calloc(gopt_env_nvars(e) + 1, sizeof *x) : NULL;
  rc = rc ? rc : gopt_baseline_run(method, e, x, &err);
  gopt_env_ws *w = e ? gopt_env_ws_new(e) : NULL;
  gopt_env_result r;
  size_t rep = 99;
  rc = rc ? rc : gopt_env_evaluate(w, x, &r, &rep, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK_EQ_INT(rep, 0); /* rule bits never need repairs */
  rc = rc ? rc : gopt_env_to_decisions(e, x, &d, &err);
  for (int32_t k = 0; !rc && k < d.n_groups; k++) {
    if (k) strncat(out, "|", outn - strlen(out) - 1);
    int first = 1;
    for (size_t i = 0; i < g->nodes.n; i++)
      if (d.group[i] == k) {
        if (!first) strncat(out, ",", outn - strlen(out) - 1);
        strncat(out, gopt_node_name(g, (int32_t)i), outn - strlen(out) - 1);
        first = 0;
      }
  }
  gopt_decisions_clear(&d);
  gopt_env_ws_free(w);
  free(x);
  gopt_env_free(e);
}

/* m1 = MatMul(x0, W1); a1 = Add(m1, b1); r1 = Relu; s1 = Softmax; t1 = Tanh; m2 = MatMul(t1, W2);
 * e1 = Relu(m2); e2 = Sigmoid(m2); o = Add(e1, e2); h = Exp(o); u1 = Relu(h); u2 = Neg(h);
 * out = Add(u1, u2). */
static gopt_graph *rules_graph(void) {
  gopt_graph *g = gopt_graph_new("rules");
  int32_t x0 = t2(g, "x0", 64, 256);
  gopt_graph_add_input(g, x0);
  int32_t W1 = param(g, "W1", 256, 256), b1 = param(g, "b1", 256, 0), W2 = param(g, "W2", 256, 256);
  const char *names[] = {"m1", "a1", "r1", "s1", "t1", "m2", "e1", "e2", "o", "h", "u1", "u2", "out"};
  int32_t t[13];
  for (int i = 0; i < 13; i++) t[i] = t2(g, names[i], 64, 256);
  op2(g, "MatMul", "m1", x0, W1, t[0]);
  op2(g, "Add", "a1", t[0], b1, t[1]);
  op1(g, "Relu", "r1", t[1], t[2]);
  op1(g, "Softmax", "s1", t[2], t[3]);
  op1(g, "Tanh", "t1", t[3], t[4]);
  op2(g, "MatMul", "m2", t[4], W2, t[5]);
  op1(g, "Relu", "e1", t[5], t[6]);
  op1(g, "Sigmoid", "e2", t[5], t[7]);
  op2(g, "Add", "o", t[6], t[7], t[8]);
  op1(g, "Exp", "h", t[8], t[9]);
  op1(g, "Relu", "u1", t[9], t[10]);
  op1(g, "Neg", "u2", t[9], t[11]);
  op2(g, "Add", "out", t[10], t[11], t[12]);
  gopt_graph_add_output(g, t[12]);
  return g;
}

static gopt_graph *chain_graph(int len) {
  gopt_graph *g = gopt_graph_new("chain");
  int32_t prev = t2(g, "x", 1024, 0);
  gopt_graph_add_input(g, prev);
  char nm[32];
  for (int i = 0; i < len; i++) {
    snprintf(nm, sizeof nm, "r%d", i);
    int32_t t = t2(g, nm, 1024, 0);
    op1(g, "Relu", nm, prev, t);
    prev = t;
  }
  gopt_graph_add_output(g, prev);
  return g;
}

/* cat = Concat(Relu(x_0), ..., Relu(x_{k-1})) along axis 0. */
static gopt_graph *concat_graph(int k) {
  gopt_graph *g = gopt_graph_new("concat");
  int32_t *in = calloc((size_t)k, sizeof *in);
  char nm[32];
  for (int i = 0; i < k; i++) {
    snprintf(nm, sizeof nm, "x%d", i);
    int32_t x = t2(g, nm, 16, 0);
    gopt_graph_add_input(g, x);
    snprintf(nm, sizeof nm, "r%d", i);
    in[i] = t2(g, nm, 16, 0);
    op1(g, "Relu", nm, x, in[i]);
  }
  int32_t out = t2(g, "cat", 16 * k, 0);
  int32_t n = gopt_graph_add_node(g, "Concat", "cat", k, in, 1, &out, NULL);
  gopt_node_set_int(g, n, "axis", 0);
  gopt_graph_add_output(g, out);
  free(in);
  return g;
}

static void test_fusion_rules(void) {
  gopt_error err = {0};
  gopt_cluster *c = NULL;
  CHECK(gopt_cluster_parse("V100", &c, &err) == 0);
  char grp[4096];
  gopt_graph *g = rules_graph();
  groups_of(g, c, "xla", grp, sizeof grp);
  /* XLA: matmuls and the softmax are not fused into consumers; relu -> softmax is input fusion;
   * sigmoid has one consumer so it fuses although expensive; Exp has two consumers and is
   * expensive (4 FLOPs/element): not duplicated, so h stays out of the u1/u2 group */
  CHECK_MSG(!strcmp(grp, "a1,r1,s1|e1,e2,o,h|u1,u2,out"), "xla: %s", grp);
  groups_of(g, c, "tvm", grp, sizeof grp);
  /* TVM: each matmul absorbs its elementwise consumers; t1 feeds a matmul (not fusible into it);
   * a group holds at most one heavy op (conv-like or reduction), so m1 cannot join the group
   * a1,r1,s1 that the softmax (a reduction) heads */
  CHECK_MSG(!strcmp(grp, "a1,r1,s1|m2,e1,e2,o,h,u1,u2,out"), "tvm: %s", grp);
  groups_of(g, c, "no_fusion", grp, sizeof grp);
  CHECK_MSG(!strcmp(grp, ""), "no_fusion: %s", grp);
  gopt_graph_free(g);

  /* 300-op chain: TVM groups at most 256 ops, built from the end: r44..r299, then r0..r43 */
  g = chain_graph(300);
  groups_of(g, c, "tvm", grp, sizeof grp);
  char *bar = strchr(grp, '|');
  CHECK(bar && !strncmp(grp, "r0,", 3) && strstr(grp, ",r43|r44,") && !strchr(bar + 1, '|'));
  size_t commas = 0;
  for (char *s = bar ? bar : grp; *s; s++) commas += *s == ',';
  CHECK_EQ_INT(commas, 255); /* 256 members in the second group */
  groups_of(g, c, "xla", grp, sizeof grp);
  CHECK(!strchr(grp, '|') && !strncmp(grp, "r0,r1,", 6) && strstr(grp, ",r299"));
  gopt_graph_free(g);

  /* operand budget: a concat of 60 relus fuses whole (60 operands), of 70 not at all under XLA
   * (the concat alone already reads 70 tensors); TVM has no operand budget */
  g = concat_graph(60);
  groups_of(g, c, "xla", grp, sizeof grp);
  CHECK(!strchr(grp, '|') && !strncmp(grp, "r0,", 3) && strstr(grp, ",r59,cat"));
  gopt_graph_free(g);
  g = concat_graph(70);
  groups_of(g, c, "xla", grp, sizeof grp);
  CHECK_MSG(!strcmp(grp, ""), "xla concat 70: %s", grp);
  groups_of(g, c, "tvm", grp, sizeof grp);
  CHECK(!strchr(grp, '|') && strstr(grp, ",r69,cat"));
  gopt_graph_free(g);
  gopt_cluster_free(c);
}

/* ---- m-ETF on a diamond --------------------------------------------------------------------- */
typedef struct costs {
  double flops[8];
} costs;
static void cost_fn(const gopt_graph *g, int32_t n, gopt_cost *c, void *user) {
  const costs *k = user;
  c->flops = k->flops[n];
  c->bytes_read = 4096;
  c->bytes_written = 4096;
  c->params = 0;
}

static void test_m_etf(void) {
  /* devices: 1 TFLOP/s, efficiency 1, launch 1 us; A = Relu(X) (1 MFLOP = 1 us + 1 us launch),
   * B = Relu(A), C = Relu(A) (1 GFLOP = 1 ms each), D = Add(B, C); A's output is 4096 bytes. */
  const double bws[2] = {1e9, 1e3};
  for (int fast = 1; fast >= 0; fast--) {
    char js[1024];
    snprintf(js, sizeof js,
             "{\"devices\":[{\"name\":\"d\",\"count\":2,\"peak_flops\":1e12,\"mem_bw\":1e11,"
             "\"memory\":1e9,\"launch_us\":1,\"efficiency\":1}],"
             "\"links\":[{\"name\":\"bus\",\"devices\":[0,1],\"bw\":%g,\"latency_us\":10}]}",
             bws[fast ? 0 : 1]);
    gopt_error err = {0};
    gopt_cluster *c = NULL;
    CHECK(gopt_cluster_from_json(js, "test", &c, &err) == 0);
    gopt_graph *g = gopt_graph_new("diamond");
    int32_t X = t2(g, "X", 1024, 0), A = t2(g, "A", 1024, 0), B = t2(g, "B", 1024, 0),
            C = t2(g, "C", 1024, 0), D = t2(g, "D", 1024, 0);
    gopt_graph_add_input(g, X);
    op1(g, "Relu", "A", X, A);
    op1(g, "Relu", "B", A, B);
    op1(g, "Relu", "C", A, C);
    op2(g, "Add", "D", B, C, D);
    gopt_graph_add_output(g, D);
    costs k = {{1e6, 1e9, 1e9, 1e6}};
    gopt_sim_opts so = {GOPT_SIM_COSTS_ANALYTICAL, NULL, cost_fn, &k};
    gopt_env_opts o = {.task = GOPT_TASK_PLACEMENT, .sim = &so};
    gopt_env *e = NULL;
    int rc = gopt_env_new(g, c, &o, &e, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    double x[4] = {0}, xs[4] = {0};
    rc = rc ? rc : gopt_baseline_run("m_etf", e, x, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    /* hand derivation: A on device 0 (tie, lower device); B on 0 at A's end; C on 0 would start
     * after B (1 ms), on 1 after A's transfer (4096 / bw + 10 us): 14 us on the fast link, 4 s
     * on the slow one. Fast: D on 1 (dev 0 would wait C's end + a transfer; dev 1 only C's end) */
    if (fast) {
      CHECK(x[0] == 0 && x[1] == 0 && x[2] == 1 && x[3] == 1);
    } else {
      CHECK(x[0] == 0 && x[1] == 0 && x[2] == 0 && x[3] == 0);
    }
    if (!rc) {
      gopt_env_ws *w = gopt_env_ws_new(e);
      gopt_env_result r1, r2;
      gopt_baseline_run("single", e, xs, &err);
      rc = gopt_env_evaluate(w, x, &r1, NULL, &err) || gopt_env_evaluate(w, xs, &r2, NULL, &err);
      CHECK(rc == 0);
      if (fast) CHECK(r1.step_time < 0.75 * r2.step_time); /* the branches overlap */
      else CHECK(r1.step_time == r2.step_time);
      gopt_env_ws_free(w);
    }
    gopt_env_free(e);
    gopt_graph_free(g);
    gopt_cluster_free(c);
  }
}

/* ---- every baseline on real graphs ---------------------------------------------------------- */
static void test_all(const char *label, gopt_graph *g) {
  gopt_error err = {0};
  const char *clusters[GOPT_TASK_COUNT] = {"4xV100-nvlink", "V100", "4xV100-nvlink", "2xV100-nvlink",
                                           "4xV100-nvlink"};
  for (int task = 0; task < GOPT_TASK_COUNT; task++) {
    gopt_cluster *c = NULL;
    gopt_env *e = NULL;
    CHECK(gopt_cluster_parse(clusters[task], &c, &err) == 0);
    gopt_env_opts o = {.task = task};
    int rc = gopt_env_new(g, c, &o, &e, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) {
      gopt_cluster_free(c);
      continue;
    }
    size_t nv = gopt_env_nvars(e);
    const gopt_env_var *v = gopt_env_vars(e);
    double *x = calloc(nv + 1, sizeof *x), *x2 = calloc(nv + 1, sizeof *x2), *xd = calloc(nv + 1, sizeof *xd);
    gopt_env_ws *w = gopt_env_ws_new(e);
    gopt_env_result r, rd;
    gopt_env_default(e, xd);
    CHECK(gopt_env_evaluate(w, xd, &rd, NULL, &err) == 0);
    CHECK(gopt_baseline_task_count(task) >= 3);
    for (size_t i = 0; i < gopt_baseline_task_count(task); i++) {
      const char *name = gopt_baseline_task_name(task, i);
      const char *why = NULL;
      CHECK_MSG(gopt_baseline_applicable(name, e, &why), "%s: %s", name, why ? why : "");
      rc = gopt_baseline_run(name, e, x, &err);
      CHECK_MSG(rc == 0, "%s %s: %s", label, name, err.msg);
      rc = rc ? rc : gopt_baseline_run(name, e, x2, &err);
      CHECK(rc == 0 && !memcmp(x, x2, nv * sizeof *x)); /* deterministic */
      int bad = 0;
      for (size_t j = 0; j < nv; j++) {
        if (v[j].kind == GOPT_VAR_PRIORITY) bad += !(x[j] >= 0 && x[j] <= 1);
        else bad += !(x[j] == floor(x[j]) && x[j] >= 0 && x[j] < v[j].card);
      }
      CHECK_EQ_INT(bad, 0);
      size_t rep = 0;
      rc = gopt_env_evaluate(w, x, &r, &rep, &err);
      CHECK_MSG(rc == 0, "%s", err.msg);
      if (task == GOPT_TASK_FUSION) CHECK_EQ_INT(rep, 0);
      fprintf(stderr, "  %-14s %-9s %-26s objective %.6g (default %.6g)\n", label, gopt_task_name(task), name,
              r.objective, rd.objective);
    }
    /* single-device placement equals the default; not-applicable names say why */
    if (task == GOPT_TASK_PLACEMENT) {
      CHECK(gopt_baseline_run("single", e, x, &err) == 0 && !memcmp(x, xd, nv * sizeof *x));
    }
    if (task == GOPT_TASK_FUSION) {
      const char *why = NULL;
      CHECK(!gopt_baseline_applicable("metis", e, &why) && why && strstr(why, "fusion task"));
      CHECK(gopt_baseline_run("metis", e, x, &err) == GOPT_EINVAL && strstr(err.msg, "metis"));
      CHECK(gopt_baseline_run("xla", e, x, &err) == 0 && !memcmp(x, xd, nv * sizeof *x)); /* default = XLA */
    }
    CHECK(gopt_baseline_run("nosuch", e, x, &err) == GOPT_EINVAL && strstr(err.msg, "nosuch"));
    CHECK(!gopt_baseline_known("metis+nosuch") && gopt_baseline_known("metis+mem_greedy+xla"));
    free(x);
    free(x2);
    free(xd);
    gopt_env_ws_free(w);
    gopt_env_free(e);
    gopt_cluster_free(c);
  }
}

/* METIS balances kernel time. */
static void test_partitions(const char *spec) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  gopt_cluster *c = NULL;
  gopt_env *e = NULL;
  CHECK(gopt_zoo_build(spec, &g, &err) == 0);
  CHECK(gopt_cluster_parse("4xV100-nvlink", &c, &err) == 0);
  gopt_env_opts o = {.task = GOPT_TASK_PLACEMENT};
  int rc = g && c ? gopt_env_new(g, c, &o, &e, &err) : -1;
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) goto done;
  size_t n = gopt_env_nvars(e);
  const gopt_env_var *v = gopt_env_vars(e);
  double *x = calloc(n, sizeof *x);
  const gopt_sim *s = gopt_env_sim(e);
  {
    CHECK(gopt_baseline_run("metis", e, x, &err) == 0);
    double load[4] = {0}, total = 0;
    for (size_t i = 0; i < n; i++) {
      double t = gopt_sim_node_time(s, v[i].node, 0);
      load[(int)x[i]] += t;
      total += t;
    }
    double mx = fmax(fmax(load[0], load[1]), fmax(load[2], load[3]));
    fprintf(stderr, "  %s metis: loads %.3g %.3g %.3g %.3g ms, max/mean %.3f\n", spec,
            load[0] * 1e3, load[1] * 1e3, load[2] * 1e3, load[3] * 1e3, mx / (total / 4));
    CHECK(mx <= 1.10 * total / 4);
  }
  free(x);
done:
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

int main(void) {
  gopt_error err = {0};
  CHECK(gopt_baseline_count() == 12 && gopt_baseline_find("m_etf") && !gopt_baseline_find("x"));
  test_fusion_rules();
  test_m_etf();
  test_partitions("transformer");
  test_partitions("resnet50");
  gopt_graph *g = NULL;
  CHECK(gopt_zoo_build("inception_v3", &g, &err) == 0);
  if (g) test_all("inception_v3", g);
  gopt_graph_free(g);
  g = NULL;
  int rc = gopt_onnx_load("corpus/squeezenet1_1.onnx", NULL, &g, &err);
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  rc = rc ? rc : gopt_infer_shapes(g, &io, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (!rc) test_all("squeezenet1_1", g);
  gopt_graph_free(g);
  return check_exit("test_task_baselines");
}
