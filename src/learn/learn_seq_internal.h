/* learn_seq_internal.h: the sequential agent's layout and the pieces its two files share
 * (learn_seq.c: network, episodes, files; learn_seq_train.c: the PPO trainer). */
#ifndef GOPT_LEARN_SEQ_INTERNAL_H
#define GOPT_LEARN_SEQ_INTERNAL_H

#include "gopt/learn_seq.h"
#include "learn/learn_internal.h"

struct gopt_seq_policy {
  char kind[32];
  gopt_seq_arch arch;
  gopt_nn_params *params;
  gopt_nn_linear in;                    /* encoder (learn_encode) */
  gopt_nn_sage sage[LEARN_MAX_SAGE];
  gopt_nn_mlp cand;                     /* [g, cand_feat, h_anchor] -> 1 */
  gopt_nn_linear stop;                  /* g -> 1 */
  gopt_nn_mlp value;                    /* g -> 1 */
  char *trainset;
  /* trainer state (has_train) */
  int has_train;
  int64_t iter, total_iters;
  size_t n_graphs;
  double best_ret;
  unsigned char *ckpt;                  /* NN checkpoint with Adam state */
  size_t ckpt_len;
};

/* One recorded step: the observation (copied), the action taken and PPO's bookkeeping. */
typedef struct seq_step {
  int64_t n;
  float *feat;             /* n x node_feat */
  gopt_nn_csr csr;
  int m;                   /* candidates */
  float *cf;               /* m x cand_feat */
  int32_t *anchor;         /* m, -1 mapped to n (a zero row) */
  int32_t action;          /* 0..m-1 a candidate, m STOP */
  unsigned char *ok;       /* imitation: m + 1 flags, the actions the expert accepts (else NULL) */
  float logp_old, value;
  double reward, adv, ret;
} seq_step;

/* Copies obs into s (validated against the policy's widths: one line naming what is wrong). */
int seq_step_from_obs(const gopt_seq_policy *p, const gopt_seq_obs *obs, seq_step *s, gopt_error *err);
void seq_step_free(seq_step *s); /* accepts NULL */
/* Forward pass of one step: *logits [1, m+1] (STOP last), *value [1, 1]. */
int seq_forward(gopt_nn_ctx *ctx, const gopt_seq_policy *p, const seq_step *s, gopt_nn_tensor **logits,
                gopt_nn_tensor **value, gopt_error *err);
/* A growing list of recorded steps. */
typedef struct seq_steps { seq_step *a; size_t n, cap; } seq_steps;
void seq_steps_clear(seq_steps *v); /* frees every step and the array; accepts NULL */
/* How an episode's actions are chosen. */
enum { SEQ_SAMPLE, SEQ_GREEDY, SEQ_EXPERT };
/* Runs one episode from graph with rng, appending its steps to v; mode: sampled from the policy,
 * its argmax, or imitation (env->expert's accepted set recorded in each step; the action taken is
 * the expert's first or the policy's sample, at random).
 * *ret: the sum of rewards. */
int seq_episode(gopt_nn_ctx *ctx, gopt_seq_policy *p, const gopt_seq_env *env, size_t graph, int mode,
                gopt_nn_rng *rng, int max_steps, seq_steps *v, double *ret, gopt_error *err);

#endif
