/* learn_train.c: PPO training of a policy over many graphs (gopt_learn_train), the per-graph
 * reference and reward, and the PPO batch on one graph that training and fine-tuning share. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/baselines.h"
#include "gopt/util.h"
#include "learn/learn_imitate.h"
#include "learn/learn_internal.h"
#include "learn/learn_ppo.h"

static volatile sig_atomic_t stop_flag = 0;
void gopt_learn_request_stop(void) { stop_flag = 1; }
void gopt_learn_clear_stop(void) { stop_flag = 0; }
int learn_stop_requested(void) { return stop_flag != 0; }

int gopt_learn_reference(const gopt_env *e, gopt_env_result *ref, double *x_ref, gopt_error *err) {
  size_t nv = gopt_env_nvars(e);
  int task = gopt_env_task(e), rc = 0, have = 0;
  double *x = malloc((nv + 1) * sizeof *x);
  gopt_env_ws *w = gopt_env_ws_new(e);
  if (!x || !w) { rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (reference)"); goto done; }
  /* the default decisions are always a candidate (the baselines start from them) */
  gopt_env_default(e, x);
  if ((rc = gopt_env_evaluate(w, x, ref, NULL, err))) goto done;
  if (x_ref) memcpy(x_ref, x, nv * sizeof *x);
  have = 1;
  for (size_t i = 0; i < gopt_baseline_task_count(task); i++) {
    const char *name = gopt_baseline_task_name(task, i);
    gopt_env_result r;
    if (!gopt_baseline_applicable(name, e, NULL)) continue;
    if ((rc = gopt_baseline_run(name, e, x, err)) || (rc = gopt_env_evaluate(w, x, &r, NULL, err))) goto done;
    if (gopt_env_result_better(&r, ref)) {
      *ref = r;
      if (x_ref) memcpy(x_ref, x, nv * sizeof *x);
    }
  }
done:
  (void)have;
  free(x);
  gopt_env_ws_free(w);
  return rc;
}

double gopt_learn_reward(const gopt_env *e, const gopt_env_result *r, const gopt_env_result *ref) {
  if (r->feasible) {
    double den = ref->objective > 0 ? ref->objective : 1.0;
    double v = (ref->objective - r->objective) / den;
    return v < -1.0 ? -1.0 : v;
  }
  const gopt_cluster *c = gopt_env_cluster(e);
  double mem = INFINITY;
  for (int d = 0; d < c->n_devices; d++)
    if (c->devices[d].mem_bytes > 0 && c->devices[d].mem_bytes < mem) mem = c->devices[d].mem_bytes;
  double over = isfinite(mem) ? r->mem_over / mem : 1.0;
  return -1.01 - (over < 10.0 ? over : 10.0);
}

/* ---- one PPO batch ------------------------------------------------------------------------------ */

int learn_batch_init(learn_batch *b, const learn_graph *g, size_t nvars, int k) {
  memset(b, 0, sizeof *b);
  b->k = k;
  b->nv = learn_nv(g);
  b->acts = calloc((size_t)k, sizeof *b->acts);
  b->xs = malloc(((size_t)k * nvars + 1) * sizeof *b->xs);
  b->res = malloc(((size_t)k + 1) * sizeof *b->res);
  b->reward = malloc(((size_t)k + 1) * sizeof *b->reward);
  b->old = malloc(((size_t)k * (size_t)b->nv + 1) * sizeof *b->old);
  b->adv = malloc(((size_t)b->nv + 1) * sizeof *b->adv);
  if (!b->acts || !b->xs || !b->res || !b->reward || !b->old || !b->adv) return GOPT_ENOMEM;
  for (int i = 0; i < k; i++)
    if (learn_acts_alloc(&b->acts[i], g)) return GOPT_ENOMEM;
  return 0;
}

void learn_batch_free(learn_batch *b) {
  if (!b) return;
  for (int i = 0; b->acts && i < b->k; i++) learn_acts_free(&b->acts[i]);
  free(b->acts);
  free(b->xs);
  free(b->res);
  free(b->reward);
  free(b->old);
  free(b->adv);
  memset(b, 0, sizeof *b);
}

/* The clipped surrogate of one sample over its log-probability entries. The segment head's are its
 * first n_seg entries only, one ratio per cluster decision, summed (a single ratio of their sum, the first
 * version, left the clip range after any step over 64-256 factors): PPO does not train the node
 * refinement, which keeps its initial "stay with the cluster" bias (trained with per-node ratios it
 * learned to move scattered single nodes off their cluster, each move adding transfers:
 * docs/LEARNED.md "Segment-level placement"). */
