/* test_nn_torch.c: checks the NN engine against PyTorch. Loads the fixtures written by
 * tools/nn_fixtures.py (MLP, 2-layer GraphSAGE, masked attention, segment-recurrent attention
 * blocks, categorical PPO head, Beta head, optimizers + clipping + LR schedule) and requires every
 * output, loss and gradient (parameters and inputs) to match within rtol 1e-4, atol 1e-5. */
#include <string.h>

#include "nn_fixture.h"

#define RTOL 1e-4
#define ATOL 1e-5
#define FX(name) "tests/nn/fixtures/" name

static gopt_nn_tensor *input(gopt_nn_ctx *ctx, fx_file *fx, const char *name, int grad) {
  fx_rec *r = fx_get(fx, name);
  if (!r) return NULL;
  gopt_nn_tensor *t = gopt_nn_from(ctx, r->ndim, r->shape, r->data);
  gopt_nn_set_requires_grad(t, grad);
  return t;
}

/* Finishes a model: checks status, backward, loss/output/input-grad/param-grads. */
static void finish(const char *model, fx_file *fx, gopt_nn_ctx *ctx, gopt_nn_params *p,
                   gopt_nn_tensor *loss, gopt_nn_tensor *y, const char *yname, gopt_nn_tensor *x) {
  gopt_error err = {0};
  int rc = gopt_nn_ctx_status(ctx, &err);
  CHECK_MSG(rc == 0, "%s: graph build failed: %s", model, err.msg);
  if (rc) return;
  rc = gopt_nn_backward(ctx, loss, &err);
  CHECK_MSG(rc == 0, "%s: backward failed: %s", model, err.msg);
  char what[128];
  snprintf(what, sizeof what, "%s: loss", model);
  fx_compare(what, loss->data, fx_f32(fx, "loss"), 1, RTOL, ATOL);
  if (y) { snprintf(what, sizeof what, "%s: %s", model, yname); fx_compare(what, y->data, fx_f32(fx, yname), y->n, RTOL, ATOL); }
  if (x) { snprintf(what, sizeof what, "%s: grad.x", model); fx_compare(what, x->grad, fx_f32(fx, "grad.x"), x->n, RTOL, ATOL); }
  fx_check_param_grads(fx, p, model, RTOL, ATOL);
}

static gopt_nn_params *ready(gopt_nn_params *p, fx_file *fx) {
  gopt_error err = {0};
  int rc = gopt_nn_params_finalize(p, 1, &err);
  CHECK_MSG(rc == 0, "finalize: %s", err.msg);
  if (!rc) fx_load_params(fx, p);
  return p;
}

static void test_mlp(gopt_nn_ctx *ctx) {
  fx_file fx;
  if (fx_load(FX("mlp.bin"), &fx)) { CHECK(0); return; }
  gopt_nn_params *p = gopt_nn_params_new();
  gopt_nn_mlp m;
  int64_t dims[4] = {5, 8, 8, 3};
  CHECK_EQ_INT(gopt_nn_mlp_init(&m, p, "mlp", 3, dims, GOPT_NN_ACT_GELU), 0);
  ready(p, &fx);
  gopt_nn_ctx_reset(ctx);
  gopt_nn_tensor *x = input(ctx, &fx, "x", 1), *tg = input(ctx, &fx, "target", 0);
  gopt_nn_tensor *y = gopt_nn_mlp_forward(ctx, &m, x);
  gopt_nn_tensor *d = gopt_nn_sub(ctx, y, tg);
  gopt_nn_tensor *loss = gopt_nn_mean(ctx, gopt_nn_mul(ctx, d, d));
  finish("mlp", &fx, ctx, p, loss, y, "y", x);
  gopt_nn_params_free(p);
  fx_free(&fx);
}

static void test_sage(gopt_nn_ctx *ctx) {
  fx_file fx;
  if (fx_load(FX("sage.bin"), &fx)) { CHECK(0); return; }
  gopt_nn_params *p = gopt_nn_params_new();
  gopt_nn_sage s0, s1;
  CHECK_EQ_INT(gopt_nn_sage_init(&s0, p, "sage0", 4, 6, GOPT_NN_ACT_RELU, GOPT_NN_NORM_LAYERNORM), 0);
  CHECK_EQ_INT(gopt_nn_sage_init(&s1, p, "sage1", 6, 6, GOPT_NN_ACT_TANH, GOPT_NN_NORM_L2), 0);
  ready(p, &fx);
  gopt_nn_csr g;
  gopt_error err = {0};
  fx_rec *rp = fx_get(&fx, "rowptr");
  int rc = gopt_nn_csr_init(&g, 7, 7, fx_i32(&fx, "rowptr"), fx_i32(&fx, "col"), &err);
  CHECK_MSG(rc == 0 && rp && rp->n == 8, "csr: %s", err.msg);
  gopt_nn_ctx_reset(ctx);
  gopt_nn_tensor *x = input(ctx, &fx, "x", 1), *R = input(ctx, &fx, "R", 0);
  gopt_nn_tensor *h = gopt_nn_sage_forward(ctx, &s1, gopt_nn_sage_forward(ctx, &s0, x, &g), &g);
  gopt_nn_tensor *loss = gopt_nn_sum(ctx, gopt_nn_mul(ctx, h, R));
  finish("sage", &fx, ctx, p, loss, h, "y", x);
  gopt_nn_csr_free(&g);
  gopt_nn_params_free(p);
  fx_free(&fx);
}

