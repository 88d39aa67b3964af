/* baselines.c: the baseline registry (baselines.h): component table, the standard baselines of
 * each task, composite names ("metis+mem_greedy"), applicability and running. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baselines/baselines_internal.h"

enum { C_SINGLE, C_RR, C_METIS, C_EXPERT, C_METF, C_NOFUSE, C_XLA, C_TVM, C_BFS, C_DFS, C_CP, C_MEMG, C_COUNT };

static const gopt_baseline_info comps[C_COUNT] = {
    {"single", "every op on device 0 (the framework default)", GOPT_BASELINE_DEVICE},
    {"round_robin", "op i (topological order) on device i mod D", GOPT_BASELINE_DEVICE},
    {"metis", "METIS k-way partition, node weight = kernel time, edge weight = tensor bytes", GOPT_BASELINE_DEVICE},
    {"expert", "the papers' human expert: a layer per device (LSTMs), contiguous layers (docs/TASKS.md)", GOPT_BASELINE_DEVICE},
    {"m_etf", "Baechi's memory-aware earliest-task-first list scheduling (placement and order)",
     GOPT_BASELINE_DEVICE | GOPT_BASELINE_PRIORITY},
    {"no_fusion", "no op fused", GOPT_BASELINE_FUSE},
    {"xla", "XLA-style producer->consumer loop/input fusion, no duplication, 64 operands", GOPT_BASELINE_FUSE},
    {"tvm", "TVM-style pattern fusion: conv absorbs elementwise, reductions end groups, 256 ops", GOPT_BASELINE_FUSE},
    {"bfs", "topological (BFS) order", GOPT_BASELINE_PRIORITY},
    {"dfs", "depth-first order", GOPT_BASELINE_PRIORITY},
    {"critical_path", "critical path first (upward rank with transfers on the current placement)", GOPT_BASELINE_PRIORITY},
    {"mem_greedy", "smallest net allocation first", GOPT_BASELINE_PRIORITY},
};

static const char *const std_placement[] = {"single", "round_robin", "metis", "expert", "m_etf"};
static const char *const std_fusion[] = {"no_fusion", "xla", "tvm"};
static const char *const std_schedule[] = {"bfs", "dfs", "critical_path", "mem_greedy"};
static const char *const std_memory[] = {"single+mem_greedy", "metis+dfs", "metis+mem_greedy",
                                         "expert+mem_greedy", "m_etf"};
static const char *const std_joint[] = {"metis+critical_path+xla", "expert+critical_path+xla",
                                        "m_etf+xla", "m_etf+tvm", "metis+critical_path+tvm"};

size_t gopt_baseline_count(void) { return C_COUNT; }
const gopt_baseline_info *gopt_baseline_get(size_t i) { return i < C_COUNT ? &comps[i] : NULL; }

const gopt_baseline_info *gopt_baseline_find(const char *name) {
  for (size_t i = 0; name && i < C_COUNT; i++)
    if (!strcmp(comps[i].name, name)) return &comps[i];
  return NULL;
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
static const char *const *std_list(int task, size_t *n) {
  switch (task) {
  case GOPT_TASK_PLACEMENT: *n = NELEM(std_placement); return std_placement;
  case GOPT_TASK_FUSION: *n = NELEM(std_fusion); return std_fusion;
  case GOPT_TASK_SCHEDULE: *n = NELEM(std_schedule); return std_schedule;
  case GOPT_TASK_MEMORY: *n = NELEM(std_memory); return std_memory;
  case GOPT_TASK_JOINT: *n = NELEM(std_joint); return std_joint;
  default: *n = 0; return NULL;
  }
}

size_t gopt_baseline_task_count(int task) {
  size_t n;
  std_list(task, &n);
  return n;
}

const char *gopt_baseline_task_name(int task, size_t i) {
  size_t n;
  const char *const *l = std_list(task, &n);
  return i < n ? l[i] : NULL;
}

/* Splits name at '+' into component indices; returns the count or -1 (unknown component, with
 * its text in bad). At most 8 components. */
static int parse(const char *name, int *idx, char *bad, size_t badn) {
  int k = 0;
  const char *s = name;
  if (!name || !*name) {
    snprintf(bad, badn, "%s", "");
    return -1;
  }
  while (1) {
    const char *end = strchr(s, '+');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    int found = -1;
    for (int i = 0; i < C_COUNT && found < 0; i++)
      if (strlen(comps[i].name) == len && !strncmp(comps[i].name, s, len)) found = i;
    if (found < 0 || k == 8) {
      snprintf(bad, badn, "%.*s", (int)(len < 64 ? len : 64), s);
      return -1;
    }
    idx[k++] = found;
    if (!end) break;
    s = end + 1;
  }
  return k;
}

