/* learn_segment.c: the segment-level placement head (docs/LEARNED.md "Segment-level placement").
 * A graph's rows are coarsened into at most S clusters: contiguous runs of a depth-first
 * topological order (reverse postorder, so a branch's nodes are consecutive), balanced by kernel
 * time and node count (or one row per cluster: the node level; or go's min-cut levels, METIS's
 * parts split by phase, learn_parts.c). Each cluster is embedded by the
 * mean of its rows' device-block embeddings; a device is chosen per cluster autoregressively, each
 * decision conditioned on the earlier ones through per-device features (load so far, previous
 * cluster's device, unused device, share of the cluster's dataflow neighbours already placed on
 * the device; since file version 3 also the cluster's finish time on the device in a list schedule
 * of the clusters placed so far, m-ETF's criterion, and how far the device's memory would be
 * overfilled; since version 5 the return transfer, what sending the cluster's outputs back to the
 * device its inputs come from would take: the earliest finish alone does not see that a cluster
 * moved away must send its results back over a slow link) weighted by coefficients the network
 * computes from the cluster's embedding; then
 * every node may move off its cluster's device (node-level refinement: node logits plus a learned
 * "stay" bonus on the cluster's device). The clusters are decided in depth-first order (file
 * versions 2 and 3) or, since version 4, in list-schedule order: next the ready cluster that can
 * start earliest, ties to the one with the longer chain after it (m-ETF's choice of op, with
 * HEFT's tie-break), so that a fork's branches are decided in the order they would run.
 * Log-probability entries of a sample: one per cluster factor (PPO takes one ratio per cluster
 * decision, each with the sample's advantage, as PPO on autoregressive decisions does per token),
 * then one per node for the refinement. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "learn/learn_internal.h"

static int serr(gopt_error *err) { return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (segments)"); }

/* Kernel time of row r in us (feature column 19 = log10(1 + us) / 6). */
double learn_row_us(const learn_graph *lg, int64_t r) {
  double t = pow(10.0, 6.0 * lg->feat[r * LEARN_NIN + 19]) - 1.0;
  return t > 0 ? t : 0;
}

/* Bytes row r writes (feature column 9 = log10(1 + bytes) / 10) and its weights' bytes (column 10 =
 * log10(1 + parameters) / 9, 4 bytes each). */
static double row_out_bytes(const learn_graph *lg, int64_t r) {
  double b = pow(10.0, 10.0 * lg->feat[r * LEARN_NIN + 9]) - 1.0;
  return b > 0 ? b : 0;
}
static double row_weight_bytes(const learn_graph *lg, int64_t r) {
  double b = pow(10.0, 9.0 * lg->feat[r * LEARN_NIN + 10]) - 1.0;
  return b > 0 ? 4.0 * b : 0;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Sorts each list of the CSR (ptr, col) over n rows and drops repeats, in place. */
static void csr_uniq(int32_t *ptr, int32_t *col, int64_t n) {
  int32_t m = 0;
  for (int64_t i = 0; i < n; i++) {
    int32_t a = ptr[i], b = ptr[i + 1];
    qsort(col + a, (size_t)(b - a), sizeof *col, cmp_i32);
    ptr[i] = m;
    for (int32_t j = a; j < b; j++)
      if (j == a || col[j] != col[j - 1]) col[m++] = col[j];
  }
  ptr[n] = m;
}

int learn_row_csr(const gopt_graph *g, const int32_t *pos, int64_t n, int dir, int uniq, int32_t **ptr_out,
                  int32_t **col_out) {
  int32_t *ptr = calloc((size_t)n + 2, sizeof *ptr), *col = NULL, *fill = NULL;
  if (!ptr) return GOPT_ENOMEM;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t v = 0; v < g->nodes.n; v++) {
      if (pos[v] < 0) continue;
      const gopt_node *nd = &g->nodes.a[v];
      for (uint32_t k = 0; k < nd->n_in; k++) {
        int32_t t = g->slots.a[nd->in + k].tensor;
        int32_t u = t >= 0 ? g->tensors.a[t].producer : -1;
        if (u < 0 || pos[u] < 0 || u == (int32_t)v) continue;
        int32_t a = dir ? pos[u] : pos[v], b = dir ? pos[v] : pos[u];
        if (pass) col[fill[a]++] = b;
        else ptr[a + 1]++;
      }
    }
    if (pass) break;
    for (int64_t i = 0; i < n; i++) ptr[i + 1] += ptr[i];
    col = malloc(((size_t)ptr[n] + 1) * sizeof *col);
    fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!col || !fill) { free(ptr); free(col); free(fill); return GOPT_ENOMEM; }
    memcpy(fill, ptr, (size_t)n * sizeof *fill);
  }
  free(fill);
  if (uniq) csr_uniq(ptr, col, n);
  *ptr_out = ptr;
  *col_out = col;
  return 0;
}

/* Depth-first reverse postorder of the rows (roots in row order, successors in edge order): a
 * topological order in which each branch of a fork is consecutive. */
static int dfs_order(const int32_t *ptr, const int32_t *col, int64_t n, int32_t *order) {
  int32_t *indeg = calloc((size_t)n + 1, sizeof *indeg), *stk = malloc(((size_t)n + 1) * sizeof *stk);
  int32_t *it = malloc(((size_t)n + 1) * sizeof *it);
  uint8_t *seen = calloc((size_t)n + 1, 1);
  if (!indeg || !stk || !it || !seen) { free(indeg); free(stk); free(it); free(seen); return GOPT_ENOMEM; }
  for (int64_t e = 0; e < ptr[n]; e++) indeg[col[e]]++;
  int64_t post = n;
  for (int64_t r0 = 0; r0 < n; r0++) {
    if (indeg[r0] || seen[r0]) continue;
    int64_t top = 0;
    stk[top++] = (int32_t)r0;
    it[r0] = ptr[r0];
    seen[r0] = 1;
    while (top) {
      int32_t v = stk[top - 1];
      if (it[v] < ptr[v + 1]) {
        int32_t w = col[it[v]++];
        if (!seen[w]) { seen[w] = 1; it[w] = ptr[w]; stk[top++] = w; }
        continue;
      }
      order[--post] = v;
      top--;
    }
  }
  free(indeg);
  free(stk);
  free(it);
  free(seen);
  return post == 0 ? 0 : GOPT_EGRAPH;
}

