/* learn_policy.c: the GO-style policy network: a graph's encoding (features in topological order,
 * neighbourhood CSR, device features), the layers (input linear, GraphSAGE, segment-recurrent
 * attention blocks chained over decision kinds, heads), sampling, log-probabilities, entropy and
 * gopt_policy_decide. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn/learn_internal.h"

static int lerr(gopt_error *err, int code, const char *msg) { return gopt_error_set(err, code, "%s", msg); }

/* ---- graph encoding ------------------------------------------------------------------------ */

/* Context columns (same for every node) and device features from the cluster. */
static void cluster_feats(const gopt_env *e, int64_t n_nodes, float ctxf[LEARN_NCTX], float *dev) {
  const gopt_cluster *c = gopt_env_cluster(e);
  int D = c->n_devices;
  double fl = 0, mem = INFINITY, bw_all = 0;
  int nb = 0;
  for (int d = 0; d < D; d++) {
    const gopt_device *v = &c->devices[d];
    double bw = 0;
    int k = 0;
    for (int j = 0; j < D; j++) {
      int l = c->route ? c->route[d * D + j] : -1;
      if (j != d && l >= 0 && l < c->n_links) { bw += c->links[l].bw; k++; }
    }
    bw = k ? bw / k : 0;
    bw_all += bw;
    nb += k ? 1 : 0;
    fl += gopt_device_peak(v, GOPT_DT_FLOAT);
    if (v->mem_bytes < mem) mem = v->mem_bytes;
    float *r = dev + (size_t)d * LEARN_NDEV;
    r[0] = D > 1 ? (float)d / (float)(D - 1) : 0.f;
    r[1] = (float)D / 8.f;
    r[2] = (float)(log10(gopt_device_peak(v, GOPT_DT_FLOAT) + 1.0) / 15.0);
    r[3] = (float)(log10(v->mem_bytes + 1.0) / 11.0);
    r[4] = (float)(log10(bw + 1.0) / 12.0);
    r[5] = d == 0 ? 1.f : 0.f;
  }
  ctxf[0] = (float)D / 8.f;
  ctxf[1] = (float)(log10(fl / (D ? D : 1) + 1.0) / 15.0);
  ctxf[2] = (float)(log10((isfinite(mem) ? mem : 0) + 1.0) / 11.0);
  ctxf[3] = (float)(log10((nb ? bw_all / nb : 0) + 1.0) / 12.0);
  ctxf[4] = (float)(log10((double)n_nodes + 1.0) / 6.0);
}

/* Undirected dataflow neighbourhood over rows (pos maps node id -> row). */
static int build_csr(const gopt_graph *g, const int32_t *pos, int64_t n, gopt_nn_csr *csr, gopt_error *err) {
  int32_t *deg = calloc((size_t)n + 1, sizeof *deg), *rowptr = NULL, *col = NULL, *fill = NULL;
  int rc = 0;
  if (!deg) return lerr(err, GOPT_ENOMEM, "learn: out of memory (graph encoding)");
  for (int pass = 0; pass < 2; pass++) {
    for (size_t v = 0; v < g->nodes.n; v++) {
      if (pos[v] < 0) continue;
      const gopt_node *nd = &g->nodes.a[v];
      for (int k = 0; k < nd->n_in; k++) {
        int32_t t = g->slots.a[nd->in + (uint32_t)k].tensor;
        int32_t u = t >= 0 ? g->tensors.a[t].producer : -1;
        if (u < 0 || pos[u] < 0 || u == (int32_t)v) continue;
        if (!pass) { deg[pos[v]]++; deg[pos[u]]++; continue; }
        col[fill[pos[v]]++] = pos[u];
        col[fill[pos[u]]++] = pos[v];
      }
    }
    if (pass) break;
    rowptr = malloc(((size_t)n + 1) * sizeof *rowptr);
    fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!rowptr || !fill) { rc = lerr(err, GOPT_ENOMEM, "learn: out of memory (graph encoding)"); goto done; }
    rowptr[0] = 0;
    for (int64_t i = 0; i < n; i++) rowptr[i + 1] = rowptr[i] + deg[i];
    memcpy(fill, rowptr, ((size_t)n + 1) * sizeof *fill);
    col = malloc(((size_t)rowptr[n] + 1) * sizeof *col);
    if (!col) { rc = lerr(err, GOPT_ENOMEM, "learn: out of memory (graph encoding)"); goto done; }
  }
  rc = gopt_nn_csr_init(csr, n, n, rowptr, col, err);
