/* search_local.c: local search / hill climbing ("local"): single-variable moves (a discrete
 * variable to another value, a priority to a point of an 8-value grid) tried in a random order,
 * first improvement accepted (in the ranking of gopt_env_result_cmp: a point that fits in memory
 * beats any over-memory one); after a whole cycle of the variables without an improvement (a
 * local optimum) the search restarts from a uniformly random point. Moves are evaluated
 * incrementally (gopt_env_evaluate_delta). Sequential: the result does not depend on threads. */
#include <stdlib.h>

#include "search/search_internal.h"

/* Candidate values of variable v other than cur, in a random order, into vals; returns count. */
static size_t candidates(search_rng *r, const gopt_env_var *v, double cur, double *vals) {
  size_t k = 0;
  if (v->kind == GOPT_VAR_PRIORITY) {
    for (int g = 0; g < SEARCH_PRIO_GRID; g++) {
      double p = (g + 0.5) / SEARCH_PRIO_GRID;
      if (p != cur) vals[k++] = p;
    }
  } else {
    for (int32_t d = 0; d < v->card; d++)
      if ((double)d != cur) vals[k++] = d;
  }
  for (size_t i = k; i > 1; i--) {
    size_t j = search_rng_below(r, (uint32_t)i);
    double t = vals[i - 1];
    vals[i - 1] = vals[j];
    vals[j] = t;
  }
  return k;
}

int search_local(search_ctx *c) {
  const size_t nv = c->nv;
  int rc = 0;
  search_rng rng;
  search_rng_seed(&rng, c->o->seed, 2);
  size_t *mv = malloc(nv * sizeof *mv);
  double *x = malloc(nv * sizeof *x);
  size_t maxc = SEARCH_PRIO_GRID;
  for (size_t i = 0; i < nv; i++)
    if ((size_t)c->vars[i].card > maxc) maxc = (size_t)c->vars[i].card;
  double *vals = malloc(maxc * sizeof *vals);
  if (!mv || !x || !vals) {
    rc = gopt_error_set(c->err, GOPT_ENOMEM, "search local: out of memory");
    goto done;
  }
  size_t nm = search_movable_vars(c, mv);
  if (nm == 0) goto done; /* nothing to change: the start is the only point */
  for (size_t i = 0; i < nv; i++) x[i] = c->best_x[i];
  gopt_env_ws *w = c->ws[0];
  gopt_env_result cur = c->best, r;
  size_t pending = (size_t)-1; /* variable whose rejected trial value w still holds */
  size_t p = 0, since = 0;
  search_shuffle(&rng, mv, nm);
  while (!search_done(c)) {
    if (since >= nm) { /* local optimum: random restart */
      for (size_t i = 0; i < nv; i++) x[i] = search_random_value(&rng, &c->vars[i]);
      if ((rc = search_eval(c, w, x, &cur))) goto done;
      pending = (size_t)-1;
      since = 0;
      search_shuffle(&rng, mv, nm);
      p = 0;
      continue;
    }
    size_t i = mv[p++];
    if (p == nm) {
      p = 0;
      search_shuffle(&rng, mv, nm);
    }
    size_t k = candidates(&rng, &c->vars[i], x[i], vals);
    int improved = 0;
    for (size_t j = 0; j < k && !search_done(c); j++) {
      double old = x[i];
      x[i] = vals[j];
      size_t idx[2] = {i, pending};
      size_t ni = (pending != (size_t)-1 && pending != i) ? 2 : 1;
      if ((rc = search_eval_delta(c, w, x, idx, ni, &r))) goto done;
      if (gopt_env_result_better(&r, &cur)) {
        cur = r;
        pending = (size_t)-1;
        improved = 1;
        break;
      }
      x[i] = old;
      pending = i;
    }
    since = improved ? 0 : since + 1;
  }
done:
  free(mv);
  free(x);
  free(vals);
  return rc;
}
