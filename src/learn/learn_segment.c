/* learn_segment.c: the segment-level placement head (docs/LEARNED.md "Segment-level placement").
 * A graph's rows are coarsened into at most S clusters: contiguous runs of a depth-first
 * topological order (reverse postorder, so a branch's nodes are consecutive), balanced by kernel
 * time and node count. Each cluster is embedded by the mean of its rows' device-block embeddings;
 * a device is chosen per cluster autoregressively, in cluster order, each decision conditioned on
 * the earlier ones through per-device features (load so far, previous cluster's device, unused
 * device, share of the cluster's dataflow neighbours already placed on the device) weighted by
 * coefficients the network computes from the cluster's embedding; then every node may move off
 * its cluster's device (node-level refinement: node logits plus a learned "stay" bonus on the
 * cluster's device). Log-probability of a sample = sum of the cluster factors (one PPO ratio)
 * plus one entry per node for the refinement. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "learn/learn_internal.h"

static int serr(gopt_error *err) { return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (segments)"); }

/* Kernel time of row r in us (feature column 19 = log10(1 + us) / 6). */
static double row_time(const learn_graph *lg, int64_t r) {
  double t = pow(10.0, 6.0 * lg->feat[r * LEARN_NIN + 19]) - 1.0;
  return t > 0 ? t : 0;
}

