/* env.c: the task environment (task.h): task names, building the variables of a task over a
 * graph and cluster (adjacency by topological position, default priorities, fusible nodes, the
 * fixed placement of the schedule task), the default decision vector, and node features. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/exec.h"
#include "gopt/ops.h"
#include "task/task_internal.h"
#include "util/util_internal.h"

static const char *const task_names[GOPT_TASK_COUNT] = {"placement", "fusion", "schedule",
                                                        "memory", "joint"};

int gopt_task_from_name(const char *name) {
  for (int i = 0; name && i < GOPT_TASK_COUNT; i++)
    if (!strcmp(name, task_names[i])) return i;
  return -1;
}

const char *gopt_task_name(int task) {
  return task >= 0 && task < GOPT_TASK_COUNT ? task_names[task] : NULL;
}

void gopt_env_free(gopt_env *e) {
  if (!e) return;
  gopt_sim_free(e->sim);
  void *arrs[] = {e->order, e->pos, e->succ_off, e->succ, e->pred_off, e->pred, e->t0, e->dprio,
                  e->out_bytes, e->cls, e->fixed_dev, e->vars, e->fuse_var, e->xdef, e->dfs_rank,
                  e->host_step, e->host_chain, e->host_chain_off, e->host_chain_mem};
  for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) free(arrs[i]);
  free(e);
}

/* The host target's fixed part: which nodes the executor runs in its own oneDNN steps (never in a
 * fusion group's loop) and its post-op chains (docs/TASKS.md "Fusion legality per target"). */
static int host_plan(gopt_env *e, gopt_error *err) {
  size_t nn = e->g->nodes.n;
  int32_t *cnt = NULL;
  if (GOPT_ALLOC(e->host_step, nn) || GOPT_ALLOC(e->host_chain, nn) || GOPT_ALLOC(cnt, nn)) {
    free(cnt);
    return gopt_error_set(err, GOPT_ENOMEM, "task: out of memory");
  }
  int rc = gopt_exec_auto_plan(e->g, e->host_step);
  if (rc) {
    free(cnt);
    return gopt_error_set(err, rc, "task: the executor's plan of the graph failed");
  }
  for (size_t n = 0; n < nn; n++) {
    cnt[n] = 0;
    e->host_chain[n] = -1;
  }
  for (size_t n = 0; n < nn; n++)
    if (e->host_step[n] >= 0) cnt[e->host_step[n]]++;
  e->n_host_chains = 0;
  for (size_t n = 0; n < nn; n++) /* chain index per head, then per member */
    if (e->host_step[n] == (int32_t)n && cnt[n] >= 2) e->host_chain[n] = e->n_host_chains++;
  for (size_t n = 0; n < nn; n++)
    if (e->host_step[n] >= 0 && e->host_step[n] != (int32_t)n) e->host_chain[n] = e->host_chain[e->host_step[n]];
  free(cnt);
  /* each chain's nodes (a merge with a chain's node is checked as the whole chain, task_group.c) */
  if (GOPT_ALLOC(e->host_chain_off, (size_t)e->n_host_chains + 1) || GOPT_ALLOC(e->host_chain_mem, nn))
    return gopt_error_set(err, GOPT_ENOMEM, "task: out of memory");
  for (int32_t c = 0; c <= e->n_host_chains; c++) e->host_chain_off[c] = 0;
  for (size_t n = 0; n < nn; n++)
    if (e->host_chain[n] >= 0) e->host_chain_off[e->host_chain[n] + 1]++;
  for (int32_t c = 0; c < e->n_host_chains; c++) e->host_chain_off[c + 1] += e->host_chain_off[c];
  int32_t *cur = NULL;
  if (GOPT_ALLOC(cur, (size_t)e->n_host_chains + 1)) return gopt_error_set(err, GOPT_ENOMEM, "task: out of memory");
  memcpy(cur, e->host_chain_off, ((size_t)e->n_host_chains + 1) * sizeof *cur);
  for (size_t n = 0; n < nn; n++)
    if (e->host_chain[n] >= 0) e->host_chain_mem[cur[e->host_chain[n]]++] = (int32_t)n;
  free(cur);
  return GOPT_OK;
}

static void sort_i32(int32_t *a, int32_t n) {
  for (int32_t i = 1; i < n; i++) {
    int32_t v = a[i], j = i - 1;
    while (j >= 0 && a[j] > v) {
      a[j + 1] = a[j];
      j--;
    }
    a[j + 1] = v;
  }
}

