/* test_exec_isa.c: the executor's per-ISA vector kernels and its in-place buffers. Every
 * instruction set this CPU runs (GOPT_ISA=baseline|avx2|avx512) computes each fused-loop op and
 * reduction against a double-precision C reference, and against the baseline build: exactly for
 * ops without a polynomial, within float tolerance for exp/sigmoid/tanh/elu and sums of products
 * (FMA contraction); a fused chain likewise. An unknown GOPT_ISA is refused with one line. In-place
 * execution: a hand-made graph whose peak is known (8000 bytes without in-place, 4004 with), a
 * graph input that must survive being read by an elementwise op, and resnet18 / mobilenet_v2 from
 * the corpus, whose outputs must be bitwise those of the run without in-place while the peak drops
 * to the figure the planner predicts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_graph.h"
#include "gopt/exec.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"

static const char *const isas[] = {"baseline", "avx2", "avx512"};

/* Runs g once under GOPT_ISA=isa (NULL: unset) and GOPT_INPLACE=inplace; outputs into out.
 * Returns 1 when it ran, 0 when the CPU lacks isa (skipped), -1 on another error. */
static int run_isa(const gopt_graph *g, const char *isa, int inplace, const gopt_host_tensor *in,
                   size_t n_in, gopt_host_tensor *out, size_t n_out, size_t *peak, size_t *peak_plain,
                   size_t *n_inplace) {
  gopt_error err = {0};
  gopt_exec *x = NULL;
  if (isa) setenv("GOPT_ISA", isa, 1);
  else unsetenv("GOPT_ISA");
  setenv("GOPT_INPLACE", inplace ? "1" : "0", 1);
  gopt_exec_opts o = {.threads = 2, .seed = 7};
  int rc = gopt_exec_new(g, &o, &x, NULL, &err);
  unsetenv("GOPT_ISA");
  unsetenv("GOPT_INPLACE");
  if (rc && strstr(err.msg, "does not support")) {
    fprintf(stderr, "skipped (%s)\n", err.msg);
    return 0;
  }
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) return -1;
  if (isa) CHECK_MSG(!strcmp(gopt_exec_isa(x), isa), "asked %s, got %s", isa, gopt_exec_isa(x));
  for (size_t i = 0; !rc && i < n_in; i++) rc = gopt_exec_set_input(x, i, &in[i], &err);
  if (!rc && !in) rc = gopt_exec_random_inputs(x, 3, &err);
  if (!rc) rc = gopt_exec_run(x, &err);
  for (size_t i = 0; !rc && i < n_out; i++) rc = gopt_exec_get_output(x, i, &out[i], &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (peak) *peak = gopt_exec_peak_bytes(x);
  if (peak_plain) *peak_plain = gopt_exec_peak_bytes_without_inplace(x);
  if (n_inplace) *n_inplace = gopt_exec_n_inplace(x);
  gopt_exec_free(x);
  return rc ? -1 : 1;
}

/* ---- every op of the fused loops and the reductions, per ISA ---------------------------------------- */

enum { D0 = 3, D1 = 64, D2 = 37, N = D0 * D1 * D2 };

typedef struct op_case {
  const char *type;
  int arity;   /* 1: f(x); 2: f(x, c[D1,1]); 3: Where(m, x, c); 4, 5: Pow(x, 3), Pow(x, 2) */
  int exact;   /* all ISAs bitwise equal */
  double tol;  /* relative tolerance against the double reference */
} op_case;

