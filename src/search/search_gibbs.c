/* search_gibbs.c: Gibbs sampling with temperature tau ("gibbs"), the data collection of the
 * local-advantage seed. Sweeps visit the movable variables of every kind (DEVICE, PRIORITY, FUSE)
 * in a seeded random order, reshuffled for each sweep, so that a budget smaller than one sweep
 * still touches every part of the graph. For each variable it evaluates every choice with the
 * others fixed (all values of a DEVICE/FUSE variable; for a PRIORITY the current value, steps of
 * +-0.02 and +-0.1 around it and two uniform values), reports the choices' (configuration, cost)
 * pairs consecutively in choice order (increasing value) through opts->on_sample (the current
 * configuration's cached result stands for its own choice, so it is not evaluated twice), and
 * resamples the variable from softmax(-(cost - min) / (tau * s)), where s is the median |change of
 * the objective| over the last 64 nonzero single-variable changes seen (so tau = 1 makes a typical
 * change one e-fold, whatever the unit and size of the objective) and only the choices that fit
 * in memory take part when any does (memory limits are hard). tau = opts->temperature (default
 * 0.25). The best configuration seen is kept (gopt_env_result_cmp). Choices are evaluated
 * incrementally (gopt_env_evaluate_delta) on one workspace; sequential, so the result does not
 * depend on threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"

#define GIBBS_TAU 0.25
#define GIBBS_WINDOW 64 /* recent nonzero |delta objective| values that set the scale */
#define GIBBS_PRIO_RANDOM 2
#define GIBBS_MAX_PRIO 7 /* current, 4 steps, 2 random */

static const double k_prio_steps[] = {-0.1, -0.02, 0.02, 0.1};

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The choices of variable v at current value cur into vals, in increasing order, cur among
 * them; returns the count. */
static size_t gibbs_choices(search_rng *r, const gopt_env_var *v, double cur, double *vals) {
  size_t k = 0;
  if (v->kind != GOPT_VAR_PRIORITY) {
    for (int32_t d = 0; d < v->card; d++) vals[k++] = d;
    return k;
  }
  vals[k++] = cur;
  for (size_t s = 0; s < sizeof k_prio_steps / sizeof k_prio_steps[0]; s++) {
    double p = cur + k_prio_steps[s];
    vals[k++] = p < 0 ? 0 : p > 1 ? 1 : p;
  }
  for (int s = 0; s < GIBBS_PRIO_RANDOM; s++) vals[k++] = search_rng_uniform(r);
  qsort(vals, k, sizeof *vals, cmp_double);
  size_t u = 0; /* drop duplicates (clamped steps) */
  for (size_t j = 0; j < k; j++)
    if (u == 0 || vals[j] != vals[u - 1]) vals[u++] = vals[j];
  return u;
}

