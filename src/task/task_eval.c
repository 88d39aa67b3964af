/* task_eval.c: evaluating decision vectors (task.h): per-thread workspaces holding a simulator
 * state, x -> decisions (placement, fusion groups with repairs, priorities), full, incremental and
 * batched (OpenMP) evaluation, the objective with its memory penalty, and conversion to and from
 * gopt_decisions. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "task/task_internal.h"
#include "util/util_internal.h"

struct gopt_env_ws {
  const gopt_env *e;
  gopt_sim_state *st;
  gopt_decisions d;        /* arrays by node id, reused for every full evaluation */
  task_grouper *gr;        /* NULL when the task has no FUSE variables */
  uint8_t *want;           /* [n] FUSE bits of x */
  int32_t *dev;            /* [n] device per position */
  double *x;               /* [nvars] the last evaluated x */
  int has_x;
  size_t repaired;
};

void gopt_env_ws_free(gopt_env_ws *w) {
  if (!w) return;
  gopt_sim_state_free(w->st);
  gopt_decisions_clear(&w->d);
  task_grouper_free(w->gr);
  free(w->want);
  free(w->dev);
  free(w->x);
  free(w);
}

gopt_env_ws *gopt_env_ws_new(const gopt_env *e) {
  gopt_env_ws *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->e = e;
  const size_t NN = e->g->nodes.n;
  gopt_decisions_init(&w->d, e->g);
  if (!(w->st = gopt_sim_state_new(e->sim)) || GOPT_ALLOC(w->want, e->n) || GOPT_ALLOC(w->dev, e->n) ||
      GOPT_ALLOC(w->x, e->nvars))
    goto fail;
  gopt_sim_state_set_delta(w->st, e->eval_mode == GOPT_ENV_EVAL_DELTA);
  if (e->off_dev >= 0 || e->fixed_dev) {
    if (GOPT_ALLOC(w->d.placement, NN)) goto fail;
    for (size_t i = 0; i < NN; i++) w->d.placement[i] = -1;
  }
  if (e->off_prio >= 0) {
    if (GOPT_ALLOC(w->d.priority, NN)) goto fail;
    for (size_t i = 0; i < NN; i++) w->d.priority[i] = NAN;
  }
  if (e->n_fuse > 0) {
    if (GOPT_ALLOC(w->d.group, NN) || !(w->gr = task_grouper_new(e))) goto fail;
    for (size_t i = 0; i < NN; i++) w->d.group[i] = -1;
  }
  return w;
fail:
  gopt_env_ws_free(w);
  return NULL;
}

static const char *kind_name(int k) {
  return k == GOPT_VAR_DEVICE ? "device" : k == GOPT_VAR_PRIORITY ? "priority" : "fuse";
}

/* Checks the value of variable i. */
static int check_var(const gopt_env *e, const double *x, size_t i, gopt_error *err) {
  const gopt_env_var *v = &e->vars[i];
  double a = x[i];
  int ok = isfinite(a);
  if (ok && v->kind != GOPT_VAR_PRIORITY) ok = a == floor(a) && a >= 0 && a < v->card;
  if (ok) return GOPT_OK;
  if (v->kind == GOPT_VAR_PRIORITY)
    return gopt_error_set(err, GOPT_EINVAL, "task: x[%zu] (priority of node '%s') = %g: not finite", i,
                          gopt_node_name(e->g, v->node), a);
  return gopt_error_set(err, GOPT_EINVAL, "task: x[%zu] (%s of node '%s') = %g: expected an integer in [0, %d)",
                        i, kind_name(v->kind), gopt_node_name(e->g, v->node), a, v->card);
}

/* Fills w->d from x (placement, groups with repairs, priorities). */
static void decisions_of(gopt_env_ws *w, const double *x) {
  const gopt_env *e = w->e;
  task_devices_of(e, x, w->dev);
  if (w->d.placement)
    for (int32_t p = 0; p < e->n; p++) w->d.placement[e->order[p]] = w->dev[p];
  if (w->d.priority)
    for (int32_t p = 0; p < e->n; p++) w->d.priority[e->order[p]] = x[e->off_prio + p];
  w->repaired = 0;
  if (w->gr) {
    for (int32_t p = 0; p < e->n; p++) w->want[p] = e->fuse_var[p] >= 0 && x[e->fuse_var[p]] != 0;
    task_grouper_build(w->gr, w->want, e->off_dev >= 0 ? w->dev : NULL, NULL, NULL);
    for (int32_t p = 0; p < e->n; p++) w->d.group[e->order[p]] = w->gr->group[p];
    w->d.n_groups = w->gr->n_groups;
    w->repaired = w->gr->repaired;
    task_host_chains(e, e->off_dev >= 0 ? w->dev : NULL, &w->d);
  }
}