/* Cluster of each row along order: weight = half kernel-time share, half node-count share; at most
 * S clusters, none empty; S == LEARN_SEG_PER_NODE: one row per cluster. Fills lg->seg_of,
 * lg->n_seg and each cluster's kernel-time share. */
static int assign_clusters(learn_graph *lg, const int32_t *order, int S) {
  int64_t n = lg->n;
  double tot = 0, cum = 0;
  for (int64_t r = 0; r < n; r++) tot += learn_row_us(lg, r);
  int32_t *raw = malloc(((size_t)n + 1) * sizeof *raw);
  if (!raw) return GOPT_ENOMEM;
  for (int64_t i = 0; i < n; i++) {
    int64_t r = order[i];
    double w = 0.5 * (tot > 0 ? learn_row_us(lg, r) / tot : 0) + (tot > 0 ? 0.5 : 1.0) / (double)n;
    int64_t s = S == LEARN_SEG_PER_NODE ? i : (int64_t)floor((cum + w / 2) * S);
    raw[r] = (int32_t)(s < 0 ? 0 : s >= S ? S - 1 : s);
    cum += w;
  }
  /* renumber the non-empty clusters 0..n_seg-1 in order (order visits clusters monotonically) */
  int32_t last = -1, next = -1;
  for (int64_t i = 0; i < n; i++) {
    int64_t r = order[i];
    if (raw[r] != last) { last = raw[r]; next++; }
    lg->seg_of[r] = next;
  }
  lg->n_seg = next + 1;
  free(raw);
  return learn_seg_shares(lg);
}

int learn_seg_shares(learn_graph *lg) {
  int64_t n = lg->n;
  double tot = 0, cum = 0;
  for (int64_t r = 0; r < n; r++) tot += learn_row_us(lg, r);
  lg->seg_time = calloc((size_t)lg->n_seg + 1, sizeof *lg->seg_time);
  lg->seg_mid = calloc((size_t)lg->n_seg + 1, sizeof *lg->seg_mid);
  if (!lg->seg_time || !lg->seg_mid) return GOPT_ENOMEM;
  for (int64_t r = 0; r < n; r++) lg->seg_time[lg->seg_of[r]] += tot > 0 ? learn_row_us(lg, r) / tot : 1.0 / (double)n;
  for (int32_t s = 0; s < lg->n_seg; s++) {
    lg->seg_mid[s] = cum + lg->seg_time[s] / 2;
    cum += lg->seg_time[s];
  }
  return 0;
}

/* Pooling CSR (cluster <- its rows), the device variables' clusters, the pipeline prior per cluster,
 * and for each cluster the earlier clusters its rows neighbour, with their share of its edges, and
 * the rows of earlier clusters it reads with their output bytes (row_bytes: per row, the bytes of
 * its output tensors, what the simulator moves when a reader is on another device); per cluster
 * the bytes of its rows that later clusters read (seg_outb). */
static int cluster_tables(learn_graph *lg, const gopt_env *e, const double *row_bytes, gopt_error *err) {
  int64_t n = lg->n, S = lg->n_seg, D = lg->n_dev, nd = lg->nk[GOPT_VAR_DEVICE];
  int32_t *ptr = calloc((size_t)S + 1, sizeof *ptr), *col = malloc(((size_t)n + 1) * sizeof *col);
  int32_t *fill = malloc(((size_t)S + 1) * sizeof *fill);
  double *cnt = calloc((size_t)S + 1, sizeof *cnt);
  int rc = 0;
  lg->var_seg = malloc(((size_t)nd + 1) * sizeof *lg->var_seg);
  lg->seg_prior = malloc(((size_t)(S * D) + 1) * sizeof *lg->seg_prior);
  lg->src_ptr = calloc((size_t)S + 1, sizeof *lg->src_ptr);
  lg->src_seg = malloc(((size_t)lg->csr.n_edges + 1) * sizeof *lg->src_seg);
  lg->src_w = malloc(((size_t)lg->csr.n_edges + 1) * sizeof *lg->src_w);
  lg->in_ptr = calloc((size_t)S + 1, sizeof *lg->in_ptr);
  lg->in_row = malloc(((size_t)lg->csr.n_edges + 1) * sizeof *lg->in_row);
  lg->in_bytes = malloc(((size_t)lg->csr.n_edges + 1) * sizeof *lg->in_bytes);
  lg->n_links = gopt_env_cluster(e)->n_links;
  lg->scratch = malloc(((size_t)D * (LEARN_SEG_NF + 4) + 1) * sizeof *lg->scratch);
  lg->seg_outb = calloc((size_t)S + 1, sizeof *lg->seg_outb);
  int32_t *stamp = malloc(((size_t)n + 1) * sizeof *stamp);
  if (!ptr || !col || !fill || !cnt || !lg->var_seg || !lg->seg_prior || !lg->src_ptr || !lg->src_seg || !lg->src_w ||
      !lg->in_ptr || !lg->in_row || !lg->in_bytes || !lg->scratch || !lg->seg_outb || !stamp) {
    free(stamp);
    rc = serr(err);
    goto done;
  }
  for (int64_t r = 0; r < n; r++) stamp[r] = -1;
  for (int64_t r = 0; r < n; r++) ptr[lg->seg_of[r] + 1]++;
  for (int64_t s = 0; s < S; s++) ptr[s + 1] += ptr[s];
  memcpy(fill, ptr, (size_t)S * sizeof *fill);
  for (int64_t r = 0; r < n; r++) col[fill[lg->seg_of[r]]++] = (int32_t)r;
  if ((rc = gopt_nn_csr_init(&lg->seg_csr, S, n, ptr, col, err))) goto done;
  for (int64_t v = 0; v < nd; v++) lg->var_seg[v] = lg->seg_of[lg->rows[GOPT_VAR_DEVICE][v]];
  for (int64_t s = 0; s < S; s++)
    for (int64_t d = 0; d < D; d++) lg->seg_prior[s * D + d] = (float)-fabs(lg->seg_mid[s] * (double)D - ((double)d + 0.5));
  int32_t m = 0, mi = 0;
  for (int64_t s = 0; s < S; s++) {
    double tot = 0;
    int32_t m0 = m;
    for (int32_t i = ptr[s]; i < ptr[s + 1]; i++) {
      int32_t r = col[i];
      for (int32_t e = lg->csr.rowptr[r]; e < lg->csr.rowptr[r + 1]; e++) {
        int32_t u = lg->csr.col[e], s2 = lg->seg_of[u];
        if (s2 >= s) continue;
        if (cnt[s2]++ == 0) lg->src_seg[m++] = s2; /* the earlier clusters s touches, in first-touch order */
        tot += 1;
        if (stamp[u] == (int32_t)s) continue; /* each producer's output once per cluster */
        stamp[u] = (int32_t)s;
        lg->in_row[mi] = u;
        lg->in_bytes[mi++] = (float)row_bytes[u];
      }
    }
    lg->in_ptr[s + 1] = mi;
    qsort(lg->src_seg + m0, (size_t)(m - m0), sizeof *lg->src_seg, cmp_i32); /* ascending, as the features sum them */
    for (int32_t j = m0; j < m; j++) {
      lg->src_w[j] = (float)(cnt[lg->src_seg[j]] / tot);
      cnt[lg->src_seg[j]] = 0;
    }
    lg->src_ptr[s + 1] = m;
  }
  for (int64_t r = 0; r < n; r++) /* stamped: a later cluster reads it */
    if (stamp[r] >= 0) lg->seg_outb[lg->seg_of[r]] += (float)row_bytes[r]; /* as in_bytes holds them */
  free(stamp);
done:
  free(ptr);
  free(col);
  free(fill);
  free(cnt);
  return rc;
}