static unsigned task_kinds(const gopt_env *e) {
  unsigned m = 0;
  if (e->off_dev >= 0) m |= GOPT_BASELINE_DEVICE;
  if (e->off_prio >= 0) m |= GOPT_BASELINE_PRIORITY;
  if (e->n_fuse > 0 || e->task == GOPT_TASK_FUSION || e->task == GOPT_TASK_JOINT) m |= GOPT_BASELINE_FUSE;
  return m;
}

static const char *kinds_text(unsigned k) {
  return k == GOPT_BASELINE_DEVICE ? "placement" : k == GOPT_BASELINE_PRIORITY ? "schedule priorities"
         : k == GOPT_BASELINE_FUSE ? "fusion" : "placement and schedule priorities";
}

int gopt_baseline_known(const char *name) {
  int idx[8];
  char bad[80];
  return parse(name, idx, bad, sizeof bad) > 0;
}

static _Thread_local char why_buf[256];

int gopt_baseline_applicable(const char *name, const gopt_env *e, const char **why) {
  int idx[8];
  char bad[80];
  int k = parse(name, idx, bad, sizeof bad);
  if (k < 0) {
    snprintf(why_buf, sizeof why_buf, "unknown baseline component '%s'", bad);
    if (why) *why = why_buf;
    return 0;
  }
  unsigned have = task_kinds(e);
  for (int i = 0; i < k; i++)
    if (!(comps[idx[i]].kinds & have)) {
      snprintf(why_buf, sizeof why_buf, "'%s' decides %s; the %s task has no such variables",
               comps[idx[i]].name, kinds_text(comps[idx[i]].kinds), gopt_task_name(e->task));
      if (why) *why = why_buf;
      return 0;
    }
  return 1;
}

int gopt_baseline_run(const char *name, const gopt_env *e, double *x, gopt_error *err) {
  int idx[8];
  char bad[80];
  const char *why = NULL;
  int k = parse(name, idx, bad, sizeof bad);
  if (k < 0) return gopt_error_set(err, GOPT_EINVAL, "baseline: unknown baseline component '%s'", bad);
  if (!gopt_baseline_applicable(name, e, &why))
    return gopt_error_set(err, GOPT_EINVAL, "baseline %s: %s", name, why);
  gopt_env_default(e, x);
  const int32_t n = e->n;
  int32_t *dev = calloc((size_t)n + 1, sizeof *dev);
  double *prio = calloc((size_t)n + 1, sizeof *prio);
  int rc = GOPT_OK;
  if (!dev || !prio) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "baseline: out of memory");
    goto done;
  }
  for (int i = 0; i < k && !rc; i++) {
    int c = idx[i];
    unsigned kinds = comps[c].kinds;
    switch (c) {
    case C_SINGLE: rc = bl_single(e, x, dev, err); break;
    case C_RR: rc = bl_round_robin(e, x, dev, err); break;
    case C_METIS: rc = bl_metis(e, x, dev, err); break;
    case C_EXPERT: rc = bl_expert(e, x, dev, err); break;
    case C_METF: rc = bl_m_etf(e, x, dev, prio, err); break;
    case C_BFS: rc = bl_bfs(e, x, prio, err); break;
    case C_DFS: rc = bl_dfs(e, x, prio, err); break;
    case C_CP: rc = bl_critical_path(e, x, prio, err); break;
    case C_MEMG: rc = bl_mem_greedy(e, x, prio, err); break;
    default: {
      task_devices_of(e, x, dev);
      int rules = c == C_XLA ? TASK_FUSE_XLA : c == C_TVM ? TASK_FUSE_TVM : TASK_FUSE_NONE;
      if (task_fusion_rules(e, rules, e->off_dev >= 0 ? dev : NULL, x))
        rc = gopt_error_set(err, GOPT_ENOMEM, "baseline: out of memory");
      kinds = 0;
    }
    }
    if (rc) break;
    if ((kinds & GOPT_BASELINE_DEVICE) && e->off_dev >= 0)
      for (int32_t p = 0; p < n; p++) x[e->off_dev + p] = dev[p];
    if ((kinds & GOPT_BASELINE_PRIORITY) && e->off_prio >= 0)
      for (int32_t p = 0; p < n; p++) x[e->off_prio + p] = prio[p];
  }
done:
  free(dev);
  free(prio);
  return rc;
}