/* Distinct consumer positions (succ) and producer positions (pred) of every position. */
static int build_adjacency(gopt_env *e) {
  const gopt_graph *g = e->g;
  const int32_t n = e->n;
  int32_t *stamp = NULL, *cnt = NULL;
  int rc = GOPT_ENOMEM;
  size_t ne = 0;
  if (GOPT_ALLOC(stamp, n) || GOPT_ALLOC(cnt, n) || GOPT_ALLOC(e->succ_off, n + 1) || GOPT_ALLOC(e->pred_off, n + 1))
    goto done;
  for (int32_t p = 0; p < n; p++) stamp[p] = -1;
  /* pass 0 counts, pass 1 fills */
  for (int pass = 0; pass < 2; pass++) {
    ne = 0;
    for (int32_t p = 0; p < n; p++) {
      const gopt_node *nd = &g->nodes.a[e->order[p]];
      if (pass) e->succ_off[p] = (int32_t)ne;
      for (uint32_t k = 0; k < nd->n_out; k++) {
        int32_t t = g->outs.a[nd->out + k];
        if (t < 0) continue;
        for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
          int32_t c = g->slots.a[s].node;
          if (c < 0 || !gopt_node_alive(g, c)) continue;
          int32_t cp = e->pos[c];
          if (cp < 0 || cp == p || stamp[cp] == p + pass * n) continue;
          stamp[cp] = p + pass * n;
          if (pass) {
            e->succ[ne] = cp;
            cnt[cp]++;
          }
          ne++;
        }
      }
      if (pass) sort_i32(e->succ + e->succ_off[p], (int32_t)ne - e->succ_off[p]);
    }
    if (!pass) {
      for (int32_t p = 0; p < n; p++) stamp[p] = -1;
      if (GOPT_ALLOC(e->succ, ne) || GOPT_ALLOC(e->pred, ne)) goto done;
    }
  }
  e->succ_off[n] = (int32_t)ne;
  e->pred_off[0] = 0;
  for (int32_t p = 0; p < n; p++) e->pred_off[p + 1] = e->pred_off[p] + cnt[p];
  for (int32_t p = 0; p < n; p++) cnt[p] = e->pred_off[p];
  for (int32_t p = 0; p < n; p++) /* producers in increasing position: sorted */
    for (int32_t i = e->succ_off[p]; i < e->succ_off[p + 1]; i++) e->pred[cnt[e->succ[i]]++] = p;
  rc = GOPT_OK;
done:
  free(stamp);
  free(cnt);
  return rc;
}

