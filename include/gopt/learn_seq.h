/* gopt/learn_seq.h: the shared sequential-decision RL agent of the learn module, for multi-step
 * problems (graph rewriting, pass ordering) where each step picks one of a variable list of
 * candidates or STOP, the environment changes, and a reward comes back per step.
 *
 * Network (docs/LEARNED.md "Sequential agent"):
 *   node features [n, node_feat] -> the learn module's GNN encoder (input linear + residual
 *   GraphSAGE layers, the same layers as the GO policy's) -> node embeddings h [n, hidden];
 *   graph embedding g = mean over nodes of h;
 *   candidate score(c) = MLP([g, candidate features (cand_feat), h[anchor(c)] or zeros]) -> 1;
 *   STOP score = Linear(g); action distribution = softmax over [scores of the candidates, STOP];
 *   value V(s) = MLP(g).
 * Training: PPO (clipped surrogate, value loss, entropy bonus) on complete episodes, advantages
 * by GAE(gamma, lambda) from the value head, normalised within each rollout group; optionally
 * after an imitation warm start (imitate_iters): episodes whose steps the environment's expert
 * labels (half of them taking its action, half the policy's sample: DAgger), and cross-entropy
 * towards the actions it accepts instead of the surrogate.
 *
 * Episodes are collected from a caller-supplied environment (gopt_seq_env): reset to training
 * graph i, observe the state (graph features + candidate list), step with an action. Every random
 * choice comes from the seed: episode e of iteration t samples from a RNG seeded by
 * (seed, t, e), so results depend neither on process count nor on where a run was resumed.
 *
 * Policy file: the .gpol container of gopt/learn.h ("GOPTPOL1", metadata, NN checkpoint,
 * checksum) with metadata "task seq:<kind>" (kind, e.g. "rewrite" or "passes", set by the
 * caller); loading a file of another kind (or a GO policy) fails with one line naming the file. */
#ifndef GOPT_LEARN_SEQ_H
#define GOPT_LEARN_SEQ_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/learn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GOPT_SEQ_STOP (-1)          /* the STOP action */
#define GOPT_SEQ_MAX_CAND 4096      /* candidates per state (more are refused) */

/* One observed state. Arrays belong to the environment and stay valid until its next
 * reset/step/observe call. */
typedef struct gopt_seq_obs {
  int64_t n_nodes;          /* >= 1 */
  const float *node_feat;   /* n_nodes x node_feat (the policy's width) */
  int64_t n_edges;
  const int32_t *edges;     /* n_edges (src, dst) pairs of node indices; used undirected */
  int n_cand;               /* 0..GOPT_SEQ_MAX_CAND (STOP is always available besides) */
  const float *cand_feat;   /* n_cand x cand_feat */
  const int32_t *anchor;    /* n_cand anchor node indices (-1: none) */
} gopt_seq_obs;

/* The environment. reset(env, i): start an episode on training graph i. observe: the current
 * state. step(action): apply candidate `action` (index into the last observation) or
 * GOPT_SEQ_STOP; *reward receives the step's reward, *done 1 when the episode is over (always
 * after STOP). expert (may be NULL; needed by imitate_iters): after observe, the actions a
 * hand-written rule accepts in the current state: ok[0..n_cand) the candidates, ok[n_cand] STOP,
 * each set to 1 or 0, at least one 1 (several where the rule has ties). Each returns 0 or an
 * error with one line in err. */
typedef struct gopt_seq_env {
  int (*reset)(void *env, size_t graph, gopt_error *err);
  int (*observe)(void *env, gopt_seq_obs *obs, gopt_error *err);
  int (*step)(void *env, int action, double *reward, int *done, gopt_error *err);
  void *env;
  int (*expert)(void *env, unsigned char *ok, gopt_error *err);
} gopt_seq_env;

typedef struct gopt_seq_arch {
  int node_feat, cand_feat; /* input widths (required, >= 1 / >= 0) */
  int hidden;               /* embedding width (default 32) */
  int sage_layers;          /* GraphSAGE layers (default 2, at most 4) */
  int mlp_hidden;           /* candidate / value MLP width (default 64) */
} gopt_seq_arch;

typedef struct gopt_seq_policy gopt_seq_policy;

