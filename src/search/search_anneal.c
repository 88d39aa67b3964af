/* search_anneal.c: simulated annealing ("anneal"), the MCMC search of FlexFlow: a random
 * single-variable move (a discrete variable to another value, a priority to a uniform value) is
 * accepted when it is not worse, else with probability exp(-delta / T), delta being the cost
 * increase relative to the start objective (a move from a state that fits in memory to one that
 * does not adds 1 to delta; the reverse move is always accepted). The best follows the hard
 * ranking of gopt_env_result_cmp whatever the walk accepts. Geometric cooling from T0 (opts->temperature,
 * default 0.05) to T0 / 1000 over the budget (evaluations when given, else seconds). Moves are
 * evaluated incrementally; sequential, so the result does not depend on threads. */
#include <math.h>
#include <stdlib.h>

#include "search/search_internal.h"

#define ANNEAL_T0 0.05
#define ANNEAL_RATIO 1e-3

int search_anneal(search_ctx *c) {
  const size_t nv = c->nv;
  int rc = 0;
  search_rng rng;
  search_rng_seed(&rng, c->o->seed, 3);
  size_t *mv = malloc(nv * sizeof *mv);
  double *x = malloc(nv * sizeof *x);
  if (!mv || !x) {
    rc = gopt_error_set(c->err, GOPT_ENOMEM, "search anneal: out of memory");
    goto done;
  }
  size_t nm = search_movable_vars(c, mv);
  if (nm == 0) goto done;
  for (size_t i = 0; i < nv; i++) x[i] = c->best_x[i];
  const double T0 = c->o->temperature > 0 ? c->o->temperature : ANNEAL_T0;
  const uint64_t start_evals = c->evals;
  gopt_env_ws *w = c->ws[0];
  gopt_env_result cur = c->best, r;
  size_t pending = (size_t)-1;
  while (!search_done(c)) {
    double frac;
    if (c->o->budget_evals > start_evals)
      frac = (double)(c->evals - start_evals) / (double)(c->o->budget_evals - start_evals);
    else if (c->o->budget_seconds > 0)
      frac = search_elapsed(c) / c->o->budget_seconds;
    else
      frac = 1;
    double T = T0 * pow(ANNEAL_RATIO, frac < 1 ? frac : 1);
    size_t i = mv[search_rng_below(&rng, (uint32_t)nm)];
    const gopt_env_var *v = &c->vars[i];
    double old = x[i];
    if (v->kind == GOPT_VAR_PRIORITY) {
      x[i] = search_rng_uniform(&rng);
    } else {
      uint32_t card = (uint32_t)v->card;
      x[i] = (double)(((uint32_t)old + 1 + search_rng_below(&rng, card - 1)) % card);
    }
    double u = search_rng_uniform(&rng);
    size_t idx[2] = {i, pending};
    size_t ni = (pending != (size_t)-1 && pending != i) ? 2 : 1;
    if ((rc = search_eval_delta(c, w, x, idx, ni, &r))) goto done;
    double delta = search_rel(c, cur.objective, r.objective);
    /* memory limits are hard: a move out of memory from a state that fits counts as at least
     * 100 % worse (accepted with probability <= exp(-1 / T)) */
    if (cur.feasible && !r.feasible) delta = (delta > 0 ? delta : 0) + 1;
    else if (!cur.feasible && r.feasible && delta > 0) delta = 0;
    if (delta <= 0 || u < exp(-delta / T)) {
      cur = r;
      pending = (size_t)-1;
    } else {
      x[i] = old;
      pending = i;
    }
  }
done:
  free(mv);
  free(x);
  return rc;
}
