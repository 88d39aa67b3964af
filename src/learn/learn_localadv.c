/* learn_localadv.c: the local advantage model (localadv.h) on the learn module's network: the
 * configuration enters as LEARN_NCFG extra input columns (learn_graph.cfg), the task's per-choice
 * head (FUSE logits for fusion, DEVICE logits for placement) is read as scores s[v][k], and the
 * predicted advantage of choice k is s[v][k] - s[v][default]. Labels (sigma transform per graph),
 * prioritised minibatch sampling, the regression trainer (Adam, resume, stop), prediction and the
 * guided search's scoring callback. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/sim.h"
#include "gopt/util.h"
#include "learn/learn_localadv.h"

/* ---- labels ------------------------------------------------------------------------------ */
double gopt_localadv_label(double a, double sigma) {
  double t = log1p(fabs(a) / sigma);
  return a < 0 ? -t : t;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median_sorted(const double *v, size_t n) {
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double gopt_localadv_sigma(const double *a, size_t n) {
  double *v = malloc((n + 1) * sizeof *v);
  if (!v || n == 0) {
    free(v);
    return 1.0;
  }
  for (size_t i = 0; i < n; i++) v[i] = fabs(a[i]);
  qsort(v, n, sizeof *v, cmp_dbl);
  double m = median_sorted(v, n);
  if (!(m > 0)) {
    size_t z = 0;
    while (z < n && !(v[z] > 0)) z++;
    m = z < n ? median_sorted(v + z, n - z) : 1.0;
  }
  free(v);
  return m > 0 && isfinite(m) ? m : 1.0;
}

void la_labels_free(la_labels *ls) {
  if (!ls) return;
  free(ls->l);
  free(ls->top);
  free(ls->rest);
  free(ls->sigma);
  memset(ls, 0, sizeof *ls);
}

/* Sort key for the top split: |t| descending, then index (deterministic). */
typedef struct la_key { double a; size_t i; } la_key;
static int cmp_key(const void *x, const void *y) {
  const la_key *a = x, *b = y;
  if (a->a != b->a) return a->a > b->a ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

int la_labels_build(const gopt_ladata *d, double top_frac, la_labels *out, gopt_error *err) {
  memset(out, 0, sizeof *out);
  size_t n = 0;
  for (size_t g = 0; g < d->n; g++)
    for (size_t r = 0; r < d->g[g].nrec; r++) n += d->g[g].card[d->g[g].var[r]] - 1;
  out->l = malloc((n + 1) * sizeof *out->l);
  out->top = malloc((n + 1) * sizeof *out->top);
  out->rest = malloc((n + 1) * sizeof *out->rest);
  out->sigma = malloc((d->n + 1) * sizeof *out->sigma);
  double *a = malloc((n + 1) * sizeof *a);
  la_key *key = malloc((n + 1) * sizeof *key);
  if (!out->l || !out->top || !out->rest || !out->sigma || !a || !key) {
    free(a);
    free(key);
    la_labels_free(out);
    return gopt_error_set(err, GOPT_ENOMEM, "localadv: out of memory (labels)");
  }
  for (size_t g = 0; g < d->n; g++) {
    const ladata_graph *G = &d->g[g];
    size_t g0 = out->n;
    for (size_t r = 0; r < G->nrec; r++) {
      uint32_t v = G->var[r], dv = G->dflt[v];
      const double *c = G->cost + G->cost_off[r];
      for (uint32_t k = 0; k < G->card[v]; k++) {
        if (k == dv) continue;
        a[out->n] = c[k] - c[dv];
        out->l[out->n++] = (la_label){(uint32_t)g, k, r, 0};
      }
    }
    size_t m = out->n - g0;
    out->sigma[g] = gopt_localadv_sigma(a + g0, m);
    for (size_t j = 0; j < m; j++) {
      out->l[g0 + j].t = gopt_localadv_label(a[g0 + j], out->sigma[g]);
      key[j] = (la_key){fabs(a[g0 + j]), g0 + j};
    }
    /* the graph's top fraction by |a|: ceil(frac * m) labels */
    qsort(key, m, sizeof *key, cmp_key);
    size_t ntop = (size_t)ceil(top_frac * (double)m);
    if (ntop > m) ntop = m;
    for (size_t j = 0; j < m; j++) {
      if (j < ntop) out->top[out->ntop++] = key[j].i;
      else out->rest[out->nrest++] = key[j].i;
    }
  }
  free(a);
  free(key);
  return 0;
}

size_t la_labels_draw(const la_labels *ls, double top_prob, gopt_nn_rng *rng) {
  int from_top = gopt_nn_rng_uniform(rng) < top_prob;
  if (!ls->nrest) from_top = 1;
  if (!ls->ntop) from_top = 0;
  const size_t *set = from_top ? ls->top : ls->rest;
  size_t n = from_top ? ls->ntop : ls->nrest;
  return set[gopt_nn_rng_u64(rng) % n];
}

/* ---- model --------------------------------------------------------------------------------- */
int gopt_localadv_new(int task, const gopt_learn_arch *arch, uint64_t seed, gopt_policy **out, gopt_error *err) {
  if (task != GOPT_TASK_FUSION && task != GOPT_TASK_PLACEMENT) {
    *out = NULL;
    return gopt_error_set(err, GOPT_EINVAL, "localadv: task '%s' is not supported (fusion, placement)",
                          gopt_task_name(task) ? gopt_task_name(task) : "?");
  }
  return learn_policy_build(task, arch, seed, 1, out, err);
}

int gopt_policy_is_localadv(const gopt_policy *p) { return p && p->localadv; }

int gopt_localadv_load(const char *path, int task, gopt_policy **out, gopt_error *err) {
  return learn_policy_load(path, task, 1, out, err);
}

int gopt_localadv_find(int task, const char *exe, char *buf, size_t n, gopt_error *err) {
  const char *tn = gopt_task_name(task);
  if (!tn) return gopt_error_set(err, GOPT_EINVAL, "localadv: unknown task %d", task);
  char name[64];
  snprintf(name, sizeof name, "%s_localadv.gpol", tn);
  return learn_find_file(name, exe, buf, n, err);
}

/* One environment prepared for the model: its encoding, the kind the task decides, each
 * variable's index within that kind (-1: none), the default vector. */
typedef struct la_prep {
  learn_graph *lg;
  int kind;
  int32_t *pos;
  double *dflt;
  size_t nv;
} la_prep;

static void la_prep_free(la_prep *p) {
  if (!p) return;
  learn_graph_free(p->lg);
  free(p->pos);
  free(p->dflt);
  memset(p, 0, sizeof *p);
}

static int la_prep_new(const gopt_env *e, la_prep *p, gopt_error *err) {
  memset(p, 0, sizeof *p);
  p->nv = gopt_env_nvars(e);
  p->kind = gopt_env_task(e) == GOPT_TASK_PLACEMENT ? GOPT_VAR_DEVICE : GOPT_VAR_FUSE;
  int rc = learn_graph_new(e, &p->lg, err);
  if (rc) return rc;
  p->pos = malloc((p->nv + 1) * sizeof *p->pos);
  p->dflt = malloc((p->nv + 1) * sizeof *p->dflt);
  p->lg->cfg = calloc((size_t)p->lg->n * LEARN_NCFG + 1, sizeof *p->lg->cfg);
  if (!p->pos || !p->dflt || !p->lg->cfg) {
    la_prep_free(p);
    return gopt_error_set(err, GOPT_ENOMEM, "localadv: out of memory (graph encoding)");
  }
  gopt_env_default(e, p->dflt);
  for (size_t i = 0; i < p->nv; i++) p->pos[i] = -1;
  for (int64_t j = 0; j < p->lg->nk[p->kind]; j++) p->pos[p->lg->var[p->kind][j]] = (int32_t)j;
  return 0;
}

/* The configuration columns of x (see learn_internal.h): FUSE value and "differs from default",
 * DEVICE value / (D - 1) and "differs from default". */
static void la_set_cfg(la_prep *p, const double *x) {
  learn_graph *g = p->lg;
  memset(g->cfg, 0, (size_t)g->n * LEARN_NCFG * sizeof *g->cfg);
  double dn = g->n_dev > 1 ? (double)(g->n_dev - 1) : 1.0;
  for (int k = GOPT_VAR_DEVICE; k <= GOPT_VAR_FUSE; k += GOPT_VAR_FUSE - GOPT_VAR_DEVICE)
    for (int64_t j = 0; j < g->nk[k]; j++) {
      int32_t v = g->var[k][j];
      float *r = g->cfg + (size_t)g->rows[k][j] * LEARN_NCFG + (k == GOPT_VAR_FUSE ? 0 : 2);
      r[0] = (float)(k == GOPT_VAR_FUSE ? x[v] : x[v] / dn);
      r[1] = x[v] != p->dflt[v] ? 1.f : 0.f;
    }
}

/* Score tensor [V_kind, choices] of one forward pass at configuration x. */
static int la_scores(gopt_nn_ctx *ctx, const gopt_policy *m, la_prep *p, const double *x, gopt_nn_tensor **s,
                     gopt_error *err) {
  learn_fwd f;
  la_set_cfg(p, x);
  int rc = learn_forward(ctx, m, p->lg, NULL, &f, err);
  if (rc) return rc;
  *s = p->kind == GOPT_VAR_FUSE ? f.fuse_logits : f.dev_logits;
  if (!*s) return gopt_error_set(err, GOPT_EINVAL, "localadv: the graph has no variable the model scores");
  return 0;
}

/* ---- training ------------------------------------------------------------------------------ */
static gopt_localadv_train_opts la_defaults(const gopt_localadv_train_opts *o) {
  gopt_localadv_train_opts d = *o;
  if (d.batch <= 0) d.batch = 16;
  if (d.lr <= 0) d.lr = 3e-3f;
  if (!(d.top_frac > 0) || d.top_frac > 1) d.top_frac = 0.1;
  if (!(d.top_prob >= 0) || d.top_prob > 1) d.top_prob = 0.9;
  return d;
}

/* Starts fresh trainer state in p (names: the dataset's graphs), or checks a resumed run. */
static int la_state(gopt_policy *p, const gopt_ladata *d, int64_t steps, gopt_error *err) {
  if (p->has_train) {
    if (p->total_iters != steps)
      return gopt_error_set(err, GOPT_EINVAL, "localadv: resume: the model was trained for %lld steps, this run has %lld",
                            (long long)p->total_iters, (long long)steps);
    return 0;
  }
  size_t len = 1;
  for (size_t i = 0; i < d->n; i++) len += strlen(d->g[i].model) + strlen(d->g[i].cluster) + 2;
  char *s = malloc(len);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "localadv: out of memory");
  s[0] = 0;
  for (size_t i = 0; i < d->n; i++) {
    strcat(s, d->g[i].model);
    strcat(s, "@");
    strcat(s, d->g[i].cluster);
    strcat(s, "\n");
  }
  free(p->trainset);
  p->trainset = s;
  p->n_graphs = 0;
  p->iter = 0;
  p->total_iters = steps;
  p->has_train = 1;
  return 0;
}

/* One minibatch: B labels drawn with priority, one forward pass each at the record's
 * configuration, mean squared error of the predicted transformed advantage; one Adam step. */
static int la_step(gopt_nn_ctx *ctx, gopt_policy *p, gopt_nn_optim *opt, const gopt_ladata *d, la_prep *preps,
                   const la_labels *ls, const gopt_localadv_train_opts *o, gopt_nn_rng *rng, double *xbuf,
                   double *loss, gopt_error *err) {
  gopt_nn_ctx_reset(ctx);
  gopt_nn_ctx_set_training(ctx, 1);
  gopt_nn_tensor *acc = NULL;
  int rc = 0;
  for (int b = 0; b < o->batch && !rc; b++) {
    const la_label *l = &ls->l[la_labels_draw(ls, o->top_prob, rng)];
    const ladata_graph *G = &d->g[l->g];
    la_prep *pp = &preps[l->g];
    const uint8_t *cfg = G->cfg + l->rec * G->nvars;
    for (uint32_t i = 0; i < G->nvars; i++) xbuf[i] = cfg[i];
    gopt_nn_tensor *s = NULL;
    if ((rc = la_scores(ctx, p, pp, xbuf, &s, err))) break;
    uint32_t v = G->var[l->rec];
    int32_t j = pp->pos[v], k = (int32_t)l->k, dv = (int32_t)G->dflt[v];
    if (j < 0) { rc = gopt_error_set(err, GOPT_EINVAL, "localadv: dataset variable %u is not one the model scores", v); break; }
    gopt_nn_tensor *row = gopt_nn_gather_rows(ctx, s, &j, 1);
    gopt_nn_tensor *pred = gopt_nn_sub(ctx, gopt_nn_pick(ctx, row, &k), gopt_nn_pick(ctx, row, &dv));
    gopt_nn_tensor *e = gopt_nn_add_scalar(ctx, pred, (float)-l->t);
    gopt_nn_tensor *sq = gopt_nn_mul(ctx, e, e);
    acc = acc ? gopt_nn_add(ctx, acc, sq) : sq;
  }
  if (rc) return rc;
  gopt_nn_tensor *lt = gopt_nn_scale(ctx, acc, 1.0f / (float)o->batch);
  if ((rc = gopt_nn_ctx_status(ctx, err))) return rc;
  gopt_nn_params_zero_grad(p->params);
  if ((rc = gopt_nn_backward(ctx, lt, err))) return rc;
  gopt_nn_optim_step(opt);
  *loss = lt->data[0];
  return 0;
}

int gopt_localadv_train(gopt_policy *p, const gopt_ladata *d, gopt_env *const *envs,
                        const gopt_localadv_train_opts *opts, gopt_learn_train_result *res, gopt_error *err) {
  memset(res, 0, sizeof *res);
  double t0 = gopt_now();
  if (!p->localadv) return gopt_error_set(err, GOPT_EINVAL, "localadv: the model is a GO policy");
  if (d->task != p->task)
    return gopt_error_set(err, GOPT_EINVAL, "localadv: the dataset is for '%s', the model for '%s'",
                          gopt_task_name(d->task), gopt_task_name(p->task));
  gopt_localadv_train_opts o = la_defaults(opts);
  if (o.steps <= 0) return gopt_error_set(err, GOPT_EINVAL, "localadv: --iters must be positive");
  int resumed = p->has_train && p->ckpt;
  int rc = la_state(p, d, o.steps, err);
  if (rc) return rc;
  la_labels ls;
  if ((rc = la_labels_build(d, o.top_frac, &ls, err))) return rc;
  gopt_nn_optim_cfg oc = gopt_nn_optim_defaults(GOPT_NN_ADAM, o.lr);
  oc.clip_norm = 1.0f;
  oc.sched = GOPT_NN_LR_WARMUP_COSINE;
  oc.total_steps = o.steps;
  oc.warmup_steps = o.steps / 20;
  oc.min_lr_ratio = 0.1f;
  gopt_nn_optim *opt = gopt_nn_optim_new(&oc, p->params, err);
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  la_prep *preps = calloc(d->n + 1, sizeof *preps);
  size_t maxv = 1;
  for (size_t i = 0; i < d->n; i++) maxv = d->g[i].nvars > maxv ? d->g[i].nvars : maxv;
  double *xbuf = malloc(maxv * sizeof *xbuf);
  gopt_nn_rng rng;
  gopt_nn_rng_seed(&rng, o.seed);
  if (!opt || !ctx || !preps || !xbuf) {
    rc = opt ? gopt_error_set(err, GOPT_ENOMEM, "localadv: out of memory") : GOPT_EINVAL;
    goto done;
  }
  if (ls.n == 0) { rc = gopt_error_set(err, GOPT_EINVAL, "localadv: the dataset has no labels"); goto done; }
  for (size_t i = 0; i < d->n; i++)
    if ((rc = gopt_ladata_check_env(d, i, envs[i], err)) || (rc = la_prep_new(envs[i], &preps[i], err))) goto done;
  if (resumed) {
    int64_t step = 0;
    if ((rc = learn_ckpt_from_blob("model", p->ckpt, p->ckpt_len, p->params, opt, &rng, &step, err))) goto done;
    if (step != p->iter) { rc = gopt_error_set(err, GOPT_EPARSE, "localadv: resume: checkpoint step %lld, metadata %lld", (long long)step, (long long)p->iter); goto done; }
  }
  while (p->iter < o.steps) {
    if (learn_stop_requested() || (o.stop_after > 0 && p->iter >= o.stop_after)) { res->interrupted = 1; break; }
    double loss = 0;
    if ((rc = la_step(ctx, p, opt, d, preps, &ls, &o, &rng, xbuf, &loss, err))) goto done;
    p->iter++;
    if (o.on_step) o.on_step(p->iter, o.steps, loss, o.user);
  }
  free(p->ckpt);
  p->ckpt = NULL;
  rc = learn_ckpt_to_blob(p->params, opt, &rng, p->iter, &p->ckpt, &p->ckpt_len, err);
done:
  res->iters_done = p->iter;
  res->seconds = gopt_now() - t0;
  for (size_t i = 0; preps && i < d->n; i++) la_prep_free(&preps[i]);
  free(preps);
  free(xbuf);
  la_labels_free(&ls);
  gopt_nn_ctx_free(ctx);
  gopt_nn_optim_free(opt);
  return rc;
}

/* ---- prediction and the guided search ------------------------------------------------------ */
/* Per variable of x, from one forward pass on a prepared graph: its largest predicted |advantage|
 * over the non-default choices (gain 0), or the largest predicted cost decrease of moving it from
 * its value in x to another choice, s[x_i] - s[k] (gain 1; negative when every move is predicted
 * to cost more). */
static int la_predict_prep(gopt_nn_ctx *ctx, gopt_policy *m, la_prep *p, const double *x, int gain, double *adv,
                           gopt_error *err) {
  gopt_nn_ctx_reset(ctx);
  gopt_nn_ctx_set_training(ctx, 0);
  gopt_nn_tensor *s = NULL;
  int rc = la_scores(ctx, m, p, x, &s, err);
  if (rc) return rc;
  int64_t C = s->shape[1];
  for (size_t i = 0; i < p->nv; i++) {
    adv[i] = gain ? -INFINITY : 0;
    int32_t j = p->pos[i];
    if (j < 0) continue;
    const float *r = s->data + (size_t)j * (size_t)C;
    int64_t dv = (int64_t)p->dflt[i], cv = (int64_t)x[i];
    if (gain) {
      if (cv < 0 || cv >= C) cv = dv;
      for (int64_t k = 0; k < C; k++)
        if (k != cv && (double)r[cv] - (double)r[k] > adv[i]) adv[i] = (double)r[cv] - (double)r[k];
      continue;
    }
    for (int64_t k = 0; k < C; k++) {
      double a = fabs((double)r[k] - (double)r[dv]);
      if (k != dv && a > adv[i]) adv[i] = a;
    }
  }
  return 0;
}

int gopt_localadv_predict(gopt_policy *m, const gopt_env *e, const double *x, double *adv, gopt_error *err) {
  if (!m->localadv) return gopt_error_set(err, GOPT_EINVAL, "localadv: the model is a GO policy");
  if (gopt_env_task(e) != m->task)
    return gopt_error_set(err, GOPT_EINVAL, "localadv: the model is for '%s', the environment '%s'",
                          gopt_task_name(m->task), gopt_task_name(gopt_env_task(e)));
  la_prep p;
  int rc = la_prep_new(e, &p, err);
  if (rc) return rc;
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  rc = ctx ? la_predict_prep(ctx, m, &p, x, 0, adv, err) : gopt_error_set(err, GOPT_ENOMEM, "localadv: out of memory");
  gopt_nn_ctx_free(ctx);
  la_prep_free(&p);
  return rc;
}

typedef struct la_guide_state {
  la_prep prep;
  gopt_nn_ctx *ctx;
} la_guide_state;

int gopt_localadv_guide_fn(const double *x, double *score, void *user, gopt_error *err) {
  gopt_localadv_guide *g = user;
  if (!g->state) {
    if (!g->model->localadv || gopt_env_task(g->env) != g->model->task)
      return gopt_error_set(err, GOPT_EINVAL, "localadv: the guide needs an advantage model for task '%s'",
                            gopt_task_name(gopt_env_task(g->env)));
    la_guide_state *s = calloc(1, sizeof *s);
    if (!s) return gopt_error_set(err, GOPT_ENOMEM, "localadv: out of memory");
    int rc = la_prep_new(g->env, &s->prep, err);
    if (!rc && !(s->ctx = gopt_nn_ctx_new(0))) rc = gopt_error_set(err, GOPT_ENOMEM, "localadv: out of memory");
    g->state = s;
    if (rc) return rc;
  }
  la_guide_state *s = g->state;
  return la_predict_prep(s->ctx, g->model, &s->prep, x, 1, score, err);
}

void gopt_localadv_guide_free(gopt_localadv_guide *g) {
  if (!g || !g->state) return;
  la_guide_state *s = g->state;
  la_prep_free(&s->prep);
  gopt_nn_ctx_free(s->ctx);
  free(s);
  g->state = NULL;
}

/* ---- held-out ranking quality -------------------------------------------------------------- */
int gopt_localadv_evaluate(gopt_policy *m, const gopt_ladata *d, gopt_env *const *envs, double *tau,
                           double *tau_abs, gopt_error *err) {
  if (!m->localadv) return gopt_error_set(err, GOPT_EINVAL, "localadv: the model is a GO policy");
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  if (!ctx) return gopt_error_set(err, GOPT_ENOMEM, "localadv: out of memory");
  int rc = 0;
  for (size_t gi = 0; gi < d->n && !rc; gi++) {
    const ladata_graph *G = &d->g[gi];
    size_t nl = 0;
    for (size_t r = 0; r < G->nrec; r++) nl += G->card[G->var[r]] - 1u;
    double *pa = malloc((nl + 1) * sizeof *pa), *ta = malloc((nl + 1) * sizeof *ta);
    double *x = malloc(((size_t)G->nvars + 1) * sizeof *x);
    la_prep p;
    memset(&p, 0, sizeof p);
    if (!pa || !ta || !x) rc = gopt_error_set(err, GOPT_ENOMEM, "localadv: out of memory");
    if (!rc && !(rc = gopt_ladata_check_env(d, gi, envs[gi], err))) rc = la_prep_new(envs[gi], &p, err);
    size_t k = 0;
    for (size_t r = 0; r < G->nrec && !rc; r++) {
      for (uint32_t i = 0; i < G->nvars; i++) x[i] = G->cfg[r * G->nvars + i];
      gopt_nn_tensor *s = NULL;
      gopt_nn_ctx_reset(ctx);
      gopt_nn_ctx_set_training(ctx, 0);
      if ((rc = la_scores(ctx, m, &p, x, &s, err))) break;
      uint32_t v = G->var[r], dv = G->dflt[v];
      const float *row = s->data + (size_t)(p.pos[v] < 0 ? 0 : p.pos[v]) * (size_t)s->shape[1];
      const double *c = G->cost + G->cost_off[r];
      for (uint32_t q = 0; q < G->card[v]; q++) {
        if (q == dv) continue;
        pa[k] = p.pos[v] < 0 ? 0 : (double)row[q] - (double)row[dv];
        ta[k++] = c[q] - c[dv];
      }
    }
    if (!rc) {
      tau[gi] = gopt_sim_kendall_tau(pa, ta, k);
      for (size_t i = 0; i < k; i++) { pa[i] = fabs(pa[i]); ta[i] = fabs(ta[i]); }
      tau_abs[gi] = gopt_sim_kendall_tau(pa, ta, k);
    }
    la_prep_free(&p);
    free(pa);
    free(ta);
    free(x);
  }
  gopt_nn_ctx_free(ctx);
  return rc;
}