/* A fresh policy of kind (a short word, e.g. "rewrite") with weights from seed. */
int gopt_seq_policy_new(const char *kind, const gopt_seq_arch *arch, uint64_t seed,
                        gopt_seq_policy **out, gopt_error *err);
void gopt_seq_policy_free(gopt_seq_policy *p); /* accepts NULL */
const char *gopt_seq_policy_kind(const gopt_seq_policy *p);
gopt_seq_arch gopt_seq_policy_arch(const gopt_seq_policy *p);
size_t gopt_seq_policy_param_count(const gopt_seq_policy *p);
const float *gopt_seq_policy_weights(const gopt_seq_policy *p);
int64_t gopt_seq_policy_iters(const gopt_seq_policy *p);
const char *gopt_seq_policy_trainset(const gopt_seq_policy *p); /* one entry per line */
/* Writes the policy (and its trainer state) atomically. */
int gopt_seq_policy_save(const gopt_seq_policy *p, const char *path, gopt_error *err);
/* Reads a policy; kind must match ("P.gpol: policy is for 'seq:passes', not 'seq:rewrite'"); a
 * truncated, corrupted or foreign file gets one line naming the file. */
int gopt_seq_policy_load(const char *path, const char *kind, gopt_seq_policy **out, gopt_error *err);

/* Finds the shipped policy <kind>.gpol where gopt_learn_find_policy looks (exe as there); one
 * line listing where it looked when there is none. */
int gopt_seq_find_policy(const char *kind, const char *exe, char *buf, size_t n, gopt_error *err);

/* Action probabilities for one observation: probs[0..n_cand) the candidates, probs[n_cand] STOP. */
int gopt_seq_policy_probs(gopt_seq_policy *p, const gopt_seq_obs *obs, double *probs, gopt_error *err);

/* Runs one episode on graph: greedy (argmax) or sampled from seed; at most max_steps steps
 * (then the episode ends as if STOP was chosen, without calling step). *ret (may be NULL)
 * receives the sum of rewards, *steps (may be NULL) the steps taken. */
int gopt_seq_run(gopt_seq_policy *p, const gopt_seq_env *env, size_t graph, int greedy, uint64_t seed,
                 int max_steps, double *ret, int *steps, gopt_error *err);

typedef struct gopt_seq_train_opts {
  int64_t iters;            /* total iterations (a resumed run gives the same value) */
  int64_t stop_after;       /* > 0: return after this many total iterations (as an interrupt) */
  int64_t imitate_iters;    /* the first this many iterations are an imitation warm start: every
                             * step labelled by env->expert and taking its first accepted action or,
                             * with probability 1/2, the policy's sample; loss = -log of the
                             * policy's probability of the accepted set + the value loss (no
                             * surrogate, no entropy bonus); a resumed run needs the same value.
                             * Default 0. */
  uint64_t seed;
  int episodes;             /* per iteration (default 8; multiple of the rollout groups) */
  int max_steps;            /* per episode (default 16) */
  int epochs;               /* PPO epochs per iteration (default 4) */
  float lr;                 /* Adam (default 3e-3, warmup + cosine) */
  float clip_eps;           /* default 0.2 */
  float ent_coef;           /* default 0.01 (< 0: none) */
  float vf_coef;            /* value loss weight (default 0.5) */
  float gamma, lambda;      /* GAE (defaults 0.99, 0.95) */
  float clip_norm;          /* default 1.0 */
  int rollout_groups;       /* one process: gradient groups (default 1) */
  const gopt_learn_dist *dist; /* non-NULL: rank r collects and differentiates group r */
  gopt_learn_iter_fn on_iter;  /* info.reward: mean episode return; info.graph: last graph;
                                * info.best_obj: best return so far; info.ref_obj: NaN */
  void *user;
} gopt_seq_train_opts;

/* Trains p on the environment's n_graphs training graphs (names[i] may be NULL; recorded in
 * the policy). Episode e of iteration t runs on graph (hash of seed, t, e) mod n_graphs. Stops
 * early on gopt_learn_request_stop (res->interrupted). A policy loaded with trainer state
 * continues exactly where it stopped (same weights as an uninterrupted run). */
int gopt_seq_train(gopt_seq_policy *p, const gopt_seq_env *env, const char *const *names, size_t n_graphs,
                   const gopt_seq_train_opts *o, gopt_learn_train_result *res, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
