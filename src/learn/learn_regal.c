/* learn_regal.c: REGAL (learn.h): the policy's affinity Beta heads on the shared encoder, the
 * sampler that feeds brkga-regal's fresh chromosomes from one forward pass, `--method regal`'s
 * guided search, and REINFORCE training against uniform brkga-regal at the same budget and seed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/util.h"
#include "learn/learn_internal.h"
#include "util/util_internal.h"

#define REGAL_EVALS 1000
#define REGAL_LN_HALF (-0.69314718055994530942)

int gopt_policy_new_regal(int task, const gopt_learn_arch *arch, uint64_t seed, gopt_policy **out,
                          gopt_error *err) {
  return learn_policy_build(task, arch, seed, LEARN_HEAD_REGAL, out, err);
}

int learn_regal_params(gopt_policy *p) {
  if (!p->kinds[GOPT_VAR_DEVICE]) return 0;
  int rc = gopt_nn_linear_init(&p->aff_a, p->params, "regal_aff_a", p->arch.hidden, p->arch.dev_hidden, 1);
  return rc ? rc : gopt_nn_linear_init(&p->aff_b, p->params, "regal_aff_b", p->arch.hidden, p->arch.dev_hidden, 1);
}

/* The affinity heads from the pass's DEVICE rows: alpha, beta [Vd, D] (NULL when none). */
static void regal_heads(gopt_nn_ctx *ctx, const gopt_policy *p, const learn_graph *g, const learn_fwd *f,
                        gopt_nn_tensor **a, gopt_nn_tensor **b) {
  *a = *b = NULL;
  gopt_nn_tensor *r = f->rows[GOPT_VAR_DEVICE];
  if (!r) return;
  int64_t dsh[2] = {g->n_dev, LEARN_NDEV};
  gopt_nn_tensor *de = gopt_nn_mlp_forward(ctx, &p->dev_mlp, gopt_nn_from(ctx, 2, dsh, g->dev_feat));
  gopt_nn_tensor *la = gopt_nn_matmul(ctx, gopt_nn_linear_forward(ctx, &p->aff_a, r), de, 0, 1);
  gopt_nn_tensor *lb = gopt_nn_matmul(ctx, gopt_nn_linear_forward(ctx, &p->aff_b, r), de, 0, 1);
  *a = gopt_nn_add_scalar(ctx, gopt_nn_softplus(ctx, la), 1.0f);
  *b = gopt_nn_add_scalar(ctx, gopt_nn_softplus(ctx, lb), 1.0f);
}

/* ---- the sampler ------------------------------------------------------------------------------ */

/* Policy genes: the affinities (Vd x D, kind order) then the priorities (Vp). */
struct gopt_regal_sampler {
  size_t genes, npol, ndev;  /* chromosome genes; policy genes; affinity genes (Vd x D) */
  int32_t *src;              /* [genes]: the policy gene of each chromosome gene (-1: uniform) */
  double *ga, *gb;           /* [npol] Beta parameters */
  /* training: every sampled chromosome is recorded (its policy genes and the hash of its decoded
   * vector) and matched, in sampling order, with its evaluation through on_sample */
  int record;
  const gopt_env *e;
  size_t nrows, cap, cursor;
  float *rows;               /* [cap x npol] policy genes of each recorded chromosome */
  uint64_t *hash;            /* [cap] hash of its decoded x */
  gopt_env_result *res;      /* [cap] its evaluation */
  uint8_t *seen;             /* [cap] evaluated (the budget may end first) */
  double *xbuf;              /* [nvars] */
};

void gopt_regal_sampler_free(gopt_regal_sampler *s) {
  if (!s) return;
  free(s->src);
  free(s->ga);
  free(s->gb);
  free(s->rows);
  free(s->hash);
  free(s->res);
  free(s->seen);
  free(s->xbuf);
  free(s);
}