int gopt_env_new(const gopt_graph *g, const gopt_cluster *c, const gopt_env_opts *o,
                 gopt_env **out, gopt_error *err) {
  int rc = GOPT_OK;
  gopt_env *e = NULL;
  *out = NULL;
  if (!g || !c || !o) return gopt_error_set(err, GOPT_EINVAL, "task: missing graph, cluster or options");
  if (o->task < 0 || o->task >= GOPT_TASK_COUNT)
    return gopt_error_set(err, GOPT_EINVAL, "task: unknown task %d", o->task);
  if (c->n_devices < 1) return gopt_error_set(err, GOPT_EINVAL, "task: the cluster has no device");
  if (!(e = calloc(1, sizeof *e))) return gopt_error_set(err, GOPT_ENOMEM, "task: out of memory");
  e->g = g;
  e->c = c;
  e->task = o->task;
  e->D = c->n_devices;
  /* one legality per target: on cpus a group is what gopt's executor runs as one kernel */
  e->fuse_host = 1;
  for (int k = 0; k < c->n_devices; k++) e->fuse_host &= !strcmp(c->devices[k].kind, "cpu");
  e->threads = o->threads;
  e->pen = o->mem_penalty == 0 ? 10.0 : (o->mem_penalty < 0 ? 0.0 : o->mem_penalty);
  atomic_init(&e->evals, 0);
  if (o->sim) e->sopts = *o->sim;
  if ((rc = gopt_sim_new(g, c, o->sim, &e->sim, err))) goto fail;
  const size_t NN = g->nodes.n;
  if (GOPT_ALLOC(e->order, NN) || GOPT_ALLOC(e->pos, NN)) goto oom;
  int64_t n = gopt_graph_topo(g, e->order, err);
  if (n < 0) {
    rc = (int)n;
    goto fail;
  }
  e->n = (int32_t)n;
  for (size_t i = 0; i < NN; i++) e->pos[i] = -1;
  for (int32_t p = 0; p < e->n; p++) e->pos[e->order[p]] = p;
  if (build_adjacency(e)) goto oom;
  if (GOPT_ALLOC(e->t0, e->n) || GOPT_ALLOC(e->dprio, e->n) || GOPT_ALLOC(e->cls, e->n) ||
      GOPT_ALLOC(e->out_bytes, e->n) || GOPT_ALLOC(e->fuse_var, e->n))
    goto oom;
  for (int32_t p = 0; p < e->n; p++) {
    const gopt_node *nd = &g->nodes.a[e->order[p]];
    e->t0[p] = gopt_sim_node_time(e->sim, e->order[p], 0);
    e->cls[p] = (uint8_t)gopt_op_class_of(nd->op);
    double b = 0;
    for (uint32_t k = 0; k < nd->n_out; k++) {
      int32_t t = g->outs.a[nd->out + k];
      int dup = 0;
      for (uint32_t j = 0; j < k; j++) dup |= g->outs.a[nd->out + j] == t;
      if (t >= 0 && !dup) b += gopt_tensor_bytes(g, t);
    }
    e->out_bytes[p] = b;
  }
  /* default priority exactly as the simulator computes it: bottom level on device 0 / max */
  double mx = 0;
  for (int32_t p = e->n - 1; p >= 0; p--) {
    double best = 0;
    for (int32_t i = e->succ_off[p]; i < e->succ_off[p + 1]; i++)
      if (e->dprio[e->succ[i]] > best) best = e->dprio[e->succ[i]];
    e->dprio[p] = e->t0[p] + best;
    if (e->dprio[p] > mx) mx = e->dprio[p];
  }
  for (int32_t p = 0; p < e->n; p++) e->dprio[p] = mx > 0 ? e->dprio[p] / mx : 0;

  /* depth-first topological order (Kahn with a stack) for the fusion grouper's initial order */
  {
    int32_t *pending = NULL, *stack = NULL, sp = 0, k = 0;
    if (GOPT_ALLOC(e->dfs_rank, e->n) || GOPT_ALLOC(pending, e->n) || GOPT_ALLOC(stack, e->n)) {
      free(pending);
      goto oom;
    }
    for (int32_t p = e->n - 1; p >= 0; p--) {
      pending[p] = e->pred_off[p + 1] - e->pred_off[p];
      if (!pending[p]) stack[sp++] = p;
    }
    while (sp > 0) {
      int32_t p = stack[--sp];
      e->dfs_rank[p] = k++;
      for (int32_t j = e->succ_off[p + 1] - 1; j >= e->succ_off[p]; j--)
        if (--pending[e->succ[j]] == 0) stack[sp++] = e->succ[j];
    }
    free(pending);
    free(stack);
  }

  /* variables */
  int has_dev = e->task == GOPT_TASK_PLACEMENT || e->task == GOPT_TASK_MEMORY || e->task == GOPT_TASK_JOINT;
  int has_prio = e->task == GOPT_TASK_SCHEDULE || e->task == GOPT_TASK_MEMORY || e->task == GOPT_TASK_JOINT;
  int has_fuse = e->task == GOPT_TASK_FUSION || e->task == GOPT_TASK_JOINT;
  e->n_fuse = 0;
  for (int32_t p = 0; p < e->n; p++) {
    e->fuse_var[p] = -1;
    if (!has_fuse || e->cls[p] == GOPT_OPC_OPAQUE || e->succ_off[p] == e->succ_off[p + 1]) continue;
    int ok = 1;
    for (int32_t i = e->succ_off[p]; i < e->succ_off[p + 1]; i++) ok &= e->cls[e->succ[i]] != GOPT_OPC_OPAQUE;
    if (ok) e->fuse_var[p] = e->n_fuse++;
  }
  e->nvars = (size_t)(has_dev ? e->n : 0) + (size_t)(has_prio ? e->n : 0) + (size_t)e->n_fuse;
  if (GOPT_ALLOC(e->vars, e->nvars) || GOPT_ALLOC(e->xdef, e->nvars)) goto oom;
  size_t k = 0;
  e->off_dev = e->off_prio = -1;
  if (has_dev) {
    e->off_dev = (int32_t)k;
    for (int32_t p = 0; p < e->n; p++, k++) {
      e->vars[k] = (gopt_env_var){e->order[p], GOPT_VAR_DEVICE, e->D};
      e->xdef[k] = 0;
    }
  }
  if (has_prio) {
    e->off_prio = (int32_t)k;
    for (int32_t p = 0; p < e->n; p++, k++) {
      e->vars[k] = (gopt_env_var){e->order[p], GOPT_VAR_PRIORITY, 0};
      e->xdef[k] = e->dprio[p];
    }
  }
  for (int32_t p = 0; p < e->n; p++)
    if (e->fuse_var[p] >= 0) {
      e->fuse_var[p] += (int32_t)k;
      e->vars[e->fuse_var[p]] = (gopt_env_var){e->order[p], GOPT_VAR_FUSE, 2};
    }
  if (e->task == GOPT_TASK_SCHEDULE) {
    if (GOPT_ALLOC(e->fixed_dev, e->n)) goto oom;
    task_contiguous_split(e, e->fixed_dev);
  }
  if (has_fuse && e->fuse_host && (rc = host_plan(e, err))) goto fail;
  if (has_fuse && task_fusion_rules(e, TASK_FUSE_XLA, NULL, e->xdef)) goto oom;
  *out = e;
  return GOPT_OK;
oom:
  rc = gopt_error_set(err, GOPT_ENOMEM, "task: out of memory");
fail:
  gopt_env_free(e);
  return rc;
}