static gopt_nn_tensor *ppo_terms(gopt_nn_ctx *ctx, const learn_graph *g, gopt_nn_tensor *lp, gopt_nn_tensor *old,
                                 gopt_nn_tensor *adv, float eps) {
  int64_t S = g->n_seg;
  if (S <= 0 || lp->n <= S) return gopt_nn_ppo_loss(ctx, lp, old, adv, eps);
  /* summed over the clusters (x S of the mean): at ratio 1 the gradient of the summed log-probability */
  return gopt_nn_scale(ctx, gopt_nn_ppo_loss(ctx, gopt_nn_slice(ctx, lp, 0, 0, S), gopt_nn_slice(ctx, old, 0, 0, S),
                                             gopt_nn_slice(ctx, adv, 0, 0, S), eps), (float)S);
}

/* The PPO loss of samples [i0, i1) of the batch on the pass f (old log-probs and advantages from
 * b), over b->k; the entropy bonus is added when i0 == 0, the segment head's KL anchor to its
 * prior (c->kl_coef) per sample. */
static gopt_nn_tensor *batch_loss(gopt_nn_ctx *ctx, const learn_fwd *f, const learn_graph *g,
                                  const learn_batch *b, const learn_ppo_cfg *c, int record_old, int i0, int i1) {
  gopt_nn_tensor *total = NULL;
  int64_t sh[1] = {b->nv};
  for (int i = i0; i < i1; i++) {
    gopt_nn_tensor *kl = NULL, *lp = learn_logp(ctx, f, g, &b->acts[i], c->kl_coef > 0 ? &kl : NULL);
    if (!lp) return NULL;
    if (record_old) memcpy(b->old + (size_t)i * (size_t)b->nv, lp->data, (size_t)b->nv * sizeof(float));
    for (int64_t j = 0; j < b->nv; j++) b->adv[j] = (float)b->advantage[i];
    gopt_nn_tensor *old = gopt_nn_from(ctx, 1, sh, b->old + (size_t)i * (size_t)b->nv);
    gopt_nn_tensor *adv = gopt_nn_from(ctx, 1, sh, b->adv);
    gopt_nn_tensor *l = ppo_terms(ctx, g, lp, old, adv, c->clip_eps);
    if (kl) l = gopt_nn_add(ctx, l, gopt_nn_scale(ctx, kl, c->kl_coef));
    total = total ? gopt_nn_add(ctx, total, l) : l;
  }
  total = gopt_nn_scale(ctx, total, 1.0f / (float)b->k);
  gopt_nn_tensor *ent = i0 == 0 ? learn_entropy(ctx, f) : NULL;
  return ent && c->ent_coef != 0 ? gopt_nn_sub(ctx, total, gopt_nn_scale(ctx, ent, c->ent_coef)) : total;
}

/* Gradient groups of a batch (gopt_learn_dist): 1 for plain training. */
static int ppo_groups(const learn_ppo_cfg *c) { return c->dist ? c->dist->size : (c->groups > 1 ? c->groups : 1); }

/* Evaluates the batch's samples: all of them, or under dist this rank's group, then gathers every
 * group's results in rank order. */
static int batch_evaluate(gopt_env *e, learn_batch *b, const learn_ppo_cfg *c, gopt_error *err) {
  const gopt_learn_dist *d = c->dist;
  if (!d) return gopt_env_evaluate_batch(e, b->xs, (size_t)b->k, b->res, err);
  size_t r = (size_t)(b->k / d->size), nv = gopt_env_nvars(e);
  int rc = gopt_env_evaluate_batch(e, b->xs + (size_t)d->rank * r * nv, r, b->res + (size_t)d->rank * r, err);
  return d->allgather(b->res, r * sizeof *b->res, rc, d->user, err);
}

/* One epoch's gradient as the sum, in group order, of the groups' gradients (each group's computed
 * by its rank under dist, or all of them here); leaves it in p's gradients and the summed loss in
 * *loss. Blocks: the group's gradient floats, then its loss (a double). */
