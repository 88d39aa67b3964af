/* test_nn_misc.c: the NN engine's numerical helpers and samplers against independent references:
 * lgamma vs libm, digamma/trigamma vs central differences of lgamma and known values, Gamma/Beta
 * sampling moments, categorical sampling frequencies vs softmax, dropout keep rate and scaling,
 * LR schedules, parameter declaration errors, CSR validation, and arena growth across resets. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "gopt/nn.h"

static void test_special(void) {
  const double xs[] = {0.05, 0.5, 1.0, 1.5, 2.7, 7.9, 8.0, 30.0, 250.0};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    double x = xs[i], h = 1e-4 * (x < 1 ? x : 1);
    CHECK_NEAR(gopt_nn_lgamma(x), lgamma(x), 1e-10 * (1 + fabs(lgamma(x))));
    double dg = (lgamma(x + h) - lgamma(x - h)) / (2 * h);
    CHECK_NEAR(gopt_nn_digamma(x), dg, 1e-6 * (1 + fabs(dg)));
    double tg = (gopt_nn_digamma(x + h) - gopt_nn_digamma(x - h)) / (2 * h);
    CHECK_NEAR(gopt_nn_trigamma(x), tg, 1e-5 * (1 + fabs(tg)));
  }
  CHECK_NEAR(gopt_nn_digamma(1.0), -0.57721566490153286, 1e-12);
  CHECK_NEAR(gopt_nn_trigamma(1.0), 1.6449340668482264, 1e-12);
}

static void test_samplers(void) {
  gopt_nn_rng r;
  gopt_nn_rng_seed(&r, 123);
  const double shapes[] = {0.4, 1.0, 3.5};
  for (int s = 0; s < 3; s++) {
    double m = 0, v = 0, a = shapes[s];
    int n = 40000;
    for (int i = 0; i < n; i++) { double g = gopt_nn_rng_gamma(&r, a); m += g; v += g * g; }
    m /= n;
    v = v / n - m * m;
    CHECK_NEAR(m, a, 0.03 * a + 0.01);   /* Gamma(a,1): mean a, variance a */
    CHECK_NEAR(v, a, 0.06 * a + 0.02);
  }
  double a = 2.0, b = 5.0, m = 0;
  int n = 40000;
  for (int i = 0; i < n; i++) m += gopt_nn_rng_beta(&r, a, b);
  CHECK_NEAR(m / n, a / (a + b), 0.005);
  /* determinism of the stream */
  gopt_nn_rng r1, r2;
  gopt_nn_rng_seed(&r1, 9);
  gopt_nn_rng_seed(&r2, 9);
  for (int i = 0; i < 100; i++) CHECK(gopt_nn_rng_u64(&r1) == gopt_nn_rng_u64(&r2));
}

static void test_categorical_and_dropout(void) {
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  float lg[3] = {0.0f, 1.0f, -1.0f};
  int64_t sh[2] = {1, 3};
  gopt_nn_tensor *t = gopt_nn_from(ctx, 2, sh, lg);
  gopt_nn_rng r;
  gopt_nn_rng_seed(&r, 4);
  int cnt[3] = {0, 0, 0};
  for (int i = 0; i < 30000; i++) { int32_t act; gopt_nn_categorical_sample(t, &r, 0, &act); cnt[act]++; }
  double z = exp(0.0) + exp(1.0) + exp(-1.0);
  CHECK_NEAR(cnt[0] / 30000.0, 1.0 / z, 0.01);
  CHECK_NEAR(cnt[1] / 30000.0, exp(1.0) / z, 0.01);
  int32_t g;
  gopt_nn_categorical_sample(t, &r, 1, &g);
  CHECK_EQ_INT(g, 1);
  /* dropout: keep rate 1-p, kept values scaled by 1/(1-p) */
  gopt_nn_tensor *x = gopt_nn_new1(ctx, 100000);
  for (int64_t i = 0; i < x->n; i++) x->data[i] = 1.0f;
  gopt_nn_tensor *y = gopt_nn_dropout(ctx, x, 0.25f, &r);
  int64_t kept = 0;
  for (int64_t i = 0; i < y->n; i++) {
    if (y->data[i] != 0.0f) { kept++; CHECK_NEAR(y->data[i], 1.0 / 0.75, 1e-6); if (kept > 3) break; }
  }
  kept = 0;
  for (int64_t i = 0; i < y->n; i++) kept += y->data[i] != 0.0f;
  CHECK_NEAR(kept / 100000.0, 0.75, 0.01);
  gopt_nn_ctx_set_training(ctx, 0);
  CHECK(gopt_nn_dropout(ctx, x, 0.25f, &r) == x);
  gopt_nn_ctx_free(ctx);
}

static void test_sched_params_csr(void) {
  gopt_nn_optim_cfg c = gopt_nn_optim_defaults(GOPT_NN_ADAM, 1.0f);
  c.sched = GOPT_NN_LR_WARMUP_COSINE;
  c.warmup_steps = 4;
  c.total_steps = 14;
  c.min_lr_ratio = 0.0f;
  CHECK_NEAR(gopt_nn_lr_at(&c, 0), 0.25, 1e-7);
  CHECK_NEAR(gopt_nn_lr_at(&c, 3), 1.0, 1e-7);
  CHECK_NEAR(gopt_nn_lr_at(&c, 9), 0.5, 1e-6);
  CHECK_NEAR(gopt_nn_lr_at(&c, 14), 0.0, 1e-7);
  c.sched = GOPT_NN_LR_WARMUP_LINEAR;
  CHECK_NEAR(gopt_nn_lr_at(&c, 1), 0.5, 1e-7);
  CHECK_NEAR(gopt_nn_lr_at(&c, 100), 1.0, 1e-7);

  gopt_nn_params *p = gopt_nn_params_new();
  int64_t s2[2] = {2, 3};
  CHECK(gopt_nn_param(p, "w", 2, s2, GOPT_NN_INIT_NORMAL, 1.0f) != NULL);
  CHECK(gopt_nn_param(p, "w", 2, s2, GOPT_NN_INIT_ZEROS, 0) == NULL);  /* duplicate */
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_nn_params_finalize(p, 1, &err), GOPT_EINVAL);
  CHECK(strstr(err.msg, "duplicate") != NULL);
  gopt_nn_params_free(p);
  gopt_nn_params_free(NULL);

  gopt_nn_csr g;
  int32_t rp[3] = {0, 1, 2}, col[2] = {0, 5};
  CHECK_EQ_INT(gopt_nn_csr_init(&g, 2, 2, rp, col, &err), GOPT_ERANGE);
  CHECK(strstr(err.msg, "col[1]") != NULL);
  gopt_nn_csr_free(NULL);
}

static void test_arena(void) {
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  for (int pass = 0; pass < 3; pass++) {
    gopt_nn_ctx_reset(ctx);
    gopt_nn_tensor *a = gopt_nn_new2(ctx, 1000, 700);  /* forces growth beyond the first block */
    gopt_nn_tensor *b = gopt_nn_new2(ctx, 1000, 700);
    CHECK(a && b && a->data != b->data);
    a->data[a->n - 1] = 1.0f;
    b->data[0] = 2.0f;
    CHECK(a->data[a->n - 1] == 1.0f);
    CHECK(gopt_nn_ctx_bytes_used(ctx) >= 2 * 700000 * sizeof(float));
  }
  gopt_nn_ctx_free(ctx);
  gopt_nn_ctx_free(NULL);
}

int main(void) {
  test_special();
  test_samplers();
  test_categorical_and_dropout();
  test_sched_params_csr();
  test_arena();
  return check_exit("test_nn_misc");
}