/* The temperature scale: median of the recorded nonzero |delta| (1 when none yet). */
static double gibbs_scale(const double *ring, size_t n, double *tmp) {
  if (n == 0) return 1;
  memcpy(tmp, ring, n * sizeof *tmp);
  qsort(tmp, n, sizeof *tmp, cmp_double);
  return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

/* Samples a choice from softmax(-(cost - lo) / temp) over res[0..k) (only the feasible ones when
 * any is feasible); returns its index. */
static size_t gibbs_pick(search_rng *r, const gopt_env_result *res, size_t k, double temp, double *wts) {
  int any_feasible = 0;
  for (size_t j = 0; j < k; j++) any_feasible |= res[j].feasible;
  double lo = INFINITY, sum = 0;
  for (size_t j = 0; j < k; j++)
    if ((res[j].feasible || !any_feasible) && res[j].objective < lo) lo = res[j].objective;
  for (size_t j = 0; j < k; j++) {
    int in = (res[j].feasible || !any_feasible) && isfinite(res[j].objective);
    wts[j] = in ? exp(-(res[j].objective - lo) / temp) : 0;
    sum += wts[j];
  }
  double u = search_rng_uniform(r) * sum, acc = 0;
  size_t pick = (size_t)-1;
  for (size_t j = 0; j < k; j++) {
    if (wts[j] > 0) pick = j; /* the last weighted choice catches rounding */
    acc += wts[j];
    if (u < acc && wts[j] > 0) return j;
  }
  return pick;
}

int search_gibbs(search_ctx *c) {
  const size_t nv = c->nv;
  int rc = 0;
  search_rng rng;
  search_rng_seed(&rng, c->o->seed, 4);
  size_t maxc = GIBBS_MAX_PRIO;
  for (size_t i = 0; i < nv; i++)
    if ((size_t)c->vars[i].card > maxc) maxc = (size_t)c->vars[i].card;
  size_t *mv = malloc(nv * sizeof *mv);
  double *x = malloc(nv * sizeof *x), *xs = malloc(maxc * nv * sizeof *xs);
  double *vals = malloc(maxc * sizeof *vals), *wts = malloc(maxc * sizeof *wts);
  double ring[GIBBS_WINDOW], tmp[GIBBS_WINDOW];
  size_t nring = 0, ring_pos = 0;
  gopt_env_result *res = malloc(maxc * sizeof *res), *out = malloc(maxc * sizeof *out);
  if (!mv || !x || !xs || !vals || !wts || !res || !out) {
    rc = gopt_error_set(c->err, GOPT_ENOMEM, "search gibbs: out of memory");
    goto done;
  }
  size_t nm = search_movable_vars(c, mv);
  if (nm == 0) goto done;
  memcpy(x, c->best_x, nv * sizeof *x);
  const double tau = c->o->temperature > 0 ? c->o->temperature : GIBBS_TAU;
  gopt_env_result cur = c->best;
  gopt_env_ws *w = c->ws[0]; /* its last point is the start */
  size_t pending = (size_t)-1;
  for (size_t s = 0; !search_done(c); s++) {
    if (s % nm == 0) search_shuffle(&rng, mv, nm); /* a fresh order for every sweep */
    size_t i = mv[s % nm];
    size_t k = gibbs_choices(&rng, &c->vars[i], x[i], vals), cached = (size_t)-1;
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
    /* incremental evaluations on one workspace: row e differs from the workspace's last point
     * in variable i and in the variable whose trial value the workspace still holds */
    for (size_t r = 0; r < ne; r++) {
      size_t idx[2] = {i, pending};
      size_t ni = (pending != (size_t)-1 && pending != i) ? 2 : 1;
      if ((rc = gopt_env_evaluate_delta(w, xs + r * nv, idx, ni, &out[r], c->err))) goto done;
      pending = i;
    }
    /* offer in choice order (the cached current configuration included) */
    size_t e = 0;
    for (size_t j = 0; j < k; j++) {
      if (j == cached) {
        res[j] = cur;
        if (c->o->on_sample) c->o->on_sample(x, &cur, c->o->user);
        continue;
      }
      if (e == ne) break;
      res[j] = out[e];
      c->evals++; /* counted here so that on_improve sees this evaluation's number */
      search_offer(c, xs + e * nv, &out[e]);
      double d = fabs(out[e].objective - cur.objective);
      if (d > 0 && isfinite(d)) {
        ring[ring_pos] = d;
        ring_pos = (ring_pos + 1) % GIBBS_WINDOW;
        if (nring < GIBBS_WINDOW) nring++;
      }
      e++;
    }
    if (partial) break; /* budget ended inside this variable's choices */
    double scale = gibbs_scale(ring, nring, tmp);
    size_t pick = gibbs_pick(&rng, res, k, tau * scale, wts);
    if (pick == (size_t)-1) continue; /* no finite choice: keep the current value */
    x[i] = vals[pick];
    cur = res[pick];
    /* the workspace holds the last evaluated row: it differs from x at most in variable i */
  }
done:
  free(mv);
  free(x);
  free(xs);
  free(vals);
  free(wts);
  free(res);
  free(out);
  return rc;
}
