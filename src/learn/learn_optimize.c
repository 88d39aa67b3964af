/* learn_optimize.c: `--method go` on one graph: zero-shot (greedy decode plus the best of K
 * samples; the list-order segment head decodes at up to five levels, and a training step's decodes
 * also with its gradients on their forward ops' devices, below) and optional PPO fine-tuning of a
 * per-graph feature modulation (GO's parameter superposition) starting from the trained policy. */
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

/* The zero-shot decodes' shared state. A variant is a level (0..levels-1) or, on a training step,
 * a level whose gradient and optimizer-update nodes then move to their forward node's device
 * (levels..2 levels-1; own: gopt_env_grad_owner's table, else NULL). Row r of xs (nv each) belongs
 * to variant row_lv[r]; rows r < nvar are greedy (one per variant). Placement rows are
 * post-processed (learn_colocate.c) unless c is NULL (c and dev_of belong to opt_state). */
typedef struct dec_ctx {
  gopt_env *e;
  int levels, nvar, k;
  int32_t *own;
  int owned; /* variables with an owner in own (0: no gradient-colocated variants) */
  int bal, nbal;                   /* the balanced variants bal..bal+nbal-1 (bal_variant); bal -1: none */
  int bal_lv[LEARN_DEC_BALANCED];  /* the level each decodes */
  double *cap[LEARN_DEC_BALANCED]; /* its cluster weights, over that level's clusters */
  gopt_nn_rng *rng;
  double *xs;
  size_t nv;
  const learn_graph *g0;
  learn_coloc *c;
  int32_t *dev_of; /* g0->n rows of learn_coloc_apply's scratch */
  int8_t row_lv[256];
} dec_ctx;

/* One decode level: its encoding, the head's forward pass over it, decisions scratch. */
typedef struct dec_level {
  learn_graph *g; /* owned, except level 0's (zero_shot's *g0) */
  learn_fwd f;
  learn_acts a;
} dec_level;

/* Decodes rows r0..r1 of level lv (those whose variant is lv, lv's gradient-colocated one or, for
 * level 0, the balanced one). */
static void decode_rows(dec_ctx *d, dec_level *L, int lv, int r0, int r1) {
  for (int r = r0; r <= r1; r++) {
    int v = d->row_lv[r];
    int b = d->bal >= 0 && v >= d->bal ? v - d->bal : -1;
    if ((b >= 0 ? d->bal_lv[b] : v % d->levels) != lv) continue;
    double *x = d->xs + (size_t)r * d->nv;
    gopt_env_default(d->e, x);
    if (b >= 0) learn_seg_sample(&L->f, L->g, d->rng, r < d->nvar, d->cap[b], &L->a);
    else learn_sample(&L->f, L->g, d->rng, r < d->nvar, &L->a);
    learn_to_x(L->g, &L->a, x);
    if (d->c) learn_coloc_apply(d->c, d->g0, x, d->dev_of);
    if (d->owned > 0 && v >= d->levels) /* owners are forward nodes, which this does not move */
      for (size_t v = 0; v < d->nv; v++)
        if (d->own[v] >= 0) x[v] = x[d->own[v]];
  }
}

/* Level L over `clusters` clusters of e (learn_graph_for), pooled from the graph embeddings of
 * level 0's forward pass f0. */
static int level_init(dec_ctx *d, gopt_policy *p, int clusters, const learn_fwd *f0, gopt_nn_ctx *ctx, dec_level *L,
                      gopt_error *err) {
  L->f = *f0;
  int rc = learn_graph_for(p, d->e, clusters, &L->g, err);
  if (!rc && learn_acts_alloc(&L->a, L->g)) rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  if (!rc) {
    learn_seg_forward(ctx, p, L->g, f0->dev_emb, f0->rows[GOPT_VAR_DEVICE], &L->f);
    rc = gopt_nn_ctx_status(ctx, err);
  }
  return rc;
}

void learn_alloc_levels(const gopt_env_result *greedy, int levels, int sampled, int k, int8_t *row_lv) {
  int keep[LEARN_DEC_VARIANTS] = {0}, nk = 0, b = 0;
  for (int l = 1; l < sampled; l++)
    if (gopt_env_result_better(&greedy[l], &greedy[b])) b = l;
  for (int l = 0; l < sampled; l++)
    if (l == b || !gopt_env_result_better(&greedy[b], &greedy[l])) keep[nk++] = l;
  for (int r = 0; r <= k; r++) row_lv[r] = (int8_t)(r < levels ? r : keep[(r - levels) % nk]);
}

