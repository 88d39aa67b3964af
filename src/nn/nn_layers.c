/* nn_layers.c: layers built from the ops: linear, MLP, GraphSAGE, multi-head attention (full or
 * segment-recurrent with Transformer-XL memory) and the segment attention block. Each layer has an
 * _init that declares its parameters in a gopt_nn_params (PyTorch names, layout and default init)
 * and a _forward that records ops on a ctx. */
#include <math.h>
#include <stdio.h>

#include "nn/nn_internal.h"

gopt_nn_tensor *gopt_nn_activate(gopt_nn_ctx *ctx, gopt_nn_tensor *x, gopt_nn_act act) {
  switch (act) {
    case GOPT_NN_ACT_RELU: return gopt_nn_relu(ctx, x);
    case GOPT_NN_ACT_GELU: return gopt_nn_gelu(ctx, x);
    case GOPT_NN_ACT_GELU_TANH: return gopt_nn_gelu_tanh(ctx, x);
    case GOPT_NN_ACT_TANH: return gopt_nn_tanh(ctx, x);
    case GOPT_NN_ACT_SIGMOID: return gopt_nn_sigmoid(ctx, x);
    default: return x;
  }
}

static int name2(char *buf, size_t n, const char *prefix, const char *suffix) {
  int k = snprintf(buf, n, "%s.%s", prefix ? prefix : "", suffix);
  return (k < 0 || (size_t)k >= n) ? GOPT_EINVAL : 0;
}

int gopt_nn_linear_init(gopt_nn_linear *l, gopt_nn_params *p, const char *prefix, int64_t in,
                        int64_t out, int bias) {
  char nm[256];
  if (!l || !p || in < 1 || out < 1) return GOPT_EINVAL;
  float bound = 1.0f / sqrtf((float)in);
  int64_t ws[2] = {out, in};
  l->in = in;
  l->out = out;
  if (name2(nm, sizeof nm, prefix, "weight")) return GOPT_EINVAL;
  l->w = gopt_nn_param(p, nm, 2, ws, GOPT_NN_INIT_UNIFORM, bound);
  l->b = NULL;
  if (bias) {
    if (name2(nm, sizeof nm, prefix, "bias")) return GOPT_EINVAL;
    l->b = gopt_nn_param(p, nm, 1, &out, GOPT_NN_INIT_UNIFORM, bound);
  }
  return (l->w && (!bias || l->b)) ? 0 : GOPT_EINVAL;
}

gopt_nn_tensor *gopt_nn_linear_forward(gopt_nn_ctx *ctx, const gopt_nn_linear *l, gopt_nn_tensor *x) {
  return gopt_nn_linear_op(ctx, x, l->w, l->b);  /* [N,in] @ [out,in]^T + [out] */
}

int gopt_nn_mlp_init(gopt_nn_mlp *m, gopt_nn_params *p, const char *prefix, int n_layers,
                     const int64_t *dims, gopt_nn_act act) {
  if (!m || n_layers < 1 || n_layers > GOPT_NN_MLP_MAX || !dims) return GOPT_EINVAL;
  m->n_layers = n_layers;
  m->act = act;
  for (int i = 0; i < n_layers; i++) {
    char pre[256];
    int k = snprintf(pre, sizeof pre, "%s.%d", prefix ? prefix : "", i);
    if (k < 0 || (size_t)k >= sizeof pre) return GOPT_EINVAL;
    int rc = gopt_nn_linear_init(&m->l[i], p, pre, dims[i], dims[i + 1], 1);
    if (rc) return rc;
  }
  return 0;
}

gopt_nn_tensor *gopt_nn_mlp_forward(gopt_nn_ctx *ctx, const gopt_nn_mlp *m, gopt_nn_tensor *x) {
  for (int i = 0; i < m->n_layers; i++) {
    x = gopt_nn_linear_forward(ctx, &m->l[i], x);
    if (i + 1 < m->n_layers) x = gopt_nn_activate(ctx, x, m->act);
  }
  return x;
}

static int ln_init(gopt_nn_params *p, const char *prefix, const char *which, int64_t d,
                   gopt_nn_tensor **w, gopt_nn_tensor **b) {
  char nm[256];
  int k = snprintf(nm, sizeof nm, "%s.%s.weight", prefix, which);
  if (k < 0 || (size_t)k >= sizeof nm) return GOPT_EINVAL;
  *w = gopt_nn_param(p, nm, 1, &d, GOPT_NN_INIT_ONES, 0);
  snprintf(nm, sizeof nm, "%s.%s.bias", prefix, which);
  *b = gopt_nn_param(p, nm, 1, &d, GOPT_NN_INIT_ZEROS, 0);
  return (*w && *b) ? 0 : GOPT_EINVAL;
}

int gopt_nn_sage_init(gopt_nn_sage *s, gopt_nn_params *p, const char *prefix, int64_t in,
                      int64_t out, gopt_nn_act act, gopt_nn_norm norm) {
  char pre[256];
  if (!s || !prefix) return GOPT_EINVAL;
  s->act = act;
  s->norm = norm;
  s->ln_w = s->ln_b = NULL;
  if (name2(pre, sizeof pre, prefix, "lin")) return GOPT_EINVAL;
  int rc = gopt_nn_linear_init(&s->lin, p, pre, 2 * in, out, 1);
  if (rc) return rc;
  if (norm == GOPT_NN_NORM_LAYERNORM) return ln_init(p, prefix, "ln", out, &s->ln_w, &s->ln_b);
  return 0;
}