/* The sampler's gene map for e (values not set). */
static int regal_sampler_build(const gopt_env *e, const learn_graph *g, gopt_regal_sampler **out, gopt_error *err) {
  size_t nv = gopt_env_nvars(e);
  const gopt_env_var *vars = gopt_env_vars(e);
  gopt_regal_sampler *s = calloc(1, sizeof *s);
  int32_t *kidx = malloc((nv + 1) * sizeof *kidx);
  *out = NULL;
  if (!s || !kidx) goto oom;
  for (int k = 0; k < 3; k++)
    for (int64_t i = 0; i < g->nk[k]; i++) kidx[g->var[k][i]] = (int32_t)i;
  s->genes = gopt_search_regal_genes(e);
  s->ndev = (size_t)(g->nk[GOPT_VAR_DEVICE] * g->n_dev);
  s->npol = s->ndev + (size_t)g->nk[GOPT_VAR_PRIORITY];
  s->src = malloc((s->genes + 1) * sizeof *s->src);
  s->ga = malloc((s->npol + 1) * sizeof *s->ga);
  s->gb = malloc((s->npol + 1) * sizeof *s->gb);
  s->e = e;
  s->xbuf = malloc((nv + 1) * sizeof *s->xbuf);
  if (!s->src || !s->ga || !s->gb || !s->xbuf) goto oom;
  size_t j = 0;
  for (size_t i = 0; i < nv; i++) {
    if (vars[i].kind == GOPT_VAR_DEVICE) {
      int32_t card = vars[i].card > 1 ? vars[i].card : 1;
      for (int32_t d = 0; d < card; d++)
        s->src[j++] = d < g->n_dev ? (int32_t)(kidx[i] * g->n_dev + d) : -1;
    } else {
      s->src[j++] = vars[i].kind == GOPT_VAR_PRIORITY ? (int32_t)(s->ndev + (size_t)kidx[i]) : -1;
    }
  }
  free(kidx);
  *out = s;
  return 0;
oom:
  free(kidx);
  gopt_regal_sampler_free(s);
  return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (REGAL sampler)");
}

/* Copies the pass's Beta parameters into s. */
static void regal_sampler_fill(gopt_regal_sampler *s, const gopt_nn_tensor *aa, const gopt_nn_tensor *ab,
                               const learn_fwd *f) {
  for (size_t i = 0; i < s->ndev; i++) {
    s->ga[i] = aa->data[i];
    s->gb[i] = ab->data[i];
  }
  for (size_t i = s->ndev; i < s->npol; i++) {
    s->ga[i] = f->alpha->data[i - s->ndev];
    s->gb[i] = f->beta->data[i - s->ndev];
  }
}

/* Records row (genes) of a training run; returns GOPT_ENOMEM when it cannot. */
static int regal_record(gopt_regal_sampler *s, const double *row) {
  if (s->nrows == s->cap) {
    size_t c = s->cap ? 2 * s->cap : 64;
    float *r = realloc(s->rows, c * (s->npol + 1) * sizeof *r);
    if (r) s->rows = r;
    uint64_t *h = realloc(s->hash, c * sizeof *h);
    if (h) s->hash = h;
    gopt_env_result *v = realloc(s->res, c * sizeof *v);
    if (v) s->res = v;
    uint8_t *sn = realloc(s->seen, c);
    if (sn) s->seen = sn;
    if (!r || !h || !v || !sn) return GOPT_ENOMEM;
    s->cap = c;
  }
  float *dst = s->rows + s->nrows * s->npol;
  for (size_t j = 0; j < s->genes; j++)
    if (s->src[j] >= 0) dst[s->src[j]] = (float)row[j];
  gopt_search_regal_decode(s->e, row, s->xbuf);
  s->hash[s->nrows] = gopt_hash_bytes(s->xbuf, gopt_env_nvars(s->e) * sizeof *s->xbuf, 0);
  s->seen[s->nrows++] = 0;
  return 0;
}

/* gopt_search_keys_fn: n chromosomes from the policy's Beta distributions (uniform genes where the
 * policy has none), recorded when training. */
