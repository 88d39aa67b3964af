/* search_fixture.h: shared helpers for the search tests: test clusters (JSON), random tiny DAGs
 * built with the IR API (hand-set kernel costs through the simulator's cost hook, random tensor
 * sizes, weights, multi-output nodes, graph outputs), environments, and brute-force references
 * (every placement D^n; every topological order as priorities), evaluated through the same env. */
#ifndef GOPT_TEST_SEARCH_FIXTURE_H
#define GOPT_TEST_SEARCH_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/search.h"
#include "gopt/zoo.h"

/* ---- deterministic test randomness (independent of the library's PRNG) -------------------- */
static uint64_t fx_rng_state = 1;
static inline uint64_t fx_next(void) {
  uint64_t z = (fx_rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static inline int fx_below(int n) { return (int)(fx_next() % (uint64_t)n); }

/* ---- clusters ------------------------------------------------------------------------------ */
/* ndev devices (1 TFLOP/s, 100 GB/s, launch 1 us, efficiency 1, memory mem bytes); device i's
 * peak is multiplied by (1 + hetero * i). Links: one shared bus (shared = 1) or one link per
 * pair, fx_link_bw bytes/s + fx_link_lat_us (default 10 GB/s + 2 us). */
static double fx_link_bw = 1e10, fx_link_lat_us = 2;
static inline gopt_cluster *fx_cluster(int ndev, double mem, double hetero, int shared) {
  char buf[4096];
  size_t k = 0;
  k += (size_t)snprintf(buf + k, sizeof buf - k, "{\"name\":\"test\",\"devices\":[");
  for (int i = 0; i < ndev; i++)
    k += (size_t)snprintf(buf + k, sizeof buf - k,
                          "%s{\"name\":\"d%d\",\"peak_flops\":%g,\"mem_bw\":1e11,\"memory\":%.17g,"
                          "\"launch_us\":1,\"efficiency\":1}",
                          i ? "," : "", i, 1e12 * (1 + hetero * i), mem);
  k += (size_t)snprintf(buf + k, sizeof buf - k, "]");
  if (ndev > 1) {
    k += (size_t)snprintf(buf + k, sizeof buf - k, ",\"links\":[");
    if (shared) {
      k += (size_t)snprintf(buf + k, sizeof buf - k, "{\"name\":\"bus\",\"devices\":[");
      for (int i = 0; i < ndev; i++) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%d", i ? "," : "", i);
      k += (size_t)snprintf(buf + k, sizeof buf - k, "],\"bw\":%g,\"latency_us\":%g}", fx_link_bw,
                            fx_link_lat_us);
    } else {
      int first = 1;
      for (int i = 0; i < ndev; i++)
        for (int j = i + 1; j < ndev; j++) {
          k += (size_t)snprintf(buf + k, sizeof buf - k,
                                "%s{\"name\":\"l%d%d\",\"devices\":[%d,%d],\"bw\":%g,\"latency_us\":%g}",
                                first ? "" : ",", i, j, i, j, fx_link_bw, fx_link_lat_us);
          first = 0;
        }
    }
    k += (size_t)snprintf(buf + k, sizeof buf - k, "]");
  }
  snprintf(buf + k, sizeof buf - k, "}");
  gopt_cluster *c = NULL;
  gopt_error err = {0};
  int rc = gopt_cluster_from_json(buf, "test", &c, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return c;
}

/* ---- random tiny DAGs ---------------------------------------------------------------------- */
typedef struct fx_costs {
  double flops[64], bytes[64];
} fx_costs;

static inline void fx_cost_fn(const gopt_graph *g, int32_t n, gopt_cost *c, void *user) {
  const fx_costs *k = user;
  c->flops = n < 64 ? k->flops[n] : 0;
  c->bytes_read = n < 64 ? k->bytes[n] : 0;
  c->bytes_written = 0;
  c->params = 0;
}

/* A random DAG of n nodes (n <= 60): node i reads 1-2 earlier outputs (or the graph input),
 * sometimes a weight constant; about one node in five has two outputs; outputs nobody reads are
 * graph outputs. Kernel costs 1-20 us of compute, tensor sizes 1-64 KiB. */
static inline gopt_graph *fx_random_dag(int n, uint64_t seed, fx_costs *k) {
  fx_rng_state = seed * 7919 + 13;
  gopt_graph *g = gopt_graph_new("rand");
  int64_t e = 256;
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 1, &e, NULL);
  gopt_graph_add_input(g, x);
  int32_t outs[128];
  int no = 0;
  outs[no++] = x;
  memset(k, 0, sizeof *k);
  for (int i = 0; i < n; i++) {
    char name[32];
    int32_t in[3];
    int nin = 1 + (i > 1 && fx_below(2));
    /* mostly recent outputs (deeper graphs), sometimes any earlier one (wider graphs) */
    in[0] = fx_below(3) ? outs[no - 1 - fx_below(no < 3 ? no : 3)] : outs[fx_below(no)];
    if (nin == 2) {
      in[1] = outs[fx_below(no)];
      if (in[1] == in[0]) nin = 1;
    }
    if (fx_below(4) == 0) {
      int64_t we = 16 * (1 + fx_below(64));
      snprintf(name, sizeof name, "w%d", i);
      int32_t w = gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, 1, &we, NULL);
      gopt_tensor_set_const(g, w, NULL, (size_t)we * 4, NULL);
      in[nin++] = w;
    }
    int nout = fx_below(5) == 0 ? 2 : 1;
    int32_t ot[2];
    for (int j = 0; j < nout; j++) {
      int64_t oe = 256 * (1 + fx_below(64));
      snprintf(name, sizeof name, "t%d_%d", i, j);
      ot[j] = gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, 1, &oe, NULL);
      outs[no++] = ot[j];
    }
    snprintf(name, sizeof name, "n%d", i);
    const char *type = nout == 2 ? "Split" : nin >= 2 ? "Add" : "Relu";
    int32_t id = gopt_graph_add_node(g, type, name, nin, in, nout, ot, NULL);
    k->flops[id] = 1e6 * (1 + fx_below(40));
    k->bytes[id] = 1e4 * (1 + fx_below(10));
  }
  for (int j = 1; j < no; j++)
    if (gopt_tensor_use_count(g, outs[j]) == 0) gopt_graph_add_output(g, outs[j]);
  return g;
}

