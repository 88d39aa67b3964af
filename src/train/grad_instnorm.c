/* grad_instnorm.c: the gradient rule of InstanceNormalization, from standard ONNX ops. With the
 * statistics over the spatial axes of each (n, c), recomputed from X (S spatial elements):
 *   xhat = (X - mean) * rstd,  rstd = 1 / sqrt(var + epsilon),  g = dY * scale (per channel)
 *   dX     = rstd * (g - mean(g) - xhat * mean(g * xhat))
 *   dscale = sum over n and space of dY * xhat;  dB = sum over n and space of dY
 * Static shapes only (S is a constant); a symbolic one is refused in one line. docs/TRAINING.md
 * lists the rule. */
#include "train/train_internal.h"

typedef struct in_ctx {
  tb *b;
  int dt, r;
  int64_t xd[GOPT_MAX_RANK]; /* X's dims (a copy: adding tensors may move the graph's) */
  int64_t kd[GOPT_MAX_RANK]; /* kept dims: [N, C, 1, ...] */
  int64_t sp[GOPT_MAX_RANK]; /* the spatial axes */
  int nsp;
  int32_t inv_s;           /* the constant 1 / S */
} in_ctx;

static int32_t op2(in_ctx *c, const char *type, const char *what, int32_t a, int32_t d, int keep) {
  int32_t in[2] = {a, d};
  return tb_op(c->b, type, what, 2, in, c->dt, c->r, keep ? c->kd : c->xd);
}

/* Mean over the spatial axes, kept dims. */
static int32_t sp_mean(in_ctx *c, const char *what, int32_t x) {
  int32_t s = tb_reduce_sum(c->b, x, c->sp, c->nsp, 1, "sum", c->r, c->kd);
  return s < 0 ? -1 : op2(c, "Mul", what, s, c->inv_s, 1);
}

int tb_rule_instance_norm(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  int32_t X = tb_in(g, n, 0), scale = tb_in(g, n, 1), Bi = tb_in(g, n, 2);
  in_ctx c = {.b = b, .dt = g->tensors.a[X].dtype, .r = g->tensors.a[X].rank};
  if (c.r < 3 || c.r > GOPT_MAX_RANK) return tb_fail(b, GOPT_EINVAL, "InstanceNormalization input of rank %d", c.r);
  for (int i = 0; i < c.r; i++) c.xd[i] = gopt_tensor_dims(g, X)[i];
  double S = 1;
  for (int i = 0; i < c.r; i++) {
    if (c.xd[i] < 0) return tb_fail(b, GOPT_EUNSUP, "InstanceNormalization over a symbolic shape has no gradient rule");
    c.kd[i] = i < 2 ? c.xd[i] : 1;
    if (i >= 2) { c.sp[c.nsp++] = i; S *= (double)c.xd[i]; }
  }
  int64_t all[GOPT_MAX_RANK], cd[1] = {c.xd[1]};
  int na = 0;
  for (int i = 0; i < c.r; i++)
    if (i != 1) all[na++] = i;
  int32_t t, mu, xc, var, rstd, xhat, eps, one;
  TRY(c.inv_s = tb_const_scalar(b, "inv_s", c.dt, 1.0 / S));
  TRY(mu = sp_mean(&c, "mean", X));
  TRY(xc = op2(&c, "Sub", "centred", X, mu, 0));
  TRY(t = op2(&c, "Mul", "sq", xc, xc, 0));
  TRY(var = sp_mean(&c, "var", t));
  TRY(eps = tb_const_scalar(b, "eps", c.dt, gopt_node_get_float(g, n, "epsilon", 1e-5)));
  TRY(t = op2(&c, "Add", "var_eps", var, eps, 1));
  TRY(t = tb_op(b, "Sqrt", "std", 1, &t, c.dt, c.r, c.kd));
  TRY(one = tb_const_scalar(b, "one", c.dt, 1.0));
  TRY(rstd = op2(&c, "Div", "rstd", one, t, 1));
  TRY(xhat = op2(&c, "Mul", "xhat", xc, rstd, 0));
  if (NEED(0)) {
    int64_t sd[GOPT_MAX_RANK];
    int32_t sh, sr, gr, m1, m2, u;
    for (int i = 0; i < c.r; i++) sd[i] = i == 1 ? c.xd[1] : 1;
    TRY(sh = tb_const_i64(b, "scale_shape", sd, c.r));
    int32_t in[2] = {scale, sh};
    TRY(sr = tb_op(b, "Reshape", "scale_b", 2, in, c.dt, c.r, sd));
    TRY(gr = op2(&c, "Mul", "g", d, sr, 0));
    TRY(m1 = sp_mean(&c, "mean_g", gr));
    TRY(t = op2(&c, "Mul", "g_xhat", gr, xhat, 0));
    TRY(m2 = sp_mean(&c, "mean_g_xhat", t));
    TRY(u = op2(&c, "Sub", "g_c", gr, m1, 0));
    TRY(t = op2(&c, "Mul", "xhat_m2", xhat, m2, 0));
    TRY(u = op2(&c, "Sub", "g_cc", u, t, 0));
    TRY(t = op2(&c, "Mul", "d0", u, rstd, 0));
    TRY(tb_partial(b, X, t));
  }
  if (NEED(1)) {
    TRY(t = op2(&c, "Mul", "dy_xhat", d, xhat, 0));
    TRY(t = tb_reduce_sum(b, t, all, na, 0, "d1", 1, cd));
    TRY(tb_partial(b, scale, t));
  }
  if (NEED(2)) {
    TRY(t = tb_reduce_sum(b, d, all, na, 0, "d2", 1, cd));
    TRY(tb_partial(b, Bi, t));
  }
  return 0;
}