static int regal_keys(double *keys, size_t n, size_t genes, uint64_t seed, void *user) {
  gopt_regal_sampler *s = user;
  if (genes != s->genes) return GOPT_EINVAL;
  gopt_nn_rng rng;
  gopt_nn_rng_seed(&rng, seed);
  for (size_t r = 0; r < n; r++) {
    for (size_t j = 0; j < genes; j++) {
      int32_t k = s->src[j];
      double x = k < 0 ? gopt_nn_rng_uniform(&rng) : gopt_nn_rng_beta(&rng, s->ga[k], s->gb[k]);
      keys[r * genes + j] = k < 0 ? x : (x < 1e-6 ? 1e-6 : (x > 1 - 1e-6 ? 1 - 1e-6 : x));
    }
    if (s->record && regal_record(s, keys + r * genes)) return GOPT_ENOMEM;
  }
  return 0;
}

/* on_sample of a training run: the recorded chromosomes are evaluated in sampling order (between
 * crossovers), so the next unmatched one is the only candidate. */
static void regal_on_sample(const double *x, const gopt_env_result *r, void *user) {
  gopt_regal_sampler *s = user;
  if (s->cursor >= s->nrows) return;
  if (gopt_hash_bytes(x, gopt_env_nvars(s->e) * sizeof *x, 0) != s->hash[s->cursor]) return;
  s->res[s->cursor] = *r;
  s->seen[s->cursor++] = 1;
}

void gopt_regal_sampler_attach(gopt_regal_sampler *s, gopt_search_opts *o) {
  o->sample_keys = regal_keys;
  o->keys_user = s;
}

/* The policy must be a REGAL policy for e's task. */
static int regal_check(const gopt_policy *p, const gopt_env *e, gopt_error *err) {
  if (p->head != LEARN_HEAD_REGAL)
    return gopt_error_set(err, GOPT_EINVAL, "learn: policy is a '%s' policy, not a REGAL one (gopt train --method regal)",
                          gopt_policy_kind(p));
  if (gopt_env_task(e) != p->task)
    return gopt_error_set(err, GOPT_EINVAL, "learn: policy is for task '%s', environment is '%s'",
                          gopt_task_name(p->task), gopt_task_name(gopt_env_task(e)));
  return 0;
}

/* Forward pass (ctx reset first) and the sampler's values; the pass's outputs stay in ctx. */
static int regal_pass(gopt_nn_ctx *ctx, const gopt_policy *p, const learn_graph *g, int training,
                      gopt_regal_sampler *s, learn_fwd *f, gopt_nn_tensor **aa, gopt_nn_tensor **ab,
                      gopt_error *err) {
  gopt_nn_ctx_reset(ctx);
  gopt_nn_ctx_set_training(ctx, training);
  int rc = learn_forward(ctx, p, g, NULL, f, err);
  if (rc) return rc;
  regal_heads(ctx, p, g, f, aa, ab);
  if ((rc = gopt_nn_ctx_status(ctx, err))) return rc;
  regal_sampler_fill(s, *aa, *ab, f);
  return 0;
}

int gopt_regal_sampler_new(gopt_policy *p, const gopt_env *e, gopt_regal_sampler **out, gopt_error *err) {
  *out = NULL;
  int rc = regal_check(p, e, err);
  if (rc) return rc;
  learn_graph *g = NULL;
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  learn_fwd f;
  gopt_nn_tensor *aa, *ab;
  if (!ctx) return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (nn context)");
  rc = learn_graph_new(e, &g, err);
  rc = rc ? rc : regal_sampler_build(e, g, out, err);
  rc = rc ? rc : regal_pass(ctx, p, g, 0, *out, &f, &aa, &ab, err);
  if (rc) {
    gopt_regal_sampler_free(*out);
    *out = NULL;
  }
  learn_graph_free(g);
  gopt_nn_ctx_free(ctx);
  return rc;
}

