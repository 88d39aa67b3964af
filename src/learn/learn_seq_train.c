/* learn_seq_train.c: PPO for the sequential agent (gopt_seq_train): per iteration, each rollout
 * group collects its episodes (seeded by seed, iteration and episode index), GAE advantages
 * normalised within the group, then E epochs of one Adam step each whose gradient is the sum, in
 * group order, of the groups' gradients (gopt_learn_dist: one group per rank). The first
 * imitate_iters iterations label every step with the environment's expert's accepted actions and
 * minimise cross-entropy towards them in place of the surrogate (DAgger as a warm start). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/util.h"
#include "learn/learn_seq_internal.h"

static gopt_seq_train_opts seq_defaults(const gopt_seq_train_opts *o) {
  gopt_seq_train_opts d = *o;
  if (d.episodes <= 0) d.episodes = 8;
  if (d.max_steps <= 0) d.max_steps = 16;
  if (d.epochs <= 0) d.epochs = 4;
  if (d.lr <= 0) d.lr = 3e-3f;
  if (d.clip_eps <= 0) d.clip_eps = 0.2f;
  if (d.ent_coef < 0) d.ent_coef = 0;
  else if (d.ent_coef == 0) d.ent_coef = 0.01f;
  if (d.vf_coef <= 0) d.vf_coef = 0.5f;
  if (d.gamma <= 0 || d.gamma > 1) d.gamma = 0.99f;
  if (d.lambda <= 0 || d.lambda > 1) d.lambda = 0.95f;
  if (d.clip_norm <= 0) d.clip_norm = 1.0f;
  return d;
}

/* The seed of episode e of iteration t (independent of groups and ranks). */
static uint64_t seq_episode_seed(uint64_t seed, int64_t t, int e) {
  uint64_t k[3] = {seed, (uint64_t)t, (uint64_t)e};
  return gopt_hash_bytes(k, sizeof k, 0x5e9a11ce5eedULL);
}

/* GAE over the episode's steps [i0, i1) (terminal after the last): advantages and returns. */
static void seq_gae(seq_steps *v, size_t i0, size_t i1, double gamma, double lambda) {
  double next_v = 0, a = 0;
  for (size_t i = i1; i-- > i0;) {
    seq_step *s = &v->a[i];
    double delta = s->reward + gamma * next_v - s->value;
    a = delta + gamma * lambda * a;
    s->adv = a;
    s->ret = a + s->value;
    next_v = s->value;
  }
}

/* Normalises a group's advantages to mean 0, deviation 1. */
static void seq_normalise(seq_steps *v) {
  if (v->n < 2) return;
  double mean = 0, var = 0;
  for (size_t i = 0; i < v->n; i++) mean += v->a[i].adv;
  mean /= (double)v->n;
  for (size_t i = 0; i < v->n; i++) var += (v->a[i].adv - mean) * (v->a[i].adv - mean);
  double sd = sqrt(var / (double)v->n);
  for (size_t i = 0; i < v->n; i++) v->a[i].adv = (v->a[i].adv - mean) / (sd + 1e-8);
}

/* One group's loss gradient over its steps, accumulated into p's (zeroed) gradients; *loss the
 * group loss: mean over steps of clipped surrogate + vf * (V - ret)^2 - ent * entropy, or when
 * imitating, of -log p(an action the expert accepts) + vf * (V - ret)^2. */
