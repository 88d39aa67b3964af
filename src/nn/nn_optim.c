/* nn_optim.c: optimizers over the flat parameter block (llm.c style): SGD with momentum,
 * Adam and AdamW with PyTorch's update formulas, global-norm gradient clipping and learning-rate
 * schedules (constant, linear warmup, warmup + cosine). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "nn/nn_kernels.h"
#include "nn/nn_optim.h"

gopt_nn_optim_cfg gopt_nn_optim_defaults(gopt_nn_optim_kind kind, float lr) {
  gopt_nn_optim_cfg c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  c.lr = lr;
  c.beta1 = 0.9f;
  c.beta2 = 0.999f;
  c.eps = 1e-8f;
  c.weight_decay = kind == GOPT_NN_ADAMW ? 0.01f : 0.0f;
  c.sched = GOPT_NN_LR_CONSTANT;
  return c;
}

gopt_nn_optim *gopt_nn_optim_new(const gopt_nn_optim_cfg *cfg, gopt_nn_params *p, gopt_error *err) {
  if (!cfg || !p) { nn_err(err, GOPT_EINVAL, "nn_optim: NULL cfg or params"); return NULL; }
  if (!gopt_nn_params_data(p)) { nn_err(err, GOPT_EINVAL, "nn_optim: params not finalized"); return NULL; }
  if (cfg->kind < GOPT_NN_SGD || cfg->kind > GOPT_NN_ADAMW || !(cfg->lr >= 0)) {
    nn_err(err, GOPT_EINVAL, "nn_optim: bad kind %d or lr %g", (int)cfg->kind, (double)cfg->lr);
    return NULL;
  }
  gopt_nn_optim *o = calloc(1, sizeof *o);
  size_t total = gopt_nn_params_total(p);
  if (o) o->state = calloc(2 * total + 1, sizeof(float));
  if (!o || !o->state) {
    free(o);
    nn_err(err, GOPT_ENOMEM, "nn_optim: cannot allocate state for %zu parameters", total);
    return NULL;
  }
  o->cfg = *cfg;
  o->p = p;
  o->total = total;
  return o;
}

void gopt_nn_optim_free(gopt_nn_optim *o) {
  if (!o) return;
  free(o->state);
  free(o);
}

int64_t gopt_nn_optim_steps(const gopt_nn_optim *o) { return o ? o->t : 0; }

float gopt_nn_lr_at(const gopt_nn_optim_cfg *c, int64_t step) {
  if (c->sched == GOPT_NN_LR_CONSTANT) return c->lr;
  if (c->warmup_steps > 0 && step < c->warmup_steps)
    return c->lr * (float)(step + 1) / (float)c->warmup_steps;
  if (c->sched == GOPT_NN_LR_WARMUP_LINEAR) return c->lr;
  int64_t span = c->total_steps - c->warmup_steps;
  if (span <= 0) return c->lr;
  double prog = (double)(step - c->warmup_steps) / (double)span;
  if (prog > 1.0) prog = 1.0;
  double lo = c->min_lr_ratio;
  return (float)(c->lr * (lo + (1.0 - lo) * 0.5 * (1.0 + cos(3.14159265358979323846 * prog))));
}

double gopt_nn_clip_grad_norm(gopt_nn_params *p, double max_norm) {
  float *g = gopt_nn_params_grad(p);
  int64_t n = (int64_t)gopt_nn_params_total(p);
  if (!g) return 0.0;
  int nt = nn_threads();
  double norm = sqrt(nn_sumsq_det(g, n));
  if (max_norm > 0) {
    float coef = (float)(max_norm / (norm + 1e-6));
    if (coef < 1.0f) {
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
      for (int64_t i = 0; i < n; i++) g[i] *= coef;
    }
  }
  return norm;
}

double gopt_nn_optim_step(gopt_nn_optim *o) {
  if (!o) return 0.0;
  const gopt_nn_optim_cfg *c = &o->cfg;
  double norm = gopt_nn_clip_grad_norm(o->p, c->clip_norm > 0 ? c->clip_norm : 0.0);
  float lr = gopt_nn_lr_at(c, o->t);
  o->t++;
  float *w = gopt_nn_params_data(o->p), *g = gopt_nn_params_grad(o->p);
  float *m = o->state, *v = o->state + o->total;
  int64_t n = (int64_t)o->total;
  float wd = c->weight_decay;
  int nt = nn_threads();
  if (c->kind == GOPT_NN_SGD) {
    float mu = c->momentum;
    int first = o->t == 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
      float d = g[i] + wd * w[i];
      if (mu != 0.0f) {
        m[i] = first ? d : mu * m[i] + d;
        d = m[i];
      }
      w[i] -= lr * d;
    }
  } else {
    float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    double bc1 = 1.0 - pow((double)b1, (double)o->t), bc2 = 1.0 - pow((double)b2, (double)o->t);
    float step = (float)(lr / bc1), bc2s = (float)sqrt(bc2);
    int adamw = c->kind == GOPT_NN_ADAMW;
    float decay = 1.0f - lr * wd;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i];
      if (adamw) w[i] *= decay;
      else gi += wd * w[i];
      m[i] = m[i] * b1 + gi * (1.0f - b1);
      v[i] = v[i] * b2 + gi * gi * (1.0f - b2);
      float denom = sqrtf(v[i]) / bc2s + eps;
      w[i] -= step * (m[i] / denom);
    }
  }
  return norm;
}
