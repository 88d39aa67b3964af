/* search_gibbs.c: Gibbs sampling with temperature tau ("gibbs"), the data collection of the
 * local-advantage seed: sweeps over the variables in their order; for each it evaluates every
 * choice (all values of a discrete variable, an 8-value grid for a priority) with the others
 * fixed, reports the choices' (configuration, cost) pairs consecutively in choice order through
 * opts->on_sample (the current configuration's cached result stands for its own choice, so it is
 * not evaluated twice), and resamples the variable from softmax(-cost / (tau * |start cost|)).
 * tau = opts->temperature (default 0.01). The best configuration seen is kept. A variable's
 * candidates are evaluated in parallel; the sampling is sequential, so the result does not depend
 * on threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"

#define GIBBS_TAU 0.01

int search_gibbs(search_ctx *c) {
  const size_t nv = c->nv;
  int rc = 0;
  search_rng rng;
  search_rng_seed(&rng, c->o->seed, 4);
  size_t maxc = SEARCH_PRIO_GRID;
  for (size_t i = 0; i < nv; i++)
    if ((size_t)c->vars[i].card > maxc) maxc = (size_t)c->vars[i].card;
  size_t *mv = malloc(nv * sizeof *mv);
  double *x = malloc(nv * sizeof *x), *xs = malloc(maxc * nv * sizeof *xs);
  double *vals = malloc(maxc * sizeof *vals), *wts = malloc(maxc * sizeof *wts);
  gopt_env_result *res = malloc(maxc * sizeof *res), *tmp = malloc(maxc * sizeof *tmp);
  if (!mv || !x || !xs || !vals || !wts || !res || !tmp) {
    rc = gopt_error_set(c->err, GOPT_ENOMEM, "search gibbs: out of memory");
    goto done;
  }
  size_t nm = search_movable_vars(c, mv);
  if (nm == 0) goto done;
  memcpy(x, c->best_x, nv * sizeof *x);
  const double tau = c->o->temperature > 0 ? c->o->temperature : GIBBS_TAU;
  double scale = fabs(c->start_obj) > 0 ? fabs(c->start_obj) : 1.0;
  gopt_env_result cur = c->best;
  for (size_t s = 0; !search_done(c); s = (s + 1) % nm) {
    size_t i = mv[s];
    const gopt_env_var *v = &c->vars[i];
    size_t k = 0, cached = (size_t)-1;
    if (v->kind == GOPT_VAR_PRIORITY)
      for (int g = 0; g < SEARCH_PRIO_GRID; g++) vals[k++] = (g + 0.5) / SEARCH_PRIO_GRID;
    else
      for (int32_t d = 0; d < v->card; d++) vals[k++] = d;
    /* rows to evaluate: every choice but the current value */
    size_t ne = 0;
    for (size_t j = 0; j < k; j++) {
      if (vals[j] == x[i] && cached == (size_t)-1) {
        cached = j;
        continue;
      }
      memcpy(xs + ne * nv, x, nv * sizeof *x);
      xs[ne * nv + i] = vals[j];
      ne++;
    }
    uint64_t left = search_evals_left(c);
    int partial = left < ne;
    if (partial) ne = (size_t)left;
    if ((rc = search_eval_batch_raw(c, xs, ne, tmp))) goto done;
    /* offer in choice order (the cached current configuration included) */
    size_t e = 0;
    for (size_t j = 0; j < k && e <= ne; j++) {
      if (j == cached) {
        res[j] = cur;
        if (c->o->on_sample) c->o->on_sample(x, &cur, c->o->user);
        continue;
      }
      if (e == ne) break;
      res[j] = tmp[e];
      search_offer(c, xs + e * nv, &tmp[e]);
      e++;
    }
    if (partial) break; /* budget ended inside this variable's choices */
    double lo = INFINITY;
    for (size_t j = 0; j < k; j++)
      if (res[j].objective < lo) lo = res[j].objective;
    double sum = 0;
    for (size_t j = 0; j < k; j++) {
      wts[j] = isfinite(res[j].objective) ? exp(-(res[j].objective - lo) / (tau * scale)) : 0;
      sum += wts[j];
    }
    double u = search_rng_uniform(&rng) * sum, acc = 0;
    size_t pick = k - 1;
    for (size_t j = 0; j < k; j++) {
      acc += wts[j];
      if (u < acc) {
        pick = j;
        break;
      }
    }
    x[i] = vals[pick];
    cur = res[pick];
  }
done:
  free(mv);
  free(x);
  free(xs);
  free(vals);
  free(wts);
  free(res);
  free(tmp);
  return rc;
}