static const op_case cases[] = {
    {"Relu", 1, 1, 0}, {"LeakyRelu", 1, 1, 1e-6}, {"Elu", 1, 0, 1e-5}, {"Sigmoid", 1, 0, 1e-5},
    {"HardSigmoid", 1, 0, 1e-6}, {"HardSwish", 1, 0, 1e-6}, {"Tanh", 1, 0, 1e-5}, {"Exp", 1, 0, 1e-5},
    {"Log", 1, 1, 1e-6}, {"Sqrt", 1, 1, 1e-6}, {"Reciprocal", 1, 1, 1e-6}, {"Neg", 1, 1, 0},
    {"Abs", 1, 1, 0}, {"Floor", 1, 1, 0}, {"Ceil", 1, 1, 0}, {"Sin", 1, 1, 1e-6}, {"Cos", 1, 1, 1e-6},
    {"Softplus", 1, 1, 1e-6}, {"Erf", 1, 0, 1e-6}, {"Sign", 1, 1, 0}, {"Add", 2, 1, 1e-6},
    {"Sub", 2, 1, 1e-6}, {"Mul", 2, 1, 1e-6}, {"Div", 2, 1, 1e-6}, {"Max", 2, 1, 0}, {"Min", 2, 1, 0},
    {"PRelu", 2, 1, 1e-6}, {"Pow", 2, 1, 1e-5}, {"Where", 3, 1, 0}, {"Pow", 4, 1, 1e-6},
    {"Pow", 5, 1, 0},
    {"ReduceSum", 1, 1, 1e-6}, {"ReduceMean", 1, 1, 1e-6}, {"ReduceMax", 1, 1, 0}, {"ReduceMin", 1, 1, 0},
    {"ReduceSumSquare", 1, 0, 1e-5}, {"ReduceL2", 1, 0, 1e-5},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static double ref1(const char *t, double v, double c) {
  if (!strcmp(t, "Relu")) return v > 0 ? v : 0;
  if (!strcmp(t, "LeakyRelu")) return v >= 0 ? v : 0.01 * v;
  if (!strcmp(t, "Elu")) return v >= 0 ? v : exp(v) - 1;
  if (!strcmp(t, "Sigmoid")) return 1 / (1 + exp(-v));
  if (!strcmp(t, "HardSigmoid")) return fmin(fmax(0.2 * v + 0.5, 0), 1);
  if (!strcmp(t, "HardSwish")) return v * fmin(fmax(v / 6 + 0.5, 0), 1);
  if (!strcmp(t, "Tanh")) return tanh(v);
  if (!strcmp(t, "Exp")) return exp(v);
  if (!strcmp(t, "Log")) return log(v);
  if (!strcmp(t, "Sqrt")) return sqrt(v);
  if (!strcmp(t, "Reciprocal")) return 1 / v;
  if (!strcmp(t, "Neg")) return -v;
  if (!strcmp(t, "Abs")) return fabs(v);
  if (!strcmp(t, "Floor")) return floor(v);
  if (!strcmp(t, "Ceil")) return ceil(v);
  if (!strcmp(t, "Sin")) return sin(v);
  if (!strcmp(t, "Cos")) return cos(v);
  if (!strcmp(t, "Softplus")) return log1p(exp(v));
  if (!strcmp(t, "Erf")) return erf(v);
  if (!strcmp(t, "Sign")) return (v > 0) - (v < 0);
  if (!strcmp(t, "Add")) return v + c;
  if (!strcmp(t, "Sub")) return v - c;
  if (!strcmp(t, "Mul")) return v * c;
  if (!strcmp(t, "Div")) return v / c;
  if (!strcmp(t, "Max")) return v > c ? v : c;
  if (!strcmp(t, "Min")) return v < c ? v : c;
  if (!strcmp(t, "PRelu")) return v < 0 ? c * v : v;
  if (!strcmp(t, "Pow")) return pow(fabs(v), c);
  return NAN;
}

/* The reductions keep dims: ReduceSum/Mean/Min over the last axis (contiguous), Max/SumSquare/L2
 * over axis 1 (strided: vectorised over the inner axis). Opset 11: axes are attributes. */
static int is_reduce(const char *t) { return !strncmp(t, "Reduce", 6); }
static int reduce_axis(const char *t) {
  return !strcmp(t, "ReduceSum") || !strcmp(t, "ReduceMean") || !strcmp(t, "ReduceMin") ? 2 : 1;
}

static void reduce_ref(const char *t, const float *x, double *out) {
  int ax = reduce_axis(t);
  int64_t n_out = ax == 2 ? D0 * D1 : D0 * D2, red = ax == 2 ? D2 : D1;
  for (int64_t o = 0; o < n_out; o++) {
    double acc = !strcmp(t, "ReduceMax") ? -INFINITY : !strcmp(t, "ReduceMin") ? INFINITY : 0;
    for (int64_t r = 0; r < red; r++) {
      double v = ax == 2 ? x[o * D2 + r] : x[(o / D2) * D1 * D2 + r * D2 + o % D2];
      if (!strcmp(t, "ReduceMax")) acc = v > acc ? v : acc;
      else if (!strcmp(t, "ReduceMin")) acc = v < acc ? v : acc;
      else if (!strcmp(t, "ReduceSumSquare") || !strcmp(t, "ReduceL2")) acc += v * v;
      else acc += v;
    }
    if (!strcmp(t, "ReduceMean")) acc /= (double)red;
    if (!strcmp(t, "ReduceL2")) acc = sqrt(acc);
    out[o] = acc;
  }
}

/* One graph: every case reads x (Log/Sqrt/Pow read |x| through Abs first: an output too). */
static gopt_graph *ops_graph(const float *c, const uint8_t *m, int32_t *outs) {
  gopt_graph *g = gopt_graph_new("isa_ops");
  gopt_error err = {0};
  CHECK(gopt_graph_set_opset(g, "", 11) == 0);
  int64_t xd[3] = {D0, D1, D2}, cd[2] = {D1, 1};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 3, xd);
  gopt_graph_add_input(g, x);
  int32_t kc = tensor(g, "c", GOPT_DT_FLOAT, 2, cd), km = tensor(g, "m", GOPT_DT_BOOL, 3, xd);
  CHECK(gopt_tensor_set_const(g, kc, c, D1 * sizeof(float), &err) == 0);
  CHECK(gopt_tensor_set_const(g, km, m, N, &err) == 0);
  int32_t k3 = tensor(g, "three", GOPT_DT_FLOAT, 0, NULL), k2 = tensor(g, "two", GOPT_DT_FLOAT, 0, NULL);
  float three = 3.0f, two = 2.0f;
  CHECK(gopt_tensor_set_const(g, k3, &three, sizeof three, &err) == 0);
  CHECK(gopt_tensor_set_const(g, k2, &two, sizeof two, &err) == 0);
  int32_t ax = tensor(g, "absx", GOPT_DT_FLOAT, 3, xd);
  node(g, "Abs", "abs_in", 1, (int32_t[]){x}, ax);
  for (size_t i = 0; i < N_CASES; i++) {
    const char *t = cases[i].type;
    int64_t od[3] = {D0, D1, D2};
    if (is_reduce(t)) od[reduce_axis(t)] = 1;
    char name[64];
    snprintf(name, sizeof name, "y%zu_%s", i, t);
    outs[i] = tensor(g, name, GOPT_DT_FLOAT, 3, od);
    int pos = !strcmp(t, "Log") || !strcmp(t, "Sqrt") || !strcmp(t, "Pow");
    int32_t a = pos ? ax : x;
    int32_t n;
    if (cases[i].arity == 3) n = node(g, t, name, 3, (int32_t[]){km, x, kc}, outs[i]);
    else if (cases[i].arity >= 4) n = node(g, t, name, 2, (int32_t[]){x, cases[i].arity == 4 ? k3 : k2}, outs[i]);
    else if (cases[i].arity == 2) n = node(g, t, name, 2, (int32_t[]){a, kc}, outs[i]);
    else n = node(g, t, name, 1, (int32_t[]){a}, outs[i]);
    if (is_reduce(t) && n >= 0) {
      int64_t axes[1] = {reduce_axis(t)};
      CHECK(gopt_node_set_ints(g, n, "axes", axes, 1) == 0);
    }
    gopt_graph_add_output(g, outs[i]);
  }
  finish(g);
  return g;
}

