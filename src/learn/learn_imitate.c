/* learn_imitate.c: the imitation warm start of `gopt train` (GO/HDP-style pretraining): before PPO,
 * the policy is trained by cross-entropy to reproduce each training graph's reference decisions (the
 * best of the task's baselines and the default, gopt_learn_reference), so PPO starts from
 * baseline-level decisions instead of the collapsed "everything on one device" point. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/util.h"
#include "learn/learn_imitate.h"

/* Device labels in order of first use along the policy's rows (topological order): the first node's
 * device becomes 0, the next new device 1, ... A partition from METIS or m-ETF has arbitrary labels;
 * relabelled, equal partitions give equal targets, which a network can learn. */
static void relabel_devices(const learn_graph *g, double *x) {
  int64_t nd = g->nk[GOPT_VAR_DEVICE];
  int map[256], next = 0, D = g->n_dev;
  if (D > 256 || nd == 0) return;
  for (int d = 0; d < D; d++) map[d] = -1;
  /* rows[] of device variables follow variable order; visit them by row */
  int32_t *by_row = malloc(((size_t)g->n + 1) * sizeof *by_row);
  if (!by_row) return;
  for (int64_t r = 0; r < g->n; r++) by_row[r] = -1;
  for (int64_t v = 0; v < nd; v++) by_row[g->rows[GOPT_VAR_DEVICE][v]] = (int32_t)v;
  for (int64_t r = 0; r < g->n; r++) {
    if (by_row[r] < 0) continue;
    int d = (int)x[g->var[GOPT_VAR_DEVICE][by_row[r]]];
    if (d >= 0 && d < D && map[d] < 0) map[d] = next++;
  }
  for (int d = 0; d < D; d++)
    if (map[d] < 0) map[d] = next++;
  for (int64_t v = 0; v < nd; v++) {
    double *xv = &x[g->var[GOPT_VAR_DEVICE][v]];
    int d = (int)*xv;
    if (d >= 0 && d < D) *xv = map[d];
  }
  free(by_row);
}

int learn_imitate_target(gopt_env *e, const learn_graph *g, const gopt_env_result *ref, const double *x_ref,
                         learn_acts *a, gopt_error *err) {
  size_t nv = gopt_env_nvars(e);
  double *x = malloc((nv + 1) * sizeof *x);
  gopt_env_ws *w = gopt_env_ws_new(e);
  int rc = 0;
  if (!x || !w) { rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (imitation target)"); goto done; }
  memcpy(x, x_ref, nv * sizeof *x);
  if (g->nk[GOPT_VAR_DEVICE]) {
    /* keep the relabelled partition only where the simulator scores it the same (symmetric devices) */
    gopt_env_result r;
    relabel_devices(g, x);
    if ((rc = gopt_env_evaluate(w, x, &r, NULL, err))) goto done;
    if (gopt_env_result_cmp(&r, ref) > 0) memcpy(x, x_ref, nv * sizeof *x);
  }
  for (int64_t i = 0; i < g->nk[GOPT_VAR_DEVICE]; i++) a->dev[i] = (int32_t)x[g->var[GOPT_VAR_DEVICE][i]];
  for (int64_t i = 0; i < g->nk[GOPT_VAR_FUSE]; i++) a->fuse[i] = x[g->var[GOPT_VAR_FUSE][i]] >= 0.5;
  for (int64_t i = 0; i < g->nk[GOPT_VAR_PRIORITY]; i++) {
    double v = x[g->var[GOPT_VAR_PRIORITY][i]];
    a->pri[i] = (float)(v < 0.02 ? 0.02 : v > 0.98 ? 0.98 : v);
  }
  if (g->n_seg > 0) learn_seg_from_dev(g, a); /* segment head: each cluster's majority device */
done:
  free(x);
  gopt_env_ws_free(w);
  return rc;
}

int learn_imitate_step(gopt_nn_ctx *ctx, gopt_policy *p, gopt_nn_optim *opt, const learn_graph *g,
                       const learn_acts *target, double *loss, gopt_error *err) {
  learn_fwd f;
  int rc;
  *loss = 0;
  if (learn_nv(g) == 0) return 0;
  gopt_nn_ctx_reset(ctx);
  gopt_nn_ctx_set_training(ctx, 1);
  if ((rc = learn_forward(ctx, p, g, NULL, &f, err))) return rc;
  gopt_nn_tensor *lp = learn_logp(ctx, &f, g, target, NULL);
  gopt_nn_tensor *l = lp ? gopt_nn_scale(ctx, gopt_nn_mean(ctx, lp), -1.0f) : NULL;
  if (lp && g->n_seg > 0 && lp->n > g->n_seg) /* segment head: mean cluster factor + mean node refinement */
    l = gopt_nn_scale(ctx, gopt_nn_add(ctx, gopt_nn_mean(ctx, gopt_nn_slice(ctx, lp, 0, 0, g->n_seg)),
                                       gopt_nn_mean(ctx, gopt_nn_slice(ctx, lp, 0, g->n_seg, lp->n - g->n_seg))), -1.0f);
  if ((rc = gopt_nn_ctx_status(ctx, err))) return rc;
  gopt_nn_params_zero_grad(p->params);
  if ((rc = gopt_nn_backward(ctx, l, err))) return rc;
  gopt_nn_optim_step(opt);
  *loss = l->data[0];
  return 0;
}