static inline gopt_env *fx_env(const gopt_graph *g, const gopt_cluster *c, int task, fx_costs *k,
                        int threads) {
  gopt_sim_opts so = {GOPT_SIM_COSTS_ANALYTICAL, NULL, k ? fx_cost_fn : NULL, k}; /* copied */
  gopt_env_opts eo = {task, &so, 0, threads};
  gopt_env *e = NULL;
  gopt_error err = {0};
  int rc = gopt_env_new(g, c, &eo, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return e;
}

static inline double fx_eval(gopt_env *e, const double *x, gopt_env_result *r) {
  gopt_env_ws *w = gopt_env_ws_new(e);
  gopt_error err = {0};
  gopt_env_result tmp;
  if (!r) r = &tmp;
  int rc = gopt_env_evaluate(w, x, r, NULL, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  gopt_env_ws_free(w);
  return rc ? NAN : r->objective;
}

/* ---- brute force --------------------------------------------------------------------------- */
/* Minimum objective over every placement (DEVICE variables; others at the default); with
 * feasible_only, over the memory-feasible ones (INFINITY when none). */
static inline double fx_brute_placement(gopt_env *e, int feasible_only, size_t *count) {
  size_t nv = gopt_env_nvars(e);
  const gopt_env_var *v = gopt_env_vars(e);
  double *x = malloc(nv * sizeof *x);
  gopt_env_default(e, x);
  gopt_env_ws *w = gopt_env_ws_new(e);
  double best = INFINITY;
  size_t cnt = 0;
  for (;;) {
    gopt_env_result r;
    gopt_error err = {0};
    int rc = gopt_env_evaluate(w, x, &r, NULL, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    cnt++;
    if ((!feasible_only || r.feasible) && r.objective < best) best = r.objective;
    size_t i = 0; /* next placement (odometer over DEVICE variables) */
    for (; i < nv; i++) {
      if (v[i].kind != GOPT_VAR_DEVICE) continue;
      if (x[i] + 1 < v[i].card) {
        x[i] += 1;
        break;
      }
      x[i] = 0;
    }
    if (i == nv) break;
  }
  gopt_env_ws_free(w);
  free(x);
  if (count) *count = cnt;
  return best;
}

typedef struct fx_orders {
  gopt_env *e;
  gopt_env_ws *w;
  int n;
  int32_t *prio_var;   /* [n] by topological position */
  int32_t *npred;      /* remaining predecessors */
  int32_t *succ_off, *succ;
  double *x;
  double best;
  size_t count, limit;
} fx_orders;

static inline void fx_orders_rec(fx_orders *o, int depth) {
  if (o->count >= o->limit) return;
  if (depth == o->n) {
    gopt_env_result r;
    gopt_error err = {0};
    int rc = gopt_env_evaluate(o->w, o->x, &r, NULL, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    o->count++;
    if (r.objective < o->best) o->best = r.objective;
    return;
  }
  for (int p = 0; p < o->n; p++) {
    if (o->npred[p] != 0) continue;
    o->npred[p] = -1;
    o->x[o->prio_var[p]] = 1.0 - (depth + 0.5) / o->n;
    for (int j = o->succ_off[p]; j < o->succ_off[p + 1]; j++) o->npred[o->succ[j]]--;
    fx_orders_rec(o, depth + 1);
    for (int j = o->succ_off[p]; j < o->succ_off[p + 1]; j++) o->npred[o->succ[j]]++;
    o->npred[p] = 0;
  }
}

/* Minimum objective over every topological order (as priorities; DEVICE variables 0) of the
 * memory task's graph, at most limit orders (*count says how many were tried). */
static inline double fx_brute_orders(gopt_env *e, size_t limit, size_t *count) {
  const gopt_graph *g = gopt_env_graph(e);
  size_t nv = gopt_env_nvars(e), NN = g->nodes.n;
  const gopt_env_var *v = gopt_env_vars(e);
  fx_orders o = {0};
  o.e = e;
  o.w = gopt_env_ws_new(e);
  o.limit = limit;
  o.best = INFINITY;
  int32_t *order = malloc(NN * sizeof *order), *pos = malloc(NN * sizeof *pos);
  o.n = (int)gopt_graph_topo(g, order, NULL);
  for (size_t i = 0; i < NN; i++) pos[i] = -1;
  for (int p = 0; p < o.n; p++) pos[order[p]] = p;
  o.prio_var = calloc((size_t)o.n, sizeof *o.prio_var);
  o.npred = calloc((size_t)o.n, sizeof *o.npred);
  o.x = malloc(nv * sizeof *o.x);
  gopt_env_default(e, o.x);
  for (size_t i = 0; i < nv; i++) {
    if (v[i].kind == GOPT_VAR_PRIORITY) o.prio_var[pos[v[i].node]] = (int32_t)i;
    if (v[i].kind == GOPT_VAR_DEVICE) o.x[i] = 0;
  }
  /* distinct successor lists through tensors */
  int32_t *cnt = calloc((size_t)o.n + 1, sizeof *cnt);
  int32_t *pairs = malloc((size_t)o.n * (size_t)o.n * 2 * sizeof *pairs);
  size_t np = 0;
  for (int c = 0; c < o.n; c++) {
    const gopt_node *nd = &g->nodes.a[order[c]];
    for (int k = 0; k < nd->n_in; k++) {
      int32_t t = gopt_node_input(g, order[c], k);
      if (t < 0 || g->tensors.a[t].producer < 0) continue;
      int p = pos[g->tensors.a[t].producer], dup = 0;
      for (size_t j = 0; j < np; j++) dup |= pairs[2 * j] == p && pairs[2 * j + 1] == c;
      if (dup) continue;
      pairs[2 * np] = p;
      pairs[2 * np + 1] = c;
      np++;
      cnt[p + 1]++;
      o.npred[c]++;
    }
  }
  o.succ_off = calloc((size_t)o.n + 1, sizeof *o.succ_off);
  o.succ = malloc((np + 1) * sizeof *o.succ);
  for (int p = 0; p < o.n; p++) o.succ_off[p + 1] = o.succ_off[p] + cnt[p + 1];
  memcpy(cnt, o.succ_off, (size_t)o.n * sizeof *cnt);
  for (size_t j = 0; j < np; j++) o.succ[cnt[pairs[2 * j]]++] = pairs[2 * j + 1];
  fx_orders_rec(&o, 0);
  if (count) *count = o.count;
  gopt_env_ws_free(o.w);
  free(order);
  free(pos);
  free(o.prio_var);
  free(o.npred);
  free(o.x);
  free(cnt);
  free(pairs);
  free(o.succ_off);
  free(o.succ);
  return o.best;
}

/* Runs a method; CHECKs success; returns the best objective (NAN on failure). */
/* An on_sample callback that logs up to cap evaluated points (x rows of nv values, objectives). */
typedef struct sample_log {
  size_t n, cap, nv;
  double *xs, *obj;
} sample_log;
static inline void log_sample(const double *x, const gopt_env_result *r, void *user) {
  sample_log *l = user;
  if (l->n == l->cap) return;
  memcpy(l->xs + l->n * l->nv, x, l->nv * sizeof *x);
  l->obj[l->n++] = r->objective;
}

static inline double fx_run(const char *method, gopt_env *e, const gopt_search_opts *o, double *x,
                     gopt_search_result *res) {
  gopt_error err = {0};
  int rc = gopt_search_run(method, e, o, x, res, &err);
  CHECK_MSG(rc == 0, "%s: %s", method, err.msg);
  return rc ? NAN : res->best.objective;
}

#endif