static void test_ops_per_isa(void) {
  static float c[D1], xv[N];
  static uint8_t m[N];
  for (int i = 0; i < D1; i++) c[i] = frand() * 2.0f + (i % 2 ? 0.1f : -0.1f);
  for (int i = 0; i < N; i++) xv[i] = frand() * 6.0f, m[i] = (uint8_t)(frand() > 0);
  xv[5] = 0.0f, xv[6] = 1e-3f, xv[7] = -95.0f, xv[8] = 95.0f, xv[9] = -0.03f; /* tails, saturation */
  int32_t outs[N_CASES];
  gopt_graph *g = ops_graph(c, m, outs);
  gopt_host_tensor in = {.dtype = GOPT_DT_FLOAT, .rank = 3, .dims = {D0, D1, D2}, .data = xv,
                         .nbytes = sizeof xv};
  gopt_host_tensor base[N_CASES], got[N_CASES];
  memset(base, 0, sizeof base);
  int ran = 0;
  for (int k = 0; k < 3; k++) {
    gopt_host_tensor *o = k == 0 ? base : got;
    memset(got, 0, sizeof got);
    int r = run_isa(g, isas[k], 1, &in, 1, o, N_CASES, NULL, NULL, NULL);
    if (r <= 0) {
      CHECK_MSG(k > 0, "the baseline kernels must run everywhere");
      continue;
    }
    ran++;
    static double red[D0 * D1 * D2];
    for (size_t i = 0; i < N_CASES; i++) {
      const char *t = cases[i].type;
      const float *y = o[i].data, *b = base[i].data;
      int64_t n = gopt_host_tensor_numel(&o[i]);
      if (is_reduce(t)) reduce_ref(t, xv, red);
      int64_t bad_ref = 0, bad_base = 0;
      double worst = 0;
      for (int64_t j = 0; j < n; j++) {
        double want;
        if (is_reduce(t)) want = red[j];
        else if (cases[i].arity == 3) want = m[j] ? xv[j] : c[(j / D2) % D1];
        else if (cases[i].arity >= 4) want = pow(xv[j], cases[i].arity == 4 ? 3.0 : 2.0);
        else {
          int pos = !strcmp(t, "Log") || !strcmp(t, "Sqrt") || !strcmp(t, "Pow");
          double v = pos ? fabs((double)xv[j]) : xv[j];
          want = ref1(t, v, c[(j / D2) % D1]);
        }
        want = (double)(float)want; /* beyond float's range: +-Inf, as float kernels give */
        double e = fabs(y[j] - want);
        int ok = (isnan(want) && isnan(y[j])) || (isinf(want) && y[j] == want) ||
                 e <= cases[i].tol * fabs(want) + 1e-6;
        if (!ok) bad_ref++;
        if (e > worst && isfinite(want)) worst = e;
        if (k > 0) {
          int same = y[j] == b[j] || (isnan(y[j]) && isnan(b[j]));
          int close = same || fabs(y[j] - b[j]) <= 4e-6 * fabs(b[j]) + 1e-7;
          if (cases[i].exact ? !same : !close) bad_base++;
        }
      }
      CHECK_MSG(bad_ref == 0, "%s on %s: %lld of %lld values off the double reference (worst %g)",
                t, isas[k], (long long)bad_ref, (long long)n, worst);
      CHECK_MSG(bad_base == 0, "%s on %s: %lld of %lld values differ from the baseline build (%s)",
                t, isas[k], (long long)bad_base, (long long)n, cases[i].exact ? "exact" : "tolerance");
    }
    if (k > 0)
      for (size_t i = 0; i < N_CASES; i++) gopt_host_tensor_clear(&got[i]);
  }
  for (size_t i = 0; i < N_CASES; i++) gopt_host_tensor_clear(&base[i]);
  fprintf(stderr, "%d instruction sets ran %zu ops\n", ran, N_CASES);
  gopt_graph_free(g);
}

