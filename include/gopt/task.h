/* gopt/task.h: the decision problems as one environment interface.
 *
 * An environment (gopt_env) binds a graph, a cluster and a task. It defines a vector of decision
 * variables x (one or more per node, see gopt_env_var), the default (heuristic) decision vector,
 * and evaluate(x) -> objective via the step simulator (sim.h). Every baseline, search method and
 * learned policy works on this interface, so they are scored identically.
 *
 * Variables. Each variable belongs to one node and has a kind:
 *   GOPT_VAR_DEVICE    integer in [0, D): the device running the node
 *   GOPT_VAR_FUSE      integer in {0, 1}: fuse the node into its consumer(s) (XLA's decision)
 *   GOPT_VAR_PRIORITY  real in [0, 1]: scheduling priority (higher runs first among ready nodes)
 * Tasks and their variables:
 *   placement  DEVICE per node               objective: step time (infeasible memory penalised)
 *   fusion     FUSE per fusible node         objective: step time on one device
 *   schedule   PRIORITY per node             objective: step time on the cluster
 *   memory     DEVICE + PRIORITY per node    objective: peak memory (max over devices; REGAL)
 *   joint      DEVICE + PRIORITY + FUSE      objective: step time (GO's joint task)
 * Values are stored as doubles (integers for discrete kinds). Variable order: all variables of a
 * kind in topological node order, kinds in the order DEVICE, PRIORITY, FUSE. */
#ifndef GOPT_TASK_H
#define GOPT_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/device.h"
#include "gopt/graph.h"
#include "gopt/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gopt_task_kind {
  GOPT_TASK_PLACEMENT = 0,
  GOPT_TASK_FUSION,
  GOPT_TASK_SCHEDULE,
  GOPT_TASK_MEMORY,
  GOPT_TASK_JOINT,
  GOPT_TASK_COUNT
} gopt_task_kind;

/* "placement", "fusion", "schedule", "memory", "joint"; -1 / NULL when unknown. */
int gopt_task_from_name(const char *name);
const char *gopt_task_name(int task);

enum { GOPT_VAR_DEVICE = 0, GOPT_VAR_PRIORITY = 1, GOPT_VAR_FUSE = 2 };

typedef struct gopt_env_var {
  int32_t node;   /* graph node id */
  int32_t kind;   /* GOPT_VAR_* */
  int32_t card;   /* number of choices for discrete kinds; 0 for PRIORITY (continuous) */
} gopt_env_var;

typedef struct gopt_env_result {
  double objective;    /* what the task minimises (seconds or bytes), penalty included */
  double step_time;    /* seconds */
  double peak_mem;     /* bytes, max over devices */
  double mem_over;     /* bytes over capacity, max over devices (0 when feasible) */
  int feasible;
} gopt_env_result;

typedef struct gopt_env_opts {
  int task;                     /* gopt_task_kind */
  const gopt_sim_opts *sim;     /* cost options (NULL: analytical) */
  double mem_penalty;           /* objective *= 1 + mem_penalty * over / capacity (default 10) */
  int threads;                  /* for batch evaluation; <= 0: all */
} gopt_env_opts;

typedef struct gopt_env gopt_env;

/* Builds the environment (and its simulator) for graph g on cluster c. Both must outlive it. */
int gopt_env_new(const gopt_graph *g, const gopt_cluster *c, const gopt_env_opts *o,
                 gopt_env **out, gopt_error *err);
void gopt_env_free(gopt_env *e); /* accepts NULL */

size_t gopt_env_nvars(const gopt_env *e);
const gopt_env_var *gopt_env_vars(const gopt_env *e);
const gopt_graph *gopt_env_graph(const gopt_env *e);
const gopt_cluster *gopt_env_cluster(const gopt_env *e);
int gopt_env_task(const gopt_env *e);
const gopt_sim *gopt_env_sim(const gopt_env *e);

/* The default decision vector (the compiler's own heuristics: everything on device 0 /
 * XLA-style fusion rules / topological priority) into x (nvars doubles). */
void gopt_env_default(const gopt_env *e, double *x);