/* The list schedule's inputs: each cluster's kernel time (us on device 0) and bytes held, the
 * devices' speed against device 0 and memory, the links' us per byte and latency. */
static int schedule_tables(learn_graph *lg, const gopt_env *e) {
  int64_t n = lg->n, S = lg->n_seg;
  const gopt_cluster *c = gopt_env_cluster(e);
  int D = lg->n_dev;
  lg->seg_us = calloc((size_t)S + 1, sizeof *lg->seg_us);
  lg->seg_mem = calloc((size_t)S + 1, sizeof *lg->seg_mem);
  lg->seg_fin = calloc((size_t)S + 1, sizeof *lg->seg_fin);
  lg->dev_slow = malloc(((size_t)D + 1) * sizeof *lg->dev_slow);
  lg->dev_mem = malloc(((size_t)D + 1) * sizeof *lg->dev_mem);
  lg->x_us_b = calloc((size_t)D * D + 1, sizeof *lg->x_us_b);
  lg->x_lat = calloc((size_t)D * D + 1, sizeof *lg->x_lat);
  lg->x_link = malloc(((size_t)D * D + 1) * sizeof *lg->x_link);
  lg->arrive = malloc(((size_t)n * D + 1) * sizeof *lg->arrive);
  int32_t max_in = 0;
  for (int64_t s = 0; s < S; s++)
    if (lg->in_ptr[s + 1] - lg->in_ptr[s] > max_in) max_in = lg->in_ptr[s + 1] - lg->in_ptr[s];
  lg->iv = malloc(((size_t)lg->in_ptr[S] + (size_t)max_in + 1) * sizeof *lg->iv);
  lg->lk_ends = malloc((2 * (size_t)lg->n_links + 1) * sizeof *lg->lk_ends);
  if (!lg->iv || !lg->lk_ends || !lg->seg_us || !lg->seg_mem || !lg->seg_fin || !lg->dev_slow || !lg->dev_mem || !lg->x_us_b || !lg->x_lat ||
      !lg->x_link || !lg->arrive)
    return GOPT_ENOMEM;
  double tot = 0;
  for (int64_t r = 0; r < n; r++) {
    double t = learn_row_us(lg, r);
    lg->seg_us[lg->seg_of[r]] += t;
    lg->seg_mem[lg->seg_of[r]] += row_out_bytes(lg, r) + row_weight_bytes(lg, r);
    tot += t;
  }
  lg->tau_us = tot > 0 ? tot / (double)S : 1.0;
  double p0 = gopt_device_peak(&c->devices[0], GOPT_DT_FLOAT);
  for (int d = 0; d < D; d++) {
    double pd = gopt_device_peak(&c->devices[d], GOPT_DT_FLOAT);
    lg->dev_slow[d] = p0 > 0 && pd > 0 ? p0 / pd : 1.0;
    lg->dev_mem[d] = c->devices[d].mem_bytes > 0 ? c->devices[d].mem_bytes : INFINITY;
    for (int j = 0; j < D; j++) {
      int l = c->route && j != d ? c->route[d * D + j] : -1;
      lg->x_link[d * D + j] = l >= 0 && l < c->n_links ? l : -1;
      if (l < 0 || l >= c->n_links) continue;
      lg->x_us_b[d * D + j] = c->links[l].bw > 0 ? 1e6 / c->links[l].bw : 0;
      lg->x_lat[d * D + j] = 1e6 * c->links[l].latency_s;
    }
  }
  return 0;
}

/* The list-schedule decode order's tables (after schedule_tables): per cluster the later clusters
 * that read it (src_seg reversed), its upward rank (its kernel time plus the longest chain of
 * kernel times after it, HEFT's priority: the tie-break between clusters that can start at the
 * same time) and the order's scratch. */
