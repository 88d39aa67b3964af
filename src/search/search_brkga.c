/* search_brkga.c: biased random-key genetic algorithm ("brkga"), REGAL's baseline. A chromosome
 * is one key in [0,1] per variable, decoded (search_brkga_decode, a pure function) into device
 * affinities (DEVICE = floor(key * D)), scheduling priorities (PRIORITY = key) and fuse bits
 * (key > 0.5). Each generation keeps the elite (top elite_frac, default 0.2), adds mutants (fresh
 * random chromosomes, mutant_frac, default 0.1) and fills the rest with crossovers of an elite
 * and a non-elite parent taking each key from the elite one with probability elite_bias
 * (default 0.7); population default 100. The start point is encoded into the first population.
 * New chromosomes of a generation are evaluated in parallel; all random draws are made
 * sequentially, so the result depends only on the seed. "BRKGA-5K" is budget_evals = 5000. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"

#define BRKGA_POP 100
#define BRKGA_ELITE 0.2
#define BRKGA_MUTANT 0.1
#define BRKGA_BIAS 0.7

void search_brkga_decode(const gopt_env_var *vars, size_t nv, const double *keys, double *x) {
  for (size_t i = 0; i < nv; i++) {
    double k = keys[i];
    if (!(k >= 0)) k = 0; /* NaN and negatives */
    if (k > 1) k = 1;
    if (vars[i].kind == GOPT_VAR_PRIORITY) {
      x[i] = k;
    } else if (vars[i].kind == GOPT_VAR_FUSE && vars[i].card == 2) {
      x[i] = k > 0.5 ? 1 : 0;
    } else {
      int32_t card = vars[i].card > 0 ? vars[i].card : 1;
      int32_t d = (int32_t)floor(k * card);
      x[i] = d < card ? d : card - 1;
    }
  }
}

void search_brkga_encode(const gopt_env_var *vars, size_t nv, const double *x, double *keys) {
  for (size_t i = 0; i < nv; i++) {
    if (vars[i].kind == GOPT_VAR_PRIORITY)
      keys[i] = x[i];
    else if (vars[i].kind == GOPT_VAR_FUSE && vars[i].card == 2)
      keys[i] = x[i] > 0 ? 0.75 : 0.25;
    else
      keys[i] = (x[i] + 0.5) / (vars[i].card > 0 ? vars[i].card : 1);
  }
}

typedef struct ranked {
  double fit;
  size_t idx;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->fit < y->fit) return -1;
  if (x->fit > y->fit) return 1;
  /* NaN-free here; ties by index keep the order total and deterministic */
  return (x->idx > y->idx) - (x->idx < y->idx);
}

int search_brkga(search_ctx *c) {
  const size_t nv = c->nv;
  const gopt_search_opts *o = c->o;
  int rc = 0;
  size_t P = o->population > 0 ? (size_t)o->population : BRKGA_POP;
  if (P < 2) P = 2;
  double pe = o->elite_frac > 0 ? o->elite_frac : BRKGA_ELITE;
  double pm = o->mutant_frac > 0 ? o->mutant_frac : BRKGA_MUTANT;
  double rho = o->elite_bias > 0 ? o->elite_bias : BRKGA_BIAS;
  size_t ne = (size_t)lround(pe * (double)P), nm = (size_t)lround(pm * (double)P);
  if (ne < 1) ne = 1;
  if (ne > P - 1) ne = P - 1;
  if (nm > P - ne) nm = P - ne;
  search_rng rng;
  search_rng_seed(&rng, o->seed, 5);
  double *pop = malloc(P * nv * sizeof *pop), *nxt = malloc(P * nv * sizeof *nxt);
  double *fit = malloc(P * sizeof *fit), *nfit = malloc(P * sizeof *nfit);
  double *xs = malloc(P * nv * sizeof *xs);
  gopt_env_result *out = malloc(P * sizeof *out);
  ranked *rk = malloc(P * sizeof *rk);
  if (!pop || !nxt || !fit || !nfit || !xs || !out || !rk) {
    rc = gopt_error_set(c->err, GOPT_ENOMEM, "search brkga: out of memory");
    goto done;
  }
  /* generation 0: the start point, then random chromosomes */
  search_brkga_encode(c->vars, nv, c->best_x, pop);
  fit[0] = c->best.objective;
  for (size_t p = 1; p < P; p++)
    for (size_t j = 0; j < nv; j++) pop[p * nv + j] = search_rng_uniform(&rng);
  size_t first = 1; /* chromosomes [first, P) need evaluation */
  for (;;) {
    size_t n = P - first;
    uint64_t left = search_evals_left(c);
    if (left < n) n = (size_t)left;
    if (search_done(c)) n = 0;
    for (size_t p = 0; p < n; p++)
      search_brkga_decode(c->vars, nv, pop + (first + p) * nv, xs + p * nv);
    if ((rc = search_eval_batch(c, xs, n, out))) goto done;
    for (size_t p = first; p < P; p++) fit[p] = p - first < n ? out[p - first].objective : INFINITY;
    if (isnan(fit[0])) fit[0] = INFINITY;
    for (size_t p = 0; p < P; p++) {
      rk[p].fit = isnan(fit[p]) ? INFINITY : fit[p];
      rk[p].idx = p;
    }
    qsort(rk, P, sizeof *rk, cmp_ranked);
    if (search_done(c)) break;
    /* next generation: elite, mutants, crossovers */
    for (size_t p = 0; p < ne; p++) {
      memcpy(nxt + p * nv, pop + rk[p].idx * nv, nv * sizeof *nxt);
      nfit[p] = rk[p].fit;
    }
    for (size_t p = ne; p < ne + nm; p++)
      for (size_t j = 0; j < nv; j++) nxt[p * nv + j] = search_rng_uniform(&rng);
    for (size_t p = ne + nm; p < P; p++) {
      const double *a = pop + rk[search_rng_below(&rng, (uint32_t)ne)].idx * nv;
      const double *b = pop + rk[ne + search_rng_below(&rng, (uint32_t)(P - ne))].idx * nv;
      for (size_t j = 0; j < nv; j++) nxt[p * nv + j] = search_rng_uniform(&rng) < rho ? a[j] : b[j];
    }
    double *t = pop;
    pop = nxt;
    nxt = t;
    t = fit;
    fit = nfit;
    nfit = t;
    first = ne;
  }
done:
  free(pop);
  free(nxt);
  free(fit);
  free(nfit);
  free(xs);
  free(out);
  free(rk);
  return rc;
}
