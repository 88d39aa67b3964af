/* learn_optimize.c: `--method go` on one graph: zero-shot (greedy decode plus the best of K
 * samples; the list-order segment head decodes at up to four levels, below) and optional PPO
 * fine-tuning of a per-graph feature modulation (GO's parameter superposition) starting from the
 * trained policy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/search.h"
#include "gopt/util.h"
#include "learn/learn_internal.h"
#include "learn/learn_ppo.h"

typedef struct opt_state {
  gopt_env_result best;
  int have;
  double *x_best;
  size_t nv;
  uint64_t evals;
  double t0;
  const gopt_learn_opt_opts *o;
  learn_coloc *coloc;   /* placement (not o->raw): the decodes' post-process over level 0's rows ... */
  int32_t *coloc_dev;   /* ... and its scratch; made by zero_shot, used by fine-tuning too */
} opt_state;

/* Records rows of xs/res as evaluated; keeps the best (gopt_env_result_cmp). */
static void take(opt_state *s, const double *xs, const gopt_env_result *res, size_t k) {
  for (size_t i = 0; i < k; i++) {
    s->evals++;
    if (s->have && !gopt_env_result_better(&res[i], &s->best)) continue;
    s->best = res[i];
    s->have = 1;
    memcpy(s->x_best, xs + i * s->nv, s->nv * sizeof *xs);
    if (s->o->on_improve) s->o->on_improve(s->evals, gopt_now() - s->t0, s->best.objective, s->o->user);
  }
}

/* Placement fine-tuning starts by taking the search methods' start (gopt_search_start "best": the
 * default and every baseline, each evaluation counted in the fine-tuning budget) as a candidate,
 * so a fine-tuned result is never worse than what the searches start from (issue 26). The other
 * tasks' fine-tuning does not (yet): their documented figures were measured without it. Returns
 * the evaluations it used. */
static int take_start(gopt_env *e, opt_state *s, uint64_t *used, gopt_error *err) {
  *used = 0;
  if (gopt_env_task(e) != GOPT_TASK_PLACEMENT) return 0;
  double *x0 = malloc((s->nv + 1) * sizeof *x0);
  gopt_search_start_info info;
  if (!x0) return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (start)");
  int rc = gopt_search_start(e, "best", x0, &info, err);
  if (!rc && info.evaluated && info.evals > 0) {
    s->evals += info.evals - 1; /* take() counts the last one */
    take(s, x0, &info.result, 1);
    *used = info.evals;
  }
  free(x0);
  return rc;
}

/* PPO on this graph for o->finetune_evals evaluations, training only the modulation. Placement
 * samples get zero-shot's post-process (s->coloc, when set). */
