/* placement.c: placement baselines: everything on one device, round robin, METIS k-way partition
 * (node weight = kernel time, edge weight = tensor bytes) and Baechi's memory-aware
 * earliest-task-first list scheduling (m-ETF). The human-expert placement is in expert.c. */
#include <math.h>
#include <metis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baselines/baselines_internal.h"

#include "util/util_internal.h"

int bl_single(const gopt_env *e, const double *x, int32_t *dev, gopt_error *err) {
  (void)x;
  (void)err;
  for (int32_t p = 0; p < e->n; p++) dev[p] = 0;
  return GOPT_OK;
}

int bl_round_robin(const gopt_env *e, const double *x, int32_t *dev, gopt_error *err) {
  (void)x;
  (void)err;
  for (int32_t p = 0; p < e->n; p++) dev[p] = p % e->D;
  return GOPT_OK;
}

/* METIS prints from inside the library: "***Cannot bisect a graph with 0 vertices! ***You are
 * trying to partition a graph into too many parts!" on stdout when its initial recursive bisection
 * leaves a side with more parts than vertices (an op heavier than half of what the side must hold,
 * e.g. GPT-2's LM head on 8 devices); it then leaves those parts empty and returns METIS_OK. That
 * text would corrupt gopt's stdout (--json). metis_quiet_begin points file descriptor 1 at an
 * anonymous temporary file for the call and metis_quiet_end restores it, returning 1 when METIS
 * wrote anything there. Changing the input instead would change METIS's partition of every graph
 * with a heavy op, which is the baseline as published. Only used inside the gopt_metis critical
 * section; another thread writing to stdout during the call would lose its text (gopt's library
 * never writes to stdout). When descriptor 1 cannot be redirected, METIS runs unchanged. */
typedef struct metis_quiet {
  int saved;  /* dup of descriptor 1, or -1 */
  FILE *tmp;
} metis_quiet;

static void metis_quiet_begin(metis_quiet *q) {
  q->saved = -1;
  fflush(stdout);
  if (!(q->tmp = tmpfile())) return;
  q->saved = dup(STDOUT_FILENO);
  if (q->saved < 0 || dup2(fileno(q->tmp), STDOUT_FILENO) < 0) {
    if (q->saved >= 0) close(q->saved);
    q->saved = -1;
  }
}

static int metis_quiet_end(metis_quiet *q) {
  int wrote = 0;
  if (q->saved >= 0) {
    fflush(stdout);
    struct stat st;
    wrote = fstat(fileno(q->tmp), &st) == 0 && st.st_size > 0;
    dup2(q->saved, STDOUT_FILENO);
    close(q->saved);
  }
  if (q->tmp) fclose(q->tmp);
  return wrote;
}

int gopt_metis_parts(int32_t n, const int32_t *xadj, const int32_t *adj, const int32_t *vwgt, const int32_t *ewgt,
                     int nparts, int32_t *part, int *empty, gopt_error *err) {
  _Static_assert(sizeof(idx_t) == sizeof(int32_t), "gopt_metis_parts: METIS built with 32-bit idx_t");
  idx_t nv = n, ncon = 1, np = nparts, objval = 0;
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = 1;
  options[METIS_OPTION_NUMBERING] = 0;
  /* METIS seeds one process-wide random generator (GKlib's): two partitions at once in one
   * process would interleave its draws, so results would depend on thread timing. */
  int mr, wrote;
#pragma omp critical(gopt_metis)
  {
    metis_quiet q;
    metis_quiet_begin(&q);
    mr = METIS_PartGraphKway(&nv, &ncon, (idx_t *)xadj, (idx_t *)adj, (idx_t *)vwgt, NULL, (idx_t *)ewgt, &np, NULL,
                             NULL, options, &objval, (idx_t *)part);
    wrote = metis_quiet_end(&q);
  }
  if (empty) *empty = wrote && mr == METIS_OK;
  if (mr != METIS_OK) return gopt_error_set(err, GOPT_EINVAL, "metis: METIS_PartGraphKway failed (code %d)", mr);
  for (int32_t v = 0; v < n; v++)
    if (part[v] < 0 || part[v] >= nparts) part[v] = 0;
  return 0;
}

