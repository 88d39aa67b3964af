/* gopt/learn.h: the learned optimizer (GO-style policy) shared by `gopt train`, `--method go` and
 * REGAL (--method regal, below) and later local-advantage: graph encoder, per-decision-kind heads,
 * PPO and REINFORCE trainers, policy files.
 *
 * Policy (docs/LEARNED.md has the details and every hyperparameter):
 *   node features (gopt_env_node_features + cluster/graph context) -> input linear -> GraphSAGE
 *   layers (residual, layernorm) -> [per-graph feature modulation when fine-tuning] -> one
 *   segment-recurrent attention block (gopt_nn_seg_block, nodes in topological order) per decision
 *   kind the task has, chained DEVICE -> PRIORITY -> FUSE (each block's output embeddings feed the
 *   next block: GO's joint placement -> scheduling -> fusion) -> heads:
 *     DEVICE    categorical, logits[n,d] = <Wq e[n], MLP(dev_feat[d])>: one set of weights serves
 *               any device count; for placement (default) the segment head instead: the graph is
 *               coarsened into <= 64 clusters (contiguous runs of a depth-first topological order),
 *               one device per cluster chosen autoregressively (conditioned on the earlier clusters'
 *               devices), then a node-level refinement (docs/LEARNED.md "Segment-level placement");
 *     PRIORITY  Beta(alpha, beta) (gopt_nn_beta_head);
 *     FUSE      2-way categorical.
 *   All of a graph's decisions come from one forward pass (the segment head's autoregression runs
 *   over the pass's outputs).
 *
 * Policy file (.gpol, little-endian, one file, checksummed, written atomically):
 *   "GOPTPOL1" | u32 format version | u32 meta_len | meta (text, "key value" lines: task, feature
 *   version, architecture, training set, trainer state) | u64 ckpt_len | NN checkpoint
 *   (gopt_nn_ckpt_save format: weights, Adam moments, RNG, iteration) | u64 FNV-1a-64 of all
 *   bytes before it. */
#ifndef GOPT_LEARN_H
#define GOPT_LEARN_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/search.h"
#include "gopt/task.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the policy input features (env features + context columns). A policy trained with
 * another version is refused on load. */