int gopt_learn_regal_search(gopt_policy *p, gopt_env *e, const gopt_search_opts *o, double *x_best,
                            gopt_search_result *res, gopt_error *err) {
  gopt_regal_sampler *s = NULL;
  int rc = gopt_regal_sampler_new(p, e, &s, err);
  if (rc) return rc;
  gopt_search_opts so = *o;
  gopt_regal_sampler_attach(s, &so);
  rc = gopt_search_run("brkga-regal", e, &so, x_best, res, err);
  gopt_regal_sampler_free(s);
  return rc;
}

/* ---- REINFORCE ---------------------------------------------------------------------------------- */

/* One iteration's work on one graph: K run pairs, their rewards, the advantage-weighted sampling
 * statistics of the guided runs' policy chromosomes, and the group gradients. */
typedef struct regal_batch {
  int K, G;
  double *stat;    /* K x (2 npol + 2): sum adv log x, sum adv log(1 - x), sum adv, chromosomes */
  double *out;     /* K x 3: reward, guided objective, uniform objective */
  double *adv;     /* K: the runs' rewards, then their advantages (the reward baseline's update) */
  double *x;       /* nvars */
} regal_batch;

/* Run k's statistics from the sampler's recorded chromosomes: each one's reward is
 * gopt_learn_reward of its evaluation against the uniform run's best; advantages are the rewards
 * normalised within the run (learn_advantages); unevaluated ones (budget ended) are left out. */
static int regal_run_stats(const gopt_regal_sampler *s, const gopt_env *e, const gopt_env_result *ub, double *st) {
  size_t np = s->npol, c = 0;
  double *rw = malloc((s->nrows + 1) * sizeof *rw), *adv = malloc((s->nrows + 1) * sizeof *adv), ema = NAN;
  if (!rw || !adv) {
    free(rw);
    free(adv);
    return GOPT_ENOMEM;
  }
  for (size_t i = 0; i < s->nrows; i++)
    if (s->seen[i]) rw[c++] = gopt_learn_reward(e, &s->res[i], ub);
  memset(st, 0, (2 * np + 2) * sizeof *st);
  if (c > 1) learn_advantages(rw, (int)c, adv, &ema, 0.5, 0);
  for (size_t i = 0, j = 0; c > 1 && i < s->nrows; i++) {
    if (!s->seen[i]) continue;
    const float *g = s->rows + i * np;
    double a = adv[j++];
    for (size_t q = 0; q < np; q++) {
      st[q] += a * log(g[q]);
      st[np + q] += a * log1p(-(double)g[q]);
    }
    st[2 * np] += a;
  }
  st[2 * np + 1] = c > 1 ? (double)c : 0;
  free(rw);
  free(adv);
  return 0;
}

/* Runs pair k (uniform then guided brkga-regal with the same seed, both from the environment's
 * default decisions, as REGAL's BRKGA starts from its samples alone) into b. */
static int regal_pair(gopt_env *e, gopt_regal_sampler *s, const gopt_learn_train_opts *o, uint64_t seed, int k,
                      regal_batch *b, gopt_error *err) {
  gopt_search_opts so;
  memset(&so, 0, sizeof so);
  so.budget_evals = o->regal_evals;
  so.population = o->regal_population;
  so.threads = 1; /* small generations: a thread team costs more than it saves */
  uint64_t z = seed + (uint64_t)k * 0x9e3779b97f4a7c15ULL;
  so.seed = gopt_splitmix64(&z);
  gopt_search_result ur, gr;
  int rc = gopt_search_run("brkga-regal", e, &so, b->x, &ur, err);
  if (rc) return rc;
  s->nrows = s->cursor = 0;
  s->record = 1;
  gopt_regal_sampler_attach(s, &so);
  so.on_sample = regal_on_sample;
  so.user = s;
  rc = gopt_search_run("brkga-regal", e, &so, b->x, &gr, err);
  s->record = 0;
  if (rc) return rc;
  if (regal_run_stats(s, e, &ur.best, b->stat + (size_t)k * (2 * s->npol + 2)))
    return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (REGAL statistics)");
  double *ou = b->out + (size_t)k * 3;
  ou[0] = gopt_learn_reward(e, &gr.best, &ur.best);
  ou[1] = gr.best.objective;
  ou[2] = ur.best.objective;
  return 0;
}