static int order_tables(learn_graph *lg) {
  int64_t S = lg->n_seg;
  lg->dst_ptr = calloc((size_t)S + 2, sizeof *lg->dst_ptr);
  lg->dst_seg = malloc(((size_t)lg->src_ptr[S] + 1) * sizeof *lg->dst_seg);
  lg->ord_pend = malloc(((size_t)S + 1) * sizeof *lg->ord_pend);
  lg->ord_ready = malloc(((size_t)S + 1) * sizeof *lg->ord_ready);
  lg->seg_rank = malloc(((size_t)S + 1) * sizeof *lg->seg_rank);
  if (!lg->dst_ptr || !lg->dst_seg || !lg->ord_pend || !lg->ord_ready || !lg->seg_rank) return GOPT_ENOMEM;
  for (int32_t i = 0; i < lg->src_ptr[S]; i++) lg->dst_ptr[lg->src_seg[i] + 2]++;
  for (int64_t s = 0; s < S; s++) lg->dst_ptr[s + 2] += lg->dst_ptr[s + 1];
  for (int64_t s = 0; s < S; s++)
    for (int32_t i = lg->src_ptr[s]; i < lg->src_ptr[s + 1]; i++)
      lg->dst_seg[lg->dst_ptr[lg->src_seg[i] + 1]++] = (int32_t)s;
  for (int64_t s = S - 1; s >= 0; s--) { /* clusters are numbered in a topological order */
    double m = 0;
    for (int32_t i = lg->dst_ptr[s]; i < lg->dst_ptr[s + 1]; i++) m = fmax(m, lg->seg_rank[lg->dst_seg[i]]);
    lg->seg_rank[s] = lg->seg_us[s] + m;
  }
  return 0;
}

int learn_row_index(const gopt_graph *g, int64_t n_rows, int32_t *topo, int32_t *pos, double *bytes, gopt_error *err) {
  int64_t n = gopt_graph_topo(g, topo, err);
  if (n < 0) return (int)n;
  if (n != n_rows) return gopt_error_set(err, GOPT_EINVAL, "learn: graph changed under its encoding");
  for (size_t v = 0; v < g->nodes.n; v++) pos[v] = -1;
  for (int64_t i = 0; i < n; i++) pos[topo[i]] = (int32_t)i;
  for (int64_t i = 0; bytes && i < n; i++) { /* the tensors, not the cost model's bytes written (0 for a view) */
    const gopt_node *nd = &g->nodes.a[topo[i]];
    bytes[i] = 0;
    for (uint32_t k = 0; k < nd->n_out; k++)
      if (g->outs.a[nd->out + k] >= 0) bytes[i] += gopt_tensor_bytes(g, g->outs.a[nd->out + k]);
  }
  return 0;
}

int learn_graph_segment(learn_graph *lg, const gopt_env *e, int S, gopt_error *err) {
  if (S == 0 || lg->nk[GOPT_VAR_DEVICE] == 0 || lg->n == 0) return 0;
  if (lg->n_dev > LEARN_SEG_MAXDEV)
    return gopt_error_set(err, GOPT_EUNSUP, "learn: the segment placement head handles at most %d devices, the cluster has %d",
                          LEARN_SEG_MAXDEV, lg->n_dev);
  const gopt_graph *g = gopt_env_graph(e);
  size_t N = g->nodes.n;
  int32_t *topo = malloc((N + 1) * sizeof *topo), *pos = malloc((N + 1) * sizeof *pos), *order = NULL;
  int32_t *sp = NULL, *sc = NULL;
  double *rb = NULL;
  int rc = 0;
  int64_t n = lg->n;
  order = malloc(((size_t)n + 1) * sizeof *order);
  rb = malloc(((size_t)n + 1) * sizeof *rb);
  lg->seg_of = malloc(((size_t)n + 1) * sizeof *lg->seg_of);
  if (!topo || !pos || !order || !rb || !lg->seg_of) { rc = serr(err); goto done; }
  if ((rc = learn_row_index(g, n, topo, pos, rb, err))) goto done;
  if (learn_row_csr(g, pos, n, 1, S < 0, &sp, &sc)) { rc = serr(err); goto done; }
  if (S < 0) { /* min-cut parts (learn_parts.c) */
    if ((rc = learn_part_clusters(lg, sp, sc, rb, -S, err))) goto done;
  } else if (dfs_order(sp, sc, n, order)) {
    rc = gopt_error_set(err, GOPT_EGRAPH, "learn: segments: no depth-first order (cycle?)");
    goto done;
  } else if (assign_clusters(lg, order, S)) { rc = serr(err); goto done; }
  if (!(rc = cluster_tables(lg, e, rb, err)) && (schedule_tables(lg, e) || order_tables(lg))) rc = serr(err);
done:
  free(topo);
  free(pos);
  free(order);
  free(rb);
  free(sp);
  free(sc);
  return rc;
}

int learn_graph_for(const gopt_policy *p, const gopt_env *e, int clusters, learn_graph **out, gopt_error *err) {
  int rc = learn_graph_new(e, out, err);
  if (!rc && p->seg > 0 && (rc = learn_graph_segment(*out, e, clusters != 0 ? clusters : p->seg, err))) {
    learn_graph_free(*out);
    *out = NULL;
  }
  if (!rc) (*out)->time_order = p->seg > 0 && p->seg_order == GOPT_LEARN_ORDER_LIST;
  return rc;
}

void learn_graph_segment_free(learn_graph *g) {
  gopt_nn_csr_free(&g->seg_csr);
  free(g->seg_of);
  free(g->seg_time);
  free(g->seg_mid);
  free(g->seg_prior);
  free(g->var_seg);
  free(g->src_ptr);
  free(g->src_seg);
  free(g->src_w);
  free(g->in_ptr);
  free(g->in_row);
  free(g->in_bytes);
  free(g->arrive);
  free(g->seg_us);
  free(g->seg_mem);
  free(g->seg_fin);
  free(g->seg_outb);
  free(g->dev_slow);
  free(g->dev_mem);
  free(g->x_us_b);
  free(g->x_lat);
  free(g->x_link);
  free(g->iv);
  free(g->lk_ends);
  free(g->dst_ptr);
  free(g->dst_seg);
  free(g->ord_pend);
  free(g->ord_ready);
  free(g->seg_rank);
  free(g->scratch);
}

