/* learn_parts.c: the segment head's min-cut clusters (HDP's grouper-placer with METIS as the
 * grouper, the route docs/LEARNED.md names for splits the list schedule's greedy decode never
 * makes). The rows are cut into K parts by METIS's k-way partition (vertex weight: kernel time;
 * edge weight: the producer's output bytes, as the metis baseline weighs them); a part is then split
 * by phase so that the clusters' graph stays acyclic, as the list-order decode needs: a row's phase
 * is the largest over its producers of their phase, plus one where the producer is in another part.
 * Every edge between two clusters then goes to a higher phase, so numbering the clusters by
 * (phase, part) is a topological order. The head places these clusters as it places the
 * depth-first ones; METIS only groups. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/baselines.h"
#include "learn/learn_internal.h"

/* The undirected row graph for METIS from the readers' CSR (sp/sc, sorted, no repeats): xadj[n + 1],
 * adj and ew (2 x edges each), edge weight from the producer's bytes, vertex weight vw from kernel
 * time; integer weights scaled as bl_metis scales them. */
static int row_graph(const learn_graph *lg, const int32_t *sp, const int32_t *sc, const double *rb, int32_t *xadj,
                     int32_t *adj, int32_t *ew, int32_t *vw) {
  int64_t n = lg->n, ne = sp[n];
  int32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
  if (!fill) return GOPT_ENOMEM;
  double tmax = 0, bmax = 0;
  for (int64_t r = 0; r < n; r++) {
    tmax = fmax(tmax, learn_row_us(lg, r));
    bmax = fmax(bmax, rb[r]);
  }
  double vs = fmin(1e4, 1e9 / (double)n), es = fmin(1e4, 1e9 / (double)(2 * ne + 1));
  memset(xadj, 0, ((size_t)n + 1) * sizeof *xadj);
  for (int64_t u = 0; u < n; u++)
    for (int32_t i = sp[u]; i < sp[u + 1]; i++) {
      xadj[u + 1]++;
      xadj[sc[i] + 1]++;
    }
  for (int64_t r = 0; r < n; r++) xadj[r + 1] += xadj[r];
  memcpy(fill, xadj, (size_t)n * sizeof *fill);
  for (int64_t u = 0; u < n; u++) {
    vw[u] = 1 + (int32_t)(tmax > 0 ? learn_row_us(lg, u) / tmax * vs : 0);
    int32_t w = 1 + (int32_t)(bmax > 0 ? rb[u] / bmax * es : 0);
    for (int32_t i = sp[u]; i < sp[u + 1]; i++) {
      int32_t v = sc[i];
      adj[fill[u]] = v;
      ew[fill[u]++] = w;
      adj[fill[v]] = (int32_t)u;
      ew[fill[v]++] = w;
    }
  }
  free(fill);
  return 0;
}

/* Each row's cluster (lg->seg_of, lg->n_seg, then learn_seg_shares) from its part: phases in row
 * order (rows are a topological order), clusters numbered by (phase, part), empty ones skipped. */
static int phase_split(learn_graph *lg, const int32_t *sp, const int32_t *sc, const int32_t *part, int K) {
  int64_t n = lg->n;
  int32_t *phase = calloc((size_t)n + 1, sizeof *phase), pmax = 0;
  if (!phase) return GOPT_ENOMEM;
  for (int64_t u = 0; u < n; u++) {
    pmax = phase[u] > pmax ? phase[u] : pmax;
    for (int32_t i = sp[u]; i < sp[u + 1]; i++) {
      int32_t v = sc[i], p = phase[u] + (part[u] != part[v]);
      if (p > phase[v]) phase[v] = p;
    }
  }
  size_t nk = ((size_t)pmax + 1) * (size_t)K;
  int32_t *id = malloc((nk + 1) * sizeof *id);
  if (!id) {
    free(phase);
    return GOPT_ENOMEM;
  }
  for (size_t k = 0; k < nk; k++) id[k] = -1;
  for (int64_t r = 0; r < n; r++) id[(size_t)phase[r] * (size_t)K + (size_t)part[r]] = 0;
  int32_t next = 0;
  for (size_t k = 0; k < nk; k++)
    if (id[k] == 0) id[k] = next++;
  for (int64_t r = 0; r < n; r++) lg->seg_of[r] = id[(size_t)phase[r] * (size_t)K + (size_t)part[r]];
  lg->n_seg = next;
  free(id);
  free(phase);
  return learn_seg_shares(lg);
}

int learn_part_clusters(learn_graph *lg, const int32_t *sp, const int32_t *sc, const double *rb, int K, gopt_error *err) {
  int64_t n = lg->n, ne = sp[n];
  int32_t *xadj = malloc(((size_t)n + 1) * sizeof *xadj), *part = malloc(((size_t)n + 1) * sizeof *part);
  int32_t *adj = malloc(((size_t)(2 * ne) + 1) * sizeof *adj), *ew = malloc(((size_t)(2 * ne) + 1) * sizeof *ew);
  int32_t *vw = malloc(((size_t)n + 1) * sizeof *vw);
  int rc = !xadj || !part || !adj || !ew || !vw ? GOPT_ENOMEM : 0;
  if (!rc && n <= K) /* one row per part */
    for (int64_t r = 0; r < n; r++) part[r] = (int32_t)r;
  else if (!rc && !(rc = row_graph(lg, sp, sc, rb, xadj, adj, ew, vw)))
    rc = gopt_metis_parts((int32_t)n, xadj, adj, vw, ew, K, part, NULL, err);
  if (!rc) rc = phase_split(lg, sp, sc, part, K);
  if (rc == GOPT_ENOMEM) rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (min-cut clusters)");
  free(xadj);
  free(part);
  free(adj);
  free(ew);
  free(vw);
  return rc;
}