/* Directed successor lists over rows (producer row -> consumer row) from the graph. */
static int succ_csr(const gopt_graph *g, const int32_t *pos, int64_t n, int32_t **ptr_out, int32_t **col_out) {
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
        if (pass) col[fill[pos[u]]++] = pos[v];
        else ptr[pos[u] + 1]++;
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
 * S clusters, none empty. Fills lg->seg_of, lg->n_seg and each cluster's kernel-time share. */
static int assign_clusters(learn_graph *lg, const int32_t *order, int S) {
  int64_t n = lg->n;
  double tot = 0, cum = 0;
  for (int64_t r = 0; r < n; r++) tot += row_time(lg, r);
  int32_t *raw = malloc(((size_t)n + 1) * sizeof *raw);
  if (!raw) return GOPT_ENOMEM;
  for (int64_t i = 0; i < n; i++) {
    int64_t r = order[i];
    double w = 0.5 * (tot > 0 ? row_time(lg, r) / tot : 0) + (tot > 0 ? 0.5 : 1.0) / (double)n;
    int64_t s = (int64_t)floor((cum + w / 2) * S);
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
  lg->seg_time = calloc((size_t)lg->n_seg + 1, sizeof *lg->seg_time);
  lg->seg_mid = calloc((size_t)lg->n_seg + 1, sizeof *lg->seg_mid);
  if (!lg->seg_time || !lg->seg_mid) return GOPT_ENOMEM;
  cum = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t r = order[i];
    double t = tot > 0 ? row_time(lg, r) / tot : 1.0 / (double)n;
    lg->seg_time[lg->seg_of[r]] += t;
  }
  for (int32_t s = 0; s < lg->n_seg; s++) {
    lg->seg_mid[s] = cum + lg->seg_time[s] / 2;
    cum += lg->seg_time[s];
  }
  return 0;
}

/* Pooling CSR (cluster <- its rows), the device variables' clusters, the pipeline prior per cluster,
 * and for each cluster the earlier clusters its rows neighbour, with their share of its edges. */
static int cluster_tables(learn_graph *lg, gopt_error *err) {
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
  lg->scratch = malloc(((size_t)D * (LEARN_SEG_NF + 2) + 1) * sizeof *lg->scratch);
  if (!ptr || !col || !fill || !cnt || !lg->var_seg || !lg->seg_prior || !lg->src_ptr || !lg->src_seg || !lg->src_w ||
      !lg->scratch) { rc = serr(err); goto done; }
  for (int64_t r = 0; r < n; r++) ptr[lg->seg_of[r] + 1]++;
  for (int64_t s = 0; s < S; s++) ptr[s + 1] += ptr[s];
  memcpy(fill, ptr, (size_t)S * sizeof *fill);
  for (int64_t r = 0; r < n; r++) col[fill[lg->seg_of[r]]++] = (int32_t)r;
  if ((rc = gopt_nn_csr_init(&lg->seg_csr, S, n, ptr, col, err))) goto done;
  for (int64_t v = 0; v < nd; v++) lg->var_seg[v] = lg->seg_of[lg->rows[GOPT_VAR_DEVICE][v]];
  for (int64_t s = 0; s < S; s++)
    for (int64_t d = 0; d < D; d++) lg->seg_prior[s * D + d] = (float)-fabs(lg->seg_mid[s] * (double)D - ((double)d + 0.5));
  int32_t m = 0;
  for (int64_t s = 0; s < S; s++) {
    double tot = 0;
    for (int32_t i = ptr[s]; i < ptr[s + 1]; i++) {
      int32_t r = col[i];
      for (int32_t e = lg->csr.rowptr[r]; e < lg->csr.rowptr[r + 1]; e++) {
        int32_t s2 = lg->seg_of[lg->csr.col[e]];
        if (s2 < s) { cnt[s2] += 1; tot += 1; }
      }
    }
    for (int64_t s2 = 0; s2 < s; s2++) {
      if (cnt[s2] == 0) continue;
      lg->src_seg[m] = (int32_t)s2;
      lg->src_w[m++] = (float)(cnt[s2] / tot);
      cnt[s2] = 0;
    }
    lg->src_ptr[s + 1] = m;
  }
done:
  free(ptr);
  free(col);
  free(fill);
  free(cnt);
  return rc;
}

int learn_graph_segment(learn_graph *lg, const gopt_env *e, int S, gopt_error *err) {
  if (S <= 0 || lg->nk[GOPT_VAR_DEVICE] == 0 || lg->n == 0) return 0;
  if (lg->n_dev > LEARN_SEG_MAXDEV)
    return gopt_error_set(err, GOPT_EUNSUP, "learn: the segment placement head handles at most %d devices, the cluster has %d",
                          LEARN_SEG_MAXDEV, lg->n_dev);
  const gopt_graph *g = gopt_env_graph(e);
  size_t N = g->nodes.n;
  int32_t *topo = malloc((N + 1) * sizeof *topo), *pos = malloc((N + 1) * sizeof *pos), *order = NULL;
  int32_t *sp = NULL, *sc = NULL;
  int rc = 0;
  if (!topo || !pos) { rc = serr(err); goto done; }
  int64_t n = gopt_graph_topo(g, topo, err);
  if (n < 0) { rc = (int)n; goto done; }
  if (n != lg->n) { rc = gopt_error_set(err, GOPT_EINVAL, "learn: segments: graph changed under its encoding"); goto done; }
  for (size_t v = 0; v < N; v++) pos[v] = -1;
  for (int64_t i = 0; i < n; i++) pos[topo[i]] = (int32_t)i;
  order = malloc(((size_t)n + 1) * sizeof *order);
  lg->seg_of = malloc(((size_t)n + 1) * sizeof *lg->seg_of);
  if (!order || !lg->seg_of || succ_csr(g, pos, n, &sp, &sc)) { rc = serr(err); goto done; }
  if (dfs_order(sp, sc, n, order)) { rc = gopt_error_set(err, GOPT_EGRAPH, "learn: segments: no depth-first order (cycle?)"); goto done; }
  if (assign_clusters(lg, order, S)) { rc = serr(err); goto done; }
  rc = cluster_tables(lg, err);
done:
  free(topo);
  free(pos);
  free(order);
  free(sp);
  free(sc);
  return rc;
}

int learn_graph_for(const gopt_policy *p, const gopt_env *e, learn_graph **out, gopt_error *err) {
  int rc = learn_graph_new(e, out, err);
  if (!rc && p->seg > 0 && (rc = learn_graph_segment(*out, e, p->seg, err))) {
    learn_graph_free(*out);
    *out = NULL;
  }
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
  free(g->scratch);
}

/* ---- the autoregressive conditioning ---------------------------------------------------------- */

/* Features of cluster s for each device given the devices of clusters < s (seg_dev) and the state
 * they left (load[d]: kernel-time share placed on d; prev: cluster s-1's device or -1), into
 * out[D * LEARN_SEG_NF]: load * D, d == prev, d unused so far, share of s's edges to earlier
 * clusters that end on d. */
static void cond_row(const learn_graph *g, const int32_t *seg_dev, int64_t s, const double *load, int prev, float *out) {
  int D = g->n_dev;
  for (int d = 0; d < D; d++) {
    float *o = out + (size_t)d * LEARN_SEG_NF;
    o[0] = (float)(load[d] * D);
    o[1] = d == prev ? 1.f : 0.f;
    o[2] = load[d] == 0 ? 1.f : 0.f;
    o[3] = 0.f;
  }
  for (int32_t i = g->src_ptr[s]; i < g->src_ptr[s + 1]; i++) out[(size_t)seg_dev[g->src_seg[i]] * LEARN_SEG_NF + 3] += g->src_w[i];
}

/* What cluster s adds to its device's load (its kernel-time share, never 0, so that a device
 * holding a cluster is never "unused"). */
static double seg_load(const learn_graph *g, int64_t s) { return g->seg_time[s] > 0 ? g->seg_time[s] : 1e-9; }

/* Conditioning features of every cluster for the cluster devices seg_dev: [n_seg, D, NF]. */
static void cond_all(const learn_graph *g, const int32_t *seg_dev, double *load, float *cond) {
  int D = g->n_dev;
  for (int d = 0; d < D; d++) load[d] = 0;
  for (int64_t s = 0; s < g->n_seg; s++) {
    cond_row(g, seg_dev, s, load, s ? seg_dev[s - 1] : -1, cond + (size_t)s * D * LEARN_SEG_NF);
    load[seg_dev[s]] += seg_load(g, s);
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

void learn_seg_sample(const learn_fwd *f, const learn_graph *g, gopt_nn_rng *rng, int greedy, learn_acts *a) {
  int D = g->n_dev;
  double *load = g->scratch;
  float *cond = (float *)(g->scratch + D), lg[LEARN_SEG_MAXDEV]; /* D <= LEARN_SEG_MAXDEV (learn_graph_segment) */
  for (int d = 0; d < D; d++) load[d] = 0;
  for (int64_t s = 0; s < g->n_seg; s++) {
    cond_row(g, a->seg, s, load, s ? a->seg[s - 1] : -1, cond);
    const float *base = f->seg_base->data + s * D, *cf = f->seg_coef->data + s * LEARN_SEG_NF;
    for (int d = 0; d < D; d++) {
      double v = base[d];
      for (int k = 0; k < LEARN_SEG_NF; k++) v += cf[k] * cond[(size_t)d * LEARN_SEG_NF + k];
      lg[d] = (float)v;
    }
    a->seg[s] = draw(lg, D, rng, greedy);
    load[a->seg[s]] += seg_load(g, s);
  }
  float stay = f->stay->data[0];
  for (int64_t v = 0; v < g->nk[GOPT_VAR_DEVICE]; v++) {
    memcpy(lg, f->node_logits->data + v * D, (size_t)D * sizeof *lg);
    lg[a->seg[g->var_seg[v]]] += stay;
    a->dev[v] = draw(lg, D, rng, greedy);
  }
}

gopt_nn_tensor *learn_seg_logp(gopt_nn_ctx *ctx, const learn_fwd *f, const learn_graph *g, const learn_acts *a) {
  int64_t S = g->n_seg, D = g->n_dev, nd = g->nk[GOPT_VAR_DEVICE];
  int64_t csh[3] = {S, D, LEARN_SEG_NF}, ksh[3] = {S, 1, LEARN_SEG_NF}, osh[2] = {nd, D};
  gopt_nn_tensor *cond = gopt_nn_new(ctx, 3, csh), *hot = gopt_nn_new(ctx, 2, osh);
  if (!cond || !hot) return NULL;
  cond_all(g, a->seg, g->scratch, cond->data);
  for (int64_t v = 0; v < nd; v++) hot->data[v * D + a->seg[g->var_seg[v]]] = 1.f;
  gopt_nn_tensor *ar = gopt_nn_sum_last(ctx, gopt_nn_mul(ctx, cond, gopt_nn_reshape(ctx, f->seg_coef, 3, ksh)));
  gopt_nn_tensor *seg_lp = gopt_nn_categorical_logprob(ctx, gopt_nn_add(ctx, f->seg_base, ar), a->seg);
  gopt_nn_tensor *node = gopt_nn_add(ctx, f->node_logits, gopt_nn_mul(ctx, hot, f->stay));
  return gopt_nn_concat(ctx, gopt_nn_sum(ctx, seg_lp), gopt_nn_categorical_logprob(ctx, node, a->dev), 0);
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

int learn_seg_params(gopt_policy *p) {
  int64_t one[1] = {1};
  int rc = gopt_nn_linear_init(&p->seg_q, p->params, "seg_q", p->arch.hidden, p->arch.dev_hidden, 1);
  rc = rc ? rc : gopt_nn_linear_init(&p->seg_coef, p->params, "seg_coef", p->arch.hidden, LEARN_SEG_NF, 1);
  if (!rc && !(p->seg_stay = gopt_nn_param(p->params, "seg_stay", 1, one, GOPT_NN_INIT_ONES, 0))) rc = GOPT_ENOMEM;
  return rc;
}

void learn_seg_init(gopt_policy *p) {
  /* untrained: mostly the features' fixed weights (avoid load, stay on the previous device, follow
   * the neighbours), a tenth of the random embedding-dependent part, nodes stay with their cluster */
  static const float bias[LEARN_SEG_NF] = {-1.0f, 1.0f, 0.0f, 1.0f};
  for (int64_t i = 0; i < p->seg_coef.w->n; i++) p->seg_coef.w->data[i] *= 0.1f;
  memcpy(p->seg_coef.b->data, bias, sizeof bias);
  p->seg_stay->data[0] = LEARN_SEG_STAY_INIT;
}

void learn_seg_forward(gopt_nn_ctx *ctx, const gopt_policy *p, const learn_graph *g, gopt_nn_tensor *e,
                       gopt_nn_tensor *rows, learn_fwd *f) {
  int64_t dsh[2] = {g->n_dev, LEARN_NDEV}, psh[2] = {g->n_seg, g->n_dev};
  gopt_nn_tensor *de = gopt_nn_mlp_forward(ctx, &p->dev_mlp, gopt_nn_from(ctx, 2, dsh, g->dev_feat));
  gopt_nn_tensor *pool = gopt_nn_seg_mean(ctx, e, &g->seg_csr);
  gopt_nn_tensor *prior = gopt_nn_mul(ctx, gopt_nn_from(ctx, 2, psh, g->seg_prior), p->pipe_w);
  f->seg_base = gopt_nn_add(ctx, gopt_nn_matmul(ctx, gopt_nn_linear_forward(ctx, &p->seg_q, pool), de, 0, 1), prior);
  f->seg_coef = gopt_nn_linear_forward(ctx, &p->seg_coef, pool);
  f->node_logits = gopt_nn_matmul(ctx, gopt_nn_linear_forward(ctx, &p->dev_q, rows), de, 0, 1);
  f->stay = p->seg_stay;
}