/* Objective and summary of one simulated step. */
static void fill_result(const gopt_env *e, const gopt_sim_result *sr, gopt_env_result *r) {
  double peak = 0, over = 0, frac = 0;
  for (int k = 0; k < sr->n_devices; k++) {
    if (sr->peak_mem[k] > peak) peak = sr->peak_mem[k];
    if (sr->mem_over[k] > over) over = sr->mem_over[k];
    double cap = e->c->devices[k].mem_bytes;
    double f = cap > 0 ? sr->mem_over[k] / cap : (sr->mem_over[k] > 0 ? 1.0 : 0.0);
    if (f > frac) frac = f;
  }
  r->step_time = sr->step_time;
  r->peak_mem = peak;
  r->mem_over = over;
  r->feasible = sr->feasible;
  double base = e->task == GOPT_TASK_MEMORY ? peak : sr->step_time;
  r->objective = base * (1.0 + e->pen * frac);
}

static int simulate(gopt_env_ws *w, gopt_env_result *r, gopt_error *err) {
  gopt_sim_result sr;
  int rc = gopt_sim_evaluate(w->st, &sr, err);
  if (rc) return rc;
  atomic_fetch_add_explicit(&((gopt_env *)w->e)->evals, 1, memory_order_relaxed);
  gopt_env_result tmp;
  fill_result(w->e, &sr, r ? r : &tmp);
  return GOPT_OK;
}

int gopt_env_evaluate(gopt_env_ws *w, const double *x, gopt_env_result *r, size_t *repaired,
                      gopt_error *err) {
  const gopt_env *e = w->e;
  int rc;
  for (size_t i = 0; i < e->nvars; i++)
    if ((rc = check_var(e, x, i, err))) return rc;
  decisions_of(w, x);
  w->has_x = 0;
  if ((rc = gopt_sim_state_apply(w->st, &w->d, err))) return rc;
  if ((rc = simulate(w, r, err))) return rc;
  if (e->nvars) memcpy(w->x, x, e->nvars * sizeof *x);
  w->has_x = 1;
  if (repaired) *repaired = w->repaired;
  return GOPT_OK;
}

/* Whether the device change of position p can change the fusion groups: p's own bit is set,
 * a producer of p has its bit set, or p is in a group (docs/TASKS.md derives this). */
static int device_affects_groups(const gopt_env_ws *w, const double *x, int32_t p) {
  const gopt_env *e = w->e;
  if (!w->gr) return 0;
  if (e->fuse_var[p] >= 0 && (x[e->fuse_var[p]] != 0 || w->x[e->fuse_var[p]] != 0)) return 1;
  if (w->gr->group[p] >= 0 || (e->host_chain && e->host_chain[e->order[p]] >= 0)) return 1;
  for (int32_t i = e->pred_off[p]; i < e->pred_off[p + 1]; i++) {
    int32_t q = e->pred[i];
    if (e->fuse_var[q] >= 0 && (x[e->fuse_var[q]] != 0 || w->x[e->fuse_var[q]] != 0)) return 1;
  }
  return 0;
}

int gopt_env_evaluate_delta(gopt_env_ws *w, const double *x, const size_t *idx, size_t k,
                            gopt_env_result *r, gopt_error *err) {
  const gopt_env *e = w->e;
  int rc;
  if (!w->has_x) return gopt_env_evaluate(w, x, r, NULL, err);
  for (size_t j = 0; j < k; j++)
    if (idx[j] >= e->nvars)
      return gopt_error_set(err, GOPT_EINVAL, "task: changed variable %zu out of range (%zu variables)",
                            idx[j], e->nvars);
  if (e->eval_mode == GOPT_ENV_EVAL_FULL) return gopt_env_evaluate(w, x, r, NULL, err);
  /* every changed variable is found (idx is a hint; a full comparison is O(nvars), far below a
   * simulation), and a change that can alter the fusion groups falls back to a full evaluation */
  int full = 0;
  for (size_t i = 0; i < e->nvars && !full; i++) {
    if (x[i] == w->x[i]) continue;
    if ((rc = check_var(e, x, i, err))) return rc;
    const gopt_env_var *v = &e->vars[i];
    if (v->kind == GOPT_VAR_FUSE) full = 1;
    else if (v->kind == GOPT_VAR_DEVICE) full = device_affects_groups(w, x, e->pos[v->node]);
  }
  if (full) return gopt_env_evaluate(w, x, r, NULL, err);
  for (size_t i = 0; i < e->nvars; i++) {
    if (x[i] == w->x[i]) continue;
    const gopt_env_var *v = &e->vars[i];
    if (v->kind == GOPT_VAR_DEVICE) {
      rc = gopt_sim_state_set_device(w->st, v->node, (int)x[i]);
      if (w->d.placement) w->d.placement[v->node] = (int32_t)x[i];
    } else {
      rc = gopt_sim_state_set_priority(w->st, v->node, x[i]);
      if (w->d.priority) w->d.priority[v->node] = x[i];
    }
    if (rc) return gopt_error_set(err, rc, "task: variable %zu: simulator rejected the change", i);
    w->x[i] = x[i];
  }
  w->has_x = 0;
  if ((rc = simulate(w, r, err))) return rc;
  w->has_x = 1;
  return GOPT_OK;
}