#define GOPT_LEARN_FEAT_VERSION 2
#define GOPT_LEARN_FILE_VERSION 5 /* 2: a `place_head segment S` metadata line; 3: `place_head segment S feats F`
                                     (the segment head's list-schedule and memory features); 4: `... order O`
                                     (its decode order); 5: feats 7 (its return-transfer feature); 1 to 4
                                     still load */

/* The segment head's decode order (gopt_learn_arch.seg_order). */
#define GOPT_LEARN_ORDER_INDEX 1 /* the clusters in depth-first order (file versions 2 and 3) */
#define GOPT_LEARN_ORDER_LIST 2  /* list-schedule order: next the ready cluster that can start earliest on some
                                    device, ties to the longer chain after it (HEFT's upward rank) */

/* Architecture (saved in the policy file; 0 fields take the defaults). */
typedef struct gopt_learn_arch {
  int hidden;       /* node embedding width (default 32) */
  int sage_layers;  /* GraphSAGE layers (default 2) */
  int heads;        /* attention heads (default 2; must divide hidden) */
  int seg_len;      /* attention segment length (default 64) */
  int dev_hidden;   /* device embedding width of the device head (default 16) */
  int clusters;     /* placement device head of a GO policy: > 0 the segment head with at most this
                     * many clusters (0: the default, 256, for placement); -1 the per-node head (the
                     * only one before file version 2; other tasks always use it) */
  int seg_feats;    /* segment head's conditioning features: 0 the default (7: load, previous device,
                     * unused device, neighbours, list-schedule finish time, memory, return transfer);
                     * 6 the head of file versions 3 and 4 without the last; 4 the file-version-2 head
                     * without the last three */
  int seg_order;    /* segment head's decode order: 0 the default (GOPT_LEARN_ORDER_LIST with 6 or 7
                     * features, _INDEX with 4), or GOPT_LEARN_ORDER_INDEX / _LIST */
} gopt_learn_arch;

typedef struct gopt_policy gopt_policy;

/* A fresh policy for task with weights initialised from seed. */
int gopt_policy_new(int task, const gopt_learn_arch *arch, uint64_t seed, gopt_policy **out,
                    gopt_error *err);
void gopt_policy_free(gopt_policy *p); /* accepts NULL */
int gopt_policy_task(const gopt_policy *p);
gopt_learn_arch gopt_policy_arch(const gopt_policy *p);
size_t gopt_policy_param_count(const gopt_policy *p);
/* All weights as one float array (gopt_policy_param_count floats), e.g. to compare two policies. */
const float *gopt_policy_weights(const gopt_policy *p);
/* Description of the training set (one entry per line, "" when untrained). */
const char *gopt_policy_trainset(const gopt_policy *p);
/* Training iterations done so far (0 when untrained). */
int64_t gopt_policy_iters(const gopt_policy *p);

/* Writes the policy (and its trainer state when it has one) to path atomically. */
int gopt_policy_save(const gopt_policy *p, const char *path, gopt_error *err);
/* Reads a policy. task >= 0: refuse a policy for another task ("P.gpol: policy is for task
 * 'fusion', not 'placement'"). A file from another feature or format version, truncated or
 * corrupted, gets one line naming the file. The trainer state is kept for gopt_learn_train. */
int gopt_policy_load(const char *path, int task, gopt_policy **out, gopt_error *err);

/* Decides for one environment with one forward pass: row 0 of xs (n rows x nvars) is the greedy
 * decision (argmax devices and fusion bits, Beta mean priorities) when greedy is set, every other
 * row a sample drawn from the policy with seed. Values are valid for gopt_env_vars. */
int gopt_policy_decide(gopt_policy *p, const gopt_env *e, int greedy, size_t n, uint64_t seed,
                       double *xs, gopt_error *err);

/* ---- rewards -------------------------------------------------------------------------- */
/* The reference result of an environment: the best (gopt_env_result_cmp) of the task's standard
 * baselines (gopt_baseline_task_name), and its decision vector into x_ref when non-NULL. */
int gopt_learn_reference(const gopt_env *e, gopt_env_result *ref, double *x_ref, gopt_error *err);
/* Reward of r relative to ref, consistent with gopt_env_result_cmp between results that fit:
 * feasible: max(-1, (ref.obj - r.obj) / ref.obj) (0 = as good as the best baseline, > 0 better);
 * over memory: -1.01 - min(10, mem_over / smallest device memory) (below every feasible result). */
double gopt_learn_reward(const gopt_env *e, const gopt_env_result *r, const gopt_env_result *ref);

/* ---- training --------------------------------------------------------------------------- */
typedef struct gopt_learn_iter_info {
  int64_t iter;            /* 0-based iteration just finished */
  double loss;             /* mean PPO loss of the iteration's updates */
  double reward;           /* mean sampled reward of the iteration */
  double lr;
  size_t graph;            /* the last graph trained on in this iteration */
  double best_obj;         /* best objective sampled so far on that graph */
  double ref_obj;          /* that graph's best baseline objective */
} gopt_learn_iter_info;
typedef void (*gopt_learn_iter_fn)(const gopt_learn_iter_info *info, void *user);

/* Distributed training (`gopt train` under mpirun; libgopt has no MPI: the caller supplies the
 * exchange). Every PPO batch's samples are split into contiguous rollout groups of equal size;
 * each group's gradient is computed on its own (group 0's carries the entropy bonus) and the group
 * gradients are summed in group order, so the weights depend on the number of groups only, never on
 * how many processes computed them: P processes (one group each) give bitwise the weights of one
 * process with rollout_groups = P. Sampling is replicated (same weights, same RNG on every rank);
 * each rank evaluates its group's samples and computes its group's gradient.
 * allgather: buf holds size blocks of bytes, block `rank` filled by this rank; fills every other
 * block from its rank. rc is this rank's status: when any rank's is non-zero every rank returns
 * non-zero with one error line (naming the failing rank) in err, so a failure never hangs.
 * The same hook distributes a search's batch evaluations (gopt_search_opts.dist, search.h). */
typedef int (*gopt_learn_allgather_fn)(void *buf, size_t bytes, int rc, void *user, gopt_error *err);
typedef struct gopt_learn_dist {
  int rank, size;
  gopt_learn_allgather_fn allgather;
  void *user;
} gopt_learn_dist;

typedef struct gopt_learn_train_opts {
  int64_t iters;           /* total iterations of the run (a resumed run gives the same value) */
  int64_t stop_after;      /* > 0: return after this many total iterations (as an interrupt) */
  uint64_t seed;           /* weights are seeded by gopt_policy_new; this seeds sampling */
  int graphs_per_iter;     /* default 2 */
  int samples;             /* decision vectors per graph and iteration (default 8; REGAL: run pairs) */
  int epochs;              /* PPO epochs per batch (default 2) */
  float lr;                /* Adam learning rate (default 3e-3) */
  float clip_eps;          /* PPO clip (default 0.2) */
  float ent_coef;          /* entropy bonus (default 0.01) */
  float kl_coef;           /* placement's segment head: weight of the KL divergence of its cluster
                            * decisions from the head's fixed-feature prior, summed over the clusters
                            * (default 0: none; docs/LEARNED.md "KL anchor") */
  float coarse_frac;       /* placement's list-order segment head: the share of a training step's PPO
                            * batches decided at go's coarsest zero-shot level, S / 64 clusters (default
                            * 0; docs/LEARNED.md "Training at the coarsest level") */
  float clip_norm;         /* gradient clipping (default 1.0) */
  float baseline_decay;    /* per-graph moving-average baseline decay (default 0.9) */
  int64_t imitate_iters;   /* the first this many of iters are an imitation warm start: cross-entropy
                            * to each graph's reference decisions (gopt_learn_reference), no PPO
                            * (default 0) */
  int rollout_groups;      /* one process: gradient groups per batch (default 1; samples % groups == 0) */
  uint64_t regal_evals;    /* REGAL: evaluations of each brkga-regal run (default 1000) */
  int regal_population;    /* REGAL: the runs' BRKGA population (0: brkga-regal's default, 100) */
  const gopt_learn_dist *dist; /* non-NULL: distributed, groups = dist->size (rollout_groups ignored) */
  gopt_learn_iter_fn on_iter;
  void *user;
} gopt_learn_train_opts;

typedef struct gopt_learn_train_result {
  int64_t iters_done;      /* total iterations done (including earlier runs when resumed) */
  int interrupted;         /* stopped by gopt_learn_request_stop or stop_after */
  double seconds;
} gopt_learn_train_result;

/* Trains p with PPO on the n environments (all of p's task). names[i] (may be NULL) describe
 * them for the policy file. A policy that already has trainer state (loaded from a file written
 * by an interrupted run) continues exactly where it stopped: same losses, same final weights as an
 * uninterrupted run, given the same environments, options and thread count. */
int gopt_learn_train(gopt_policy *p, gopt_env *const *envs, const char *const *names, size_t n,
                     const gopt_learn_train_opts *o, gopt_learn_train_result *res, gopt_error *err);

/* Asks a running gopt_learn_train / gopt_learn_optimize to stop at the next iteration boundary
 * (async-signal-safe); clear before a new run. */
void gopt_learn_request_stop(void);
void gopt_learn_clear_stop(void);

/* ---- optimizing one graph (`gopt optimize --method go`) ---------------------------------- */
typedef struct gopt_learn_opt_opts {
  int samples;             /* K + 1 decisions: greedy, then K samples (default 16; 0 = greedy only); a list-order
                            * placement policy first decodes greedily at its clusters, single nodes, a quarter,
                            * a sixteenth and a 64th of its clusters (on a training step each also with the
                            * gradients on their forward op's device; elsewhere also at METIS's D and 2 D
                            * parts for D devices), then under a load cap (the balanced decode) at its clusters
                            * and, on a training step, at those parts (these evaluations come first), then
                            * samples at the level whose greedy decision is best (ties share; never a balanced
                            * decode) */
  uint64_t finetune_evals; /* > 0: PPO fine-tuning of the feature modulation for this many evals */
  uint64_t seed;
  gopt_search_trace_fn on_improve; /* best-vs-evaluations curve (may be NULL) */
  void *user;
  int raw;                 /* placement: the decodes as the policy gives them, without moving each constant
                            * subexpression (zero-time nodes reading only weights) to its readers' device
                            * and without a training step's gradient-colocated variants or the balanced
                            * decode */
} gopt_learn_opt_opts;

/* Zero-shot: the greedy decision and the best of K samples (ranked by gopt_env_result_cmp); with
 * finetune_evals, then PPO on this graph starting from the policy, training only a per-graph
 * feature modulation (scale/shift of the hidden features). x_best (nvars doubles) and res receive
 * the best decision found (res->evals counts every evaluation, res->seconds the time). p's weights
 * are not changed. */
int gopt_learn_optimize(gopt_policy *p, gopt_env *e, const gopt_learn_opt_opts *o, double *x_best,
                        gopt_search_result *res, gopt_error *err);

/* Finds the shipped policy <task>.gpol: in $GOPT_POLICY_DIR, else as policies/<task>.gpol where
 * gopt_find_shipped (gopt/util.h) looks: next to the executable exe (a path, e.g. argv[0]; NULL or
 * no slash: /proc/self/exe) in policies/, ../policies/, ../share/gopt/policies/ and ../../policies/
 * (a build dir inside the source tree, binary in BUILD/bin), then the source tree the build was
 * configured from, then the configured prefix's share/gopt. Writes the first existing path into
 * buf and returns 0, or GOPT_EIO with one line listing where it looked. */
int gopt_learn_find_policy(int task, const char *exe, char *buf, size_t n, gopt_error *err);
/* The same for a policy kind (gopt_policy_kind): "go" finds <task>.gpol, "regal" <task>_regal.gpol;
 * "host" finds <task>_host.gpol, a go policy trained on the host target (a cpu cluster, whose fusion
 * legality is gopt's executor's; `gopt optimize --method go` prefers it there when it exists). */
int gopt_learn_find_policy_kind(int task, const char *kind, const char *exe, char *buf, size_t n,
                                gopt_error *err);

/* ---- REGAL: a policy that guides BRKGA (`--method regal`, docs/LEARNED.md "REGAL") ---------
 * A REGAL policy is the GO encoder (same features, GraphSAGE layers, attention blocks) with Beta
 * heads for REGAL's chromosome (search.h, "brkga-regal"): per DEVICE variable and device an
 * affinity gene ~ Beta(alpha, beta) with alpha, beta = softplus(<W q(node), MLP(device)>) + 1 (any
 * device count), per PRIORITY variable the policy's priority Beta head; FUSE genes stay uniform.
 * Its samples replace BRKGA's uniform keys for generation 0 and the mutants; elites and biased
 * crossover are unchanged. Training (gopt_learn_train on a REGAL policy) is REINFORCE: per graph
 * and iteration `samples` pairs of runs of brkga-regal at regal_evals evaluations with the same
 * seed, one guided and one uniform; the reward is gopt_learn_reward of the guided best against the
 * uniform best; the log-probability is that of every chromosome the policy supplied to the guided
 * run. Under dist the runs are the rollout groups (samples % groups == 0). */
int gopt_policy_new_regal(int task, const gopt_learn_arch *arch, uint64_t seed, gopt_policy **out,
                          gopt_error *err);
/* "go" or "regal" (a policy file records it). */
const char *gopt_policy_kind(const gopt_policy *p);

/* One forward pass of a REGAL policy on an environment, kept for sampling chromosomes. */
typedef struct gopt_regal_sampler gopt_regal_sampler;
/* Errors: not a REGAL policy, another task (one line naming the policy's kind or task). */
int gopt_regal_sampler_new(gopt_policy *p, const gopt_env *e, gopt_regal_sampler **out, gopt_error *err);
void gopt_regal_sampler_free(gopt_regal_sampler *s); /* accepts NULL */
/* Sets o->sample_keys / o->keys_user so that gopt_search_run("brkga-regal", ...) (or anything that
 * runs it with a copy of o, such as the MPI island search) samples from s; s must outlive the run. */
void gopt_regal_sampler_attach(gopt_regal_sampler *s, gopt_search_opts *o);
/* REGAL with the shape of gopt_search_run: brkga-regal under o (budget, seed, threads, start,
 * population, fractions, callbacks) with the policy's sampling. */
int gopt_learn_regal_search(gopt_policy *p, gopt_env *e, const gopt_search_opts *o, double *x_best,
                            gopt_search_result *res, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