static int group_grads(gopt_nn_ctx *ctx, gopt_policy *p, const learn_fwd *f, const learn_graph *g,
                       const learn_batch *b, const learn_ppo_cfg *c, int record_old, double *loss, gopt_error *err) {
  int G = ppo_groups(c), r = b->k / G, rc = 0;
  size_t np = gopt_nn_params_total(p->params), bytes = np * sizeof(float) + sizeof(double);
  float *grad = gopt_nn_params_grad(p->params);
  unsigned char *buf = calloc((size_t)G, bytes);
  if (!buf) return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (group gradients)");
  for (int grp = 0; grp < G && !rc; grp++) {
    if (c->dist && grp != c->dist->rank) continue;
    gopt_nn_tensor *l = batch_loss(ctx, f, g, b, c, record_old, grp * r, (grp + 1) * r);
    gopt_nn_params_zero_grad(p->params);
    if (!(rc = gopt_nn_ctx_status(ctx, err)) && !(rc = gopt_nn_backward(ctx, l, err))) {
      double lv = l->data[0];
      memcpy(buf + (size_t)grp * bytes, grad, np * sizeof(float));
      memcpy(buf + (size_t)grp * bytes + np * sizeof(float), &lv, sizeof lv);
    }
  }
  if (c->dist) rc = c->dist->allgather(buf, bytes, rc, c->dist->user, err);
  *loss = 0;
  for (int grp = 0; grp < G && !rc; grp++) {
    const float *gg = (const float *)(buf + (size_t)grp * bytes);
    double lv;
    memcpy(&lv, buf + (size_t)grp * bytes + np * sizeof(float), sizeof lv);
    for (size_t j = 0; j < np; j++) grad[j] = grp ? grad[j] + gg[j] : gg[j];
    *loss += lv;
  }
  free(buf);
  return rc;
}

double learn_advantages(const double *reward, int k, double *adv, double *ema, double decay, int batch_base) {
  double mean = 0, var = 0;
  for (int i = 0; i < k; i++) mean += reward[i];
  mean /= k;
  for (int i = 0; i < k; i++) var += (reward[i] - mean) * (reward[i] - mean);
  double sd = sqrt(var / k), base = batch_base || isnan(*ema) ? mean : *ema;
  for (int i = 0; i < k; i++) {
    double a = (reward[i] - base) / (sd + 0.01);
    adv[i] = a > 5 ? 5 : (a < -5 ? -5 : a);
  }
  *ema = isnan(*ema) ? mean : decay * *ema + (1 - decay) * mean;
  return mean;
}

int learn_ppo_batch(gopt_nn_ctx *ctx, gopt_policy *p, const learn_mod *mod, gopt_nn_optim *opt,
                    gopt_env *e, const learn_graph *g, const gopt_env_result *ref, double *ema,
                    const learn_ppo_cfg *c, gopt_nn_rng *rng, learn_batch *b, gopt_error *err) {
  size_t nv = gopt_env_nvars(e);
  learn_fwd f;
  int rc = 0;
  double loss_sum = 0;
  b->loss = 0;
  for (int ep = 0; ep < c->epochs; ep++) {
    gopt_nn_ctx_reset(ctx);
    gopt_nn_ctx_set_training(ctx, 1);
    if ((rc = learn_forward(ctx, p, g, mod, &f, err))) return rc;
    if (ep == 0) {
      for (int i = 0; i < b->k; i++) {
        gopt_env_default(e, b->xs + (size_t)i * nv);
        learn_sample(&f, g, rng, 0, &b->acts[i]);
        learn_to_x(g, &b->acts[i], b->xs + (size_t)i * nv);
        if (b->coloc) learn_coloc_apply(b->coloc, g, b->xs + (size_t)i * nv, b->coloc_dev);
      }
      if ((rc = batch_evaluate(e, b, c, err))) return rc;
      for (int i = 0; i < b->k; i++) b->reward[i] = gopt_learn_reward(e, &b->res[i], ref);
      /* the version-3 segment head's baseline is the batch's own mean (docs/LEARNED.md) */
      b->mean_reward = learn_advantages(b->reward, b->k, b->advantage, ema, c->baseline_decay,
                                        p->seg_nf > LEARN_SEG_NF_V2);
    }
    if (b->nv == 0) continue;
    if (ppo_groups(c) > 1) {
      double lv = 0;
      if ((rc = group_grads(ctx, p, &f, g, b, c, ep == 0, &lv, err))) return rc;
      gopt_nn_optim_step(opt);
      loss_sum += lv;
      continue;
    }
    gopt_nn_tensor *loss = batch_loss(ctx, &f, g, b, c, ep == 0, 0, b->k);
    if ((rc = gopt_nn_ctx_status(ctx, err))) return rc;
    gopt_nn_params_zero_grad(p->params);
    if (mod && mod->params) gopt_nn_params_zero_grad(mod->params);
    if ((rc = gopt_nn_backward(ctx, loss, err))) return rc;
    gopt_nn_optim_step(opt);
    loss_sum += loss->data[0];
  }
  b->loss = c->epochs ? loss_sum / c->epochs : 0;
  return 0;
}