/* How gopt_env_evaluate_delta evaluates (for tests and benchmarks; results are identical):
 * DELTA (default) replays from a checkpoint and stops where the timeline converges back to the
 * recorded one; INCREMENTAL replays from a checkpoint to the end; FULL evaluates every vector from
 * time 0 (gopt_env_evaluate). Applies to workspaces made afterwards. */
enum { GOPT_ENV_EVAL_DELTA = 0, GOPT_ENV_EVAL_INCREMENTAL = 1, GOPT_ENV_EVAL_FULL = 2 };
void gopt_env_set_evaluation(gopt_env *e, int mode);

/* A per-thread evaluation workspace (holds a simulator state). */
typedef struct gopt_env_ws gopt_env_ws;
gopt_env_ws *gopt_env_ws_new(const gopt_env *e);
void gopt_env_ws_free(gopt_env_ws *w); /* accepts NULL */

/* Evaluates x; counts one evaluation. Invalid fusion bits (a group that would be non-convex or
 * span devices) are repaired deterministically (the bit is treated as 0) and say so in *repaired
 * (may be NULL). Returns 0 or an error. */
int gopt_env_evaluate(gopt_env_ws *w, const double *x, gopt_env_result *r, size_t *repaired,
                      gopt_error *err);
/* Re-evaluates after variables idx[0..k) changed from the workspace's last x to x (incremental
 * where the simulator allows; same result as a full evaluation). */
int gopt_env_evaluate_delta(gopt_env_ws *w, const double *x, const size_t *idx, size_t k,
                            gopt_env_result *r, gopt_error *err);
/* Evaluates n vectors (row-major n x nvars) in parallel; out[i] equals a sequential evaluation. */
int gopt_env_evaluate_batch(const gopt_env *e, const double *xs, size_t n, gopt_env_result *out,
                            gopt_error *err);
/* Total evaluations counted so far (all workspaces; atomic). */
uint64_t gopt_env_evaluations(const gopt_env *e);

/* The one ranking of results every baseline, search and learned method uses: memory limits are
 * hard, so a result that fits (feasible) ranks above every over-memory one; among results of
 * equal feasibility the lower objective wins (the objective's memory penalty orders infeasible
 * results among themselves). gopt_env_result_cmp returns <0 when a ranks above b, >0 when
 * below, 0 when tied; gopt_env_result_better(a, b) is cmp(a, b) < 0. NULL ranks last. */
int gopt_env_result_cmp(const gopt_env_result *a, const gopt_env_result *b);
int gopt_env_result_better(const gopt_env_result *a, const gopt_env_result *b);

/* Converts x to decisions (placement / fusion groups / priorities) for saving or simulating. */
int gopt_env_to_decisions(const gopt_env *e, const double *x, gopt_decisions *d, gopt_error *err);
/* Converts decisions back to x (unspecified parts take the defaults). */
int gopt_env_from_decisions(const gopt_env *e, const gopt_decisions *d, double *x, gopt_error *err);

/* Training steps: owner[v] (nvars entries) is, for the DEVICE variable of a gradient or
 * optimizer-update node, the DEVICE variable of the forward node it belongs to (a gradient op
 * named "grad/<forward node or tensor>/...": that node, or the tensor's producer, else its first
 * forward reader; an update: its parameter's first forward reader), else -1: TensorFlow's
 * colocate_gradients_with_ops. Returns how many variables have an owner (0 for a forward-only
 * graph or a task without placement), or a negative error. */
int gopt_env_grad_owner(const gopt_env *e, int32_t *owner, gopt_error *err);

/* Node features for learning: n_nodes x GOPT_ENV_NFEAT floats (row per graph node id, dead
 * nodes zero): op-class one-hot, log FLOPs, log bytes in/out, log params, in/out degree,
 * topological position in [0,1], depth from inputs and to outputs (normalised), output rank,
 * log output elements, is-parameter-reader, kernel time on device 0 (log). docs/TASKS.md lists
 * the columns. */
#define GOPT_ENV_NFEAT 24
int gopt_env_node_features(const gopt_env *e, float *feat, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