/* sum over one head of S * logp(1/2) + (alpha - 1) * cA + (beta - 1) * cB (the summed
 * log-density of the recorded samples, weighted; see regal_group_loss). */
static gopt_nn_tensor *regal_head_term(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b, const double *cA,
                                       const double *cB, double cS) {
  gopt_nn_tensor *half = gopt_nn_new(ctx, a->ndim, a->shape), *fa = gopt_nn_new(ctx, a->ndim, a->shape);
  gopt_nn_tensor *fb = gopt_nn_new(ctx, a->ndim, a->shape);
  if (!half || !fa || !fb) return NULL;
  for (int64_t i = 0; i < a->n; i++) {
    half->data[i] = 0.5f;
    fa->data[i] = (float)cA[i];
    fb->data[i] = (float)cB[i];
  }
  gopt_nn_tensor *t = gopt_nn_scale(ctx, gopt_nn_sum(ctx, gopt_nn_beta_logprob(ctx, a, b, half)), (float)cS);
  t = gopt_nn_add(ctx, t, gopt_nn_sum(ctx, gopt_nn_mul(ctx, gopt_nn_add_scalar(ctx, a, -1.0f), fa)));
  return gopt_nn_add(ctx, t, gopt_nn_sum(ctx, gopt_nn_mul(ctx, gopt_nn_add_scalar(ctx, b, -1.0f), fb)));
}

/* REINFORCE loss of group grp: -(1/K) sum_k (1/C_k) sum_c adv_c (per-gene mean log-density of
 * chromosome c), c over run k's C_k evaluated policy chromosomes. With A = sum_c adv_c,
 * sum_c adv_c log Beta(x_c; a, b) = A logp(1/2; a, b) + (a - 1)(sum_c adv_c log x_c - A ln 1/2)
 * + (b - 1)(sum_c adv_c log(1 - x_c) - A ln 1/2), so the run statistics suffice. c: 2 npol
 * scratch doubles. */
static gopt_nn_tensor *regal_group_loss(gopt_nn_ctx *ctx, const gopt_regal_sampler *s, const learn_fwd *f,
                                        gopt_nn_tensor *aa, gopt_nn_tensor *ab, const regal_batch *b, int grp,
                                        double *c) {
  size_t np = s->npol;
  int per = b->K / b->G;
  double cS = 0, *cA = c, *cB = c + np;
  memset(c, 0, 2 * np * sizeof *c);
  for (int k = grp * per; k < (grp + 1) * per; k++) {
    const double *st = b->stat + (size_t)k * (2 * np + 2);
    double A = st[2 * np], C = st[2 * np + 1];
    if (!(C > 0)) continue;
    double w = -1.0 / ((double)b->K * C * (double)np);
    cS += w * A;
    for (size_t i = 0; i < np; i++) {
      cA[i] += w * (st[i] - A * REGAL_LN_HALF);
      cB[i] += w * (st[np + i] - A * REGAL_LN_HALF);
    }
  }
  gopt_nn_tensor *loss = aa ? regal_head_term(ctx, aa, ab, cA, cB, cS) : NULL;
  if (f->alpha) {
    gopt_nn_tensor *t = regal_head_term(ctx, f->alpha, f->beta, cA + s->ndev, cB + s->ndev, cS);
    loss = loss ? gopt_nn_add(ctx, loss, t) : t;
  }
  return loss;
}

/* The batch's gradient as the sum, in group order, of the groups' gradients (each computed by its
 * rank under dist, or all of them here) into p's gradients; the summed loss into *loss. */