static int finetune(gopt_policy *p, gopt_env *e, const learn_graph *g, gopt_nn_ctx *ctx, int k,
                    gopt_nn_rng *rng, opt_state *s, gopt_error *err) {
  learn_mod mod;
  learn_batch b = {0};
  gopt_nn_optim *opt = NULL;
  int rc = learn_mod_new(p, &mod, err);
  if (rc) return rc;
  gopt_nn_optim_cfg oc = gopt_nn_optim_defaults(GOPT_NN_ADAM, 1e-2f);
  oc.clip_norm = 1.0f;
  if (!(opt = gopt_nn_optim_new(&oc, mod.params, err))) { rc = GOPT_EINVAL; goto done; }
  learn_ppo_cfg c = {k, 2, 0.2f, 0.01f, 0.9f};
  uint64_t used = 0;
  if ((rc = take_start(e, s, &used, err))) goto done;
  gopt_env_result ref = s->best; /* rewards relative to the best so far (zero-shot or the start) */
  double ema = NAN;
  while (used < s->o->finetune_evals && !learn_stop_requested()) {
    uint64_t left = s->o->finetune_evals - used;
    int kk = left < (uint64_t)k ? (int)left : k; /* the last batch may be smaller */
    if (kk != b.k) {
      learn_batch_free(&b);
      if (learn_batch_init(&b, g, s->nv, kk)) { rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (batch)"); goto done; }
      b.coloc = s->coloc;
      b.coloc_dev = s->coloc_dev;
    }
    if ((rc = learn_ppo_batch(ctx, p, &mod, opt, e, g, &ref, &ema, &c, rng, &b, err))) goto done;
    take(s, b.xs, b.res, (size_t)kk);
    used += (uint64_t)kk;
  }
done:
  learn_batch_free(&b);
  gopt_nn_optim_free(opt);
  learn_mod_free(&mod);
  return rc;
}

/* The zero-shot decodes' shared state: rows r = lv, lv + step, ... <= k of xs (nv each) belong to
 * level lv; rows r < step are greedy. Placement rows are post-processed (learn_colocate.c) unless
 * c is NULL (c and dev_of belong to opt_state). */
typedef struct dec_ctx {
  gopt_env *e;
  int step, k;
  gopt_nn_rng *rng;
  double *xs;
  size_t nv;
  const learn_graph *g0;
  learn_coloc *c;
  int32_t *dev_of; /* g0->n rows of learn_coloc_apply's scratch */
} dec_ctx;

/* Decodes level lv's rows of d with the encoding g and its forward pass f. */
static void decode_rows(dec_ctx *d, const learn_fwd *f, const learn_graph *g, learn_acts *a, int lv) {
  for (int r = lv; r <= d->k; r += d->step) {
    double *x = d->xs + (size_t)r * d->nv;
    gopt_env_default(d->e, x);
    learn_sample(f, g, d->rng, r < d->step, a);
    learn_to_x(g, a, x);
    if (d->c) learn_coloc_apply(d->c, d->g0, x, d->dev_of);
  }
}

/* Decodes level lv of d with p's head over `clusters` clusters of e (learn_graph_for), pooled from
 * the graph embeddings of the forward pass f0. */
static int decode_level(dec_ctx *d, gopt_policy *p, int clusters, const learn_fwd *f0, gopt_nn_ctx *ctx, int lv,
                        gopt_error *err) {
  learn_graph *g = NULL;
  learn_acts a = {0};
  learn_fwd f = *f0;
  int rc = learn_graph_for(p, d->e, clusters, &g, err);
  if (!rc && learn_acts_alloc(&a, g)) rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  if (!rc) {
    learn_seg_forward(ctx, p, g, f0->dev_emb, f0->rows[GOPT_VAR_DEVICE], &f);
    rc = gopt_nn_ctx_status(ctx, err);
  }
  if (!rc) decode_rows(d, &f, g, &a, lv);
  learn_acts_free(&a);
  learn_graph_free(g);
  return rc;
}

/* The zero-shot decodes of p on e into xs[(k + 1) x nv]. A list-order segment head decodes at up to
 * four levels: its S clusters (level 0), one cluster per node (when level 0 is not that already),
 * then S / 4 and S / 16 clusters (each when fewer than level 0 has). Decode r uses level
 * r % levels and is greedy when r < levels, a sample otherwise; a level is used only when k >= its
 * index. The other levels reuse level 0's graph embeddings (only the head's pooling is redone).
 * With a placement task and not s->o->raw, every decode's constant subexpressions then move to
 * their readers (learn_colocate.c; s->coloc, kept for fine-tuning). *g0 gets level 0's encoding
 * (fine-tuning's), whose forward pass stays in ctx. */
static int zero_shot(gopt_policy *p, gopt_env *e, int k, gopt_nn_rng *rng, double *xs, learn_graph **g0,
                     gopt_nn_ctx *ctx, opt_state *s, gopt_error *err) {
  learn_acts a = {0};
  learn_fwd f;
  dec_ctx d = {.e = e, .k = k, .rng = rng, .xs = xs, .nv = s->nv};
  int rc = learn_graph_for(p, e, 0, g0, err);
  if (!rc && learn_acts_alloc(&a, *g0)) rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  if (!rc && !s->o->raw && gopt_env_task(e) == GOPT_TASK_PLACEMENT) {
    s->coloc_dev = malloc(((size_t)(*g0)->n + 1) * sizeof *s->coloc_dev);
    rc = s->coloc_dev ? learn_coloc_new(e, *g0, &s->coloc, err) : gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  }
  if (!rc) {
    d.g0 = *g0;
    d.c = s->coloc;
    d.dev_of = s->coloc_dev;
    gopt_nn_ctx_set_training(ctx, 0);
    rc = learn_forward(ctx, p, *g0, NULL, &f, err);
  }
  int lv[4] = {0}, levels = 1, multi = !rc && (*g0)->time_order && f.dev_emb;
  if (multi && levels <= k && (*g0)->n_seg < (*g0)->n) lv[levels++] = LEARN_SEG_PER_NODE;
  for (int q = 4; q <= 16; q *= 4) /* coarser: a multilevel partitioner's levels */
    if (multi && levels <= k && p->seg / q >= 2 && p->seg / q < (*g0)->n_seg) lv[levels++] = p->seg / q;
  d.step = levels;
  if (!rc) decode_rows(&d, &f, *g0, &a, 0);
  for (int l = 1; l < levels && !rc; l++) rc = decode_level(&d, p, lv[l], &f, ctx, l, err);
  learn_acts_free(&a);
  return rc;
}

int gopt_learn_optimize(gopt_policy *p, gopt_env *e, const gopt_learn_opt_opts *o, double *x_best,
                        gopt_search_result *res, gopt_error *err) {
  gopt_learn_opt_opts def = {.samples = 16};
  if (!o) o = &def;
  memset(res, 0, sizeof *res);
  if (p->head != LEARN_HEAD_GO)
    return gopt_error_set(err, GOPT_EINVAL, "learn: policy is a '%s' model (use --method %s)", gopt_policy_kind(p),
                          p->head == LEARN_HEAD_REGAL ? "regal" : "guided");
  if (gopt_env_task(e) != p->task)
    return gopt_error_set(err, GOPT_EINVAL, "learn: policy is for task '%s', environment is '%s'",
                          gopt_task_name(p->task), gopt_task_name(gopt_env_task(e)));
  int k = o->samples < 0 ? 0 : (o->samples > 255 ? 255 : o->samples);
  opt_state s = {.x_best = x_best, .nv = gopt_env_nvars(e), .t0 = gopt_now(), .o = o};
  learn_graph *g = NULL;
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  gopt_nn_rng rng;
  gopt_nn_rng_seed(&rng, o->seed);
  double *xs = malloc(((size_t)(k + 1) * s.nv + 1) * sizeof *xs);
  gopt_env_result *rs = malloc((size_t)(k + 1) * sizeof *rs);
  int rc = !ctx || !xs || !rs ? gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory") : 0;
  if (!rc) rc = zero_shot(p, e, k, &rng, xs, &g, ctx, &s, err);
  if (!rc) rc = gopt_env_evaluate_batch(e, xs, (size_t)k + 1, rs, err);
  if (!rc) take(&s, xs, rs, (size_t)k + 1);
  if (!rc && o->finetune_evals > 0 && learn_nv(g) > 0) rc = finetune(p, e, g, ctx, k > 1 ? k : 8, &rng, &s, err);
  res->best = s.best;
  res->evals = s.evals;
  res->seconds = gopt_now() - s.t0;
  res->interrupted = learn_stop_requested();
  learn_coloc_free(s.coloc);
  free(s.coloc_dev);
  learn_graph_free(g);
  gopt_nn_ctx_free(ctx);
  free(xs);
  free(rs);
  return rc;
}
