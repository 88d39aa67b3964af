/* search_random.c: random search ("random"): independent uniformly random decision vectors,
 * generated in batches from the seeded PRNG (sequentially, so the points do not depend on the
 * thread count) and evaluated in parallel; the best is kept. */
#include <stdlib.h>

#include "search/search_internal.h"

#define RANDOM_BATCH 64

int search_random(search_ctx *c) {
  const size_t nv = c->nv;
  search_rng rng;
  search_rng_seed(&rng, c->o->seed, 1);
  double *xs = malloc(RANDOM_BATCH * nv * sizeof *xs);
  gopt_env_result *out = malloc(RANDOM_BATCH * sizeof *out);
  int rc = 0;
  if (!xs || !out) {
    rc = gopt_error_set(c->err, GOPT_ENOMEM, "search random: out of memory");
    goto done;
  }
  while (!search_done(c)) {
    uint64_t left = search_evals_left(c);
    size_t n = left < RANDOM_BATCH ? (size_t)left : RANDOM_BATCH;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < nv; j++) xs[i * nv + j] = search_random_value(&rng, &c->vars[j]);
    if ((rc = search_eval_batch(c, xs, n, out))) goto done;
  }
done:
  free(xs);
  free(out);
  return rc;
}