done:
  free(deg);
  free(rowptr);
  free(col);
  free(fill);
  return rc;
}

static int var_rows(const gopt_env *e, learn_graph *lg, const int32_t *pos, gopt_error *err);
static int pipeline_prior(learn_graph *lg, gopt_error *err);

int learn_graph_new(const gopt_env *e, learn_graph **out, gopt_error *err) {
  *out = NULL;
  const gopt_graph *g = gopt_env_graph(e);
  size_t N = g->nodes.n;
  learn_graph *lg = calloc(1, sizeof *lg);
  int32_t *order = malloc((N + 1) * sizeof *order), *pos = malloc((N + 1) * sizeof *pos);
  float *ef = malloc((N * GOPT_ENV_NFEAT + 1) * sizeof *ef);
  int rc = 0;
  if (!lg || !order || !pos || !ef) { rc = lerr(err, GOPT_ENOMEM, "learn: out of memory (graph encoding)"); goto done; }
  int64_t n = gopt_graph_topo(g, order, err);
  if (n < 0) { rc = (int)n; goto done; }
  if ((rc = gopt_env_node_features(e, ef, err))) goto done;
  for (size_t v = 0; v < N; v++) pos[v] = -1;
  for (int64_t i = 0; i < n; i++) pos[order[i]] = (int32_t)i;
  lg->n = n;
  lg->n_dev = gopt_env_cluster(e)->n_devices;
  lg->feat = malloc(((size_t)n * LEARN_NIN + 1) * sizeof *lg->feat);
  lg->dev_feat = malloc(((size_t)lg->n_dev * LEARN_NDEV + 1) * sizeof *lg->dev_feat);
  lg->valid = malloc((size_t)n + 1);
  if (!lg->feat || !lg->dev_feat || !lg->valid) { rc = lerr(err, GOPT_ENOMEM, "learn: out of memory (graph encoding)"); goto done; }
  memset(lg->valid, 1, (size_t)n + 1);
  float ctxf[LEARN_NCTX];
  cluster_feats(e, n, ctxf, lg->dev_feat);
  double ktot = 0;
  for (int64_t i = 0; i < n; i++) {
    double t = pow(10.0, 6.0 * ef[(size_t)order[i] * GOPT_ENV_NFEAT + 19]) - 1.0;
    ktot += t > 0 ? t : 0;
  }
  ctxf[5] = (float)(log10(1.0 + ktot) / 6.0);
  for (int64_t i = 0; i < n; i++) {
    memcpy(lg->feat + i * LEARN_NIN, ef + (size_t)order[i] * GOPT_ENV_NFEAT, GOPT_ENV_NFEAT * sizeof(float));
    memcpy(lg->feat + i * LEARN_NIN + GOPT_ENV_NFEAT, ctxf, sizeof ctxf);
  }
  if ((rc = build_csr(g, pos, n, &lg->csr, err))) goto done;
  if ((rc = var_rows(e, lg, pos, err)) || (rc = pipeline_prior(lg, err))) goto done;
done:
  free(order);
  free(pos);
  free(ef);
  if (rc) learn_graph_free(lg); else *out = lg;
  return rc;
}

/* Per-kind rows and variable indices of the environment's variables. */
static int var_rows(const gopt_env *e, learn_graph *lg, const int32_t *pos, gopt_error *err) {
  lg->nvars = gopt_env_nvars(e);
  const gopt_env_var *vars = gopt_env_vars(e);
  for (int k = 0; k < 3; k++) {
    lg->rows[k] = malloc((lg->nvars + 1) * sizeof(int32_t));
    lg->var[k] = malloc((lg->nvars + 1) * sizeof(int32_t));
    if (!lg->rows[k] || !lg->var[k]) return lerr(err, GOPT_ENOMEM, "learn: out of memory (graph encoding)");
  }
  for (size_t i = 0; i < lg->nvars; i++) {
    int k = vars[i].kind;
    if (k < 0 || k > 2 || vars[i].node < 0 || pos[vars[i].node] < 0)
      return gopt_error_set(err, GOPT_EINVAL, "learn: variable %zu names no live node", i);
    lg->rows[k][lg->nk[k]] = pos[vars[i].node];
    lg->var[k][lg->nk[k]++] = (int32_t)i;
  }
  return 0;
}