/* METIS_PartGraphKway on the undirected dataflow graph. Weights are integers: kernel time and
 * bytes scaled so the totals stay far below 2^31 (METIS sums them in 32-bit idx_t). */
int bl_metis(const gopt_env *e, const double *x, int32_t *dev, gopt_error *err) {
  (void)x;
  const int32_t n = e->n;
  int rc = GOPT_OK;
  if (e->D == 1 || n <= e->D) { /* one device, or one node per device */
    for (int32_t p = 0; p < n; p++) dev[p] = e->D == 1 ? 0 : p;
    return GOPT_OK;
  }
  idx_t *xadj = NULL, *adj = NULL, *vw = NULL, *ew = NULL, *part = NULL;
  double *eb = NULL;
  size_t ne = (size_t)e->succ_off[n];
  if (GOPT_ALLOC(xadj, n + 1) || GOPT_ALLOC(adj, 2 * ne) || GOPT_ALLOC(vw, n) || GOPT_ALLOC(ew, 2 * ne) ||
      GOPT_ALLOC(part, n) || GOPT_ALLOC(eb, ne)) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "metis: out of memory");
    goto done;
  }
  double tmax = 0, bmax = 0;
  for (int32_t p = 0; p < n; p++) tmax = fmax(tmax, e->t0[p]);
  for (int32_t p = 0; p < n; p++)
    for (int32_t i = e->succ_off[p]; i < e->succ_off[p + 1]; i++) {
      eb[i] = task_edge_bytes(e, p, e->succ[i]);
      bmax = fmax(bmax, eb[i]);
    }
  double vs = fmin(1e4, 1e9 / n), es = fmin(1e4, 1e9 / (double)(2 * ne + 1));
  for (int32_t p = 0; p < n; p++) vw[p] = 1 + (idx_t)(tmax > 0 ? e->t0[p] / tmax * vs : 0);
  /* neighbours: producers (pred) then consumers (succ); edge weight from the producer's side */
  size_t k = 0;
  for (int32_t p = 0; p < n; p++) {
    xadj[p] = (idx_t)k;
    for (int32_t i = e->pred_off[p]; i < e->pred_off[p + 1]; i++) {
      int32_t q = e->pred[i];
      double b = 0;
      for (int32_t j = e->succ_off[q]; j < e->succ_off[q + 1]; j++)
        if (e->succ[j] == p) b = eb[j];
      adj[k] = q;
      ew[k++] = 1 + (idx_t)(bmax > 0 ? b / bmax * es : 0);
    }
    for (int32_t i = e->succ_off[p]; i < e->succ_off[p + 1]; i++) {
      adj[k] = e->succ[i];
      ew[k++] = 1 + (idx_t)(bmax > 0 ? eb[i] / bmax * es : 0);
    }
  }
  xadj[n] = (idx_t)k;
  int empty = 0;
  if ((rc = gopt_metis_parts(n, xadj, adj, vw, ew, e->D, part, &empty, err))) goto done;
  if (empty)
    gopt_warn("metis: METIS ran out of ops while bisecting %d ops into %d parts (an op heavier than its "
              "side's share); some devices get no op", (int)n, (int)e->D);
  for (int32_t p = 0; p < n; p++) dev[p] = part[p];
done:
  free(xadj);
  free(adj);
  free(vw);
  free(ew);
  free(part);
  free(eb);
  return rc;
}

/* m-ETF (Baechi): repeatedly take the (ready op, device) pair with the earliest possible start
 * (device free and every input arrived: producer end + transfer bytes / bw + latency when on
 * another device), among the devices where the op's memory fits (outputs kept for the step plus
 * weights/graph inputs, gopt_sim_tensor_resident, not yet on the device; all devices when none
 * fits). Ties: lower topological position, then lower device. Priorities: 1 - rank / n in the
 * order ops were scheduled. */
