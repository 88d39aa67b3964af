/* test_nn_gradcheck.c: finite-difference gradient checks for EVERY op of the NN engine. For each op
 * the test builds loss = sum(op(inputs) * W) with fixed random W, runs gopt_nn_backward, and
 * compares every input gradient element with a central difference (L(x+e) - L(x-e)) / 2e where
 * L is accumulated in double from the fp32 forward. Inputs are kept away from kinks (relu, clamp,
 * max, minimum) by construction. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/nn.h"

#define MAXIN 5
typedef struct spec spec;
typedef gopt_nn_tensor *(*build_fn)(gopt_nn_ctx *ctx, gopt_nn_tensor **in, const spec *s);
enum { INIT_UNIFORM = 0, INIT_AWAY0, INIT_GRID, INIT_POS };
struct spec {
  const char *name;
  build_fn f;
  int n_in;
  int ndim[MAXIN];
  int64_t shape[MAXIN][4];
  int grad[MAXIN];
  int init[MAXIN];
  int64_t ip[4];
  float fp[2];
};

static gopt_nn_csr g_csr;
static const int32_t g_idx[6] = {2, 0, 2, 3, 1, 2};  /* repeats on purpose */
static const uint8_t g_kv[7] = {1, 1, 0, 1, 1, 1, 1};

static int64_t numel(const spec *s, int i) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim[i]; d++) n *= s->shape[i][d];
  return n;
}

static void init_input(float *x, int64_t n, int kind, gopt_nn_rng *r) {
  for (int64_t i = 0; i < n; i++) {
    double u = gopt_nn_rng_uniform(r);
    switch (kind) {
      case INIT_AWAY0: x[i] = (float)((0.15 + 0.85 * u) * (gopt_nn_rng_uniform(r) < 0.5 ? -1 : 1)); break;
      case INIT_POS: x[i] = (float)(0.3 + 1.5 * u); break;
      case INIT_GRID: x[i] = (float)(0.1 * (double)i - 0.05 * (double)n); break;
      default: x[i] = (float)(2.0 * u - 1.0);
    }
  }
  if (kind == INIT_GRID)  /* shuffle: distinct values at least 0.1 apart */
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = (int64_t)(gopt_nn_rng_uniform(r) * (double)(i + 1));
      float t = x[i]; x[i] = x[j]; x[j] = t;
    }
}

/* Builds the graph from host inputs; returns the scalar loss; fills *L with the double loss. */
static gopt_nn_tensor *run(gopt_nn_ctx *ctx, const spec *s, float **host, double *L, gopt_nn_tensor **in) {
  gopt_nn_ctx_reset(ctx);
  for (int i = 0; i < s->n_in; i++) {
    in[i] = gopt_nn_from(ctx, s->ndim[i], s->shape[i], host[i]);
    gopt_nn_set_requires_grad(in[i], s->grad[i]);
  }
  gopt_nn_tensor *y = s->f(ctx, in, s);
  if (!y) return NULL;
  gopt_nn_tensor *w = gopt_nn_new(ctx, y->ndim, y->shape);
  gopt_nn_rng r;
  gopt_nn_rng_seed(&r, 99);
  double acc = 0.0;
  for (int64_t i = 0; i < y->n; i++) {
    w->data[i] = (float)(2.0 * gopt_nn_rng_uniform(&r) - 1.0);
    acc += (double)w->data[i] * (double)y->data[i];
  }
  *L = acc;
  return gopt_nn_sum(ctx, gopt_nn_mul(ctx, y, w));
}

