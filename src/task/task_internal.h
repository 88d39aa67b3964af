/* task_internal.h: the task environment's layout (task.h) and the helpers the baselines
 * (src/baselines) share with it: node adjacency by topological position, the fusion-group builder
 * that turns FUSE bits into groups (with deterministic repairs), and the rule-based fusion bits
 * (XLA / TVM style) and the cost-balanced contiguous split.
 *
 * Indexing: a node's "position" is its index in the topological order (gopt_graph_topo, the same
 * order the simulator uses). Variables: DEVICE of position p is x[off_dev + p], PRIORITY of p is
 * x[off_prio + p], FUSE of p is x[fuse_var[p]] (when fuse_var[p] >= 0). */
#ifndef GOPT_TASK_INTERNAL_H
#define GOPT_TASK_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "gopt/task.h"

struct gopt_env {
  const gopt_graph *g;
  const gopt_cluster *c;
  int task, D, threads;
  double pen;                    /* memory penalty factor */
  gopt_sim *sim;
  gopt_sim_opts sopts;           /* cost options (copied; zero = analytical) */
  int32_t n;                     /* live nodes */
  int32_t *order;                /* [n] position -> node id */
  int32_t *pos;                  /* [g->nodes.n] node id -> position, -1 when dead */
  int32_t *succ_off, *succ;      /* CSR [n + 1]: distinct consumer positions */
  int32_t *pred_off, *pred;      /* CSR [n + 1]: distinct producer positions */
  double *t0;                    /* [n] kernel seconds on device 0 */
  double *dprio;                 /* [n] the simulator's default priority (normalised bottom level) */
  double *out_bytes;             /* [n] bytes of the node's distinct output tensors */
  uint8_t *cls;                  /* [n] op class */
  int32_t *fixed_dev;            /* [n] schedule task: the fixed placement; NULL otherwise */
  size_t nvars;
  gopt_env_var *vars;
  int32_t off_dev, off_prio;     /* first variable of the kind, -1 when the task has none */
  int32_t n_fuse;
  int32_t *fuse_var;             /* [n] variable index of the FUSE bit of a position, -1 */
  double *xdef;                  /* [nvars] the default decision vector */
  int32_t *dfs_rank;             /* [n] rank of each position in a depth-first topological order
                                    (producer and consumer chains stay close: small reorder windows) */
  atomic_uint_least64_t evals;
  int eval_mode;                 /* GOPT_ENV_EVAL_* (gopt_env_set_evaluation) */
  int fuse_host;                 /* every device is a cpu: a fusion group must be one kernel of
                                    gopt's executor (gopt_exec_group_kind), not XLA's rules */
  int32_t *host_step;            /* [g->nodes.n] fuse_host: gopt_exec_auto_plan's step_of (the oneDNN
                                    step the executor runs a node in by itself), else NULL */
  int32_t *host_chain;           /* [g->nodes.n] index of the executor's post-op chain a node is in
                                    (chains of >= 2 nodes), -1; NULL without fuse_host */
  int32_t n_host_chains;
  int32_t *host_chain_off;       /* CSR [n_host_chains + 1] over host_chain_mem: each chain's nodes */
  int32_t *host_chain_mem;
};

/* ---- fusion groups from FUSE bits (task_group.c) ----------------------------------------- */

/* Extra acceptance rule for a merge (rule-based fusion budgets): p is the producer, roots[0..nr)
 * the groups of its consumers. Return 1 to allow the merge. */
typedef struct task_grouper task_grouper;
typedef int (*task_accept_fn)(const task_grouper *gr, int32_t p, const int32_t *roots, int nr,
                              void *user);

