/* gpu_select.c: choosing the whole-model row weight of the GPU cost-model fit by
 * leave-one-architecture-out over the models (gopt_gpu_select_weight), so that the weight used
 * to predict a held-out architecture is chosen without it (nested leave-one-out). */
#include <math.h>
#include <stdlib.h>

#include "gopt/gpu_cost.h"

/* Sum of squared log errors of model m's batch-1, batch-32 and training rows under coef. */
static double model_sse(const gopt_gpu_data *d, int m, const double *coef) {
  double s = 0;
  for (size_t i = 0; i < d->n; i++) {
    const gopt_gpu_row *r = &d->rows[i];
    if (r->model != m || r->what < GOPT_GPU_ROW_B1 || r->what == GOPT_GPU_ROW_BF16) continue;
    double t = gopt_gpu_time(coef, r->phi);
    double e = t > 0 ? log(t / r->seconds) : 10; /* a zero prediction: a large, finite penalty */
    s += e * e;
  }
  return s;
}

int gopt_gpu_select_weight(const gopt_gpu_data *d, int exclude, const double *grid, int ng,
                           double *weight, gopt_error *err) {
  double *sse = calloc(ng > 0 ? (size_t)ng : 1, sizeof *sse), coef[GOPT_GPU_NCOEF];
  if (!sse) return gopt_error_set(err, GOPT_ENOMEM, "calibrate: out of memory");
  int rc = 0;
  for (int m = 0; m < d->n_models && !rc; m++) {
    if (m == exclude || !d->has_model_rows[m]) continue;
    for (int g = 0; g < ng && !rc; g++)
      if (!(rc = gopt_gpu_fit2(d, exclude, m, grid[g], coef, err))) sse[g] += model_sse(d, m, coef);
  }
  int best = 0;
  for (int g = 1; g < ng; g++)
    if (sse[g] < sse[best]) best = g;
  if (!rc) *weight = ng > 0 ? grid[best] : 0;
  free(sse);
  return rc;
}