/* ---- a fused chain per ISA ----------------------------------------------------------------------------- */

/* y = relu(tanh(sigmoid(x*c + 0.5) * x) - c) + x*c, one fusion group, against double and baseline. */
static void test_fused_chain(void) {
  static float c[D1], xv[N];
  for (int i = 0; i < D1; i++) c[i] = frand();
  for (int i = 0; i < N; i++) xv[i] = frand() * 3.0f;
  gopt_graph *g = gopt_graph_new("chain");
  gopt_error err = {0};
  int64_t xd[3] = {D0, D1, D2}, cd[2] = {D1, 1};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 3, xd);
  gopt_graph_add_input(g, x);
  int32_t kc = tensor(g, "c", GOPT_DT_FLOAT, 2, cd), kh = tensor(g, "h", GOPT_DT_FLOAT, 0, NULL);
  float half = 0.5f;
  CHECK(gopt_tensor_set_const(g, kc, c, sizeof c, &err) == 0);
  CHECK(gopt_tensor_set_const(g, kh, &half, sizeof half, &err) == 0);
  int32_t t[8];
  for (int i = 0; i < 8; i++) {
    char nm[8];
    snprintf(nm, sizeof nm, "t%d", i);
    t[i] = tensor(g, nm, GOPT_DT_FLOAT, 3, xd);
  }
  node(g, "Mul", "n0", 2, (int32_t[]){x, kc}, t[0]);
  node(g, "Add", "n1", 2, (int32_t[]){t[0], kh}, t[1]);
  node(g, "Sigmoid", "n2", 1, (int32_t[]){t[1]}, t[2]);
  node(g, "Mul", "n3", 2, (int32_t[]){t[2], x}, t[3]);
  node(g, "Tanh", "n4", 1, (int32_t[]){t[3]}, t[4]);
  node(g, "Sub", "n5", 2, (int32_t[]){t[4], kc}, t[5]);
  node(g, "Relu", "n6", 1, (int32_t[]){t[5]}, t[6]);
  node(g, "Add", "n7", 2, (int32_t[]){t[6], t[0]}, t[7]);
  gopt_graph_add_output(g, t[7]);
  finish(g);
  int32_t *group = malloc(g->nodes.n * sizeof *group);
  for (size_t i = 0; i < g->nodes.n; i++) group[i] = 0; /* all eight ops: one group */
  gopt_host_tensor in = {.dtype = GOPT_DT_FLOAT, .rank = 3, .dims = {D0, D1, D2}, .data = xv,
                         .nbytes = sizeof xv};
  gopt_host_tensor base = {0}, got = {0};
  for (int k = 0; k < 3; k++) {
    gopt_exec *ex = NULL;
    setenv("GOPT_ISA", isas[k], 1);
    gopt_exec_opts o = {.threads = 2, .group = group};
    int rc = gopt_exec_new(g, &o, &ex, NULL, &err);
    unsetenv("GOPT_ISA");
    if (rc && strstr(err.msg, "does not support")) continue;
    CHECK_MSG(rc == 0, "%s", err.msg);
    CHECK(gopt_exec_n_steps(ex) == 1);
    CHECK(gopt_exec_set_input(ex, 0, &in, &err) == 0 && gopt_exec_run(ex, &err) == 0);
    gopt_host_tensor *o2 = k == 0 ? &base : &got;
    CHECK_MSG(gopt_exec_get_output(ex, 0, o2, &err) == 0, "%s", err.msg);
    gopt_exec_free(ex);
    if (!o2->data) continue;
    const float *y = o2->data;
    int64_t bad = 0, bad_base = 0;
    for (int64_t j = 0; j < N; j++) {
      double cv = c[(j / D2) % D1], a = xv[j] * cv;
      double want = tanh(1 / (1 + exp(-(a + 0.5))) * xv[j]) - cv;
      want = (want > 0 ? want : 0) + a;
      if (fabs(y[j] - want) > 1e-5 * fabs(want) + 1e-6) bad++;
      if (k > 0 && fabs(y[j] - ((const float *)base.data)[j]) > 4e-6 * fabs(want) + 1e-7) bad_base++;
    }
    CHECK_MSG(bad == 0, "fused chain on %s: %lld values off the double reference", isas[k], (long long)bad);
    CHECK_MSG(bad_base == 0, "fused chain on %s: %lld values differ from baseline", isas[k], (long long)bad_base);
    if (k > 0) gopt_host_tensor_clear(&got);
  }
  gopt_host_tensor_clear(&base);
  free(group);
  gopt_graph_free(g);
}