/* The version-3+ head's fixed feature weights (learn_seg_init's coefficient biases): the earliest
 * finish time, no overfilled memory, staying with the previous device and the neighbours as
 * tie-breaks; since version 5 a mild preference for no return transfer. The KL anchor (seg_kl)
 * measures a policy's distance from them (the first nf). */
static const float seg_prior_coef[LEARN_SEG_NF] = {0.0f, 0.5f, 0.0f, 0.5f, LEARN_SEG_EFT_INIT, -2.0f, 1.0f};

/* ---- the autoregressive conditioning ---------------------------------------------------------- */

/* The state the clusters placed so far leave (views into the graph's scratch): per device the
 * kernel-time share placed on it, when it is free in the list schedule (us) and the bytes it holds;
 * per link its busy intervals (g->iv, g->lk_ends); per cluster its finish time (g->seg_fin); per
 * row and device when the row's output is there (g->arrive). */
typedef struct seg_state {
  double *load, *avail, *mem;
} seg_state;

static seg_state state_init(const learn_graph *g) {
  int D = g->n_dev;
  seg_state st = {g->scratch, g->scratch + D, g->scratch + 2 * D};
  for (int d = 0; d < 3 * D; d++) g->scratch[d] = 0;
  for (int l = 0; l < 2 * g->n_links; l++) g->lk_ends[l] = -1;
  g->lk_ends[2 * g->n_links] = 0;
  for (int32_t i = 0; i < g->in_ptr[g->n_seg]; i++) /* start_on reads only rows other clusters read */
    for (int d = 0; d < D; d++) g->arrive[(size_t)g->in_row[i] * D + d] = INFINITY;
  return st;
}

/* The search walks back from the link's last interval: the list order decides clusters in about
 * the order of their start times, so few intervals lie after r. */
double learn_seg_link_book(const learn_graph *g, int l, double r, double x) {
  learn_seg_iv *iv = g->iv;
  int32_t *head = &g->lk_ends[2 * l], *tail = head + 1, j = *tail;
  while (j >= 0 && iv[j].t0 > r) j = iv[j].prev;
  double t = j >= 0 && iv[j].t1 > r ? iv[j].t1 : r;
  int32_t k = j >= 0 ? iv[j].next : *head;
  while (k >= 0 && iv[k].t0 < t + x) {
    if (iv[k].t1 > t) t = iv[k].t1;
    j = k;
    k = iv[k].next;
  }
  int32_t m = g->lk_ends[2 * g->n_links]++;
  iv[m] = (learn_seg_iv){t, t + x, j, k};
  if (j >= 0) iv[j].next = m;
  else *head = m;
  if (k >= 0) iv[k].prev = m;
  else *tail = m;
  return t + x;
}

void learn_seg_link_unbook(const learn_graph *g, int l) {
  learn_seg_iv *iv = g->iv;
  int32_t m = --g->lk_ends[2 * g->n_links], j = iv[m].prev, k = iv[m].next;
  if (j >= 0) iv[j].next = k;
  else g->lk_ends[2 * l] = k;
  if (k >= 0) iv[k].prev = j;
  else g->lk_ends[2 * l + 1] = j;
}

/* Start time (us) of cluster s on device d in the list schedule of the clusters placed before it:
 * when d is free and every tensor it reads from an earlier cluster is on d. A tensor from
 * another device moves there once (as in the simulator: later readers on d find it there),
 * booked on its link (link_book) for the link's latency plus its bytes over the bandwidth.
 * commit: the cluster is placed on d, so the links and g->arrive keep its transfers; otherwise
 * they are unbooked before returning. */
static double start_on(const learn_graph *g, const int32_t *seg_dev, const seg_state *st, int64_t s, int d,
                       int commit) {
  int D = g->n_dev;
  double t = st->avail[d];
  for (int32_t i = g->in_ptr[s]; i < g->in_ptr[s + 1]; i++) {
    int32_t u = g->in_row[i], p = g->seg_of[u], a = seg_dev[p];
    double r = g->seg_fin[p], *arr = g->arrive + (size_t)u * D + d;
    if (a != d && *arr < INFINITY) {
      r = *arr;
    } else if (a != d) {
      int32_t l = g->x_link[a * D + d];
      double x = g->x_lat[a * D + d] + g->in_bytes[i] * g->x_us_b[a * D + d];
      r = l >= 0 ? learn_seg_link_book(g, l, r, x) : r + x;
      if (commit) *arr = r;
      else if (l >= 0) *arr = -1 - (double)l; /* booked for this candidate: unbooked below */
    }
    if (r > t) t = r;
  }
  if (!commit) /* unbook in reverse order, restoring "not yet moved" */
    for (int32_t i = g->in_ptr[s + 1] - 1; i >= g->in_ptr[s]; i--) {
      double *arr = g->arrive + (size_t)g->in_row[i] * D + d;
      if (*arr < 0) {
        learn_seg_link_unbook(g, (int)(-1 - *arr));
        *arr = INFINITY;
      }
    }
  return t;
}

/* Kernel time (us) of cluster s on device d. */
static double dur_on(const learn_graph *g, int64_t s, int d) { return g->seg_us[s] * g->dev_slow[d]; }

/* cond_row's return-transfer feature (column 6) of cluster s on every device. */
static void return_row(const learn_graph *g, const int32_t *seg_dev, int64_t s, int nf, float *out) {
  int D = g->n_dev, home = -1;
  double hb[LEARN_SEG_MAXDEV] = {0}; /* input bytes from each device */
  for (int32_t i = g->in_ptr[s]; i < g->in_ptr[s + 1]; i++) hb[seg_dev[g->seg_of[g->in_row[i]]]] += g->in_bytes[i];
  for (int d = 0; d < D; d++)
    if (hb[d] > 0 && (home < 0 || hb[d] > hb[home])) home = d;
  for (int d = 0; d < D; d++) {
    double x = home < 0 || d == home ? 0 : g->x_lat[d * D + home] + g->seg_outb[s] * g->x_us_b[d * D + home];
    out[(size_t)d * nf + 6] = (float)-log1p(x / g->tau_us);
  }
}

