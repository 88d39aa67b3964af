/* search_brkga.c: biased random-key genetic algorithm ("brkga"), REGAL's baseline. A chromosome
 * is one key in [0,1] per variable, decoded (search_brkga_decode, a pure function) into device
 * affinities (DEVICE = floor(key * D)), scheduling priorities (PRIORITY = key) and fuse bits
 * (key > 0.5). Each generation keeps the elite (top elite_frac, default 0.2), adds mutants (fresh
 * random chromosomes, mutant_frac, default 0.1) and fills the rest with crossovers of an elite
 * and a non-elite parent taking each key from the elite one with probability elite_bias
 * (default 0.7); population default 100. Generation 0 holds the start point, the chromosome of
 * every standard baseline of the task that applies (search_brkga_encode), then random keys; the
 * elite are ranked with gopt_env_result_cmp (fitting in memory first).
 * New chromosomes of a generation are evaluated in parallel; all random draws are made
 * sequentially, so the result depends only on the seed. "BRKGA-5K" is budget_evals = 5000.
 * "brkga-regal" is the same algorithm on REGAL's chromosome (search_regal.c: one affinity gene per
 * node and device, one priority gene per node) whose fresh chromosomes (generation 0's random ones
 * and the mutants) come from opts->sample_keys when set (REGAL's learned Beta distributions); its
 * generation 0 is the start and fresh chromosomes, no baselines. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/baselines.h"
#include "search/search_internal.h"

#define BRKGA_POP 100
#define BRKGA_ELITE 0.2
#define BRKGA_MUTANT 0.1
#define BRKGA_BIAS 0.7
/* brkga-tuned: brkga-regal with the population and fractions that won the grid search of
 * tools/train_regal.sh on REGAL's training graphs (docs/LEARNED.md, "REGAL", records the run). */
#define TUNED_POP 30
#define TUNED_ELITE 0.25
#define TUNED_MUTANT 0.05
#define TUNED_BIAS 0.8

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
  const gopt_env_result *r;
  size_t idx;
} ranked;

/* Elite order: gopt_env_result_cmp (fitting in memory first, then the lower objective); NaN
 * objectives last; ties by index keep the order total and deterministic. */