static int regal_grads(gopt_nn_ctx *ctx, gopt_policy *p, const gopt_regal_sampler *s, const learn_fwd *f,
                       gopt_nn_tensor *aa, gopt_nn_tensor *ab, const regal_batch *b,
                       const gopt_learn_dist *dist, double *loss, gopt_error *err) {
  size_t np = gopt_nn_params_total(p->params), bytes = np * sizeof(float) + sizeof(double);
  float *grad = gopt_nn_params_grad(p->params);
  unsigned char *buf = calloc((size_t)b->G, bytes);
  double *c = malloc((2 * s->npol + 1) * sizeof *c);
  int rc = buf && c ? 0 : gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (REGAL gradients)");
  for (int grp = 0; grp < b->G && !rc; grp++) {
    if (dist && grp != dist->rank) continue;
    gopt_nn_tensor *l = regal_group_loss(ctx, s, f, aa, ab, b, grp, c);
    gopt_nn_params_zero_grad(p->params);
    if (!(rc = gopt_nn_ctx_status(ctx, err)) && !(rc = gopt_nn_backward(ctx, l, err))) {
      double lv = l->data[0];
      memcpy(buf + (size_t)grp * bytes, grad, np * sizeof(float));
      memcpy(buf + (size_t)grp * bytes + np * sizeof(float), &lv, sizeof lv);
    }
  }
  if (dist && buf) rc = dist->allgather(buf, bytes, rc, dist->user, err);
  *loss = 0;
  for (int grp = 0; grp < b->G && !rc; grp++) {
    const float *gg = (const float *)(buf + (size_t)grp * bytes);
    double lv;
    memcpy(&lv, buf + (size_t)grp * bytes + np * sizeof(float), sizeof lv);
    for (size_t j = 0; j < np; j++) grad[j] = grp ? grad[j] + gg[j] : gg[j];
    *loss += lv;
  }
  free(buf);
  free(c);
  return rc;
}

/* One graph's step: forward pass, the run pairs (this rank's group under dist, then every group's
 * results gathered), advantages against the graph's baseline *ema, gradient, optimizer step. */
static int regal_step(gopt_nn_ctx *ctx, gopt_policy *p, gopt_nn_optim *opt, gopt_env *e, const learn_graph *g,
                      const gopt_learn_train_opts *o, int G, uint64_t seed, double *ema,
                      gopt_learn_iter_info *info, double *best, gopt_error *err) {
  gopt_regal_sampler *s = NULL;
  regal_batch b = {o->samples, G, NULL, NULL, NULL, NULL};
  learn_fwd f;
  gopt_nn_tensor *aa, *ab;
  int rc = regal_sampler_build(e, g, &s, err), per = b.K / G;
  if (rc) return rc;
  b.stat = calloc((size_t)b.K * (2 * s->npol + 2), sizeof *b.stat);
  b.out = calloc((size_t)b.K * 3, sizeof *b.out);
  b.adv = calloc((size_t)b.K, sizeof *b.adv);
  b.x = malloc((gopt_env_nvars(e) + 1) * sizeof *b.x);
  if (!b.stat || !b.out || !b.adv || !b.x) rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (REGAL batch)");
  rc = rc ? rc : regal_pass(ctx, p, g, 1, s, &f, &aa, &ab, err);
  for (int k = 0; k < b.K && !rc; k++)
    if (!o->dist || k / per == o->dist->rank) rc = regal_pair(e, s, o, seed, k, &b, err);
  if (o->dist && b.out) rc = o->dist->allgather(b.out, (size_t)per * 3 * sizeof *b.out, rc, o->dist->user, err);
  if (!rc) {
    double *rw = b.adv; /* rewards, then advantages in place */
    for (int k = 0; k < b.K; k++) rw[k] = b.out[3 * k];
    double mean = learn_advantages(rw, b.K, b.adv, ema, o->baseline_decay, 0), loss = 0, uo = 0;
    if (s->npol && !(rc = regal_grads(ctx, p, s, &f, aa, ab, &b, o->dist, &loss, err))) gopt_nn_optim_step(opt);
    for (int k = 0; k < b.K; k++) {
      if (isnan(*best) || b.out[3 * k + 1] < *best) *best = b.out[3 * k + 1];
      uo += b.out[3 * k + 2] / b.K;
    }
    info->loss += loss / o->graphs_per_iter;
    info->reward += mean / o->graphs_per_iter;
    info->best_obj = *best;
    info->ref_obj = uo;
  }
  gopt_regal_sampler_free(s);
  free(b.stat);
  free(b.out);
  free(b.adv);
  free(b.x);
  return rc;
}