/* Features of cluster s for each device given the devices of clusters < s (seg_dev) and the state
 * they left (prev: cluster s-1's device or -1), into out[D * nf]: load * D, d == prev, d unused
 * so far, share of s's edges to earlier clusters that end on d; with nf = 6 also how much later
 * than the earliest over the devices s would finish on d, -log(1 + delay / mean cluster time), and the
 * memory overfill (bytes on d with s, over 90 % of d's memory, x 10, at most 10); with nf = 7 also
 * the return transfer: away from the device s reads most of its input bytes from (its home), what
 * sending s's outputs that later clusters read back home would take, -log(1 + time / mean
 * cluster time), 0 on the home device and for a cluster without inputs. start: s's start time on
 * each device when already known (order_next), else NULL. */
static void cond_row(const learn_graph *g, const int32_t *seg_dev, int64_t s, const seg_state *st, int prev, int nf,
                     const double *start, float *out) {
  int D = g->n_dev;
  double *fin = g->scratch + 3 * D, best = INFINITY;
  for (int d = 0; d < D; d++) {
    float *o = out + (size_t)d * nf;
    o[0] = (float)(st->load[d] * D);
    o[1] = d == prev ? 1.f : 0.f;
    o[2] = st->load[d] == 0 ? 1.f : 0.f;
    o[3] = 0.f;
    if (nf <= LEARN_SEG_NF_V2) continue;
    fin[d] = (start ? start[d] : start_on(g, seg_dev, st, s, d, 0)) + dur_on(g, s, d);
    if (fin[d] < best) best = fin[d];
    double over = (st->mem[d] + g->seg_mem[s]) / g->dev_mem[d] - 0.9;
    o[5] = (float)(over <= 0 ? 0 : over >= 1 ? 10 : 10 * over);
  }
  for (int32_t i = g->src_ptr[s]; i < g->src_ptr[s + 1]; i++) out[(size_t)seg_dev[g->src_seg[i]] * nf + 3] += g->src_w[i];
  for (int d = 0; nf > LEARN_SEG_NF_V2 && d < D; d++) {
    out[(size_t)d * nf + 4] = (float)-log1p((fin[d] - best) / g->tau_us);
  }
  if (nf > LEARN_SEG_NF_V4) return_row(g, seg_dev, s, nf, out);
}

/* Cluster s placed on d: the state after it. What it adds to its device's load is its kernel-time
 * share, never 0, so that a device holding a cluster is never "unused". */
static void state_place(const learn_graph *g, const int32_t *seg_dev, seg_state *st, int64_t s, int d, int nf) {
  st->load[d] += g->seg_time[s] > 0 ? g->seg_time[s] : 1e-9;
  if (nf <= LEARN_SEG_NF_V2) return;
  g->seg_fin[s] = start_on(g, seg_dev, st, s, d, 1) + dur_on(g, s, d);
  st->avail[d] = g->seg_fin[s];
  st->mem[d] += g->seg_mem[s];
}

/* The decode order. In s order (g->time_order == 0) cluster k is the k-th; in list-schedule order
 * the next cluster is the ready one (every cluster it reads placed) that can start earliest on some
 * device (m-ETF's choice of op); on equal start times the larger upward rank, then the lower s. Its
 * start time on each device goes to start[D] (cond_row's, which then need not recompute them).
 * order_init before the first, order_next returns the next cluster and order_done marks it placed
 * (its readers may become ready). nr: ready count. Each step scans the ready clusters on every
 * device: O(ready x devices x inputs), as m-ETF. */
static int64_t order_init(const learn_graph *g) {
  if (!g->time_order) return 0;
  int64_t nr = 0;
  for (int64_t s = 0; s < g->n_seg; s++) {
    g->ord_pend[s] = g->src_ptr[s + 1] - g->src_ptr[s];
    if (!g->ord_pend[s]) g->ord_ready[nr++] = (int32_t)s;
  }
  return nr;
}

static int64_t order_next(const learn_graph *g, const int32_t *seg_dev, const seg_state *st, int64_t k, int64_t *nr,
                          double *start) {
  if (!g->time_order) return k;
  int64_t bi = 0;
  double best = INFINITY, cur[LEARN_SEG_MAXDEV];
  for (int64_t i = 0; i < *nr; i++) {
    int64_t s = g->ord_ready[i], b = g->ord_ready[bi];
    int won = 0;
    for (int d = 0; d < g->n_dev; d++) cur[d] = start_on(g, seg_dev, st, s, d, 0);
    for (int d = 0; d < g->n_dev; d++) {
      int tie_won = g->seg_rank[s] > g->seg_rank[b] || (g->seg_rank[s] == g->seg_rank[b] && s < b);
      if (cur[d] < best || (cur[d] == best && tie_won)) {
        best = cur[d];
        bi = i;
        b = s;
        won = 1;
      }
    }
    if (won) memcpy(start, cur, (size_t)g->n_dev * sizeof *cur);
  }
  int64_t s = g->ord_ready[bi];
  g->ord_ready[bi] = g->ord_ready[--*nr];
  return s;
}

/* The device of cluster s - 1 when it is placed already (always in s order), else -1. */
static int order_prev(const learn_graph *g, const int32_t *seg_dev, int64_t s) {
  return s > 0 && (!g->time_order || g->ord_pend[s - 1] < 0) ? seg_dev[s - 1] : -1;
}

static void order_done(const learn_graph *g, int64_t s, int64_t *nr) {
  if (!g->time_order) return;
  g->ord_pend[s] = -1; /* placed */
  for (int32_t i = g->dst_ptr[s]; i < g->dst_ptr[s + 1]; i++)
    if (!--g->ord_pend[g->dst_seg[i]]) g->ord_ready[(*nr)++] = g->dst_seg[i];
}