static void gradcheck(gopt_nn_ctx *ctx, const spec *s, int seed) {
  float *host[MAXIN] = {0}, *ana[MAXIN] = {0};
  gopt_nn_tensor *in[MAXIN];
  gopt_nn_rng r;
  gopt_nn_rng_seed(&r, (uint64_t)seed);
  for (int i = 0; i < s->n_in; i++) {
    host[i] = malloc((size_t)numel(s, i) * sizeof(float));
    init_input(host[i], numel(s, i), s->init[i], &r);
  }
  if (strcmp(s->name, "minimum") == 0)  /* b = a +- [0.1, 0.6]: no ties */
    for (int64_t j = 0; j < numel(s, 1); j++)
      host[1][j] = host[0][j] + (float)((0.1 + 0.5 * gopt_nn_rng_uniform(&r)) * (j % 2 ? 1 : -1));
  double L;
  gopt_error err = {0};
  gopt_nn_tensor *loss = run(ctx, s, host, &L, in);
  int rc = gopt_nn_ctx_status(ctx, &err);
  CHECK_MSG(loss && rc == 0, "%s: build failed: %s", s->name, err.msg);
  if (!loss || rc) goto out;
  rc = gopt_nn_backward(ctx, loss, &err);
  CHECK_MSG(rc == 0, "%s: backward: %s", s->name, err.msg);
  CHECK_MSG(fabs(loss->data[0] - L) <= 1e-4 * (1 + fabs(L)), "%s: loss %g vs %g", s->name, loss->data[0], L);
  for (int i = 0; i < s->n_in; i++) {
    if (!s->grad[i]) continue;
    ana[i] = malloc((size_t)numel(s, i) * sizeof(float));
    memcpy(ana[i], in[i]->grad, (size_t)numel(s, i) * sizeof(float));
  }
  const double eps = 1e-2;
  for (int i = 0; i < s->n_in; i++) {
    if (!s->grad[i]) continue;
    int bad = 0;
    double worst = 0, wa = 0, wn = 0;
    for (int64_t j = 0; j < numel(s, i); j++) {
      float keep = host[i][j];
      double lp, lm;
      host[i][j] = keep + (float)eps;
      run(ctx, s, host, &lp, in);
      host[i][j] = keep - (float)eps;
      run(ctx, s, host, &lm, in);
      host[i][j] = keep;
      double num = (lp - lm) / (2 * eps), d = fabs(num - ana[i][j]);
      if (d > 2e-3 + 1e-2 * fabs(num)) {
        bad++;
        if (d > worst) { worst = d; wa = ana[i][j]; wn = num; }
      }
    }
    CHECK_MSG(bad == 0, "%s: input %d: %d elements differ, worst analytic %.6g numeric %.6g", s->name, i, bad, wa, wn);
  }
out:
  for (int i = 0; i < s->n_in; i++) { free(host[i]); free(ana[i]); }
}