static gopt_learn_train_opts regal_defaults(const gopt_learn_train_opts *in) {
  gopt_learn_train_opts d = *in;
  if (d.graphs_per_iter <= 0) d.graphs_per_iter = 2;
  if (d.samples <= 0) d.samples = 8;
  if (d.samples > 256) d.samples = 256;
  if (d.lr <= 0) d.lr = 3e-3f;
  if (d.clip_norm <= 0) d.clip_norm = 1.0f;
  if (d.baseline_decay <= 0 || d.baseline_decay >= 1) d.baseline_decay = 0.9f;
  if (d.regal_evals == 0) d.regal_evals = REGAL_EVALS;
  return d;
}

int learn_regal_train(gopt_policy *p, gopt_env *const *envs, const char *const *names, size_t n,
                      const gopt_learn_train_opts *opts, gopt_learn_train_result *res, gopt_error *err) {
  double t0 = gopt_now();
  gopt_learn_train_opts o = regal_defaults(opts);
  if (o.iters <= 0) return gopt_error_set(err, GOPT_EINVAL, "learn: --iters must be positive");
  if (o.imitate_iters > 0) return gopt_error_set(err, GOPT_EINVAL, "learn: REGAL training has no imitation warm start");
  int G = o.dist ? o.dist->size : (o.rollout_groups > 1 ? o.rollout_groups : 1);
  if (o.samples % G)
    return gopt_error_set(err, GOPT_EINVAL, "learn: --samples %d is not a multiple of the %d rollout groups%s", o.samples, G,
                          o.dist ? " (one per MPI rank)" : "");
  int resumed = p->has_train && p->ckpt;
  int rc = learn_train_state(p, names, n, o.iters, err);
  if (rc) return rc;
  gopt_nn_optim_cfg oc;
  gopt_nn_optim *opt = NULL;
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  learn_graph **gs = calloc(n, sizeof *gs);
  gopt_nn_rng rng;
  if (!ctx || !gs) { rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory"); goto done; }
  if ((rc = learn_train_optim(p, &o, o.iters * o.graphs_per_iter, resumed, &oc, &opt, &rng, err))) goto done;
  while (p->iter < o.iters) {
    int stop = learn_stop_requested() || (o.stop_after > 0 && p->iter >= o.stop_after);
    if (o.dist && (rc = learn_train_agree_stop(o.dist, &stop, err))) goto done;
    if (stop) { res->interrupted = 1; break; }
    gopt_learn_iter_info info = {.iter = p->iter};
    for (int j = 0; j < o.graphs_per_iter; j++) {
      size_t gi = (size_t)(gopt_nn_rng_u64(&rng) % n);
      uint64_t seed = gopt_nn_rng_u64(&rng);
      if (!gs[gi] && (rc = learn_graph_new(envs[gi], &gs[gi], err))) goto done;
      info.graph = gi;
      if ((rc = regal_step(ctx, p, opt, envs[gi], gs[gi], &o, G, seed, &p->ema[gi], &info, &p->best[gi], err))) goto done;
    }
    learn_train_iter_done(p, &o, &oc, opt, &info);
  }
  rc = learn_train_finish(p, opt, &rng, err);
done:
  res->iters_done = p->iter;
  res->seconds = gopt_now() - t0;
  for (size_t i = 0; gs && i < n; i++) learn_graph_free(gs[i]);
  free(gs);
  gopt_nn_ctx_free(ctx);
  gopt_nn_optim_free(opt);
  return rc;
}