size_t gopt_env_nvars(const gopt_env *e) { return e->nvars; }
const gopt_env_var *gopt_env_vars(const gopt_env *e) { return e->vars; }
const gopt_graph *gopt_env_graph(const gopt_env *e) { return e->g; }
const gopt_cluster *gopt_env_cluster(const gopt_env *e) { return e->c; }
int gopt_env_task(const gopt_env *e) { return e->task; }
const gopt_sim *gopt_env_sim(const gopt_env *e) { return e->sim; }

void gopt_env_default(const gopt_env *e, double *x) {
  if (e->nvars) memcpy(x, e->xdef, e->nvars * sizeof *x);
}

uint64_t gopt_env_evaluations(const gopt_env *e) {
  return (uint64_t)atomic_load(&((gopt_env *)e)->evals);
}

void task_devices_of(const gopt_env *e, const double *x, int32_t *dev) {
  for (int32_t p = 0; p < e->n; p++)
    dev[p] = e->off_dev >= 0 ? (int32_t)x[e->off_dev + p] : e->fixed_dev ? e->fixed_dev[p] : 0;
}

double task_xfer_time(const gopt_env *e, int a, int b, double bytes) {
  if (a == b) return 0;
  int l = e->c->route[a * e->D + b];
  if (l < 0) return 0;
  return bytes / e->c->links[l].bw + e->c->links[l].latency_s;
}

double task_edge_bytes(const gopt_env *e, int32_t p, int32_t c) {
  const gopt_graph *g = e->g;
  const gopt_node *np = &g->nodes.a[e->order[p]], *nc = &g->nodes.a[e->order[c]];
  double b = 0;
  for (uint32_t k = 0; k < np->n_out; k++) {
    int32_t t = g->outs.a[np->out + k];
    if (t < 0) continue;
    int reads = 0;
    for (uint32_t j = 0; j < nc->n_in && !reads; j++) reads = g->slots.a[nc->in + j].tensor == t;
    int dup = 0;
    for (uint32_t j = 0; j < k; j++) dup |= g->outs.a[np->out + j] == t;
    if (reads && !dup) b += gopt_tensor_bytes(g, t);
  }
  return b;
}

void task_node_cost(const gopt_env *e, int32_t id, gopt_cost *c) {
  memset(c, 0, sizeof *c);
  if (e->sopts.cost_fn) e->sopts.cost_fn(e->g, id, c, e->sopts.cost_user);
  else gopt_node_cost(e->g, id, c);
}

void task_contiguous_split(const gopt_env *e, int32_t *dev) {
  double total = 0, cum = 0;
  for (int32_t p = 0; p < e->n; p++) total += e->t0[p];
  for (int32_t p = 0; p < e->n; p++) {
    int d = 0;
    if (total > 0) d = (int)floor((cum + 0.5 * e->t0[p]) / total * e->D);
    else d = (int)((int64_t)p * e->D / (e->n ? e->n : 1));
    if (d < 0) d = 0;
    if (d >= e->D) d = e->D - 1;
    if (p > 0 && d < dev[p - 1]) d = dev[p - 1]; /* keep it monotone (contiguous ranges) */
    dev[p] = d;
    cum += e->t0[p];
  }
}

/* Features: see docs/TASKS.md for the column list. */
static double lg(double v) { return log10(1.0 + (v > 0 ? v : 0)); }

