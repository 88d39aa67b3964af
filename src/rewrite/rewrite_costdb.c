/* rewrite_costdb.c: measured op costs for the rewrite search, TASO's cost model: the simulator's
 * step where the cluster's measured devices (`host`) take every op's time from the cost database,
 * and the ops a candidate graph has that the database lacks are profiled on demand with the
 * executor (each alone in a one-op graph, plain layouts, one thread, as `gopt run --profile
 * --costdb --threads 1` measures them) and added to it, so the next candidate and the next run find them cached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/exec.h"
#include "gopt/util.h"
#include "rewrite/rewrite_internal.h"

struct gopt_rewrite_costs {
  gopt_costdb *db;      /* borrowed */
  gopt_costdb *failed;  /* signatures the executor could not run alone (a set; never saved) */
  int reps;
  uint64_t seed;
  size_t profiled;
  double seconds;
};

gopt_rewrite_costs *gopt_rewrite_costs_new(gopt_costdb *db, int reps, uint64_t seed) {
  gopt_rewrite_costs *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  if (!(m->failed = gopt_costdb_new("unmeasurable", 0))) {
    free(m);
    return NULL;
  }
  m->db = db;
  m->reps = reps > 0 ? reps : 10;
  m->seed = seed;
  return m;
}

void gopt_rewrite_costs_free(gopt_rewrite_costs *m) {
  if (!m) return;
  gopt_costdb_free(m->failed);
  free(m);
}

void gopt_rewrite_costs_stats(const gopt_rewrite_costs *m, size_t *profiled, size_t *failed, double *seconds) {
  if (profiled) *profiled = m ? m->profiled : 0;
  if (failed) *failed = m ? gopt_costdb_size(m->failed) : 0;
  if (seconds) *seconds = m ? m->seconds : 0;
}

/* Node n of g alone in a new graph: its constant inputs constants (with g's data, or none: the
 * executor makes weights up), the others graph inputs of the same dtype and shape. */
static int one_op_graph(const gopt_graph *g, int32_t n, gopt_graph **out, gopt_error *err) {
  const gopt_node *nd = &g->nodes.a[n];
  int32_t in[RW_MAX_IN * 4], outs[RW_MAX_OUT * 2];
  if (nd->n_in > (int)(sizeof in / sizeof in[0]) || nd->n_out > (int)(sizeof outs / sizeof outs[0]))
    return gopt_error_set(err, GOPT_EUNSUP, "node '%s': too many inputs or outputs to profile alone",
                          gopt_node_name(g, n));
  gopt_graph *m = gopt_graph_new("profile");
  if (!m) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  int rc = 0;
  gopt_graph_set_opset(m, "", gopt_graph_opset(g, "", 13));
  for (int k = 0; k < nd->n_in && !rc; k++) {
    int32_t t = gopt_node_input(g, n, k);
    in[k] = -1;
    if (t < 0) continue;
    const gopt_tensor *x = &g->tensors.a[t];
    char name[32];
    snprintf(name, sizeof name, "in%d", k);
    if ((in[k] = gopt_graph_add_tensor(m, name, x->dtype, x->rank, gopt_tensor_dims(g, t), err)) < 0) rc = err->code ? err->code : GOPT_EINVAL;
    else if (x->flags & GOPT_T_CONST)
      rc = gopt_tensor_set_const(m, in[k], gopt_tensor_data(g, t), g->consts.a[x->cdata].nbytes, err);
    else rc = gopt_graph_add_input(m, in[k]);
  }
  for (int k = 0; k < nd->n_out && !rc; k++) {
    int32_t t = gopt_node_output(g, n, k);
    const gopt_tensor *x = &g->tensors.a[t];
    if ((outs[k] = gopt_graph_add_tensor(m, NULL, x->dtype, x->rank, gopt_tensor_dims(g, t), err)) < 0) rc = err->code ? err->code : GOPT_EINVAL;
  }
  int32_t mn = rc ? -1 : gopt_graph_add_node(m, gopt_node_type(g, n), "op", nd->n_in, in, nd->n_out, outs, err);
  if (!rc && mn < 0) rc = err->code ? err->code : GOPT_EINVAL;
  if (!rc && rw_copy_attrs(g, n, m, mn)) rc = gopt_error_set(err, GOPT_EUNSUP, "node '%s': attributes", gopt_node_name(g, n));
  for (int k = 0; k < nd->n_out && !rc; k++) rc = gopt_graph_add_output(m, outs[k]);
  if (rc) {
    gopt_graph_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

/* Profiles node n of g alone and stores its time under n's signature sig (the signature of the
 * original node, so a shape inference of the one-op graph cannot file it under another key). */
static int profile_op(gopt_rewrite_costs *m, const gopt_graph *g, int32_t n, uint64_t sig, gopt_error *err) {
  gopt_graph *one = NULL;
  gopt_exec *x = NULL;
  gopt_exec_profile p = {0};
  gopt_exec_opts eo = {0};
  eo.seed = m->seed;
  eo.threads = 1; /* one thread: the profiler's times are CPU times, steady on a shared machine */
  eo.layouts = GOPT_EXEC_LAYOUT_PLAIN;
  int rc = one_op_graph(g, n, &one, err);
  if (!rc) rc = gopt_exec_new(one, &eo, &x, NULL, err);
  if (!rc) rc = gopt_exec_random_inputs(x, m->seed, err);
  if (!rc) rc = gopt_exec_profile_run(x, 2, m->reps, NULL, &p, err);
  if (!rc) {
    double s = 0;
    for (size_t i = 0; i < p.n_steps; i++) s += p.steps[i].seconds;
    char desc[512];
    gopt_op_signature_desc(g, n, desc, sizeof desc);
    gopt_cost_entry e = {sig, gopt_node_type(g, n), desc, s, m->reps};
    if (gopt_costdb_put(m->db, &e)) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  gopt_exec_profile_clear(&p);
  gopt_exec_free(x);
  gopt_graph_free(one);
  return rc;
}

int rw_costs_prepare(gopt_rewrite_costs *m, const gopt_graph *g, const gopt_cluster *c, gopt_sim_opts *so,
                     gopt_error *err) {
  int measured = 0;
  for (int d = 0; d < c->n_devices; d++) measured |= c->devices[d].measured;
  if (!measured || !m->db) return 0; /* a cluster without measured devices ignores the database */
  so->costs = GOPT_SIM_COSTS_AUTO;
  so->costdb = m->db;
  gopt_cost_entry e;
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t n = (int32_t)i;
    if (!gopt_node_alive(g, n)) continue;
    uint64_t sig = gopt_op_signature(g, n);
    if (gopt_costdb_get(m->db, sig, &e) || gopt_costdb_get(m->failed, sig, &e)) continue;
    double t0 = gopt_now();
    gopt_error pe = {0};
    if (profile_op(m, g, n, sig, &pe)) {
      /* priced by the analytical model from now on; an out-of-memory is the caller's error */
      if (pe.code == GOPT_ENOMEM) return gopt_error_set(err, GOPT_ENOMEM, "%s", pe.msg);
      gopt_cost_entry f = {sig, gopt_node_type(g, n), pe.msg, 0, 0};
      if (gopt_costdb_put(m->failed, &f)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    } else {
      m->profiled++;
    }
    m->seconds += gopt_now() - t0;
  }
  return 0;
}