static void test_isa_errors(void) {
  gopt_graph *g = gopt_graph_new("e");
  int64_t d[1] = {4};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 1, d), y = tensor(g, "y", GOPT_DT_FLOAT, 1, d);
  gopt_graph_add_input(g, x);
  node(g, "Relu", "r", 1, (int32_t[]){x}, y);
  gopt_graph_add_output(g, y);
  finish(g);
  gopt_error err = {0};
  gopt_exec *ex = NULL;
  setenv("GOPT_ISA", "sse9", 1);
  CHECK(gopt_exec_new(g, NULL, &ex, NULL, &err) != 0 && ex == NULL);
  CHECK_MSG(strstr(err.msg, "GOPT_ISA=sse9") && strstr(err.msg, "unknown") && !strchr(err.msg, '\n'),
            "%s", err.msg);
  setenv("GOPT_ISA", "auto", 1);
  CHECK(gopt_exec_new(g, NULL, &ex, NULL, &err) == 0);
  CHECK(ex && (!strcmp(gopt_exec_isa(ex), "baseline") || !strcmp(gopt_exec_isa(ex), "avx2") ||
               !strcmp(gopt_exec_isa(ex), "avx512")));
  gopt_exec_free(ex);
  unsetenv("GOPT_ISA");
  gopt_graph_free(g);
}