/* ---- training over many graphs ----------------------------------------------------------------- */

static gopt_learn_train_opts train_defaults(const gopt_learn_train_opts *o) {
  gopt_learn_train_opts d = *o;
  if (d.graphs_per_iter <= 0) d.graphs_per_iter = 2;
  if (d.samples <= 0) d.samples = 8;
  if (d.samples > 256) d.samples = 256;
  if (d.epochs <= 0) d.epochs = 2;
  if (d.lr <= 0) d.lr = 3e-3f;
  if (d.clip_eps <= 0) d.clip_eps = 0.2f;
  if (d.ent_coef < 0) d.ent_coef = 0;
  else if (d.ent_coef == 0) d.ent_coef = 0.01f;
  if (d.clip_norm <= 0) d.clip_norm = 1.0f;
  if (d.baseline_decay <= 0 || d.baseline_decay >= 1) d.baseline_decay = 0.9f;
  if (d.imitate_iters < 0) d.imitate_iters = 0;
  return d;
}

int learn_resume_restore(const unsigned char *blob, size_t len, gopt_nn_params *p, gopt_nn_optim *o,
                         gopt_nn_rng *rng, int64_t iter, gopt_error *err) {
  int64_t step = 0;
  int rc = learn_ckpt_from_blob("policy", blob, len, p, o, rng, &step, err);
  if (!rc && step != iter)
    rc = gopt_error_set(err, GOPT_EPARSE, "learn: resume: checkpoint step %lld, metadata %lld", (long long)step, (long long)iter);
  return rc;
}

int learn_resume_check(size_t n_saved, int64_t iters_saved, size_t n, int64_t iters, gopt_error *err) {
  if (n_saved == n && iters_saved == iters) return 0;
  return gopt_error_set(err, GOPT_EINVAL, "learn: resume: the policy was trained on %zu graphs for %lld iterations, this run has %zu graphs and %lld",
                        n_saved, (long long)iters_saved, n, (long long)iters);
}

char *learn_trainset_text(const char *const *names, size_t n) {
  size_t len = 1, at = 0;
  for (size_t i = 0; i < n; i++) len += strlen(names && names[i] ? names[i] : "?") + 1;
  char *s = malloc(len);
  for (size_t i = 0; s && i < n; i++) {
    const char *nm = names && names[i] ? names[i] : "?";
    size_t l = strlen(nm);
    memcpy(s + at, nm, l);
    s[at + l] = '\n';
    at += l + 1;
  }
  if (s) s[at] = 0;
  return s;
}