/* The samples' variants (d->row_lv): with more than one variant, the greedy rows 0..nvar-1 are
 * evaluated first, into rs (the caller counts them). The samples go to the best of the variants
 * before the balanced ones: sampled under its cap, the training pairs did worse (docs/LEARNED.md,
 * "The balanced decode"). */
static int allocate(dec_ctx *d, gopt_env_result *rs, gopt_error *err) {
  if (d->nvar > 1) {
    int rc = gopt_env_evaluate_batch(d->e, d->xs, (size_t)d->nvar, rs, err);
    if (rc) return rc;
  }
  learn_alloc_levels(rs, d->nvar, d->bal >= 0 ? d->bal : d->nvar, d->k, d->row_lv);
  return 0;
}

/* On a training step (placement, not o->raw, and rows for two greedy decodes per level), the
 * gradient-colocated variants: d->own and d->nvar = 2 levels. A placement decided per node
 * splits a layer's backward pass from its forward activations, which on slow links costs more
 * than the parallel backward gains (docs/LEARNED.md, "Gradients follow their forward op"); both
 * are tried and the samples go to the better. */
static int grad_variants(dec_ctx *d, const opt_state *s, gopt_error *err) {
  d->nvar = d->levels;
  if (s->o->raw || gopt_env_task(d->e) != GOPT_TASK_PLACEMENT || 2 * d->levels > d->k + 1) return 0;
  d->own = malloc((d->nv + 1) * sizeof *d->own);
  if (!d->own) return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  d->owned = gopt_env_grad_owner(d->e, d->own, err);
  if (d->owned > 0) d->nvar = 2 * d->levels;
  return d->owned < 0 ? d->owned : 0;
}

/* A balanced variant (d->bal + d->nbal, one more greedy row when k leaves room): level lv (encoding
 * g) decoded so that no device takes much more than its share of the kernel time (learn_seg_sample's
 * cap), each cluster weighted by its nodes' kernel time plus, on a training step, that of the
 * gradient and update nodes they own, which then follow them. The per-cluster decisions follow
 * the earliest finish, which never splits a chain whose split pays only later (a training step's
 * backward overlap, a branch beside a cheap one); this variant splits every graph in about equal
 * parts: contiguous pieces of the decode order at level 0, unions of METIS's parts at the min-cut
 * levels. */
static int bal_variant(dec_ctx *d, const learn_graph *g, int lv, gopt_error *err) {
  if (!d->c || !g->n_seg || d->nvar > d->k || d->nbal >= LEARN_DEC_BALANCED) return 0;
  int64_t nd = g->nk[GOPT_VAR_DEVICE];
  int32_t *dv = malloc((d->nv + 1) * sizeof *dv);
  double *cap = d->cap[d->nbal] = calloc((size_t)g->n_seg + 1, sizeof *cap);
  if (!dv || !cap) {
    free(dv);
    return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  }
  for (size_t v = 0; v < d->nv; v++) dv[v] = -1;
  for (int64_t i = 0; i < nd; i++) dv[g->var[GOPT_VAR_DEVICE][i]] = (int32_t)i;
  double tot = 0;
  for (int64_t i = 0; i < nd; i++) {
    int32_t v = g->var[GOPT_VAR_DEVICE][i], o = d->owned > 0 && d->own[v] >= 0 ? dv[d->own[v]] : -1;
    double t = learn_row_us(g, g->rows[GOPT_VAR_DEVICE][i]);
    cap[g->var_seg[o >= 0 ? o : i]] += t;
    tot += t;
  }
  for (int64_t s = 0; s < g->n_seg; s++) cap[s] = tot > 0 ? cap[s] / tot : 1.0 / (double)g->n_seg;
  free(dv);
  if (d->bal < 0) d->bal = d->nvar;
  d->bal_lv[d->nbal++] = lv;
  d->nvar++;
  return 0;
}

/* The zero-shot decodes of p on e into xs[(k + 1) x nv]. A list-order segment head decodes at up to
 * seven levels: its S clusters (level 0), one cluster per node (when level 0 is not that already),
 * then S / 4, S / 16 and S / 64 clusters (each when at least 2 and fewer than level 0 has; S / 64
 * is 4 by default: a layer split in a few pieces, which wins on slow links); on a training step
 * each level also gradient-colocated (grad_variants); then two min-cut levels, METIS's D and 2 D
 * parts of the rows for D devices (learn_parts.c: parallel branches placed whole, which the
 * earliest-finish decode of their nodes one by one never does). Then the balanced decode
 * (bal_variant) of level 0 and, on a training step, of the min-cut levels instead of their greedy
 * rows (greedy, a step's forward chain stays on one device).
 * Rows 0..nvar-1 are each variant's greedy decode (a variant is used only when k >= its index);
 * the samples' variants (never a balanced one) are chosen by allocate (whose evaluations of the
 * greedy rows go to rs and *pre). The other levels reuse level 0's graph
 * embeddings (only the head's pooling is redone). With a placement task and not s->o->raw, every
 * decode's constant subexpressions then move to their readers (learn_colocate.c; s->coloc, kept for
 * fine-tuning). *g0 gets level 0's encoding (fine-tuning's), whose forward pass stays in ctx. */