int gopt_env_node_features(const gopt_env *e, float *feat, gopt_error *err) {
  const gopt_graph *g = e->g;
  const int32_t n = e->n;
  int32_t *din = NULL, *dout = NULL;
  if (GOPT_ALLOC(din, n) || GOPT_ALLOC(dout, n)) {
    free(din);
    return gopt_error_set(err, GOPT_ENOMEM, "features: out of memory");
  }
  int32_t mxin = 0, mxout = 0;
  for (int32_t p = 0; p < n; p++) {
    for (int32_t i = e->pred_off[p]; i < e->pred_off[p + 1]; i++)
      if (din[e->pred[i]] + 1 > din[p]) din[p] = din[e->pred[i]] + 1;
    if (din[p] > mxin) mxin = din[p];
  }
  for (int32_t p = n - 1; p >= 0; p--) {
    for (int32_t i = e->succ_off[p]; i < e->succ_off[p + 1]; i++)
      if (dout[e->succ[i]] + 1 > dout[p]) dout[p] = dout[e->succ[i]] + 1;
    if (dout[p] > mxout) mxout = dout[p];
  }
  memset(feat, 0, g->nodes.n * GOPT_ENV_NFEAT * sizeof *feat);
  for (int32_t p = 0; p < n; p++) {
    int32_t id = e->order[p];
    const gopt_node *nd = &g->nodes.a[id];
    float *f = feat + (size_t)id * GOPT_ENV_NFEAT;
    gopt_cost co = {0};
    task_node_cost(e, id, &co);
    int cls = e->cls[p];
    if (cls >= 0 && cls < 7) f[cls] = 1;
    f[7] = (float)(lg(co.flops) / 12);
    f[8] = (float)(lg(co.bytes_read) / 10);
    f[9] = (float)(lg(co.bytes_written) / 10);
    f[10] = (float)(lg((double)co.params) / 9);
    f[11] = (float)(log2(1.0 + (e->pred_off[p + 1] - e->pred_off[p])) / 4);
    f[12] = (float)(log2(1.0 + (e->succ_off[p + 1] - e->succ_off[p])) / 4);
    f[13] = n > 1 ? (float)p / (float)(n - 1) : 0.f;
    f[14] = mxin ? (float)din[p] / (float)mxin : 0.f;
    f[15] = mxout ? (float)dout[p] / (float)mxout : 0.f;
    double numel = 0;
    int rank = 0, out_flag = 0;
    for (uint32_t k = 0; k < nd->n_out; k++) {
      int32_t t = g->outs.a[nd->out + k];
      if (t < 0) continue;
      if (k == 0) rank = g->tensors.a[t].rank;
      numel += (double)gopt_tensor_numel(g, t);
      out_flag |= (g->tensors.a[t].flags & GOPT_T_OUTPUT) != 0;
    }
    int param = 0, ginput = 0;
    for (uint32_t k = 0; k < nd->n_in; k++) {
      int32_t t = g->slots.a[nd->in + k].tensor;
      if (t < 0) continue;
      param |= (g->tensors.a[t].flags & GOPT_T_PARAM) != 0;
      ginput |= (g->tensors.a[t].flags & GOPT_T_INPUT) != 0;
    }
    f[16] = (float)rank / 8.f;
    f[17] = (float)(lg(numel) / 9);
    f[18] = (float)param;
    f[19] = (float)(lg(e->t0[p] * 1e6) / 6);
    f[20] = (float)out_flag;
    f[21] = (float)ginput;
    int fusible = e->cls[p] != GOPT_OPC_OPAQUE && e->succ_off[p] < e->succ_off[p + 1];
    for (int32_t i = e->succ_off[p]; i < e->succ_off[p + 1]; i++) fusible &= e->cls[e->succ[i]] != GOPT_OPC_OPAQUE;
    f[22] = (float)fusible;
    f[23] = (float)e->dprio[p];
  }
  free(din);
  free(dout);
  return GOPT_OK;
}

int gopt_env_result_cmp(const gopt_env_result *a, const gopt_env_result *b) {
  if (!a || !b) return (a == NULL) - (b == NULL);
  if ((a->feasible != 0) != (b->feasible != 0)) return a->feasible ? -1 : 1;
  if (a->objective < b->objective) return -1;
  if (a->objective > b->objective) return 1;
  if (isnan(a->objective) != isnan(b->objective)) return isnan(a->objective) ? 1 : -1;
  return 0;
}

int gopt_env_result_better(const gopt_env_result *a, const gopt_env_result *b) {
  return gopt_env_result_cmp(a, b) < 0;
}