/* ---- in place ------------------------------------------------------------------------------------------ */

/* x[1] -> Expand to [1000] -> a; b = Relu(a); y = Sigmoid(b); w = Neg(z) of a second graph input z
 * (which must not be overwritten), run in the order neg, expand, relu, sig. Without in-place the
 * peak is z-or-w + a + b / b + y: 12000 bytes; with it, a's buffer becomes b's and then y's, and
 * the peak is x + w + a at step 1: 8004. */
static void test_inplace_small(void) {
  gopt_graph *g = gopt_graph_new("inplace");
  gopt_error err = {0};
  int64_t d1[1] = {1}, dn[1] = {1000}, shp = 1000;
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 1, d1), z = tensor(g, "z", GOPT_DT_FLOAT, 1, dn);
  gopt_graph_add_input(g, x);
  gopt_graph_add_input(g, z);
  int32_t ks = tensor(g, "shape", GOPT_DT_INT64, 1, d1);
  CHECK(gopt_tensor_set_const(g, ks, &shp, sizeof shp, &err) == 0);
  int32_t a = tensor(g, "a", GOPT_DT_FLOAT, 1, dn), b = tensor(g, "b", GOPT_DT_FLOAT, 1, dn);
  int32_t y = tensor(g, "y", GOPT_DT_FLOAT, 1, dn), w = tensor(g, "w", GOPT_DT_FLOAT, 1, dn);
  node(g, "Expand", "expand", 2, (int32_t[]){x, ks}, a);
  node(g, "Relu", "relu", 1, (int32_t[]){a}, b);
  node(g, "Sigmoid", "sig", 1, (int32_t[]){b}, y);
  node(g, "Neg", "neg", 1, (int32_t[]){z}, w);
  gopt_graph_add_output(g, y);
  gopt_graph_add_output(g, w);
  finish(g);
  float xv = -0.75f, zv[1000];
  for (int i = 0; i < 1000; i++) zv[i] = frand();
  gopt_host_tensor in[2] = {{.dtype = GOPT_DT_FLOAT, .rank = 1, .dims = {1}, .data = &xv, .nbytes = 4},
                            {.dtype = GOPT_DT_FLOAT, .rank = 1, .dims = {1000}, .data = zv, .nbytes = 4000}};
  int32_t order[4] = {3, 0, 1, 2}; /* node ids in insertion order: neg first */
  gopt_exec *ex = NULL;
  gopt_host_tensor o1[2] = {{0}}, o2[2] = {{0}};
  size_t peak = 0, plain = 0, nip = 0;
  for (int mode = 0; mode < 2; mode++) {
    setenv("GOPT_INPLACE", mode ? "1" : "0", 1);
    gopt_exec_opts o = {.threads = 1, .order = order, .n_order = 4};
    CHECK_MSG(gopt_exec_new(g, &o, &ex, NULL, &err) == 0, "%s", err.msg);
    unsetenv("GOPT_INPLACE");
    if (!ex) return;
    gopt_host_tensor *out = mode ? o2 : o1;
    for (int rep = 0; rep < 2; rep++) { /* the second run would see an overwritten input */
      CHECK(gopt_exec_set_input(ex, 0, &in[0], &err) == 0 && gopt_exec_set_input(ex, 1, &in[1], &err) == 0);
      CHECK_MSG(gopt_exec_run(ex, &err) == 0, "%s", err.msg);
    }
    for (int i = 0; i < 2; i++) CHECK(gopt_exec_get_output(ex, (size_t)i, &out[i], &err) == 0);
    if (mode) {
      peak = gopt_exec_peak_bytes(ex);
      plain = gopt_exec_peak_bytes_without_inplace(ex);
      nip = gopt_exec_n_inplace(ex);
    } else {
      CHECK_EQ_INT(gopt_exec_n_inplace(ex), 0);
      CHECK_EQ_INT(gopt_exec_peak_bytes(ex), gopt_exec_peak_bytes_without_inplace(ex));
      CHECK_EQ_INT(gopt_exec_peak_bytes(ex), 12000);
    }
    gopt_exec_free(ex);
    ex = NULL;
  }
  CHECK_EQ_INT(nip, 2);                    /* relu and sig; not neg (z is a graph input) */
  CHECK_EQ_INT(plain, 12000);
  CHECK_EQ_INT(peak, 8004);
  for (int i = 0; i < 2; i++) {
    CHECK(o1[i].data && o2[i].data && !memcmp(o1[i].data, o2[i].data, 4000));
  }
  double want = 1 / (1 + exp(-0.0)); /* relu(-0.75) = 0 */
  CHECK(o2[0].data && fabs(((float *)o2[0].data)[999] - want) < 1e-6);
  CHECK(o2[1].data && ((float *)o2[1].data)[3] == -zv[3]);
  for (int i = 0; i < 2; i++) gopt_host_tensor_clear(&o1[i]), gopt_host_tensor_clear(&o2[i]);
  gopt_graph_free(g);
}