/* The pipeline prior of the device head (see learn_internal.h): kernel time from feature column 19
 * (log10(1 + us) / 6), accumulated along the rows. */
static int pipeline_prior(learn_graph *lg, gopt_error *err) {
  int64_t nd = lg->nk[GOPT_VAR_DEVICE], D = lg->n_dev;
  double *cum = malloc(((size_t)lg->n + 1) * sizeof *cum), total = 0;
  lg->pipe = malloc(((size_t)(nd * D) + 1) * sizeof *lg->pipe);
  if (!cum || !lg->pipe) { free(cum); return lerr(err, GOPT_ENOMEM, "learn: out of memory (graph encoding)"); }
  for (int64_t i = 0; i < lg->n; i++) {
    double t = pow(10.0, 6.0 * lg->feat[i * LEARN_NIN + 19]) - 1.0;
    t = t > 0 ? t : 0;
    cum[i] = total + t / 2;
    total += t;
  }
  for (int64_t v = 0; v < nd; v++) {
    double c = total > 0 ? cum[lg->rows[GOPT_VAR_DEVICE][v]] / total : 0;
    for (int64_t d = 0; d < D; d++) lg->pipe[v * D + d] = (float)-fabs(c * (double)D - ((double)d + 0.5));
  }
  free(cum);
  return 0;
}

void learn_graph_free(learn_graph *g) {
  if (!g) return;
  free(g->feat);
  free(g->dev_feat);
  free(g->valid);
  free(g->pipe);
  free(g->cfg);
  gopt_nn_csr_free(&g->csr);
  learn_graph_segment_free(g);
  for (int k = 0; k < 3; k++) { free(g->rows[k]); free(g->var[k]); }
  free(g);
}

int64_t learn_nv(const learn_graph *g) { return g->nk[0] + g->nk[1] + g->nk[2] + (g->n_seg > 0 ? g->n_seg : 0); }

/* ---- the network ----------------------------------------------------------------------------- */

static void task_kinds(int task, int kinds[3]) {
  kinds[GOPT_VAR_DEVICE] = task == GOPT_TASK_PLACEMENT || task == GOPT_TASK_MEMORY || task == GOPT_TASK_JOINT;
  kinds[GOPT_VAR_PRIORITY] = task == GOPT_TASK_SCHEDULE || task == GOPT_TASK_MEMORY || task == GOPT_TASK_JOINT;
  kinds[GOPT_VAR_FUSE] = task == GOPT_TASK_FUSION || task == GOPT_TASK_JOINT;
}

static gopt_learn_arch arch_fill(const gopt_learn_arch *a) {
  gopt_learn_arch r = {32, 2, 2, 64, 16, 0};
  if (a) {
    if (a->hidden > 0) r.hidden = a->hidden;
    if (a->sage_layers > 0) r.sage_layers = a->sage_layers;
    if (a->heads > 0) r.heads = a->heads;
    if (a->seg_len > 0) r.seg_len = a->seg_len;
    if (a->dev_hidden > 0) r.dev_hidden = a->dev_hidden;
    r.clusters = a->clusters;
    r.seg_feats = a->seg_feats;
    r.seg_order = a->seg_order;
  }
  return r;
}

int gopt_policy_new(int task, const gopt_learn_arch *arch, uint64_t seed, gopt_policy **out,
                    gopt_error *err) {
  return learn_policy_build(task, arch, seed, LEARN_HEAD_GO, out, err);
}