void gopt_env_set_evaluation(gopt_env *e, int mode) { e->eval_mode = mode; }

int gopt_env_evaluate_batch(const gopt_env *e, const double *xs, size_t n, gopt_env_result *out,
                            gopt_error *err) {
  if (n == 0) return GOPT_OK;
  int threads = e->threads > 0 ? e->threads : omp_get_max_threads();
  if ((size_t)threads > n) threads = (int)n;
  gopt_env_ws **ws = calloc((size_t)threads, sizeof *ws);
  int *rcs = calloc(n, sizeof *rcs);
  int rc = GOPT_OK;
  if (!ws || !rcs) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "task: out of memory");
    goto done;
  }
  for (int t = 0; t < threads; t++)
    if (!(ws[t] = gopt_env_ws_new(e))) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "task: out of memory");
      goto done;
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (long long i = 0; i < (long long)n; i++) {
    gopt_error e1 = {0};
    rcs[i] = gopt_env_evaluate(ws[omp_get_thread_num()], xs + (size_t)i * e->nvars, &out[i], NULL, &e1);
    if (rcs[i]) memset(&out[i], 0, sizeof out[i]);
  }
  for (size_t i = 0; i < n; i++)
    if (rcs[i]) {
      /* report the first failing item's message deterministically */
      gopt_env_result tmp;
      rc = gopt_env_evaluate(ws[0], xs + i * e->nvars, &tmp, NULL, err);
      if (!rc) rc = rcs[i];
      gopt_error_prefix(err, "batch item %zu: ", i);
      break;
    }
done:
  for (int t = 0; ws && t < threads; t++) gopt_env_ws_free(ws[t]);
  free(ws);
  free(rcs);
  return rc;
}

int gopt_env_to_decisions(const gopt_env *e, const double *x, gopt_decisions *d, gopt_error *err) {
  int rc;
  gopt_decisions_init(d, e->g);
  for (size_t i = 0; i < e->nvars; i++)
    if ((rc = check_var(e, x, i, err))) return rc;
  gopt_env_ws *w = gopt_env_ws_new(e);
  if (!w) return gopt_error_set(err, GOPT_ENOMEM, "task: out of memory");
  decisions_of(w, x);
  *d = w->d; /* take the arrays */
  gopt_decisions_init(&w->d, e->g);
  gopt_env_ws_free(w);
  return GOPT_OK;
}

int gopt_env_from_decisions(const gopt_env *e, const gopt_decisions *d, double *x, gopt_error *err) {
  const gopt_graph *g = e->g;
  gopt_env_default(e, x);
  if (d->n_nodes != g->nodes.n)
    return gopt_error_set(err, GOPT_EINVAL, "task: decisions made for %zu nodes, the graph has %zu",
                          d->n_nodes, g->nodes.n);
  for (int32_t p = 0; p < e->n; p++) {
    int32_t id = e->order[p];
    if (e->off_dev >= 0 && d->placement && d->placement[id] >= 0) {
      if (d->placement[id] >= e->D)
        return gopt_error_set(err, GOPT_EINVAL, "task: placement: node '%s' on device %d, the cluster has %d devices",
                              gopt_node_name(g, id), d->placement[id], e->D);
      x[e->off_dev + p] = d->placement[id];
    }
    if (e->off_prio >= 0 && d->priority && isfinite(d->priority[id])) x[e->off_prio + p] = d->priority[id];
    if (e->fuse_var[p] >= 0 && d->group) {
      int32_t gid = d->group[id], bit = 0;
      for (int32_t j = e->succ_off[p]; j < e->succ_off[p + 1] && gid >= 0 && !bit; j++)
        bit = d->group[e->order[e->succ[j]]] == gid;
      x[e->fuse_var[p]] = bit;
    }
  }
  return GOPT_OK;
}