/* ---- builders ---- */
static gopt_nn_tensor *b_matmul(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { return gopt_nn_matmul(c, in[0], in[1], (int)s->ip[0], (int)s->ip[1]); }
static gopt_nn_tensor *b_linear(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { return gopt_nn_linear_op(c, in[0], in[1], s->n_in > 2 ? in[2] : NULL); }
static gopt_nn_tensor *b_add(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_add(c, in[0], in[1]); }
static gopt_nn_tensor *b_sub(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_sub(c, in[0], in[1]); }
static gopt_nn_tensor *b_mul(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_mul(c, in[0], in[1]); }
static gopt_nn_tensor *b_min(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_minimum(c, in[0], in[1]); }
static gopt_nn_tensor *b_scale(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_scale(c, in[0], -1.7f); }
static gopt_nn_tensor *b_adds(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_add_scalar(c, in[0], 0.3f); }
static gopt_nn_tensor *b_relu(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_relu(c, in[0]); }
static gopt_nn_tensor *b_gelu(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_gelu(c, in[0]); }
static gopt_nn_tensor *b_gelut(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_gelu_tanh(c, in[0]); }
static gopt_nn_tensor *b_tanh(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_tanh(c, in[0]); }
static gopt_nn_tensor *b_sigm(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_sigmoid(c, in[0]); }
static gopt_nn_tensor *b_exp(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_exp(c, in[0]); }
static gopt_nn_tensor *b_log(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_log(c, in[0]); }
static gopt_nn_tensor *b_softplus(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_softplus(c, gopt_nn_scale(c, in[0], 3.0f)); }
static gopt_nn_tensor *b_clamp(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_clamp(c, in[0], -0.45f, 0.35f); }
static gopt_nn_tensor *b_softmax(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_softmax(c, in[0]); }
static gopt_nn_tensor *b_lsm(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_log_softmax(c, in[0]); }
static gopt_nn_tensor *b_ln(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { return gopt_nn_layernorm(c, in[0], s->n_in > 1 ? in[1] : NULL, s->n_in > 2 ? in[2] : NULL, 1e-5f); }
static gopt_nn_tensor *b_l2(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_l2norm(c, in[0], 1e-12f); }
static gopt_nn_tensor *b_concat(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { return gopt_nn_concat(c, in[0], in[1], (int)s->ip[0]); }
static gopt_nn_tensor *b_slice(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { return gopt_nn_slice(c, in[0], (int)s->ip[0], s->ip[1], s->ip[2]); }
static gopt_nn_tensor *b_reshape(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { int64_t sh[3] = {2, 3, 2}; (void)s; return gopt_nn_reshape(c, in[0], 3, sh); }
static gopt_nn_tensor *b_sum(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_sum(c, in[0]); }
static gopt_nn_tensor *b_mean(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_mean(c, in[0]); }
static gopt_nn_tensor *b_suml(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_sum_last(c, in[0]); }
static gopt_nn_tensor *b_gather(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_gather_rows(c, in[0], g_idx, 6); }
static gopt_nn_tensor *b_embed(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_embedding(c, in[0], g_idx + 1, 5); }
static gopt_nn_tensor *b_scatter(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_scatter_add(c, in[0], g_idx, 5); }
static gopt_nn_tensor *b_pick(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_pick(c, in[0], g_idx); }
static gopt_nn_tensor *b_segsum(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_seg_sum(c, in[0], &g_csr); }
static gopt_nn_tensor *b_segmean(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_seg_mean(c, in[0], &g_csr); }
static gopt_nn_tensor *b_segmax(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_seg_max(c, in[0], &g_csr); }
static gopt_nn_tensor *b_dropout(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) {
  gopt_nn_rng r;
  (void)s;
  gopt_nn_rng_seed(&r, 5);  /* same mask on every pass */
  return gopt_nn_dropout(c, in[0], 0.4f, &r);
}
static gopt_nn_tensor *b_attn(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) {
  int mem = s->n_in == 5;
  return gopt_nn_attention(c, in[0], in[1], in[2], mem ? in[3] : NULL, mem ? in[4] : NULL, 2, s->ip[0],
                           (int)s->ip[1], s->ip[2] ? g_kv : NULL);
}
static gopt_nn_tensor *b_betalp(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) {
  (void)s;  /* x = sigmoid(in2) keeps it in (0,1) */
  return gopt_nn_beta_logprob(c, in[0], in[1], gopt_nn_sigmoid(c, in[2]));
}
static gopt_nn_tensor *b_betaent(gopt_nn_ctx *c, gopt_nn_tensor **in, const spec *s) { (void)s; return gopt_nn_beta_entropy(c, in[0], in[1]); }

#define S1(nm, fn, init_, nd, ...) {nm, fn, 1, {nd}, {{__VA_ARGS__}}, {1}, {init_}, {0}, {0}}

static void test_detach(gopt_nn_ctx *ctx) {
  /* y = x * detach(x): dy/dx must be detach(x) only (x), not 2x */
  gopt_nn_ctx_reset(ctx);
  float v[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  int64_t n = 4;
  gopt_nn_tensor *x = gopt_nn_from(ctx, 1, &n, v);
  gopt_nn_set_requires_grad(x, 1);
  gopt_nn_tensor *d = gopt_nn_detach(ctx, x);
  CHECK(d && !d->requires_grad);
  gopt_nn_tensor *loss = gopt_nn_sum(ctx, gopt_nn_mul(ctx, x, d));
  CHECK_EQ_INT(gopt_nn_backward(ctx, loss, NULL), 0);
  for (int i = 0; i < 4; i++) CHECK_NEAR(x->grad[i], v[i], 1e-7);
}

static void test_errors(gopt_nn_ctx *ctx) {
  gopt_nn_ctx_reset(ctx);
  gopt_nn_tensor *a = gopt_nn_new2(ctx, 2, 3), *b = gopt_nn_new2(ctx, 4, 5);
  CHECK(gopt_nn_matmul(ctx, a, b, 0, 0) == NULL);
  CHECK(gopt_nn_relu(ctx, NULL) == NULL);
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_nn_ctx_status(ctx, &err), GOPT_ESHAPE);
  CHECK(strstr(err.msg, "matmul") != NULL);
  gopt_nn_ctx_reset(ctx);
  int32_t bad[2] = {0, 7};
  CHECK(gopt_nn_gather_rows(ctx, gopt_nn_new2(ctx, 2, 3), bad, 2) == NULL);
  CHECK_EQ_INT(gopt_nn_ctx_status(ctx, &err), GOPT_ERANGE);
  gopt_nn_ctx_reset(ctx);
  CHECK_EQ_INT(gopt_nn_ctx_status(ctx, &err), 0);
}

int main(void) {
  gopt_nn_set_threads(2);
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(1 << 20);
  /* 5 nodes: row 3 empty, row 1 has a duplicate edge */
  int32_t rp[6] = {0, 2, 5, 6, 6, 9}, col[9] = {1, 4, 0, 0, 2, 3, 0, 1, 2};
  CHECK_EQ_INT(gopt_nn_csr_init(&g_csr, 5, 5, rp, col, NULL), 0);
  spec specs[] = {
    {"matmul", b_matmul, 2, {2, 2}, {{3, 4}, {4, 5}}, {1, 1}, {0, 0}, {0, 0}, {0}},
    {"matmul_ta", b_matmul, 2, {2, 2}, {{4, 3}, {4, 5}}, {1, 1}, {0, 0}, {1, 0}, {0}},
    {"matmul_tb", b_matmul, 2, {2, 2}, {{3, 4}, {5, 4}}, {1, 1}, {0, 0}, {0, 1}, {0}},
    {"matmul_tatb", b_matmul, 2, {2, 2}, {{4, 3}, {5, 4}}, {1, 1}, {0, 0}, {1, 1}, {0}},
    {"linear", b_linear, 3, {2, 2, 1}, {{5, 4}, {3, 4}, {3}}, {1, 1, 1}, {0}, {0}, {0}},
    {"linear_nobias", b_linear, 2, {2, 2}, {{5, 4}, {3, 4}}, {1, 1}, {0}, {0}, {0}},
    {"add", b_add, 2, {2, 2}, {{3, 4}, {3, 4}}, {1, 1}, {0}, {0}, {0}},
    {"add_bias", b_add, 2, {2, 1}, {{3, 4}, {4}}, {1, 1}, {0}, {0}, {0}},
    {"add_outer", b_add, 2, {2, 2}, {{3, 1}, {1, 4}}, {1, 1}, {0}, {0}, {0}},
    {"sub_bcast", b_sub, 2, {3, 2}, {{2, 3, 4}, {3, 1}}, {1, 1}, {0}, {0}, {0}},
    {"mul", b_mul, 2, {2, 2}, {{3, 4}, {3, 4}}, {1, 1}, {0}, {0}, {0}},
    {"mul_bias", b_mul, 2, {2, 1}, {{3, 4}, {4}}, {1, 1}, {0}, {0}, {0}},
    {"mul_scalar_bcast", b_mul, 2, {1, 2}, {{1}, {3, 4}}, {1, 1}, {0}, {0}, {0}},
    {"minimum", b_min, 2, {2, 2}, {{3, 4}, {3, 4}}, {1, 1}, {0}, {0}, {0}},
    S1("scale", b_scale, INIT_UNIFORM, 2, 3, 4),
    S1("add_scalar", b_adds, INIT_UNIFORM, 2, 3, 4),
    S1("relu", b_relu, INIT_AWAY0, 2, 3, 4),
    S1("gelu", b_gelu, INIT_UNIFORM, 2, 3, 4),
    S1("gelu_tanh", b_gelut, INIT_UNIFORM, 2, 3, 4),
    S1("tanh", b_tanh, INIT_UNIFORM, 2, 3, 4),
    S1("sigmoid", b_sigm, INIT_UNIFORM, 2, 3, 4),
    S1("exp", b_exp, INIT_UNIFORM, 2, 3, 4),
    S1("log", b_log, INIT_POS, 2, 3, 4),
    S1("softplus", b_softplus, INIT_UNIFORM, 2, 3, 4),
    S1("clamp", b_clamp, INIT_GRID, 2, 3, 4),
    S1("softmax", b_softmax, INIT_UNIFORM, 2, 3, 5),
    S1("log_softmax", b_lsm, INIT_UNIFORM, 2, 3, 5),
    S1("layernorm_plain", b_ln, INIT_UNIFORM, 2, 3, 5),
    {"layernorm_affine", b_ln, 3, {2, 1, 1}, {{3, 5}, {5}, {5}}, {1, 1, 1}, {0}, {0}, {0}},
    S1("l2norm", b_l2, INIT_UNIFORM, 2, 3, 5),
    {"concat0", b_concat, 2, {2, 2}, {{2, 3}, {3, 3}}, {1, 1}, {0}, {0}, {0}},
    {"concat1", b_concat, 2, {2, 2}, {{3, 2}, {3, 4}}, {1, 1}, {0}, {1}, {0}},
    {"slice1", b_slice, 1, {2}, {{3, 5}}, {1}, {0}, {1, 1, 3}, {0}},
    {"slice0", b_slice, 1, {2}, {{4, 3}}, {1}, {0}, {0, 2, 2}, {0}},
    S1("reshape", b_reshape, INIT_UNIFORM, 2, 3, 4),
    S1("sum", b_sum, INIT_UNIFORM, 2, 3, 4),
    S1("mean", b_mean, INIT_UNIFORM, 2, 3, 4),
    S1("sum_last", b_suml, INIT_UNIFORM, 3, 2, 3, 4),
    S1("gather_rows", b_gather, INIT_UNIFORM, 2, 4, 3),
    S1("embedding", b_embed, INIT_UNIFORM, 2, 4, 3),
    S1("scatter_add", b_scatter, INIT_UNIFORM, 2, 6, 3),
    S1("pick", b_pick, INIT_UNIFORM, 2, 6, 4),
    S1("seg_sum", b_segsum, INIT_UNIFORM, 2, 5, 3),
    S1("seg_mean", b_segmean, INIT_UNIFORM, 2, 5, 3),
    S1("seg_max", b_segmax, INIT_GRID, 2, 5, 3),
    S1("dropout", b_dropout, INIT_UNIFORM, 2, 4, 5),
    {"attention_full", b_attn, 3, {2, 2, 2}, {{5, 4}, {5, 4}, {5, 4}}, {1, 1, 1}, {0}, {0, 0, 0}, {0}},
    {"attention_causal_mask", b_attn, 3, {2, 2, 2}, {{7, 4}, {7, 4}, {7, 4}}, {1, 1, 1}, {0}, {0, 1, 1}, {0}},
    {"attention_segments", b_attn, 3, {2, 2, 2}, {{7, 4}, {7, 4}, {7, 4}}, {1, 1, 1}, {0}, {3, 0, 0}, {0}},
    {"attention_memory", b_attn, 5, {2, 2, 2, 2, 2}, {{7, 4}, {7, 4}, {7, 4}, {7, 4}, {7, 4}}, {1, 1, 1, 1, 1}, {0}, {3, 0, 1}, {0}},
    {"attention_memory_causal", b_attn, 5, {2, 2, 2, 2, 2}, {{8, 4}, {8, 4}, {8, 4}, {8, 4}, {8, 4}}, {1, 1, 1, 1, 1}, {0}, {3, 1, 0}, {0}},
    {"beta_logprob", b_betalp, 3, {1, 1, 1}, {{6}, {6}, {6}}, {1, 1, 1}, {INIT_POS, INIT_POS, INIT_UNIFORM}, {0}, {0}},
    {"beta_entropy", b_betaent, 2, {1, 1}, {{6}, {6}}, {1, 1}, {INIT_POS, INIT_POS}, {0}, {0}},
  };
  int n = (int)(sizeof specs / sizeof specs[0]);
  for (int i = 0; i < n; i++) gradcheck(ctx, &specs[i], 1000 + i);
  test_detach(ctx);
  test_errors(ctx);
  gopt_nn_csr_free(&g_csr);
  gopt_nn_ctx_free(ctx);
  return check_exit("test_nn_gradcheck");
}
