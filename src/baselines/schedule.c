/* schedule.c: scheduling baselines as priorities (higher runs first among ready ops): BFS
 * (topological FIFO order), DFS (LIFO order: finish a branch before starting the next),
 * critical path first (HEFT's upward rank on the current placement, transfers included) and
 * memory-greedy (smallest net allocation first). A list order becomes priority 1 - rank / n. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "baselines/baselines_internal.h"
#include "util/util_internal.h"

int bl_bfs(const gopt_env *e, const double *x, double *prio, gopt_error *err) {
  (void)x;
  (void)err;
  for (int32_t p = 0; p < e->n; p++) prio[p] = 1.0 - (double)p / e->n;
  return GOPT_OK;
}

/* Kahn's algorithm with a stack: sources pushed so the first runs first, and a finished op's
 * consumers pushed last-first so its first consumer is taken next. */
int bl_dfs(const gopt_env *e, const double *x, double *prio, gopt_error *err) {
  (void)x;
  const int32_t n = e->n;
  int32_t *pending = NULL, *stack = NULL;
  if (GOPT_ALLOC(pending, n) || GOPT_ALLOC(stack, n)) {
    free(pending);
    return gopt_error_set(err, GOPT_ENOMEM, "dfs: out of memory");
  }
  int32_t sp = 0;
  for (int32_t p = n - 1; p >= 0; p--) {
    pending[p] = e->pred_off[p + 1] - e->pred_off[p];
    if (!pending[p]) stack[sp++] = p;
  }
  for (int32_t rank = 0; sp > 0; rank++) {
    int32_t p = stack[--sp];
    prio[p] = 1.0 - (double)rank / n;
    for (int32_t j = e->succ_off[p + 1] - 1; j >= e->succ_off[p]; j--)
      if (--pending[e->succ[j]] == 0) stack[sp++] = e->succ[j];
  }
  free(pending);
  free(stack);
  return GOPT_OK;
}

/* Upward rank: kernel time on the op's device + the longest (transfer + rank) over consumers;
 * normalised by the largest. On one device this is the simulator's default priority. */
int bl_critical_path(const gopt_env *e, const double *x, double *prio, gopt_error *err) {
  const int32_t n = e->n;
  int32_t *dev = NULL;
  if (GOPT_ALLOC(dev, n)) return gopt_error_set(err, GOPT_ENOMEM, "critical_path: out of memory");
  task_devices_of(e, x, dev);
  double mx = 0;
  for (int32_t p = n - 1; p >= 0; p--) {
    double best = 0;
    for (int32_t i = e->succ_off[p]; i < e->succ_off[p + 1]; i++) {
      int32_t c = e->succ[i];
      double v = prio[c];
      if (dev[c] != dev[p]) v += task_xfer_time(e, dev[p], dev[c], task_edge_bytes(e, p, c));
      if (v > best) best = v;
    }
    prio[p] = gopt_sim_node_time(e->sim, e->order[p], dev[p]) + best;
    if (prio[p] > mx) mx = prio[p];
  }
  for (int32_t p = 0; p < n; p++) prio[p] = mx > 0 ? prio[p] / mx : 0;
  free(dev);
  return GOPT_OK;
}

/* List scheduling on one sequence: among ready ops take the one whose run allocates the least
 * net memory (its output bytes minus the bytes of inputs it is the last reader of; graph outputs
 * are never freed), ties by topological position. */
int bl_mem_greedy(const gopt_env *e, const double *x, double *prio, gopt_error *err) {
  (void)x;
  const gopt_graph *g = e->g;
  const int32_t n = e->n;
  int rc = GOPT_OK;
  int32_t *pending = NULL, *ready = NULL, *left = NULL;
  if (GOPT_ALLOC(pending, n) || GOPT_ALLOC(ready, n) || GOPT_ALLOC(left, g->tensors.n)) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "mem_greedy: out of memory");
    goto done;
  }
  /* left[t]: distinct live consumer nodes of activation t not yet run */
  for (int32_t p = 0; p < n; p++) {
    const gopt_node *nd = &g->nodes.a[e->order[p]];
    for (uint32_t k = 0; k < nd->n_in; k++) {
      int32_t t = g->slots.a[nd->in + k].tensor;
      if (t < 0 || g->tensors.a[t].producer < 0) continue;
      int dup = 0;
      for (uint32_t j = 0; j < k && !dup; j++) dup = g->slots.a[nd->in + j].tensor == t;
      left[t] += !dup;
    }
  }
  int32_t nr = 0;
  for (int32_t p = 0; p < n; p++) {
    pending[p] = e->pred_off[p + 1] - e->pred_off[p];
    if (!pending[p]) ready[nr++] = p;
  }
  for (int32_t rank = 0; rank < n; rank++) {
    int32_t bi = -1;
    double best = INFINITY;
    for (int32_t i = 0; i < nr; i++) {
      int32_t p = ready[i];
      const gopt_node *nd = &g->nodes.a[e->order[p]];
      double net = e->out_bytes[p];
      for (uint32_t k = 0; k < nd->n_in; k++) {
        int32_t t = g->slots.a[nd->in + k].tensor;
        if (t < 0 || g->tensors.a[t].producer < 0 || left[t] != 1 || (g->tensors.a[t].flags & GOPT_T_OUTPUT))
          continue;
        int dup = 0;
        for (uint32_t j = 0; j < k && !dup; j++) dup = g->slots.a[nd->in + j].tensor == t;
        if (!dup) net -= gopt_tensor_bytes(g, t);
      }
      if (bi < 0 || net < best || (net == best && p < ready[bi])) {
        bi = i;
        best = net;
      }
    }
    int32_t p = ready[bi];
    ready[bi] = ready[--nr];
    prio[p] = 1.0 - (double)rank / n;
    const gopt_node *nd = &g->nodes.a[e->order[p]];
    for (uint32_t k = 0; k < nd->n_in; k++) {
      int32_t t = g->slots.a[nd->in + k].tensor;
      if (t < 0 || g->tensors.a[t].producer < 0) continue;
      int dup = 0;
      for (uint32_t j = 0; j < k && !dup; j++) dup = g->slots.a[nd->in + j].tensor == t;
      left[t] -= !dup;
    }
    for (int32_t j = e->succ_off[p]; j < e->succ_off[p + 1]; j++)
      if (--pending[e->succ[j]] == 0) ready[nr++] = e->succ[j];
  }
done:
  free(pending);
  free(ready);
  free(left);
  return rc;
}
