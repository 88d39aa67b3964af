/* gopt/passes.h: target-independent compiler passes over the graph IR, after XLA's (HLO modules
 * imported by gopt/hlo.h; DCE and CSE work on any graph), and pass pipelines.
 *
 * Every pass is a pure graph -> graph function: gopt_pass_run clones its input, rewrites the
 * clone (and, recursively, the computations it calls) and returns it with statistics. Passes are
 * registered in one table addressed by index (0 .. gopt_pass_count()-1) or name, so an
 * environment can apply "pass #k" as an action. docs/PASSES.md lists the passes and the
 * algebraic simplifier's rules. */
#ifndef GOPT_PASSES_H
#define GOPT_PASSES_H

#include <stddef.h>

#include "gopt/graph.h"
#include "gopt/learn_seq.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Statistics of one pass run. ops_* count instructions as gopt_hlo_instruction_count does
 * (parameters, constants and nodes over all called computations). */
typedef struct gopt_pass_stats {
  size_t ops_before, ops_after;
  size_t removed, added;   /* nodes removed and added by rewrites (all computations) */
  size_t rewrites;         /* rule applications */
} gopt_pass_stats;

/* Number of registered passes; name and one-line description of pass i (NULL out of range). */
int gopt_pass_count(void);
const char *gopt_pass_name(int i);
const char *gopt_pass_description(int i);
/* Index of the pass named name (XLA's names, e.g. "algsimp", "dce"), -1 when none. */
int gopt_pass_find(const char *name);

/* Runs pass i on a clone of in: *out receives the rewritten graph (the caller frees it), st (may
 * be NULL) the statistics. in is not modified; err may be NULL. Returns 0 or an error. */
int gopt_pass_run(int i, const gopt_graph *in, gopt_graph **out, gopt_pass_stats *st,
                  gopt_error *err);

/* A pipeline step as reported by gopt_pipeline_run. */
typedef struct gopt_pipeline_step {
  int pass;
  size_t ops_before, ops_after;
} gopt_pipeline_step;

/* Runs a pipeline on a clone of in. spec is "default" or "default-cpu" (XLA's CPU order: the
 * passes before the simplification loop, the fixed-point loop run until no pass changes the graph
 * or 25 rounds, then the passes after it; see docs/PASSES.md), "default-gpu" (XLA's GPU order,
 * likewise; passes of XLA's lists that gopt does not register are skipped), or a comma-separated
 * list of pass names run once each in order. steps (may be NULL) receives a malloc'd array of the steps run (*n_steps of
 * them). Returns 0, or an error naming an unknown pass. */
int gopt_pipeline_run(const char *spec, const gopt_graph *in, gopt_graph **out,
                      gopt_pipeline_step **steps, size_t *n_steps, gopt_error *err);

/* ---- pass ordering as an environment (pass_env.c) ------------------------------------------
 * State: the current graph and the history of passes applied to it. Action: a pass index
 * (0 .. gopt_pass_count()-1) or GOPT_PASS_STOP. The cost C(s) is the instruction count
 * (objective ops) or the simulated step time on a cluster (objective time, analytical costs,
 * default decisions). The reward of a step is CompilerGym's normalised form
 *   r_t = (C(s_{t-1}) - C(s_t)) / D,  D = max(C(s_0) - C(s_default), 0.05 * C(s_0)),
 * s_default the module after XLA's default order ("default"): the rewards of an episode sum to 1
 * when it ends exactly as good as the default order (when the default order gains less than 5%, D
 * is 5% of the initial cost, so rewards stay bounded). An episode ends on STOP or after max_steps
 * passes. Every pass run is one evaluation (gopt_pass_env_evals). */
#define GOPT_PASS_STOP (-1)

typedef enum gopt_pass_objective { GOPT_PASS_OBJ_OPS = 0, GOPT_PASS_OBJ_TIME = 1 } gopt_pass_objective;

typedef struct gopt_pass_env_opts {
  int objective;        /* gopt_pass_objective */
  int max_steps;        /* episode length cap (default 32) */
  const char *cluster;  /* objective time: a cluster shorthand or JSON file (default "V100") */
  const char *baseline; /* the pipeline that normalises rewards (default "default") */
} gopt_pass_env_opts;

typedef struct gopt_pass_env gopt_pass_env;

/* A new environment over a clone of g (g may be freed afterwards); runs the baseline pipeline once
 * (its pass runs are not counted as evaluations). o may be NULL (defaults). */
int gopt_pass_env_new(const gopt_graph *g, const gopt_pass_env_opts *o, gopt_pass_env **out,
                      gopt_error *err);
void gopt_pass_env_free(gopt_pass_env *e); /* accepts NULL */
/* Back to the initial graph with an empty history. */
void gopt_pass_env_reset(gopt_pass_env *e);
/* Applies action (a pass index or GOPT_PASS_STOP); *reward (may be NULL) gets r_t (0 for STOP),
 * *done (may be NULL) whether the episode is over. A step after the end is GOPT_EINVAL. */
