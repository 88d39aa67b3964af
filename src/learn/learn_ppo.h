/* learn_ppo.h: one PPO batch on one graph (sample K decision vectors from one forward pass,
 * evaluate them in parallel, advantages against a per-graph moving-average baseline, E epochs of
 * clipped-surrogate updates), shared by training (learn_train.c) and fine-tuning (learn_optimize.c). */
#ifndef GOPT_LEARN_PPO_H
#define GOPT_LEARN_PPO_H

#include "learn/learn_internal.h"

typedef struct learn_ppo_cfg {
  int samples, epochs;
  float clip_eps, ent_coef, baseline_decay;
  int groups;                   /* rollout groups (<= 1: one); see gopt_learn_dist */
  const gopt_learn_dist *dist;  /* distributed training (NULL: one process) */
  float kl_coef;                /* segment head: weight of the KL anchor (learn_seg_kl; 0: none) */
} learn_ppo_cfg;

typedef struct learn_batch {
  int k;                  /* samples */
  int64_t nv;             /* policy variables */
  learn_acts *acts;       /* k */
  double *xs;             /* k x nvars */
  gopt_env_result *res;   /* k */
  double *reward;         /* k */
  double advantage[256];  /* k <= 256 */
  float *old;             /* k x nv: log-probs at sampling time */
  float *adv;             /* nv scratch */
  double loss, mean_reward;
  learn_coloc *coloc;     /* NULL, or the post-process each sample gets before it is evaluated
                           * (learn_colocate.c; not owned, set after learn_batch_init) ... */
  int32_t *coloc_dev;     /* ... and its scratch (not owned) */
} learn_batch;

/* k <= 256. Returns 0 or GOPT_ENOMEM (free with learn_batch_free either way). */
int learn_batch_init(learn_batch *b, const learn_graph *g, size_t nvars, int k);
void learn_batch_free(learn_batch *b);

/* Runs one batch of b->k samples; opt updates the parameters it was made for (the policy's when
 * training, the modulation's when fine-tuning). ref: the graph's reward reference; *ema: its reward
 * baseline (NaN on first visit; updated). */
int learn_ppo_batch(gopt_nn_ctx *ctx, gopt_policy *p, const learn_mod *mod, gopt_nn_optim *opt,
                    gopt_env *e, const learn_graph *g, const gopt_env_result *ref, double *ema,
                    const learn_ppo_cfg *c, gopt_nn_rng *rng, learn_batch *b, gopt_error *err);

#endif