_Static_assert(1 << 2 * (LEARN_DEC_LEVELS - LEARN_DEC_PARTS - 2) == LEARN_DEC_COARSEST,
               "LEARN_DEC_LEVELS: S, one per node, and S / 4, S / 16, ... down to S / LEARN_DEC_COARSEST");
static int zero_shot(gopt_policy *p, gopt_env *e, int k, gopt_nn_rng *rng, double *xs, gopt_env_result *rs, int *pre,
                     learn_graph **g0, gopt_nn_ctx *ctx, opt_state *s, gopt_error *err) {
  dec_level L[LEARN_DEC_LEVELS] = {{0}};
  dec_ctx d = {.e = e, .k = k, .rng = rng, .xs = xs, .nv = s->nv, .bal = -1};
  int rc = learn_graph_for(p, e, 0, g0, err);
  *pre = 0;
  L[0].g = *g0;
  if (!rc && learn_acts_alloc(&L[0].a, *g0)) rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  if (!rc && !s->o->raw && gopt_env_task(e) == GOPT_TASK_PLACEMENT) {
    s->coloc_dev = malloc(((size_t)(*g0)->n + 1) * sizeof *s->coloc_dev);
    rc = s->coloc_dev ? learn_coloc_new(e, *g0, &s->coloc, err) : gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  }
  if (!rc) {
    d.g0 = *g0;
    d.c = s->coloc;
    d.dev_of = s->coloc_dev;
    gopt_nn_ctx_set_training(ctx, 0);
    rc = learn_forward(ctx, p, *g0, NULL, &L[0].f, err);
  }
  int lv[LEARN_DEC_LEVELS] = {0}, levels = 1, multi = !rc && (*g0)->time_order && L[0].f.dev_emb;
  if (multi && levels <= k && (*g0)->n_seg < (*g0)->n) lv[levels++] = LEARN_SEG_PER_NODE;
  for (int q = 4; q <= LEARN_DEC_COARSEST; q *= 4) /* coarser: a multilevel partitioner's levels */
    if (multi && levels <= k && p->seg / q >= 2 && p->seg / q < (*g0)->n_seg) lv[levels++] = p->seg / q;
  d.levels = levels;
  if (!rc) rc = grad_variants(&d, s, err);
  int nl = levels; /* the min-cut levels: lv[levels..nl-1] */
  for (int m = 1; m <= LEARN_DEC_PARTS && multi && (*g0)->n_dev >= 2; m++) lv[nl++] = -m * (*g0)->n_dev;
  if (d.owned <= 0) { /* greedy rows for them, while k leaves room */
    while (levels < nl && levels <= k) levels++;
    d.levels = d.nvar = levels;
  }
  for (int l = 1; l < levels && !rc; l++) rc = level_init(&d, p, lv[l], &L[0].f, ctx, &L[l], err);
  if (!rc && multi) rc = bal_variant(&d, *g0, 0, err);
  for (int l = levels; l < nl && !rc && d.nvar <= k; l++) /* a training step's: balanced rows only */
    if (!(rc = level_init(&d, p, lv[l], &L[0].f, ctx, &L[l], err))) rc = bal_variant(&d, L[l].g, l, err);
  for (int r = 0; r < d.nvar; r++) d.row_lv[r] = (int8_t)r;
  for (int l = 0; l < nl && !rc; l++) decode_rows(&d, &L[l], l, 0, d.nvar - 1);
  if (!rc && d.nvar > 1) *pre = d.nvar;
  if (!rc) rc = allocate(&d, rs, err);
  for (int l = 0; l < nl && !rc; l++) decode_rows(&d, &L[l], l, d.nvar, k);
  free(d.own);
  for (int b = 0; b < LEARN_DEC_BALANCED; b++) free(d.cap[b]);
  for (int l = 0; l < LEARN_DEC_LEVELS; l++) {
    learn_acts_free(&L[l].a);
    if (l) learn_graph_free(L[l].g);
  }
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
  int pre = 0; /* rows zero_shot evaluated already */
  if (!rc) rc = zero_shot(p, e, k, &rng, xs, rs, &pre, &g, ctx, &s, err);
  if (!rc && pre <= k) rc = gopt_env_evaluate_batch(e, xs + (size_t)pre * s.nv, (size_t)(k + 1 - pre), rs + pre, err);
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