gopt_nn_tensor *gopt_nn_sage_forward(gopt_nn_ctx *ctx, const gopt_nn_sage *s, gopt_nn_tensor *h,
                                     const gopt_nn_csr *g) {
  gopt_nn_tensor *nb = gopt_nn_seg_mean(ctx, h, g);          /* [N, in] */
  gopt_nn_tensor *c = gopt_nn_concat(ctx, h, nb, 1);         /* [N, 2in] */
  gopt_nn_tensor *z = gopt_nn_linear_forward(ctx, &s->lin, c);
  z = gopt_nn_activate(ctx, z, s->act);
  if (s->norm == GOPT_NN_NORM_L2) z = gopt_nn_l2norm(ctx, z, 1e-12f);
  else if (s->norm == GOPT_NN_NORM_LAYERNORM) z = gopt_nn_layernorm(ctx, z, s->ln_w, s->ln_b, 1e-5f);
  return z;
}

int gopt_nn_mha_init(gopt_nn_mha *m, gopt_nn_params *p, const char *prefix, int64_t d, int n_heads) {
  char pre[256];
  if (!m || !prefix || n_heads < 1 || d % n_heads) return GOPT_EINVAL;
  m->n_heads = n_heads;
  m->d = d;
  const char *nm[4] = {"q", "k", "v", "o"};
  gopt_nn_linear *l[4] = {&m->q, &m->k, &m->v, &m->o};
  for (int i = 0; i < 4; i++) {
    if (name2(pre, sizeof pre, prefix, nm[i])) return GOPT_EINVAL;
    int rc = gopt_nn_linear_init(l[i], p, pre, d, d, 1);
    if (rc) return rc;
  }
  return 0;
}

gopt_nn_tensor *gopt_nn_mha_forward(gopt_nn_ctx *ctx, const gopt_nn_mha *m, gopt_nn_tensor *x,
                                    int64_t seg_len, int use_memory, int causal,
                                    const uint8_t *key_valid) {
  gopt_nn_tensor *q = gopt_nn_linear_forward(ctx, &m->q, x);
  gopt_nn_tensor *k = gopt_nn_linear_forward(ctx, &m->k, x);
  gopt_nn_tensor *v = gopt_nn_linear_forward(ctx, &m->v, x);
  gopt_nn_tensor *km = NULL, *vm = NULL;
  if (use_memory && seg_len > 0 && x && seg_len < x->shape[0]) {
    /* Transformer-XL memory: the previous segment's input with stop-gradient, projected by this
     * layer's K/V weights (gradients reach W_k, W_v but not the previous segment). */
    gopt_nn_tensor *xd = gopt_nn_detach(ctx, x);
    km = gopt_nn_linear_forward(ctx, &m->k, xd);
    vm = gopt_nn_linear_forward(ctx, &m->v, xd);
  }
  gopt_nn_tensor *a = gopt_nn_attention(ctx, q, k, v, km, vm, m->n_heads, seg_len, causal, key_valid);
  return gopt_nn_linear_forward(ctx, &m->o, a);
}

int gopt_nn_seg_block_init(gopt_nn_seg_block *b, gopt_nn_params *p, const char *prefix, int64_t d,
                           int n_heads, int64_t d_ff, int64_t seg_len) {
  char pre[256];
  if (!b || !prefix) return GOPT_EINVAL;
  b->seg_len = seg_len;
  int rc;
  if (name2(pre, sizeof pre, prefix, "attn") || (rc = gopt_nn_mha_init(&b->attn, p, pre, d, n_heads))) return GOPT_EINVAL;
  if ((rc = ln_init(p, prefix, "ln1", d, &b->ln1_w, &b->ln1_b))) return rc;
  if (name2(pre, sizeof pre, prefix, "ff1") || (rc = gopt_nn_linear_init(&b->ff1, p, pre, d, d_ff, 1))) return GOPT_EINVAL;
  if (name2(pre, sizeof pre, prefix, "ff2") || (rc = gopt_nn_linear_init(&b->ff2, p, pre, d_ff, d, 1))) return GOPT_EINVAL;
  return ln_init(p, prefix, "ln2", d, &b->ln2_w, &b->ln2_b);
}

gopt_nn_tensor *gopt_nn_seg_block_forward(gopt_nn_ctx *ctx, const gopt_nn_seg_block *b,
                                          gopt_nn_tensor *x, int causal, const uint8_t *key_valid) {
  gopt_nn_tensor *att = gopt_nn_mha_forward(ctx, &b->attn, x, b->seg_len, 1, causal, key_valid);
  gopt_nn_tensor *a = gopt_nn_layernorm(ctx, gopt_nn_add(ctx, x, att), b->ln1_w, b->ln1_b, 1e-5f);
  gopt_nn_tensor *f = gopt_nn_linear_forward(ctx, &b->ff2, gopt_nn_gelu(ctx, gopt_nn_linear_forward(ctx, &b->ff1, a)));
  return gopt_nn_layernorm(ctx, gopt_nn_add(ctx, a, f), b->ln2_w, b->ln2_b, 1e-5f);
}