static uint8_t *mask_of(fx_file *fx, uint8_t *buf, int n) {
  int32_t *m = fx_i32(fx, "key_valid");
  for (int i = 0; i < n; i++) buf[i] = m ? (uint8_t)m[i] : 1;
  return buf;
}

static void test_attn(gopt_nn_ctx *ctx) {
  fx_file fx;
  if (fx_load(FX("attn.bin"), &fx)) { CHECK(0); return; }
  gopt_nn_params *p = gopt_nn_params_new();
  gopt_nn_mha m;
  CHECK_EQ_INT(gopt_nn_mha_init(&m, p, "attn", 8, 2), 0);
  ready(p, &fx);
  uint8_t kv[6];
  mask_of(&fx, kv, 6);
  gopt_nn_ctx_reset(ctx);
  gopt_nn_tensor *x = input(ctx, &fx, "x", 1), *R = input(ctx, &fx, "R", 0);
  gopt_nn_tensor *y = gopt_nn_mha_forward(ctx, &m, x, 0, 0, 1, kv);
  gopt_nn_tensor *loss = gopt_nn_sum(ctx, gopt_nn_mul(ctx, y, R));
  finish("attn", &fx, ctx, p, loss, y, "y", x);
  gopt_nn_params_free(p);
  fx_free(&fx);
}

static void test_seg(gopt_nn_ctx *ctx) {
  fx_file fx;
  if (fx_load(FX("seg.bin"), &fx)) { CHECK(0); return; }
  gopt_nn_params *p = gopt_nn_params_new();
  gopt_nn_seg_block b0, b1;
  CHECK_EQ_INT(gopt_nn_seg_block_init(&b0, p, "blk0", 8, 2, 16, 4), 0);
  CHECK_EQ_INT(gopt_nn_seg_block_init(&b1, p, "blk1", 8, 2, 16, 4), 0);
  ready(p, &fx);
  uint8_t kv[10];
  mask_of(&fx, kv, 10);
  gopt_nn_ctx_reset(ctx);
  gopt_nn_tensor *x = input(ctx, &fx, "x", 1), *R = input(ctx, &fx, "R", 0);
  gopt_nn_tensor *y = gopt_nn_seg_block_forward(ctx, &b1, gopt_nn_seg_block_forward(ctx, &b0, x, 0, kv), 0, kv);
  gopt_nn_tensor *loss = gopt_nn_sum(ctx, gopt_nn_mul(ctx, y, R));
  finish("seg", &fx, ctx, p, loss, y, "y", x);
  gopt_nn_params_free(p);
  fx_free(&fx);
}

static void test_ppo(gopt_nn_ctx *ctx) {
  fx_file fx;
  if (fx_load(FX("ppo.bin"), &fx)) { CHECK(0); return; }
  gopt_nn_params *p = gopt_nn_params_new();
  gopt_nn_linear pi;
  CHECK_EQ_INT(gopt_nn_linear_init(&pi, p, "pi", 6, 4, 1), 0);
  ready(p, &fx);
  gopt_nn_ctx_reset(ctx);
  gopt_nn_tensor *x = input(ctx, &fx, "x", 1), *old = input(ctx, &fx, "logp_old", 0), *adv = input(ctx, &fx, "adv", 0);
  gopt_nn_tensor *logits = gopt_nn_linear_forward(ctx, &pi, x);
  gopt_nn_tensor *logp = gopt_nn_categorical_logprob(ctx, logits, fx_i32(&fx, "actions"));
  gopt_nn_tensor *ent = gopt_nn_categorical_entropy(ctx, logits);
  gopt_nn_tensor *loss = gopt_nn_add(ctx, gopt_nn_ppo_loss(ctx, logp, old, adv, 0.2f),
                                     gopt_nn_scale(ctx, gopt_nn_mean(ctx, ent), -0.01f));
  if (ent) fx_compare("ppo: entropy", ent->data, fx_f32(&fx, "entropy"), ent->n, RTOL, ATOL);
  finish("ppo", &fx, ctx, p, loss, logp, "logp", x);
  gopt_nn_params_free(p);
  fx_free(&fx);
}

