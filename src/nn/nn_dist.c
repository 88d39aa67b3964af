/* nn_dist.c: policy heads: categorical (log-prob, entropy, sampling), Beta (parameter head,
 * sampling via Gamma draws) and the PPO clipped surrogate loss. */
#include <math.h>
#include <stdio.h>

#include "nn/nn_internal.h"

gopt_nn_tensor *gopt_nn_categorical_logprob(gopt_nn_ctx *ctx, gopt_nn_tensor *logits,
                                            const int32_t *actions) {
  return gopt_nn_pick(ctx, gopt_nn_log_softmax(ctx, logits), actions);
}

gopt_nn_tensor *gopt_nn_categorical_entropy(gopt_nn_ctx *ctx, gopt_nn_tensor *logits) {
  gopt_nn_tensor *lp = gopt_nn_log_softmax(ctx, logits);
  gopt_nn_tensor *p = gopt_nn_exp(ctx, lp);
  return gopt_nn_scale(ctx, gopt_nn_sum_last(ctx, gopt_nn_mul(ctx, p, lp)), -1.0f);
}

void gopt_nn_categorical_sample(const gopt_nn_tensor *logits, gopt_nn_rng *rng, int greedy,
                                int32_t *actions) {
  if (!logits || !actions) return;
  int64_t C = logits->shape[logits->ndim - 1], N = C ? logits->n / C : 0;
  for (int64_t i = 0; i < N; i++) {
    const float *x = logits->data + i * C;
    int64_t best = 0;
    for (int64_t j = 1; j < C; j++) if (x[j] > x[best]) best = j;
    if (greedy || !rng) { actions[i] = (int32_t)best; continue; }
    double s = 0.0;
    for (int64_t j = 0; j < C; j++) s += exp((double)x[j] - x[best]);
    double u = gopt_nn_rng_uniform(rng) * s, c = 0.0;
    int64_t a = C - 1;
    for (int64_t j = 0; j < C; j++) {
      c += exp((double)x[j] - x[best]);
      if (u < c) { a = j; break; }
    }
    actions[i] = (int32_t)a;
  }
}

int gopt_nn_beta_head_init(gopt_nn_beta_head *h, gopt_nn_params *p, const char *prefix, int64_t in,
                           int64_t out) {
  char nm[256];
  if (!h || !prefix) return GOPT_EINVAL;
  snprintf(nm, sizeof nm, "%s.alpha", prefix);
  int rc = gopt_nn_linear_init(&h->a, p, nm, in, out, 1);
  if (rc) return rc;
  snprintf(nm, sizeof nm, "%s.beta", prefix);
  return gopt_nn_linear_init(&h->b, p, nm, in, out, 1);
}

void gopt_nn_beta_head_forward(gopt_nn_ctx *ctx, const gopt_nn_beta_head *h, gopt_nn_tensor *x,
                               gopt_nn_tensor **alpha, gopt_nn_tensor **beta) {
  *alpha = gopt_nn_add_scalar(ctx, gopt_nn_softplus(ctx, gopt_nn_linear_forward(ctx, &h->a, x)), 1.0f);
  *beta = gopt_nn_add_scalar(ctx, gopt_nn_softplus(ctx, gopt_nn_linear_forward(ctx, &h->b, x)), 1.0f);
}

void gopt_nn_beta_sample(const gopt_nn_tensor *alpha, const gopt_nn_tensor *beta, gopt_nn_rng *rng,
                         float *out) {
  if (!alpha || !beta || !rng || !out) return;
  for (int64_t i = 0; i < alpha->n; i++) {
    double v = gopt_nn_rng_beta(rng, alpha->data[i], beta->data[i]);
    if (v < 1e-6) v = 1e-6;
    if (v > 1.0 - 1e-6) v = 1.0 - 1e-6;
    out[i] = (float)v;
  }
}

gopt_nn_tensor *gopt_nn_ppo_loss(gopt_nn_ctx *ctx, gopt_nn_tensor *logp, gopt_nn_tensor *logp_old,
                                 gopt_nn_tensor *adv, float clip_eps) {
  gopt_nn_tensor *r = gopt_nn_exp(ctx, gopt_nn_sub(ctx, logp, logp_old));
  gopt_nn_tensor *s1 = gopt_nn_mul(ctx, r, adv);
  gopt_nn_tensor *s2 = gopt_nn_mul(ctx, gopt_nn_clamp(ctx, r, 1.0f - clip_eps, 1.0f + clip_eps), adv);
  return gopt_nn_scale(ctx, gopt_nn_mean(ctx, gopt_nn_minimum(ctx, s1, s2)), -1.0f);
}