/* Starts fresh trainer state in p, or checks that a resumed run matches it. */
int learn_train_state(gopt_policy *p, const char *const *names, size_t n, int64_t iters, gopt_error *err) {
  if (p->has_train) return learn_resume_check(p->n_graphs, p->total_iters, n, iters, err);
  char *s = learn_trainset_text(names, n);
  double *ema = malloc((n + 1) * sizeof *ema), *best = malloc((n + 1) * sizeof *best);
  if (!s || !ema || !best) { free(s); free(ema); free(best); return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory"); }
  for (size_t i = 0; i < n; i++) {
    ema[i] = NAN;
    best[i] = NAN;
  }
  free(p->trainset);
  free(p->ema);
  free(p->best);
  p->trainset = s;
  p->ema = ema;
  p->best = best;
  p->n_graphs = n;
  p->iter = 0;
  p->total_iters = iters;
  p->has_train = 1;
  return 0;
}

int learn_train_optim(gopt_policy *p, const gopt_learn_train_opts *o, int64_t steps, int resumed,
                      gopt_nn_optim_cfg *oc, gopt_nn_optim **opt, gopt_nn_rng *rng, gopt_error *err) {
  *oc = gopt_nn_optim_defaults(GOPT_NN_ADAM, o->lr);
  oc->clip_norm = o->clip_norm;
  oc->sched = GOPT_NN_LR_WARMUP_COSINE;
  oc->total_steps = steps;
  oc->warmup_steps = steps / 20;
  oc->min_lr_ratio = 0.1f;
  gopt_nn_rng_seed(rng, o->seed);
  if (!(*opt = gopt_nn_optim_new(oc, p->params, err))) return GOPT_EINVAL;
  return resumed ? learn_resume_restore(p->ckpt, p->ckpt_len, p->params, *opt, rng, p->iter, err) : 0;
}

void learn_train_iter_done(gopt_policy *p, const gopt_learn_train_opts *o, const gopt_nn_optim_cfg *oc,
                           const gopt_nn_optim *opt, gopt_learn_iter_info *info) {
  info->lr = gopt_nn_lr_at(oc, gopt_nn_optim_steps(opt));
  p->iter++;
  if (o->on_iter) o->on_iter(info, o->user);
}

int learn_train_finish(gopt_policy *p, const gopt_nn_optim *opt, const gopt_nn_rng *rng, gopt_error *err) {
  free(p->ckpt);
  p->ckpt = NULL;
  return learn_ckpt_to_blob(p->params, opt, rng, p->iter, &p->ckpt, &p->ckpt_len, err);
}

/* Under dist: *stop becomes 1 when any rank asks to stop (Ctrl-C reaches the ranks at different
 * times; all must leave at the same iteration boundary). */
int learn_train_agree_stop(const gopt_learn_dist *d, int *stop, gopt_error *err) {
  int *all = calloc((size_t)d->size, sizeof *all);
  if (!all) return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  all[d->rank] = *stop;
  int rc = d->allgather(all, sizeof *all, 0, d->user, err);
  for (int r = 0; r < d->size && !rc; r++) *stop |= all[r];
  free(all);
  return rc;
}

/* A training graph: its encoding g, the coarsest level's gc (batch_level; NULL until used), its
 * reference and imitation target, and whether it is a training step (has gradient ops). */
typedef struct train_slot { learn_graph *g, *gc; gopt_env_result ref; learn_acts target; int ready, step; } train_slot;

/* Whether e's graph is a training step (has gradient ops). */
static int has_grad(const gopt_env *e) {
  const gopt_graph *g = gopt_env_graph(e);
  for (size_t i = 0; i < g->nodes.n; i++)
    if (g->nodes.a[i].flags & GOPT_N_GRAD) return 1;
  return 0;
}

/* Prepares graph i on first use (encoding, best-baseline reference and, when imitating, the
 * imitation target made from the reference's decisions). */
static int slot_ready(const gopt_policy *p, train_slot *s, gopt_env *e, int imitate, gopt_error *err) {
  if (s->ready) return 0;
  double *x_ref = imitate ? malloc((gopt_env_nvars(e) + 1) * sizeof *x_ref) : NULL;
  if (imitate && !x_ref) return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (reference)");
  int rc = learn_graph_for(p, e, 0, &s->g, err);
  rc = rc ? rc : gopt_learn_reference(e, &s->ref, x_ref, err);
  if (!rc && imitate && learn_acts_alloc(&s->target, s->g)) rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (target)");
  rc = rc || !imitate ? rc : learn_imitate_target(e, s->g, &s->ref, x_ref, &s->target, err);
  free(x_ref);
  s->step = has_grad(e);
  s->ready = rc == 0;
  return rc;
}

/* The encoding a PPO batch on slot s decides over (*tg): with probability frac (a draw of rng only
 * when frac > 0 and the head is a list-order segment head with at least 2 clusters at the coarsest
 * zero-shot level, S / LEARN_DEC_COARSEST, learn_optimize.c), on a training step, that level's
 * encoding when it has fewer clusters than s's own (made on first use); else s's. At the coarse
 * level a layer split is a few decisions, so sampling finds it; on a training step it pays when the
 * pieces' backward passes overlap (docs/LEARNED.md "Training at the coarsest level"). */
static int batch_level(const gopt_policy *p, train_slot *s, gopt_env *e, double frac, gopt_nn_rng *rng,
                       learn_graph **tg, gopt_error *err) {
  *tg = s->g;
  int S = p->seg / LEARN_DEC_COARSEST;
  if (!(frac > 0) || !s->g->time_order || S < 2 || (double)(gopt_nn_rng_u64(rng) % 1000) >= frac * 1000 || !s->step)
    return 0;
  int rc = s->gc ? 0 : learn_graph_for(p, e, S, &s->gc, err);
  if (!rc && s->gc->n_seg < s->g->n_seg) *tg = s->gc;
  return rc;
}

int gopt_learn_train(gopt_policy *p, gopt_env *const *envs, const char *const *names, size_t n,
                     const gopt_learn_train_opts *opts, gopt_learn_train_result *res, gopt_error *err) {
  memset(res, 0, sizeof *res);
  double t0 = gopt_now();
  if (!n) return gopt_error_set(err, GOPT_EINVAL, "learn: no training graphs");
  for (size_t i = 0; i < n; i++)
    if (gopt_env_task(envs[i]) != p->task)
      return gopt_error_set(err, GOPT_EINVAL, "learn: graph %zu is a '%s' environment, the policy is for '%s'", i,
                            gopt_task_name(gopt_env_task(envs[i])), gopt_task_name(p->task));
  if (p->head == LEARN_HEAD_REGAL) return learn_regal_train(p, envs, names, n, opts, res, err);
  gopt_learn_train_opts o = train_defaults(opts);
  if (o.iters <= 0) return gopt_error_set(err, GOPT_EINVAL, "learn: --iters must be positive");
  int resumed = p->has_train && p->ckpt;
  int rc = learn_train_state(p, names, n, o.iters, err);
  if (rc) return rc;
  learn_ppo_cfg c = {o.samples, o.epochs, o.clip_eps, o.ent_coef, o.baseline_decay, o.rollout_groups, o.dist, o.kl_coef};
  int G = ppo_groups(&c);
  if (o.samples % G)
    return gopt_error_set(err, GOPT_EINVAL, "learn: --samples %d is not a multiple of the %d rollout groups%s", o.samples, G,
                          o.dist ? " (one per MPI rank)" : "");
  gopt_nn_optim_cfg oc;
  gopt_nn_optim *opt = NULL;
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  train_slot *slots = calloc(n, sizeof *slots);
  learn_batch b = {0};
  gopt_nn_rng rng;
  if (!ctx || !slots) { rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory"); goto done; }
  if ((rc = learn_train_optim(p, &o, o.iters * o.graphs_per_iter * o.epochs, resumed, &oc, &opt, &rng, err))) goto done;
  while (p->iter < o.iters) {
    int stop = learn_stop_requested() || (o.stop_after > 0 && p->iter >= o.stop_after);
    if (o.dist && (rc = learn_train_agree_stop(o.dist, &stop, err))) goto done;
    if (stop) { res->interrupted = 1; break; }
    gopt_learn_iter_info info = {.iter = p->iter};
    for (int j = 0; j < o.graphs_per_iter; j++) {
      size_t gi = (size_t)(gopt_nn_rng_u64(&rng) % n);
      int imitating = p->iter < o.imitate_iters;
      if ((rc = slot_ready(p, &slots[gi], envs[gi], o.imitate_iters > 0, err))) goto done;
      if (imitating) { /* deterministic and whole-graph: under dist every rank takes the same step */
        double l = 0;
        if ((rc = learn_imitate_step(ctx, p, opt, slots[gi].g, &slots[gi].target, &l, err))) goto done;
        info.loss += l / o.graphs_per_iter;
        info.graph = gi;
        info.best_obj = slots[gi].ref.objective;
        info.ref_obj = slots[gi].ref.objective;
        continue;
      }
      learn_graph *tg = NULL;
      if ((rc = batch_level(p, &slots[gi], envs[gi], o.coarse_frac, &rng, &tg, err))) goto done;
      learn_batch_free(&b);
      if (learn_batch_init(&b, tg, gopt_env_nvars(envs[gi]), c.samples)) { rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (batch)"); goto done; }
      if ((rc = learn_ppo_batch(ctx, p, NULL, opt, envs[gi], tg, &slots[gi].ref, &p->ema[gi], &c, &rng, &b, err))) goto done;
      for (int i = 0; i < b.k; i++)
        if (isnan(p->best[gi]) || (b.res[i].feasible && b.res[i].objective < p->best[gi])) p->best[gi] = b.res[i].objective;
      info.loss += b.loss / o.graphs_per_iter;
      info.reward += b.mean_reward / o.graphs_per_iter;
      info.graph = gi;
      info.best_obj = p->best[gi];
      info.ref_obj = slots[gi].ref.objective;
    }
    learn_train_iter_done(p, &o, &oc, opt, &info);
  }
  rc = learn_train_finish(p, opt, &rng, err);
done:
  res->iters_done = p->iter;
  res->seconds = gopt_now() - t0;
  learn_batch_free(&b);
  for (size_t i = 0; slots && i < n; i++) { learn_graph_free(slots[i].g); learn_graph_free(slots[i].gc); learn_acts_free(&slots[i].target); }
  free(slots);
  gopt_nn_ctx_free(ctx);
  gopt_nn_optim_free(opt);
  return rc;
}