static int seq_group_grad(gopt_nn_ctx *ctx, gopt_seq_policy *p, const seq_steps *v, const gopt_seq_train_opts *o,
                          int imitate, double *loss, gopt_error *err) {
  gopt_nn_params_zero_grad(p->params);
  *loss = 0;
  float inv = v->n ? 1.0f / (float)v->n : 0;
  int64_t one[1] = {1};
  float *mask = NULL;
  int rc = 0;
  for (size_t i = 0; i < v->n && !rc; i++) {
    const seq_step *s = &v->a[i];
    gopt_nn_tensor *lg = NULL, *val = NULL;
    gopt_nn_ctx_reset(ctx);
    gopt_nn_ctx_set_training(ctx, 1);
    if ((rc = seq_forward(ctx, p, s, &lg, &val, err))) break;
    float old = s->logp_old, adv = (float)s->adv, ret = (float)s->ret;
    gopt_nn_tensor *pg;
    if (imitate && s->ok) { /* -log of the probability of the accepted set */
      float *mk = realloc(mask, ((size_t)s->m + 1) * sizeof *mk);
      if (!mk) { rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory"); break; }
      mask = mk;
      for (int a = 0; a <= s->m; a++) mask[a] = s->ok[a] ? 1.0f : 0.0f;
      int64_t sh[2] = {1, (int64_t)s->m + 1};
      gopt_nn_tensor *pm = gopt_nn_sum(ctx, gopt_nn_mul(ctx, gopt_nn_softmax(ctx, lg), gopt_nn_from(ctx, 2, sh, mask)));
      pg = gopt_nn_scale(ctx, gopt_nn_log(ctx, gopt_nn_add_scalar(ctx, pm, 1e-12f)), -1.0f);
    } else {
      gopt_nn_tensor *lp = gopt_nn_categorical_logprob(ctx, lg, &s->action);
      pg = gopt_nn_ppo_loss(ctx, lp, gopt_nn_from(ctx, 1, one, &old), gopt_nn_from(ctx, 1, one, &adv), o->clip_eps);
    }
    gopt_nn_tensor *d = gopt_nn_sub(ctx, gopt_nn_reshape(ctx, val, 1, one), gopt_nn_from(ctx, 1, one, &ret));
    gopt_nn_tensor *l = gopt_nn_add(ctx, pg, gopt_nn_scale(ctx, gopt_nn_mul(ctx, d, d), o->vf_coef));
    if (!imitate && o->ent_coef > 0) l = gopt_nn_sub(ctx, l, gopt_nn_scale(ctx, gopt_nn_categorical_entropy(ctx, lg), o->ent_coef));
    l = gopt_nn_scale(ctx, l, inv);
    if ((rc = gopt_nn_ctx_status(ctx, err)) || (rc = gopt_nn_backward(ctx, l, err))) break;
    *loss += l->data[0];
  }
  free(mask);
  return rc;
}

/* Runs the trainer's exchange: under dist, allgather; alone, nothing to do. */
static int seq_exchange(const gopt_learn_dist *d, void *buf, size_t bytes, int rc, gopt_error *err) {
  return d ? d->allgather(buf, bytes, rc, d->user, err) : rc;
}

/* Starts fresh trainer state, or checks that a resumed run matches the saved one. */
static int seq_train_state(gopt_seq_policy *p, const char *const *names, size_t n, int64_t iters, gopt_error *err) {
  if (p->has_train) return learn_resume_check(p->n_graphs, p->total_iters, n, iters, err);
  char *s = learn_trainset_text(names, n);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  free(p->trainset);
  p->trainset = s;
  p->n_graphs = n;
  p->iter = 0;
  p->total_iters = iters;
  p->best_ret = NAN;
  p->has_train = 1;
  return 0;
}

typedef struct seq_run {
  gopt_nn_ctx *ctx;
  gopt_nn_optim *opt;
  seq_steps *groups;       /* G step lists (only this rank's filled under dist) */
  unsigned char *buf;      /* G gradient blocks (+ loss) */
  double *stats;           /* G x 3: return sum, best return, episodes */
  int G;
} seq_run;

/* Collects group grp's episodes of iteration t into r->groups[grp] and its stats (labelled by the
 * expert while imitating). */
static int seq_collect(seq_run *r, gopt_seq_policy *p, const gopt_seq_env *env, size_t n, const gopt_seq_train_opts *o,
                       int grp, size_t *last_graph, gopt_error *err) {
  const int mode = p->iter < o->imitate_iters ? SEQ_EXPERT : SEQ_SAMPLE;
  int per = o->episodes / r->G, rc = 0;
  seq_steps *v = &r->groups[grp];
  double *st = r->stats + 3 * grp;
  st[0] = 0;
  st[1] = -INFINITY;
  st[2] = per;
  for (int e = grp * per; e < (grp + 1) * per && !rc; e++) {
    uint64_t sd = seq_episode_seed(o->seed, p->iter, e);
    size_t gi = (size_t)(sd % n), i0 = v->n;
    gopt_nn_rng rng;
    gopt_nn_rng_seed(&rng, sd);
    double ret = 0;
    if ((rc = seq_episode(r->ctx, p, env, gi, mode, &rng, o->max_steps, v, &ret, err))) break;
    seq_gae(v, i0, v->n, o->gamma, o->lambda);
    st[0] += ret;
    if (ret > st[1]) st[1] = ret;
    *last_graph = gi;
  }
  if (!rc) seq_normalise(v);
  return rc;
}

/* One iteration: collect, exchange stats, E epochs of summed group gradients. */
static int seq_iteration(seq_run *r, gopt_seq_policy *p, const gopt_seq_env *env, size_t n,
                         const gopt_seq_train_opts *o, gopt_learn_iter_info *info, gopt_error *err) {
  const gopt_learn_dist *d = o->dist;
  size_t np = gopt_nn_params_total(p->params), bytes = np * sizeof(float) + sizeof(double);
  float *grad = gopt_nn_params_grad(p->params);
  int rc = 0;
  for (int grp = 0; grp < r->G; grp++) seq_steps_clear(&r->groups[grp]);
  for (int grp = 0; grp < r->G && !rc; grp++)
    if (!d || grp == d->rank) rc = seq_collect(r, p, env, n, o, grp, &info->graph, err);
  if ((rc = seq_exchange(d, d ? r->stats : NULL, 3 * sizeof(double), rc, err))) return rc;
  double sum = 0, best = -INFINITY;
  for (int grp = 0; grp < r->G; grp++) { sum += r->stats[3 * grp]; best = fmax(best, r->stats[3 * grp + 1]); }
  info->reward = sum / o->episodes;
  if (isnan(p->best_ret) || best > p->best_ret) p->best_ret = best;
  info->best_obj = p->best_ret;
  info->ref_obj = NAN;
  for (int ep = 0; ep < o->epochs; ep++) {
    double lsum = 0;
    for (int grp = 0; grp < r->G && !rc; grp++) {
      if (d && grp != d->rank) continue;
      double l = 0;
      if (!(rc = seq_group_grad(r->ctx, p, &r->groups[grp], o, p->iter < o->imitate_iters, &l, err))) {
        memcpy(r->buf + (size_t)grp * bytes, grad, np * sizeof(float));
        memcpy(r->buf + (size_t)grp * bytes + np * sizeof(float), &l, sizeof l);
      }
    }
    if ((rc = seq_exchange(d, r->buf, bytes, rc, err))) return rc;
    for (int grp = 0; grp < r->G; grp++) {
      const float *gg = (const float *)(r->buf + (size_t)grp * bytes);
      double l;
      memcpy(&l, r->buf + (size_t)grp * bytes + np * sizeof(float), sizeof l);
      for (size_t j = 0; j < np; j++) grad[j] = grp ? grad[j] + gg[j] : gg[j];
      lsum += l;
    }
    gopt_nn_optim_step(r->opt);
    info->loss += lsum / o->epochs;
  }
  return 0;
}

int gopt_seq_train(gopt_seq_policy *p, const gopt_seq_env *env, const char *const *names, size_t n,
                   const gopt_seq_train_opts *opts, gopt_learn_train_result *res, gopt_error *err) {
  memset(res, 0, sizeof *res);
  double t0 = gopt_now();
  if (!n) return gopt_error_set(err, GOPT_EINVAL, "learn: no training graphs");
  gopt_seq_train_opts o = seq_defaults(opts);
  if (o.iters <= 0) return gopt_error_set(err, GOPT_EINVAL, "learn: --iters must be positive");
  if (o.imitate_iters < 0) o.imitate_iters = 0;
  if (o.imitate_iters > 0 && !env->expert)
    return gopt_error_set(err, GOPT_EINVAL, "learn: --imitate: this environment has no expert to imitate");
  seq_run r = {0};
  r.G = o.dist ? o.dist->size : (o.rollout_groups > 1 ? o.rollout_groups : 1);
  if (o.episodes % r.G)
    return gopt_error_set(err, GOPT_EINVAL, "learn: --episodes %d is not a multiple of the %d rollout groups%s", o.episodes, r.G,
                          o.dist ? " (one per MPI rank)" : "");
  int resumed = p->has_train && p->ckpt;
  int rc = seq_train_state(p, names, n, o.iters, err);
  if (rc) return rc;
  gopt_nn_optim_cfg oc = gopt_nn_optim_defaults(GOPT_NN_ADAM, o.lr);
  oc.clip_norm = o.clip_norm;
  oc.sched = GOPT_NN_LR_WARMUP_COSINE;
  oc.total_steps = o.iters * o.epochs;
  oc.warmup_steps = oc.total_steps / 20;
  oc.min_lr_ratio = 0.1f;
  size_t np = gopt_nn_params_total(p->params);
  r.opt = gopt_nn_optim_new(&oc, p->params, err);
  r.ctx = gopt_nn_ctx_new(0);
  r.groups = calloc((size_t)r.G, sizeof *r.groups);
  r.buf = calloc((size_t)r.G, np * sizeof(float) + sizeof(double));
  r.stats = calloc((size_t)r.G * 3, sizeof *r.stats);
  if (!r.opt || !r.ctx || !r.groups || !r.buf || !r.stats) { rc = r.opt ? gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory") : GOPT_EINVAL; goto done; }
  if (resumed && (rc = learn_resume_restore(p->ckpt, p->ckpt_len, p->params, r.opt, NULL, p->iter, err))) goto done;
  while (p->iter < o.iters) {
    int stop = learn_stop_requested() || (o.stop_after > 0 && p->iter >= o.stop_after);
    if (o.dist && (rc = learn_train_agree_stop(o.dist, &stop, err))) goto done;
    if (stop) { res->interrupted = 1; break; }
    gopt_learn_iter_info info = {.iter = p->iter};
    if ((rc = seq_iteration(&r, p, env, n, &o, &info, err))) goto done;
    info.lr = gopt_nn_lr_at(&oc, gopt_nn_optim_steps(r.opt));
    p->iter++;
    if (o.on_iter) o.on_iter(&info, o.user);
  }
  free(p->ckpt);
  p->ckpt = NULL;
  rc = learn_ckpt_to_blob(p->params, r.opt, NULL, p->iter, &p->ckpt, &p->ckpt_len, err);
done:
  res->iters_done = p->iter;
  res->seconds = gopt_now() - t0;
  for (int g = 0; r.groups && g < r.G; g++) seq_steps_clear(&r.groups[g]);
  free(r.groups);
  free(r.buf);
  free(r.stats);
  gopt_nn_ctx_free(r.ctx);
  gopt_nn_optim_free(r.opt);
  return rc;
}