static int cmp_ranked(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  int xn = isnan(x->r->objective), yn = isnan(y->r->objective);
  if (xn != yn) return xn - yn;
  int c = xn ? 0 : gopt_env_result_cmp(x->r, y->r);
  if (c) return c;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

/* The chromosome a run searches: one key per variable ("brkga") or REGAL's genes. */
typedef struct brkga_code {
  size_t len;
  int regal;
  double pop, pe, pm, rho; /* defaults of the population and fractions */
} brkga_code;

static void code_decode(const search_ctx *c, const brkga_code *k, const double *keys, double *x) {
  if (k->regal) search_regal_decode(c->vars, c->nv, keys, x);
  else search_brkga_decode(c->vars, c->nv, keys, x);
}

static void code_encode(const search_ctx *c, const brkga_code *k, const double *x, double *keys) {
  if (k->regal) search_regal_encode(c->vars, c->nv, x, keys);
  else search_brkga_encode(c->vars, c->nv, x, keys);
}

/* n fresh chromosomes into keys: uniform, or (REGAL's chromosome with a sampler) from
 * opts->sample_keys seeded by one draw of rng. */
static int brkga_fresh(search_ctx *c, const brkga_code *k, search_rng *rng, double *keys, size_t n) {
  if (!n) return 0;
  if (k->regal && c->o->sample_keys) {
    uint64_t seed = search_rng_next(rng);
    int rc = c->o->sample_keys(keys, n, k->len, seed, c->o->keys_user);
    return rc ? gopt_error_set(c->err, rc, "search %s: the key sampler failed (%s)", c->method, gopt_error_name(rc)) : 0;
  }
  for (size_t i = 0; i < n * k->len; i++) keys[i] = search_rng_uniform(rng);
  return 0;
}

/* Generation 0 after the start (slot 0): "brkga": the chromosome of every standard baseline of the
 * task that applies and runs (at most P - 1), then fresh chromosomes; REGAL's chromosome: fresh
 * chromosomes only (REGAL's first population is the policy's samples; the start is the best
 * baseline when the caller asks for it, e.g. the CLI's --start best). */
static int brkga_first_population(search_ctx *c, const brkga_code *k, search_rng *rng, double *pop, size_t P,
                                  double *x) {
  const int task = gopt_env_task(c->e);
  size_t p = 1;
  for (size_t i = 0; !k->regal && i < gopt_baseline_task_count(task) && p < P; i++) {
    const char *name = gopt_baseline_task_name(task, i);
    if (!gopt_baseline_applicable(name, c->e, NULL)) continue;
    gopt_error berr = {0};
    int rc = gopt_baseline_run(name, c->e, x, &berr);
    if (rc == GOPT_ENOMEM)
      return gopt_error_set(c->err, rc, "search %s: baseline '%s': %s", c->method, name, berr.msg);
    if (rc) continue; /* a failing baseline is left out */
    code_encode(c, k, x, pop + p * k->len);
    p++;
  }
  return brkga_fresh(c, k, rng, pop + p * k->len, P - p);
}

static int brkga_run(search_ctx *c, const brkga_code *code) {
  const size_t nv = c->nv, L = code->len;
  const gopt_search_opts *o = c->o;
  int rc = 0;
  size_t P = o->population > 0 ? (size_t)o->population : (size_t)code->pop;
  if (P < 2) P = 2;
  double pe = o->elite_frac > 0 ? o->elite_frac : code->pe;
  double pm = o->mutant_frac > 0 ? o->mutant_frac : code->pm;
  double rho = o->elite_bias > 0 ? o->elite_bias : code->rho;
  size_t ne = (size_t)lround(pe * (double)P), nm = (size_t)lround(pm * (double)P);
  if (ne < 1) ne = 1;
  if (ne > P - 1) ne = P - 1;
  if (nm > P - ne) nm = P - ne;
  search_rng rng;
  search_rng_seed(&rng, o->seed, 5);
  double *pop = malloc(P * L * sizeof *pop + 1), *nxt = malloc(P * L * sizeof *nxt + 1);
  gopt_env_result *fit = malloc(P * sizeof *fit), *nfit = malloc(P * sizeof *nfit);
  double *xs = malloc(P * nv * sizeof *xs);
  gopt_env_result *out = malloc(P * sizeof *out);
  ranked *rk = malloc(P * sizeof *rk);
  if (!pop || !nxt || !fit || !nfit || !xs || !out || !rk) {
    rc = gopt_error_set(c->err, GOPT_ENOMEM, "search brkga: out of memory");
    goto done;
  }
  /* generation 0: the start point, the baselines, then random chromosomes */
  code_encode(c, code, c->best_x, pop);
  fit[0] = c->best;
  if ((rc = brkga_first_population(c, code, &rng, pop, P, xs))) goto done;
  const gopt_env_result unevaluated = {.objective = INFINITY};
  size_t first = 1; /* chromosomes [first, P) need evaluation */
  for (;;) {
    size_t n = P - first;
    uint64_t left = search_evals_left(c);
    if (left < n) n = (size_t)left;
    if (search_done(c)) n = 0;
    for (size_t p = 0; p < n; p++)
      code_decode(c, code, pop + (first + p) * L, xs + p * nv);
    if ((rc = search_eval_batch(c, xs, n, out))) goto done;
    for (size_t p = first; p < P; p++) fit[p] = p - first < n ? out[p - first] : unevaluated;
    for (size_t p = 0; p < P; p++) {
      rk[p].r = &fit[p];
      rk[p].idx = p;
    }
    qsort(rk, P, sizeof *rk, cmp_ranked);
    if (search_done(c)) break;
    /* next generation: elite, mutants, crossovers */
    for (size_t p = 0; p < ne; p++) {
      memcpy(nxt + p * L, pop + rk[p].idx * L, L * sizeof *nxt);
      nfit[p] = fit[rk[p].idx];
    }
    if ((rc = brkga_fresh(c, code, &rng, nxt + ne * L, nm))) goto done;
    for (size_t p = ne + nm; p < P; p++) {
      const double *a = pop + rk[search_rng_below(&rng, (uint32_t)ne)].idx * L;
      const double *b = pop + rk[ne + search_rng_below(&rng, (uint32_t)(P - ne))].idx * L;
      for (size_t j = 0; j < L; j++) nxt[p * L + j] = search_rng_uniform(&rng) < rho ? a[j] : b[j];
    }
    double *t = pop;
    pop = nxt;
    nxt = t;
    gopt_env_result *tf = fit;
    fit = nfit;
    nfit = tf;
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

int search_brkga(search_ctx *c) {
  brkga_code k = {c->nv, 0, BRKGA_POP, BRKGA_ELITE, BRKGA_MUTANT, BRKGA_BIAS};
  return brkga_run(c, &k);
}

int search_brkga_regal(search_ctx *c) {
  brkga_code k = {search_regal_len(c->vars, c->nv), 1, BRKGA_POP, BRKGA_ELITE, BRKGA_MUTANT, BRKGA_BIAS};
  return brkga_run(c, &k);
}

int search_brkga_tuned(search_ctx *c) {
  brkga_code k = {search_regal_len(c->vars, c->nv), 1, TUNED_POP, TUNED_ELITE, TUNED_MUTANT, TUNED_BIAS};
  return brkga_run(c, &k);
}
