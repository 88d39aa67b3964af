/* gopt/baselines.h: the heuristic baselines every search method and learned policy is compared
 * against: placement (single device, round robin, METIS k-way partition, the papers' human-expert
 * placement by model family, Baechi's memory-aware earliest-task-first), fusion (none, XLA-style
 * and TVM-style rules) and scheduling (BFS, DFS, critical path, memory-greedy). docs/TASKS.md
 * defines each precisely.
 *
 * A baseline name is one component ("metis") or several joined by '+' ("metis+mem_greedy+xla"):
 * each component sets the variables of the kinds it decides (DEVICE, PRIORITY, FUSE), in the
 * order written, starting from the environment's default vector; later components see the
 * earlier ones' decisions (critical-path priorities use the placement, fusion rules keep groups
 * on one device). A name applies to a task when every component decides at least one kind of
 * variable the task has. Every baseline is deterministic. */
#ifndef GOPT_BASELINES_H
#define GOPT_BASELINES_H

#include <stddef.h>

#include "gopt/task.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bit masks of the variable kinds a component decides. */
enum {
  GOPT_BASELINE_DEVICE = 1 << GOPT_VAR_DEVICE,
  GOPT_BASELINE_PRIORITY = 1 << GOPT_VAR_PRIORITY,
  GOPT_BASELINE_FUSE = 1 << GOPT_VAR_FUSE
};

typedef struct gopt_baseline_info {
  const char *name;          /* "metis" */
  const char *description;   /* one line */
  unsigned kinds;            /* GOPT_BASELINE_* the component decides */
} gopt_baseline_info;

/* The components: single, round_robin, metis, expert, m_etf, no_fusion, xla, tvm, bfs, dfs,
 * critical_path, mem_greedy. */
size_t gopt_baseline_count(void);
const gopt_baseline_info *gopt_baseline_get(size_t i);
/* Component by name, NULL when unknown. */
const gopt_baseline_info *gopt_baseline_find(const char *name);

/* The standard baselines of a task (what `gopt compare` runs), possibly composite names. */
size_t gopt_baseline_task_count(int task);
const char *gopt_baseline_task_name(int task, size_t i);

/* Whether name (possibly composite) is a baseline at all: 1 when every component is known. */
int gopt_baseline_known(const char *name);
/* Whether name applies to the environment's task; when not (returns 0), *why (may be NULL) says
 * why in a static string or one built into the thread-local buffer (valid until the next call). */
int gopt_baseline_applicable(const char *name, const gopt_env *e, const char **why);

/* Runs the baseline: x (nvars doubles) receives its decision vector. Errors: unknown or not
 * applicable name (GOPT_EINVAL, one line saying why), METIS failure, out of memory. */
int gopt_baseline_run(const char *name, const gopt_env *e, double *x, gopt_error *err);

/* METIS k-way partition (METIS_PartGraphKway, seed 1) of an undirected graph of n vertices: CSR
 * xadj[n + 1] / adj, symmetric and without self-loops; vwgt and ewgt integer weights (the totals
 * below 2^31), ewgt aligned with adj. part[n] receives each vertex's part in 0..nparts-1. Calls
 * are serialised (METIS's random generator is process-wide) and METIS's own messages kept off
 * stdout; *empty (may be NULL) is set when METIS reported parts it could not fill. What the metis
 * baseline and the learned placement's min-cut clusters run. */
int gopt_metis_parts(int32_t n, const int32_t *xadj, const int32_t *adj, const int32_t *vwgt, const int32_t *ewgt,
                     int nparts, int32_t *part, int *empty, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