void learn_seg_cond(const learn_graph *g, const int32_t *seg_dev, int nf, float *cond) {
  int D = g->n_dev;
  seg_state st = state_init(g);
  double start[LEARN_SEG_MAXDEV]; /* the next cluster's start times (order_next) */
  int64_t nr = order_init(g);
  for (int64_t k = 0; k < g->n_seg; k++) {
    int64_t s = order_next(g, seg_dev, &st, k, &nr, start);
    cond_row(g, seg_dev, s, &st, order_prev(g, seg_dev, s), nf, g->time_order ? start : NULL, cond + (size_t)s * D * nf);
    state_place(g, seg_dev, &st, s, seg_dev[s], nf);
    order_done(g, s, &nr);
  }
}

/* One categorical draw from D logits (argmax when greedy), as gopt_nn_categorical_sample. */
static int32_t draw(const float *logits, int D, gopt_nn_rng *rng, int greedy) {
  int64_t sh[2] = {1, D};
  gopt_nn_tensor t = {.data = (float *)logits, .ndim = 2, .n = D};
  memcpy(t.shape, sh, sizeof sh);
  int32_t a = 0;
  gopt_nn_categorical_sample(&t, rng, greedy, &a);
  return a;
}

/* The balanced decode's limits: device d may hold LEARN_DEC_CAP_SLACK times its speed's share of
 * the capped weight. */
static void cap_limits(const learn_graph *g, double *lim) {
  double inv = 0;
  for (int d = 0; d < g->n_dev; d++) inv += 1.0 / g->dev_slow[d];
  for (int d = 0; d < g->n_dev; d++) lim[d] = LEARN_DEC_CAP_SLACK / g->dev_slow[d] / inv;
}

/* Masks the logits of the devices that cluster weight w would fill past their limit (held: the
 * weight each holds so far); when it would fill every one, all but the least overfilled. */
static void cap_mask(double w, const double *held, const double *lim, int D, float *lg) {
  int least = 0, open = 0;
  for (int d = 0; d < D; d++) {
    if (held[d] + w - lim[d] < held[least] + w - lim[least]) least = d;
    open += held[d] + w <= lim[d];
  }
  for (int d = 0; d < D; d++)
    if (held[d] + w > lim[d] && (open || d != least)) lg[d] = -1e30f;
}

void learn_seg_sample(const learn_fwd *f, const learn_graph *g, gopt_nn_rng *rng, int greedy, const double *cap,
                      learn_acts *a) {
  int D = g->n_dev, nf = (int)f->seg_coef->shape[1];
  float *cond = (float *)(g->scratch + 4 * D), lg[LEARN_SEG_MAXDEV]; /* D <= LEARN_SEG_MAXDEV (learn_graph_segment) */
  double held[LEARN_SEG_MAXDEV] = {0}, lim[LEARN_SEG_MAXDEV];
  if (cap) cap_limits(g, lim);
  seg_state st = state_init(g);
  double start[LEARN_SEG_MAXDEV]; /* the next cluster's start times (order_next) */
  int64_t nr = order_init(g);
  for (int64_t k = 0; k < g->n_seg; k++) {
    int64_t s = order_next(g, a->seg, &st, k, &nr, start);
    cond_row(g, a->seg, s, &st, order_prev(g, a->seg, s), nf, g->time_order ? start : NULL, cond);
    const float *base = f->seg_base->data + s * D, *cf = f->seg_coef->data + s * nf;
    for (int d = 0; d < D; d++) {
      double v = base[d];
      for (int k = 0; k < nf; k++) v += cf[k] * cond[(size_t)d * nf + k];
      lg[d] = (float)v;
    }
    if (cap && cap[s] > 0) cap_mask(cap[s], held, lim, D, lg);
    a->seg[s] = draw(lg, D, rng, greedy);
    if (cap) held[a->seg[s]] += cap[s];
    state_place(g, a->seg, &st, s, a->seg[s], nf);
    order_done(g, s, &nr);
  }
  float stay = f->stay->data[0];
  for (int64_t v = 0; v < g->nk[GOPT_VAR_DEVICE]; v++) {
    memcpy(lg, f->node_logits->data + v * D, (size_t)D * sizeof *lg);
    lg[a->seg[g->var_seg[v]]] += stay;
    a->dev[v] = draw(lg, D, rng, greedy);
  }
}

/* The cluster logits [S, D] the decisions a->seg were drawn from (the conditioning replayed); the
 * conditioning [S, D, nf] in *cond_out when not NULL. */
static gopt_nn_tensor *seg_logits(gopt_nn_ctx *ctx, const learn_fwd *f, const learn_graph *g, const learn_acts *a,
                                  gopt_nn_tensor **cond_out) {
  int64_t S = g->n_seg, D = g->n_dev, nf = f->seg_coef->shape[1];
  int64_t csh[3] = {S, D, nf}, ksh[3] = {S, 1, nf};
  gopt_nn_tensor *cond = gopt_nn_new(ctx, 3, csh);
  if (!cond) return NULL;
  learn_seg_cond(g, a->seg, (int)nf, cond->data);
  if (cond_out) *cond_out = cond;
  gopt_nn_tensor *ar = gopt_nn_sum_last(ctx, gopt_nn_mul(ctx, cond, gopt_nn_reshape(ctx, f->seg_coef, 3, ksh)));
  return gopt_nn_add(ctx, f->seg_base, ar);
}

/* KL(policy || prior) of the cluster logits [S, D] whose conditioning is cond [S, D, nf], summed
 * over the clusters -> [1]; the prior is the head's fixed feature weights applied to cond. */
static gopt_nn_tensor *seg_kl(gopt_nn_ctx *ctx, gopt_nn_tensor *logits, const gopt_nn_tensor *cond) {
  int64_t S = logits->shape[0], D = logits->shape[1], nf = cond->shape[2], sh[2] = {S, D};
  gopt_nn_tensor *prior = gopt_nn_new(ctx, 2, sh);
  if (!prior) return NULL;
  for (int64_t i = 0; i < S * D; i++) {
    double v = 0;
    for (int64_t k = 0; k < nf; k++) v += seg_prior_coef[k] * cond->data[i * nf + k];
    prior->data[i] = (float)v;
  }
  gopt_nn_tensor *lp = gopt_nn_log_softmax(ctx, logits);
  gopt_nn_tensor *diff = gopt_nn_sub(ctx, lp, gopt_nn_log_softmax(ctx, prior));
  return gopt_nn_sum(ctx, gopt_nn_mul(ctx, gopt_nn_exp(ctx, lp), diff));
}