int gopt_pass_env_step(gopt_pass_env *e, int action, double *reward, int *done, gopt_error *err);
/* The current graph (owned by e, valid until the next step or reset) and the history. */
const gopt_graph *gopt_pass_env_graph(const gopt_pass_env *e);
size_t gopt_pass_env_history(const gopt_pass_env *e, const int **passes);
int gopt_pass_env_done(const gopt_pass_env *e);
int gopt_pass_env_max_steps(const gopt_pass_env *e);
/* Costs under the objective: now, at the start, after the baseline pipeline; D above. */
double gopt_pass_env_cost(const gopt_pass_env *e);
double gopt_pass_env_initial_cost(const gopt_pass_env *e);
double gopt_pass_env_baseline_cost(const gopt_pass_env *e);
double gopt_pass_env_reward_scale(const gopt_pass_env *e);
/* Per pass in this episode: how often it was applied, and the relative cost change of its last
 * application ((after - before) / C(s_0); 0 when never applied). */
int gopt_pass_env_applied(const gopt_pass_env *e, int pass);
double gopt_pass_env_last_delta(const gopt_pass_env *e, int pass);
/* Pass runs so far (every step and every gopt_pass_env_try). */
uint64_t gopt_pass_env_evals(const gopt_pass_env *e);
/* The cost of any graph under e's objective, and its instruction count and simulated step time
 * (seconds, on e's cluster; V100 for objective ops). Outputs may be NULL. */
int gopt_pass_env_measure(const gopt_pass_env *e, const gopt_graph *g, double *cost, size_t *ops,
                          double *step_time, gopt_error *err);

/* ---- pass-order search (pass_search.c) -------------------------------------------------------
 * Methods over e (each starts from e's initial graph; sequences are at most max_steps long):
 *   "random"  uniformly random sequences; every prefix is scored (one evaluation per pass run);
 *   "greedy"  from the current graph, tries every pass and keeps the one of lowest cost while it
 *             lowers the cost (ties: lowest index);
 *   "genetic" a population of 16 sequences (one of them the baseline pipeline's sequence when it
 *             fits in max_steps, the rest random), tournament selection, one-point crossover,
 *             per-gene mutation (replace, insert or delete), fitness = the best prefix's cost.
 * budget = evaluations (pass runs; default 1000). The best sequence (the shortest prefix reaching
 * the lowest cost) goes into res. gopt_search_request_stop() stops a search at the next
 * evaluation, keeping the best so far (res->interrupted). Deterministic for a seed. */
typedef struct gopt_pass_search_opts {
  uint64_t budget;
  uint64_t seed;
  int progress; /* 1: a progress line on stderr */
} gopt_pass_search_opts;

typedef struct gopt_pass_search_result {
  int *seq;        /* malloc'd pass indices (gopt_pass_search_result_free) */
  size_t n;
  double cost;     /* cost after seq */
  uint64_t evals;
  double seconds;
  int interrupted;
} gopt_pass_search_result;

int gopt_pass_search(gopt_pass_env *e, const char *method, const gopt_pass_search_opts *o,
                     gopt_pass_search_result *res, gopt_error *err);
void gopt_pass_search_result_free(gopt_pass_search_result *r); /* frees seq; accepts NULL */

/* ---- the learned agent (pass_rl.c; docs/PASSES.md "RL agent") --------------------------------
 * The sequential agent of gopt/learn_seq.h (kind "passes") over the environment: the state is the
 * current graph's live nodes of the entry computation (24 features: opcode class one-hot of 17,
 * log size, inputs, uses, reads a constant, reads a parameter, is an output, topological position)
 * and their dataflow edges; the candidates are the registered passes (features: one-hot of the
 * pass index among GOPT_PASS_RL_MAX_PASSES, times applied / 4, last result (10 x relative cost
 * change, clipped to [-1, 1]), applied at the previous step, steps taken / max_steps) and STOP. */
#define GOPT_PASS_RL_MAX_PASSES 32

/* A fresh policy (weights from seed), or the one in path (one line naming the file when it is
 * not a pass-ordering policy of this feature layout, truncated or corrupted). */
int gopt_pass_rl_policy_new(uint64_t seed, gopt_seq_policy **out, gopt_error *err);
int gopt_pass_rl_policy_load(const char *path, gopt_seq_policy **out, gopt_error *err);
/* PPO on the n environments (one per training module; names may be NULL); episodes are capped by
 * envs[0]'s max_steps (o->max_steps is ignored). */
int gopt_pass_rl_train(gopt_seq_policy *p, gopt_pass_env **envs, const char *const *names, size_t n,
                       const gopt_seq_train_opts *o, gopt_learn_train_result *res, gopt_error *err);
/* Orders e's module with the policy: the greedy episode, then sampled episodes (seeded) while a
 * whole episode fits in the budget (evaluations = pass runs; 0: the greedy episode only); res
 * gets the best prefix seen (shortest among the lowest cost). Stops on gopt_search_request_stop. */
int gopt_pass_rl_order(gopt_seq_policy *p, gopt_pass_env *e, uint64_t budget, uint64_t seed,
                       gopt_pass_search_result *res, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