int learn_policy_build(int task, const gopt_learn_arch *arch, uint64_t seed, int kind, gopt_policy **out,
                       gopt_error *err) {
  *out = NULL;
  if (!gopt_task_name(task)) return gopt_error_set(err, GOPT_EINVAL, "learn: unknown task %d", task);
  gopt_learn_arch a = arch_fill(arch);
  if (a.sage_layers > LEARN_MAX_SAGE || a.hidden % a.heads || a.hidden > 4096 || a.dev_hidden > 4096)
    return gopt_error_set(err, GOPT_EINVAL, "learn: bad architecture (hidden %d, heads %d, sage layers %d <= %d)",
                          a.hidden, a.heads, a.sage_layers, LEARN_MAX_SAGE);
  gopt_policy *p = calloc(1, sizeof *p);
  if (!p || !(p->params = gopt_nn_params_new()) || !(p->trainset = calloc(1, 1))) {
    gopt_policy_free(p);
    return lerr(err, GOPT_ENOMEM, "learn: out of memory (policy)");
  }
  p->task = task;
  p->head = kind;
  p->localadv = kind == LEARN_HEAD_LOCALADV;
  p->seg = kind == LEARN_HEAD_GO && task == GOPT_TASK_PLACEMENT && a.clusters >= 0
               ? (a.clusters > 0 ? a.clusters : LEARN_SEG_DEFAULT) : 0;
  a.clusters = p->seg > 0 ? p->seg : -1;
  if (a.seg_feats != 0 && !LEARN_SEG_FEATS_OK(a.seg_feats)) {
    int f = a.seg_feats;
    gopt_policy_free(p);
    return gopt_error_set(err, GOPT_EINVAL, "learn: the segment head has %d, %d or %d conditioning features, not %d",
                          LEARN_SEG_NF_V2, LEARN_SEG_NF_V4, LEARN_SEG_NF, f);
  }
  p->seg_nf = p->seg > 0 ? (a.seg_feats ? a.seg_feats : LEARN_SEG_NF) : 0;
  a.seg_feats = p->seg_nf;
  if ((a.seg_order != 0 && a.seg_order != GOPT_LEARN_ORDER_INDEX && a.seg_order != GOPT_LEARN_ORDER_LIST) ||
      (a.seg_order == GOPT_LEARN_ORDER_LIST && p->seg_nf == LEARN_SEG_NF_V2)) {
    int o = a.seg_order;
    gopt_policy_free(p);
    return gopt_error_set(err, GOPT_EINVAL, "learn: bad segment decode order %d (1 depth-first, 2 list schedule, "
                          "which needs the %d- or %d-feature head)", o, LEARN_SEG_NF_V4, LEARN_SEG_NF);
  }
  p->seg_order = p->seg <= 0 ? 0 : a.seg_order ? a.seg_order
                 : p->seg_nf > LEARN_SEG_NF_V2 ? GOPT_LEARN_ORDER_LIST : GOPT_LEARN_ORDER_INDEX;
  a.seg_order = p->seg_order;
  p->arch = a;
  task_kinds(task, p->kinds);
  int rc = gopt_nn_linear_init(&p->in, p->params, "in", LEARN_NIN, a.hidden, 1);
  char nm[32];
  for (int i = 0; !rc && i < a.sage_layers; i++) {
    snprintf(nm, sizeof nm, "sage%d", i);
    rc = gopt_nn_sage_init(&p->sage[i], p->params, nm, a.hidden, a.hidden, GOPT_NN_ACT_RELU, GOPT_NN_NORM_LAYERNORM);
  }
  static const char *const blk_names[3] = {"blk_dev", "blk_pri", "blk_fuse"};
  for (int k = 0; !rc && k < 3; k++)
    if (p->kinds[k])
      rc = gopt_nn_seg_block_init(&p->blk[k], p->params, blk_names[k], a.hidden, a.heads, 2 * a.hidden, a.seg_len);
  if (!rc && p->kinds[GOPT_VAR_DEVICE]) {
    int64_t dims[3] = {LEARN_NDEV, a.dev_hidden, a.dev_hidden};
    rc = gopt_nn_linear_init(&p->dev_q, p->params, "dev_q", a.hidden, a.dev_hidden, 1);
    rc = rc ? rc : gopt_nn_mlp_init(&p->dev_mlp, p->params, "dev_mlp", 2, dims, GOPT_NN_ACT_RELU);
    int64_t one[1] = {1};
    p->pipe_w = gopt_nn_param(p->params, "dev_pipe", 1, one, GOPT_NN_INIT_ONES, 0);
    if (!rc && p->seg > 0) rc = learn_seg_params(p);
  }
  if (!rc && p->kinds[GOPT_VAR_PRIORITY]) rc = gopt_nn_beta_head_init(&p->pri, p->params, "pri", a.hidden, 1);
  if (!rc && p->kinds[GOPT_VAR_FUSE]) rc = gopt_nn_linear_init(&p->fuse, p->params, "fuse", a.hidden, 2, 1);
  if (!rc && p->localadv) rc = gopt_nn_linear_init(&p->cfg, p->params, "la_cfg", LEARN_NCFG, a.hidden, 0);
  if (!rc && kind == LEARN_HEAD_REGAL) rc = learn_regal_params(p);
  rc = rc ? rc : gopt_nn_params_finalize(p->params, seed, err);
  if (!rc && p->pipe_w) p->pipe_w->data[0] = LEARN_PIPE_INIT;
  if (!rc && p->seg > 0) learn_seg_init(p);
  if (rc) {
    if (!err || !err->msg[0]) lerr(err, rc, "learn: cannot build the policy network");
    gopt_policy_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

void gopt_policy_free(gopt_policy *p) {
  if (!p) return;
  gopt_nn_params_free(p->params);
  free(p->trainset);
  free(p->ema);
  free(p->best);
  free(p->ckpt);
  free(p);
}

int gopt_policy_task(const gopt_policy *p) { return p->task; }
gopt_learn_arch gopt_policy_arch(const gopt_policy *p) { return p->arch; }
size_t gopt_policy_param_count(const gopt_policy *p) { return gopt_nn_params_total(p->params); }
const float *gopt_policy_weights(const gopt_policy *p) { return gopt_nn_params_data(p->params); }
const char *gopt_policy_trainset(const gopt_policy *p) { return p->trainset ? p->trainset : ""; }
int64_t gopt_policy_iters(const gopt_policy *p) { return p->iter; }
const char *gopt_policy_kind(const gopt_policy *p) {
  return p->head == LEARN_HEAD_REGAL ? "regal" : p->head == LEARN_HEAD_LOCALADV ? "localadv" : "go";
}

int learn_mod_new(const gopt_policy *p, learn_mod *m, gopt_error *err) {
  memset(m, 0, sizeof *m);
  int64_t sh[1] = {p->arch.hidden};
  if (!(m->params = gopt_nn_params_new())) return lerr(err, GOPT_ENOMEM, "learn: out of memory (modulation)");
  m->scale = gopt_nn_param(m->params, "mod.scale", 1, sh, GOPT_NN_INIT_ZEROS, 0);
  m->shift = gopt_nn_param(m->params, "mod.shift", 1, sh, GOPT_NN_INIT_ZEROS, 0);
  int rc = gopt_nn_params_finalize(m->params, 0, err);
  if (rc) learn_mod_free(m);
  return rc;
}

void learn_mod_free(learn_mod *m) {
  if (!m) return;
  gopt_nn_params_free(m->params);
  memset(m, 0, sizeof *m);
}

/* Rows of e for kind k (NULL when the graph has no variable of that kind). */
static gopt_nn_tensor *kind_rows(gopt_nn_ctx *ctx, gopt_nn_tensor *e, const learn_graph *g, int k) {
  return g->nk[k] ? gopt_nn_gather_rows(ctx, e, g->rows[k], g->nk[k]) : NULL;
}

gopt_nn_tensor *learn_encode(gopt_nn_ctx *ctx, gopt_nn_tensor *h0, const gopt_nn_sage *sage, int layers,
                             const gopt_nn_csr *csr) {
  gopt_nn_tensor *h = gopt_nn_relu(ctx, h0);
  for (int i = 0; i < layers; i++) h = gopt_nn_add(ctx, h, gopt_nn_sage_forward(ctx, &sage[i], h, csr));
  return h;
}

int learn_forward(gopt_nn_ctx *ctx, const gopt_policy *p, const learn_graph *g, const learn_mod *mod,
                  learn_fwd *f, gopt_error *err) {
  memset(f, 0, sizeof *f);
  int64_t sh[2] = {g->n, LEARN_NIN};
  gopt_nn_tensor *x = gopt_nn_from(ctx, 2, sh, g->feat);
  gopt_nn_tensor *h = gopt_nn_linear_forward(ctx, &p->in, x);
  if (p->localadv && g->cfg) {
    int64_t csh[2] = {g->n, LEARN_NCFG};
    h = gopt_nn_add(ctx, h, gopt_nn_linear_forward(ctx, &p->cfg, gopt_nn_from(ctx, 2, csh, g->cfg)));
  }
  h = learn_encode(ctx, h, p->sage, p->arch.sage_layers, &g->csr);
  if (mod && mod->params) h = gopt_nn_add(ctx, gopt_nn_add(ctx, h, gopt_nn_mul(ctx, h, mod->scale)), mod->shift);
  gopt_nn_tensor *e = h;
  for (int k = 0; k < 3; k++) {
    if (!p->kinds[k]) continue;
    e = gopt_nn_seg_block_forward(ctx, &p->blk[k], e, 0, g->valid);
    gopt_nn_tensor *r = kind_rows(ctx, e, g, k);
    if (!r) continue;
    f->rows[k] = r;
    if (k == GOPT_VAR_DEVICE && p->seg > 0) {
      if (g->n_seg <= 0) return gopt_error_set(err, GOPT_EINVAL, "learn: graph encoded without the segment head's clusters");
      f->dev_emb = e;
      learn_seg_forward(ctx, p, g, e, r, f);
    } else if (k == GOPT_VAR_DEVICE) {
      int64_t dsh[2] = {g->n_dev, LEARN_NDEV};
      gopt_nn_tensor *q = gopt_nn_linear_forward(ctx, &p->dev_q, r);
      gopt_nn_tensor *de = gopt_nn_mlp_forward(ctx, &p->dev_mlp, gopt_nn_from(ctx, 2, dsh, g->dev_feat));
      int64_t psh[2] = {g->nk[GOPT_VAR_DEVICE], g->n_dev};
      gopt_nn_tensor *prior = gopt_nn_mul(ctx, gopt_nn_from(ctx, 2, psh, g->pipe), p->pipe_w);
      f->dev_logits = gopt_nn_add(ctx, gopt_nn_matmul(ctx, q, de, 0, 1), prior);
    } else if (k == GOPT_VAR_PRIORITY) {
      gopt_nn_beta_head_forward(ctx, &p->pri, r, &f->alpha, &f->beta);
    } else {
      f->fuse_logits = gopt_nn_linear_forward(ctx, &p->fuse, r);
    }
  }
  return gopt_nn_ctx_status(ctx, err);
}

/* ---- actions --------------------------------------------------------------------------------- */

int learn_acts_alloc(learn_acts *a, const learn_graph *g) {
  a->dev = malloc(((size_t)g->nk[GOPT_VAR_DEVICE] + 1) * sizeof *a->dev);
  a->fuse = malloc(((size_t)g->nk[GOPT_VAR_FUSE] + 1) * sizeof *a->fuse);
  a->pri = malloc(((size_t)g->nk[GOPT_VAR_PRIORITY] + 1) * sizeof *a->pri);
  a->seg = calloc((size_t)g->n_seg + 1, sizeof *a->seg);
  if (a->dev && a->fuse && a->pri && a->seg) return 0;
  learn_acts_free(a);
  return GOPT_ENOMEM;
}

void learn_acts_free(learn_acts *a) {
  if (!a) return;
  free(a->dev);
  free(a->fuse);
  free(a->pri);
  free(a->seg);
  memset(a, 0, sizeof *a);
}

void learn_sample(const learn_fwd *f, const learn_graph *g, gopt_nn_rng *rng, int greedy, learn_acts *a) {
  if (f->dev_logits) gopt_nn_categorical_sample(f->dev_logits, rng, greedy, a->dev);
  if (f->seg_base) learn_seg_sample(f, g, rng, greedy, NULL, a);
  if (f->fuse_logits) gopt_nn_categorical_sample(f->fuse_logits, rng, greedy, a->fuse);
  if (f->alpha) {
    if (greedy) {
      for (int64_t i = 0; i < g->nk[GOPT_VAR_PRIORITY]; i++)
        a->pri[i] = f->alpha->data[i] / (f->alpha->data[i] + f->beta->data[i]);
    } else {
      gopt_nn_beta_sample(f->alpha, f->beta, rng, a->pri);
    }
  }
}

void learn_to_x(const learn_graph *g, const learn_acts *a, double *x) {
  for (int64_t i = 0; i < g->nk[GOPT_VAR_DEVICE]; i++) x[g->var[GOPT_VAR_DEVICE][i]] = a->dev[i];
  for (int64_t i = 0; i < g->nk[GOPT_VAR_PRIORITY]; i++) x[g->var[GOPT_VAR_PRIORITY][i]] = a->pri[i];
  for (int64_t i = 0; i < g->nk[GOPT_VAR_FUSE]; i++) x[g->var[GOPT_VAR_FUSE][i]] = a->fuse[i];
}

static gopt_nn_tensor *cat0(gopt_nn_ctx *ctx, gopt_nn_tensor *acc, gopt_nn_tensor *t) {
  return acc ? gopt_nn_concat(ctx, acc, t, 0) : t;
}

gopt_nn_tensor *learn_logp(gopt_nn_ctx *ctx, const learn_fwd *f, const learn_graph *g, const learn_acts *a,
                           gopt_nn_tensor **seg_kl) {
  gopt_nn_tensor *out = NULL;
  if (seg_kl) *seg_kl = NULL;
  if (f->dev_logits) out = cat0(ctx, out, gopt_nn_categorical_logprob(ctx, f->dev_logits, a->dev));
  if (f->seg_base) out = cat0(ctx, out, learn_seg_logp(ctx, f, g, a, seg_kl));
  if (f->alpha) {
    int64_t vp = g->nk[GOPT_VAR_PRIORITY], sh2[2] = {vp, 1}, sh1[1] = {vp};
    gopt_nn_tensor *xp = gopt_nn_from(ctx, 2, sh2, a->pri);
    out = cat0(ctx, out, gopt_nn_reshape(ctx, gopt_nn_beta_logprob(ctx, f->alpha, f->beta, xp), 1, sh1));
  }
  if (f->fuse_logits) out = cat0(ctx, out, gopt_nn_categorical_logprob(ctx, f->fuse_logits, a->fuse));
  return out;
}

gopt_nn_tensor *learn_entropy(gopt_nn_ctx *ctx, const learn_fwd *f) {
  gopt_nn_tensor *out = NULL;
  if (f->dev_logits) out = cat0(ctx, out, gopt_nn_categorical_entropy(ctx, f->dev_logits));
  if (f->seg_base) out = cat0(ctx, out, gopt_nn_categorical_entropy(ctx, f->seg_base)); /* unconditioned cluster logits */
  if (f->alpha) {
    int64_t sh1[1] = {f->alpha->n};
    out = cat0(ctx, out, gopt_nn_reshape(ctx, gopt_nn_beta_entropy(ctx, f->alpha, f->beta), 1, sh1));
  }
  if (f->fuse_logits) out = cat0(ctx, out, gopt_nn_categorical_entropy(ctx, f->fuse_logits));
  return out ? gopt_nn_mean(ctx, out) : NULL;
}

int gopt_policy_decide(gopt_policy *p, const gopt_env *e, int greedy, size_t n, uint64_t seed,
                       double *xs, gopt_error *err) {
  if (p->localadv)
    return gopt_error_set(err, GOPT_EINVAL, "learn: a local advantage model decides nothing (it guides --method guided)");
  if (gopt_env_task(e) != p->task)
    return gopt_error_set(err, GOPT_EINVAL, "learn: policy is for task '%s', environment is '%s'",
                          gopt_task_name(p->task), gopt_task_name(gopt_env_task(e)));
  learn_graph *g = NULL;
  gopt_nn_ctx *ctx = NULL;
  learn_acts a = {0};
  learn_fwd f;
  gopt_nn_rng rng;
  gopt_nn_rng_seed(&rng, seed);
  size_t nv = gopt_env_nvars(e);
  int rc = learn_graph_for(p, e, 0, &g, err);
  if (!rc && !(ctx = gopt_nn_ctx_new(0))) rc = lerr(err, GOPT_ENOMEM, "learn: out of memory (nn context)");
  if (!rc && learn_acts_alloc(&a, g)) rc = lerr(err, GOPT_ENOMEM, "learn: out of memory (actions)");
  if (!rc) {
    gopt_nn_ctx_set_training(ctx, 0);
    rc = learn_forward(ctx, p, g, NULL, &f, err);
  }
  for (size_t r = 0; !rc && r < n; r++) {
    gopt_env_default(e, xs + r * nv);
    learn_sample(&f, g, &rng, greedy && r == 0, &a);
    learn_to_x(g, &a, xs + r * nv);
  }
  learn_acts_free(&a);
  gopt_nn_ctx_free(ctx);
  learn_graph_free(g);
  return rc;
}