gopt_nn_tensor *learn_seg_logp(gopt_nn_ctx *ctx, const learn_fwd *f, const learn_graph *g, const learn_acts *a,
                               gopt_nn_tensor **kl) {
  int64_t D = g->n_dev, nd = g->nk[GOPT_VAR_DEVICE];
  int64_t osh[2] = {nd, D};
  gopt_nn_tensor *cond = NULL, *logits = seg_logits(ctx, f, g, a, &cond), *hot = gopt_nn_new(ctx, 2, osh);
  if (!logits || !hot) return NULL;
  if (kl) *kl = f->seg_coef->shape[1] > LEARN_SEG_NF_V2 ? seg_kl(ctx, logits, cond) : NULL;
  for (int64_t v = 0; v < nd; v++) hot->data[v * D + a->seg[g->var_seg[v]]] = 1.f;
  gopt_nn_tensor *seg_lp = gopt_nn_categorical_logprob(ctx, logits, a->seg);
  gopt_nn_tensor *node = gopt_nn_add(ctx, f->node_logits, gopt_nn_mul(ctx, hot, f->stay));
  return gopt_nn_concat(ctx, seg_lp, gopt_nn_categorical_logprob(ctx, node, a->dev), 0);
}

void learn_seg_from_dev(const learn_graph *g, learn_acts *a) {
  int D = g->n_dev;
  int32_t *cnt = calloc((size_t)(g->n_seg * D) + 1, sizeof *cnt);
  if (!cnt) return;
  for (int64_t v = 0; v < g->nk[GOPT_VAR_DEVICE]; v++)
    if (a->dev[v] >= 0 && a->dev[v] < D) cnt[(size_t)g->var_seg[v] * D + a->dev[v]]++;
  for (int64_t s = 0; s < g->n_seg; s++) {
    int best = 0;
    for (int d = 1; d < D; d++) if (cnt[s * D + d] > cnt[s * D + best]) best = d;
    a->seg[s] = best;
  }
  free(cnt);
}

/* ---- parameters and the forward pass ------------------------------------------------------------ */

/* Version 3 and later (seg_nf > LEARN_SEG_NF_V2) have no per-device base logits (seg_q): its cluster logits are
 * only the conditioning features weighted by the cluster's coefficients, so identical devices are
 * interchangeable (a learned preference for device 2 would not transfer to another graph). */
int learn_seg_params(gopt_policy *p) {
  int64_t one[1] = {1};
  int rc = p->seg_nf > LEARN_SEG_NF_V2 ? 0 : gopt_nn_linear_init(&p->seg_q, p->params, "seg_q", p->arch.hidden, p->arch.dev_hidden, 1);
  rc = rc ? rc : gopt_nn_linear_init(&p->seg_coef, p->params, "seg_coef", p->arch.hidden, p->seg_nf, 1);
  if (!rc && !(p->seg_stay = gopt_nn_param(p->params, "seg_stay", 1, one, GOPT_NN_INIT_ONES, 0))) rc = GOPT_ENOMEM;
  return rc;
}

void learn_seg_init(gopt_policy *p) {
  /* untrained: mostly the features' fixed weights, a tenth of the random embedding-dependent part,
   * nodes stay with their cluster. Version 2: avoid load, stay on the previous device, follow the
   * neighbours, on top of the balanced pipeline prior. Version 3: the earliest finish time in the
   * clusters' list schedule (m-ETF's rule) and no overfilled memory, no base logits and no load
   * term (a single training step gains nothing from a pipeline split that does not buy
   * parallelism or memory), staying with the previous device and the neighbours as tie-breaks. */
  static const float bias2[LEARN_SEG_NF_V2] = {-1.0f, 1.0f, 0.0f, 1.0f};
  for (int64_t i = 0; i < p->seg_coef.w->n; i++) p->seg_coef.w->data[i] *= 0.1f;
  if (p->seg_nf > LEARN_SEG_NF_V2) {
    memcpy(p->seg_coef.b->data, seg_prior_coef, (size_t)p->seg_nf * sizeof *seg_prior_coef);
  } else {
    memcpy(p->seg_coef.b->data, bias2, sizeof bias2);
  }
  p->seg_stay->data[0] = LEARN_SEG_STAY_INIT;
}

void learn_seg_forward(gopt_nn_ctx *ctx, const gopt_policy *p, const learn_graph *g, gopt_nn_tensor *e,
                       gopt_nn_tensor *rows, learn_fwd *f) {
  int64_t dsh[2] = {g->n_dev, LEARN_NDEV}, psh[2] = {g->n_seg, g->n_dev};
  gopt_nn_tensor *de = gopt_nn_mlp_forward(ctx, &p->dev_mlp, gopt_nn_from(ctx, 2, dsh, g->dev_feat));
  gopt_nn_tensor *pool = gopt_nn_seg_mean(ctx, e, &g->seg_csr);
  if (p->seg_nf > LEARN_SEG_NF_V2) {
    f->seg_base = gopt_nn_new(ctx, 2, psh); /* zeros: no per-device base (learn_seg_params) */
  } else {
    gopt_nn_tensor *prior = gopt_nn_mul(ctx, gopt_nn_from(ctx, 2, psh, g->seg_prior), p->pipe_w);
    f->seg_base = gopt_nn_add(ctx, gopt_nn_matmul(ctx, gopt_nn_linear_forward(ctx, &p->seg_q, pool), de, 0, 1), prior);
  }
  f->seg_coef = gopt_nn_linear_forward(ctx, &p->seg_coef, pool);
  f->node_logits = gopt_nn_matmul(ctx, gopt_nn_linear_forward(ctx, &p->dev_q, rows), de, 0, 1);
  f->stay = p->seg_stay;
}