/* Corpus models (random weights from the seed): bitwise equal outputs with and without in-place,
 * the peak of the run without in-place equals what the in-place run reports as its plain peak,
 * and the in-place peak is lower. */
static void test_inplace_corpus(const char *path) {
  gopt_graph *g = load_model(path);
  if (!g) return;
  gopt_host_tensor a = {0}, b = {0};
  size_t pa = 0, pb = 0, plain = 0, nip = 0;
  CHECK(run_isa(g, NULL, 0, NULL, 0, &a, 1, &pa, NULL, NULL) == 1);
  CHECK(run_isa(g, NULL, 1, NULL, 0, &b, 1, &pb, &plain, &nip) == 1);
  CHECK(a.data && b.data && a.nbytes == b.nbytes && !memcmp(a.data, b.data, a.nbytes));
  CHECK_EQ_INT(plain, pa);
  CHECK_MSG(nip > 0 && pb < pa, "%s: %zu outputs in place, peak %zu vs %zu", path, nip, pb, pa);
  fprintf(stderr, "%s: %zu outputs in place, peak %zu -> %zu bytes (%.1f %% less)\n", path, nip, pa,
          pb, 100.0 * (double)(pa - pb) / (double)(pa ? pa : 1));
  gopt_host_tensor_clear(&a);
  gopt_host_tensor_clear(&b);
  gopt_graph_free(g);
}

int main(void) {
  test_ops_per_isa();
  test_fused_chain();
  test_isa_errors();
  test_inplace_small();
  test_inplace_corpus("corpus/resnet18.onnx");
  test_inplace_corpus("corpus/mobilenet_v2.onnx");
  return check_exit("test_exec_isa");
}