static void test_beta(gopt_nn_ctx *ctx) {
  fx_file fx;
  if (fx_load(FX("beta.bin"), &fx)) { CHECK(0); return; }
  gopt_nn_params *p = gopt_nn_params_new();
  gopt_nn_beta_head h;
  CHECK_EQ_INT(gopt_nn_beta_head_init(&h, p, "beta", 5, 2), 0);
  ready(p, &fx);
  gopt_nn_ctx_reset(ctx);
  gopt_nn_tensor *x = input(ctx, &fx, "x", 1), *s = input(ctx, &fx, "samples", 0), *a = NULL, *b = NULL;
  gopt_nn_beta_head_forward(ctx, &h, x, &a, &b);
  gopt_nn_tensor *lp = gopt_nn_beta_logprob(ctx, a, b, s), *ent = gopt_nn_beta_entropy(ctx, a, b);
  gopt_nn_tensor *loss = gopt_nn_sub(ctx, gopt_nn_scale(ctx, gopt_nn_mean(ctx, lp), -1.0f),
                                     gopt_nn_scale(ctx, gopt_nn_mean(ctx, ent), 0.01f));
  if (a && b && ent) {
    fx_compare("beta: alpha", a->data, fx_f32(&fx, "alpha"), a->n, RTOL, ATOL);
    fx_compare("beta: beta", b->data, fx_f32(&fx, "beta"), b->n, RTOL, ATOL);
    fx_compare("beta: entropy", ent->data, fx_f32(&fx, "entropy"), ent->n, RTOL, ATOL);
  }
  finish("beta", &fx, ctx, p, loss, lp, "logp", x);
  gopt_nn_params_free(p);
  fx_free(&fx);
}

static void test_optim(void) {
  fx_file fx;
  if (fx_load(FX("optim.bin"), &fx)) { CHECK(0); return; }
  const char *names[3] = {"sgd", "adam", "adamw"};
  for (int k = 0; k < 3; k++) {
    gopt_nn_params *p = gopt_nn_params_new();
    int64_t n = 20;
    gopt_nn_tensor *w = gopt_nn_param(p, "p", 1, &n, GOPT_NN_INIT_ZEROS, 0);
    gopt_error err = {0};
    CHECK_EQ_INT(gopt_nn_params_finalize(p, 0, &err), 0);
    memcpy(w->data, fx_f32(&fx, "p0"), 20 * 4);
    gopt_nn_optim_cfg c;
    if (k == 0) { c = gopt_nn_optim_defaults(GOPT_NN_SGD, 0.1f); c.momentum = 0.9f; c.weight_decay = 0.01f; }
    else if (k == 1) { c = gopt_nn_optim_defaults(GOPT_NN_ADAM, 0.05f); c.beta2 = 0.99f; c.eps = 1e-6f; c.weight_decay = 0.01f; }
    else { c = gopt_nn_optim_defaults(GOPT_NN_ADAMW, 0.05f); c.beta1 = 0.8f; c.weight_decay = 0.1f; }
    c.clip_norm = 1.5f;
    c.sched = GOPT_NN_LR_WARMUP_COSINE;
    c.warmup_steps = 2;
    c.total_steps = 6;
    c.min_lr_ratio = 0.1f;
    gopt_nn_optim *o = gopt_nn_optim_new(&c, p, &err);
    CHECK_MSG(o != NULL, "optim_new: %s", err.msg);
    const float *grads = fx_f32(&fx, "grads"), *hist = fx_f32(&fx, names[k]);
    for (int s = 0; o && grads && hist && s < 6; s++) {
      memcpy(w->grad, grads + s * 20, 20 * 4);
      gopt_nn_optim_step(o);
      char what[64];
      snprintf(what, sizeof what, "optim %s step %d", names[k], s);
      fx_compare(what, w->data, hist + s * 20, 20, RTOL, ATOL);
    }
    gopt_nn_optim_free(o);
    gopt_nn_params_free(p);
  }
  fx_free(&fx);
}

int main(void) {
  gopt_nn_set_threads(2);
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(1 << 20);
  CHECK(ctx != NULL);
  test_mlp(ctx);
  test_sage(ctx);
  test_attn(ctx);
  test_seg(ctx);
  test_ppo(ctx);
  test_beta(ctx);
  test_optim();
  gopt_nn_ctx_free(ctx);
  return check_exit("test_nn_torch");
}