int bl_m_etf(const gopt_env *e, const double *x, int32_t *dev, double *prio, gopt_error *err) {
  (void)x;
  const gopt_graph *g = e->g;
  const int32_t n = e->n;
  const int D = e->D;
  int rc = GOPT_OK;
  int32_t *pending = NULL, *ready = NULL;
  double *drt = NULL, *finish = NULL, *avail = NULL, *mem = NULL, *eb = NULL;
  uint8_t *onDev = NULL;
  if (GOPT_ALLOC(pending, n) || GOPT_ALLOC(ready, n) || GOPT_ALLOC(drt, (size_t)n * D) || GOPT_ALLOC(finish, n) ||
      GOPT_ALLOC(avail, D) || GOPT_ALLOC(mem, D) || GOPT_ALLOC(eb, e->pred_off[n]) ||
      GOPT_ALLOC(onDev, g->tensors.n * (size_t)D)) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "m_etf: out of memory");
    goto done;
  }
  for (int32_t p = 0; p < n; p++)
    for (int32_t i = e->pred_off[p]; i < e->pred_off[p + 1]; i++) eb[i] = task_edge_bytes(e, e->pred[i], p);
  int32_t nr = 0;
  for (int32_t p = 0; p < n; p++) {
    pending[p] = e->pred_off[p + 1] - e->pred_off[p];
    if (!pending[p]) ready[nr++] = p;
  }
  for (int32_t rank = 0; rank < n; rank++) {
    int32_t bi = -1, bd = -1, bfit = 0;
    double best = INFINITY;
    for (int32_t i = 0; i < nr; i++) {
      int32_t p = ready[i];
      const gopt_node *nd = &g->nodes.a[e->order[p]];
      for (int d = 0; d < D; d++) {
        double need = e->out_bytes[p];
        for (uint32_t k = 0; k < nd->n_in; k++) {
          int32_t t = g->slots.a[nd->in + k].tensor;
          if (t < 0 || !gopt_sim_tensor_resident(g, t) || onDev[(size_t)t * D + d]) continue;
          int dup = 0;
          for (uint32_t j = 0; j < k && !dup; j++) dup = g->slots.a[nd->in + j].tensor == t;
          if (!dup) need += gopt_tensor_bytes(g, t);
        }
        int fit = mem[d] + need <= e->c->devices[d].mem_bytes;
        double est = fmax(avail[d], drt[(size_t)p * D + d]);
        int better = bi < 0 || fit > bfit ||
                     (fit == bfit && (est < best || (est == best && (p < ready[bi] || (p == ready[bi] && d < bd)))));
        if (better) {
          bi = i;
          bd = d;
          bfit = fit;
          best = est;
        }
      }
    }
    int32_t p = ready[bi];
    ready[bi] = ready[--nr];
    dev[p] = bd;
    if (prio) prio[p] = 1.0 - (double)rank / n;
    finish[p] = best + gopt_sim_node_time(e->sim, e->order[p], bd);
    avail[bd] = finish[p];
    const gopt_node *nd = &g->nodes.a[e->order[p]];
    mem[bd] += e->out_bytes[p];
    for (uint32_t k = 0; k < nd->n_in; k++) {
      int32_t t = g->slots.a[nd->in + k].tensor;
      if (t < 0 || !gopt_sim_tensor_resident(g, t) || onDev[(size_t)t * D + bd]) continue;
      onDev[(size_t)t * D + bd] = 1;
      mem[bd] += gopt_tensor_bytes(g, t);
    }
    for (int32_t j = e->succ_off[p]; j < e->succ_off[p + 1]; j++) {
      int32_t c = e->succ[j];
      if (--pending[c]) continue;
      for (int d = 0; d < D; d++) {
        double t = 0;
        for (int32_t i = e->pred_off[c]; i < e->pred_off[c + 1]; i++) {
          int32_t q = e->pred[i];
          t = fmax(t, finish[q] + task_xfer_time(e, dev[q], d, eb[i]));
        }
        drt[(size_t)c * D + d] = t;
      }
      ready[nr++] = c;
    }
  }
done:
  free(pending);
  free(ready);
  free(drt);
  free(finish);
  free(avail);
  free(mem);
  free(eb);
  free(onDev);
  return rc;
}