struct task_grouper {
  const gopt_env *e;
  int32_t *parent, *next, *tail, *dev, *size, *nops;
  int32_t *nconv; /* heavy ops (task_heavy_class) in the group */
  int32_t *tau;                  /* [root] a topological order of the groups (quotient graph) */
  int32_t *vis, *mark, *stack, *roots, *alist, *dlist, *slots;
  int64_t *tmp;                  /* sort scratch */
  int32_t *owner;                /* [n] tau -> unit while sorting */
  int32_t *memb;                 /* [n] node ids of a merge being checked (host legality) */
  int32_t vstamp, mstamp;
  uint8_t *eff;                  /* [n] effective (not repaired) FUSE bit */
  int32_t *group;                /* [n] final group of a position (-1 when alone) */
  int32_t n_groups;
  size_t repaired;
};

task_grouper *task_grouper_new(const gopt_env *e);
void task_grouper_free(task_grouper *gr); /* accepts NULL */
/* Union-find root of position p. */
int32_t task_grouper_find(task_grouper *gr, int32_t p);
/* Host target (e->fuse_host): adds the executor's own post-op chains (e->host_chain) to the
 * decisions' groups after the grouper's, each whose nodes share one device (dev per position,
 * NULL: one device), so the simulator prices them as the one oneDNN step the executor runs. */
void task_host_chains(const gopt_env *e, const int32_t *dev, gopt_decisions *d);

/* Builds the groups for FUSE bits want[p] (1 = fuse position p into its consumers' groups), in
 * reverse topological order. A wanted merge is made when the union of p and all its consumers'
 * groups is convex and keeps the quotient graph acyclic, all its members are on one device
 * (dev[p] per position, NULL = one device), the target can run it as one kernel (on a cpu
 * cluster, e->fuse_host: gopt_exec_group_kind; else at most one heavy op, XLA's rules), and
 * accept (may be NULL) allows it; otherwise the bit is repaired to 0. This is the projection
 * every method's decision goes through. Fills eff, group, n_groups and repaired. Deterministic. */
void task_grouper_build(task_grouper *gr, const uint8_t *want, const int32_t *dev,
                        task_accept_fn accept, void *user);

/* ---- rule-based fusion and helpers (task_rules.c) ---------------------------------------- */

enum { TASK_FUSE_NONE = 0, TASK_FUSE_XLA = 1, TASK_FUSE_TVM = 2 };
/* Sets the FUSE variables of x by the rule set (dev: device per position or NULL). The bits are
 * the merges the rules made, so evaluating them repairs nothing. Returns 0 or GOPT_ENOMEM. */
int task_fusion_rules(const gopt_env *e, int rules, const int32_t *dev, double *x);
/* Cost facts of node id as the simulator sees them (the cost override when one is set). */
void task_node_cost(const gopt_env *e, int32_t id, gopt_cost *c);
/* ---- training steps (task_grad.c) --------------------------------------------------------- */

/* Whether node id is a forward node (neither a gradient nor an optimizer update). */
int task_is_forward(const gopt_graph *g, int32_t id);
/* fwd[p]: the forward position a gradient or update position p belongs to (gopt_env_grad_owner's
 * rule), else -1. Returns how many have one, or a negative error. */
int task_grad_owner(const gopt_env *e, int32_t *fwd, gopt_error *err);

/* Cost-balanced contiguous split of the topological order over D devices (device per position). */
void task_contiguous_split(const gopt_env *e, int32_t *dev);
/* Device per position for x (DEVICE variables, else the fixed placement, else 0). */
void task_devices_of(const gopt_env *e, const double *x, int32_t *dev);
/* Seconds to send `bytes` from device a to device b (0 when a == b): bytes / bw + latency. */
double task_xfer_time(const gopt_env *e, int a, int b, double bytes);
/* Bytes of node-id n's distinct output tensors read by the position c (for edge weights). */
double task_edge_bytes(const gopt_env *e, int32_t p, int32_t c);

/* Conv-like (matmul, conv, pooling) and reduction ops: a fusion group holds at most one. */
static inline int task_heavy_class(int cls) { return cls == GOPT_OPC_CONV || cls == GOPT_OPC_REDUCE; }

#endif
