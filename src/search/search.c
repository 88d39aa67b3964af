/* search.c: the search front end (search.h): the method table, applicability, the run driver
 * (argument checks, the thread pool of evaluation workspaces, the start point evaluated first as
 * the initial best), the stop flag, and the helpers every method uses (budgets, best tracking,
 * deterministic batch evaluation, progress line). */
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/learn.h"
#include "gopt/util.h"
#include "search/search_internal.h"

static volatile sig_atomic_t g_stop = 0;

void gopt_search_request_stop(void) { g_stop = 1; }
void gopt_search_clear_stop(void) { g_stop = 0; }
int search_stop_requested(void) { return g_stop != 0; }

typedef struct method_entry {
  const char *name;
  int (*run)(search_ctx *c);
  int exact;
  /* evaluates batches: one workspace per thread (else one workspace), and distributed over the
   * ranks of gopt_search_opts.dist; such a method must decide from search_done, search_evals_left
   * and its results only (never the clock or the stop flag directly), so ranks stay in lockstep */
  int parallel;
} method_entry;

static const method_entry k_methods[] = {
    {"random", search_random, 0, 1}, {"local", search_local, 0, 0}, {"anneal", search_anneal, 0, 0},
    {"gibbs", search_gibbs, 0, 0},   {"brkga", search_brkga, 0, 1}, {"brkga-regal", search_brkga_regal, 0, 1},
    {"brkga-tuned", search_brkga_tuned, 0, 1}, {"khop", search_khop, 0, 0}, {"guided", search_guided, 0, 0},
    {"ilp", search_ilp, 1, 0}, {"dp", search_dp, 1, 0},
};
#define N_METHODS (sizeof k_methods / sizeof k_methods[0])

size_t gopt_search_method_count(void) { return N_METHODS; }
const char *gopt_search_method_name(size_t i) { return i < N_METHODS ? k_methods[i].name : NULL; }

static const method_entry *find_method(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < N_METHODS; i++)
    if (strcmp(k_methods[i].name, name) == 0) return &k_methods[i];
  return NULL;
}

int gopt_search_applicable(const char *method, const gopt_env *e, const char **why) {
  const char *dummy;
  if (!why) why = &dummy;
  *why = NULL;
  const method_entry *m = find_method(method);
  if (!m) {
    *why = "unknown search method (random, local, anneal, gibbs, brkga, brkga-regal, brkga-tuned, khop, guided, ilp, "
           "dp)";
    return 0;
  }
  if (!e) {
    *why = "no environment";
    return 0;
  }
  if (gopt_env_nvars(e) == 0) {
    *why = "the task has no decision variables on this graph";
    return 0;
  }
  if (strcmp(m->name, "guided") == 0 && gopt_env_task(e) != GOPT_TASK_FUSION &&
      gopt_env_task(e) != GOPT_TASK_PLACEMENT) {
    *why = "its local advantage model scores discrete choices: fusion and placement only";
    return 0;
  }
  if (strcmp(m->name, "ilp") == 0) return search_ilp_applicable(e, why);
  if (strcmp(m->name, "dp") == 0) return search_dp_applicable(e, why);
  return 1;
}

long search_env_knob(const char *name, long dflt) {
  const char *s = getenv(name);
  if (!s || !*s) return dflt;
  char *end;
  long v = strtol(s, &end, 10);
  return (*end == 0 && v > 0) ? v : dflt;
}

/* ---- context helpers ------------------------------------------------------------------------ */
double search_elapsed(const search_ctx *c) { return gopt_now() - c->t0; }

uint64_t search_evals_left(const search_ctx *c) {
  if (c->o->budget_evals == 0) return UINT64_MAX;
  return c->evals >= c->o->budget_evals ? 0 : c->o->budget_evals - c->evals;
}

int search_done(search_ctx *c) {
  if (c->dist) { /* only what every rank agreed on at the last exchange: all stop together */
    if (c->dist_stop) c->interrupted = 1;
    return c->dist_stop || c->dist_timeup || search_evals_left(c) == 0;
  }
  if (g_stop) {
    c->interrupted = 1;
    return 1;
  }
  if (search_evals_left(c) == 0) return 1;
  if (c->o->budget_seconds > 0 && search_elapsed(c) >= c->o->budget_seconds) return 1;
  return 0;
}

double search_rel(const search_ctx *c, double a, double b) {
  double s = fabs(c->start_obj);
  return (b - a) / (s > 0 ? s : 1.0);
}

/* Fraction of the budget (evaluations or seconds, whichever is further along) used so far, or -1
 * when there is no budget. */
static double progress_frac(const search_ctx *c, double elapsed) {
  double f = -1;
  if (c->o->budget_evals) f = (double)c->evals / (double)c->o->budget_evals;
  if (c->o->budget_seconds > 0 && elapsed / c->o->budget_seconds > f) f = elapsed / c->o->budget_seconds;
  return f > 1 ? 1 : f;
}

/* Progress on stderr: mode 1 (a terminal) redraws a bar with the ETA every 0.2 s; mode 2 (not a
 * terminal) prints a plain line every 2 s, and a final one only when it printed any. */
void search_progress(search_ctx *c, int force) {
  int mode = c->o->progress;
  if (!mode) return;
  double now = gopt_now(), el = now - c->t0;
  if (!force && now - c->last_progress < (mode == 1 ? 0.2 : 2.0)) return;
  if (mode == 2 && force && !c->progress_lines) return;
  c->last_progress = now;
  double f = progress_frac(c, el);
  char eta[48] = "";
  if (f > 0 && f < 1) snprintf(eta, sizeof eta, "  ETA %.1f s", el * (1 - f) / f);
  if (mode == 2) {
    c->progress_lines++;
    fprintf(stderr, "%s: %llu evals%s%.0f%s  best %.6g  %.1f s%s\n", c->method, (unsigned long long)c->evals,
            f >= 0 ? " (" : "", f >= 0 ? 100 * f : 0.0, f >= 0 ? "%)" : "", c->best.objective, el,
            force ? " done" : eta);
    return;
  }
  char bar[21] = "";
  if (f >= 0) {
    int k = (int)(f * 20 + 0.5);
    for (int i = 0; i < 20; i++) bar[i] = i < k ? '#' : '.';
    bar[20] = 0;
  }
  fprintf(stderr, "\r%s: %s%s%s %3.0f%%  %llu evals  best %.6g  %.1f s%s%s", c->method, f >= 0 ? "[" : "", bar,
          f >= 0 ? "]" : "", f >= 0 ? 100 * f : 0.0, (unsigned long long)c->evals, c->best.objective, el, eta,
          force ? "\n" : "   ");
  fflush(stderr);
}

/* search_offer for the evaluation numbered `at` (1-based within the run). */
static void offer_at(search_ctx *c, const double *x, const gopt_env_result *r, uint64_t at) {
  if (c->o->on_sample) c->o->on_sample(x, r, c->o->user);
  if (gopt_env_result_better(r, &c->best)) {
    c->best = *r;
    memcpy(c->best_x, x, c->nv * sizeof *x);
    if (c->o->on_improve) c->o->on_improve(at, search_elapsed(c), r->objective, c->o->user);
  }
  search_progress(c, 0);
}

void search_offer(search_ctx *c, const double *x, const gopt_env_result *r) { offer_at(c, x, r, c->evals); }

int search_eval(search_ctx *c, gopt_env_ws *w, const double *x, gopt_env_result *r) {
  int rc = gopt_env_evaluate(w, x, r, NULL, c->err);
  if (rc) return rc;
  c->evals++;
  search_offer(c, x, r);
  return 0;
}

int search_eval_delta(search_ctx *c, gopt_env_ws *w, const double *x, const size_t *idx, size_t k,
                      gopt_env_result *r) {
  int rc = gopt_env_evaluate_delta(w, x, idx, k, r, c->err);
  if (rc) return rc;
  c->evals++;
  search_offer(c, x, r);
  return 0;
}

/* Evaluates n points on this process's workspaces (no counting). */
static int eval_local(search_ctx *c, const double *xs, size_t n, gopt_env_result *out) {
  if (n == 0) return 0;
  int *rcs = calloc(n, sizeof *rcs);
  if (!rcs) return gopt_error_set(c->err, GOPT_ENOMEM, "search: out of memory");
  const size_t nv = c->nv;
  int T = c->threads < (int)n ? c->threads : (int)n;
  if (T <= 1) {
    for (size_t i = 0; i < n; i++) rcs[i] = gopt_env_evaluate(c->ws[0], xs + i * nv, &out[i], NULL, NULL);
  } else {
    gopt_env_ws **ws = c->ws;
#pragma omp parallel for num_threads(T) schedule(dynamic, 1)
    for (size_t i = 0; i < n; i++)
      rcs[i] = gopt_env_evaluate(ws[omp_get_thread_num()], xs + i * nv, &out[i], NULL, NULL);
  }
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++)
    if (rcs[i]) /* repeat the first failure sequentially for its message */
      rc = gopt_env_evaluate(c->ws[0], xs + i * nv, &out[i], NULL, c->err);
  free(rcs);
  return rc;
}

/* The distributed batch (gopt_search_opts.dist): rank r evaluates the contiguous slice
 * [r*k, min(n, (r+1)*k)) with k = ceil(n / size); the blocks (this rank's stop and time-up flags,
 * then its k results) are all-gathered in rank order and every rank copies all n results out and
 * takes the OR of the flags. A failing rank's error reaches every rank through the hook. */
static int eval_dist(search_ctx *c, const double *xs, size_t n, gopt_env_result *out) {
  typedef struct { int32_t stop, timeup; } head;
  const struct gopt_learn_dist *d = c->dist;
  size_t P = (size_t)d->size, k = (n + P - 1) / P, r = (size_t)d->rank;
  size_t block = sizeof(head) + k * sizeof(gopt_env_result);
  size_t lo = r * k < n ? r * k : n, hi = lo + k < n ? lo + k : n;
  unsigned char *buf = calloc(P, block);
  if (!buf) return gopt_error_set(c->err, GOPT_ENOMEM, "search: out of memory");
  unsigned char *mine = buf + r * block;
  head h = {g_stop != 0, c->o->budget_seconds > 0 && search_elapsed(c) >= c->o->budget_seconds};
  memcpy(mine, &h, sizeof h);
  gopt_env_result *res = malloc((k ? k : 1) * sizeof *res);
  int rc = res ? eval_local(c, xs + lo * c->nv, hi - lo, res)
               : gopt_error_set(c->err, GOPT_ENOMEM, "search: out of memory");
  if (!rc) memcpy(mine + sizeof h, res, (hi - lo) * sizeof *res);
  rc = d->allgather(buf, block, rc, d->user, c->err); /* always: a failure must reach the others */
  for (size_t q = 0; q < P && !rc; q++) {
    memcpy(&h, buf + q * block, sizeof h);
    c->dist_stop |= h.stop;
    c->dist_timeup |= h.timeup;
    size_t a = q * k < n ? q * k : n, b = a + k < n ? a + k : n;
    memcpy(out + a, buf + q * block + sizeof h, (b - a) * sizeof *out);
  }
  free(res);
  free(buf);
  return rc;
}

int search_eval_batch_raw(search_ctx *c, const double *xs, size_t n, gopt_env_result *out) {
  if (n == 0) return 0;
  int rc = c->dist ? eval_dist(c, xs, n, out) : eval_local(c, xs, n, out);
  if (rc) return rc;
  c->evals += n;
  return 0;
}

int search_eval_batch(search_ctx *c, const double *xs, size_t n, gopt_env_result *out) {
  int rc = search_eval_batch_raw(c, xs, n, out);
  if (rc) return rc;
  /* each improvement is reported at its own evaluation's number, not at the batch's end */
  for (size_t i = 0; i < n; i++) offer_at(c, xs + i * c->nv, &out[i], c->evals - n + i + 1);
  return 0;
}

size_t search_movable_vars(const search_ctx *c, size_t *idx) {
  size_t k = 0;
  for (size_t i = 0; i < c->nv; i++)
    if (c->vars[i].kind == GOPT_VAR_PRIORITY || c->vars[i].card > 1) idx[k++] = i;
  return k;
}

void search_shuffle(search_rng *r, size_t *a, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = search_rng_below(r, (uint32_t)i);
    size_t t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

double search_random_value(search_rng *r, const gopt_env_var *v) {
  if (v->kind == GOPT_VAR_PRIORITY || v->card <= 0) return search_rng_uniform(r);
  return (double)search_rng_below(r, (uint32_t)v->card);
}

/* ---- driver --------------------------------------------------------------------------------- */
int search_check_x(const gopt_env_var *vars, size_t nv, const double *x, gopt_error *err) {
  for (size_t i = 0; i < nv; i++) {
    double v = x[i];
    if (!isfinite(v))
      return gopt_error_set(err, GOPT_EINVAL, "search: start point: variable %zu is not finite", i);
    if (vars[i].kind == GOPT_VAR_PRIORITY) {
      if (v < 0 || v > 1)
        return gopt_error_set(err, GOPT_EINVAL,
                              "search: start point: priority variable %zu = %g is outside [0, 1]", i, v);
    } else if (v != floor(v) || v < 0 || v >= vars[i].card) {
      return gopt_error_set(err, GOPT_EINVAL,
                            "search: start point: variable %zu = %g is not an integer in [0, %d)", i,
                            v, (int)vars[i].card);
    }
  }
  return 0;
}

int gopt_search_run(const char *method, gopt_env *e, const gopt_search_opts *o, double *x_best,
                    gopt_search_result *res, gopt_error *err) {
  int rc = 0;
  search_ctx c;
  memset(&c, 0, sizeof c);
  gopt_search_opts dflt;
  memset(&dflt, 0, sizeof dflt);
  if (!o) o = &dflt;
  if (res) memset(res, 0, sizeof *res);
  const method_entry *m = find_method(method);
  if (!m)
    return gopt_error_set(err, GOPT_EINVAL,
                          "search: unknown method '%s' (random, local, anneal, gibbs, brkga, brkga-regal, brkga-tuned, "
                          "khop, guided, ilp, dp)",
                          method ? method : "(null)");
  if (!e || !x_best || !res) return gopt_error_set(err, GOPT_EINVAL, "search: missing argument");
  const char *why = NULL;
  if (!gopt_search_applicable(method, e, &why))
    return gopt_error_set(err, GOPT_EINVAL, "search: method '%s' does not apply: %s", method, why);
  if (o->sample_keys && strcmp(m->name, "brkga-regal"))
    return gopt_error_set(err, GOPT_EINVAL, "search: a key sampler applies to brkga-regal only, not '%s'", method);
  if (!m->exact && o->budget_evals == 0 && !(o->budget_seconds > 0))
    return gopt_error_set(err, GOPT_EINVAL,
                          "search: method '%s' needs a budget (evaluations or seconds)", method);
  if (o->budget_seconds < 0 || isnan(o->budget_seconds))
    return gopt_error_set(err, GOPT_EINVAL, "search: negative time budget");
  if (o->elite_frac < 0 || o->elite_frac >= 1 || o->mutant_frac < 0 || o->mutant_frac >= 1 ||
      o->elite_frac + o->mutant_frac >= 1 || o->elite_bias < 0 || o->elite_bias > 1 ||
      o->population < 0 || o->temperature < 0 || o->hops < 0 || o->alpha < 0 || o->alpha > 100 ||
      isnan(o->alpha))
    return gopt_error_set(err, GOPT_EINVAL,
                          "search: bad method parameter (elite/mutant fractions in [0,1) summing below 1, "
                          "bias in [0,1], population, temperature and hops >= 0, alpha in [0, 100])");
  if (!strcmp(m->name, "guided") && !o->guide)
    return gopt_error_set(err, GOPT_EINVAL,
                          "search: method 'guided' needs a local advantage model (--policy P.gpol)");

  c.e = e;
  c.o = o;
  c.method = m->name;
  c.nv = gopt_env_nvars(e);
  c.vars = gopt_env_vars(e);
  c.err = err;
  c.threads = o->threads > 0 ? o->threads : omp_get_max_threads();
  if (c.threads < 1 || !m->parallel) c.threads = 1;
  /* distributed evaluation applies to the methods that evaluate batches */
  if (o->dist && o->dist->size > 1 && o->dist->allgather && m->parallel && !m->exact) c.dist = o->dist;
  c.t0 = gopt_now();
  c.last_progress = c.t0;
  c.ws = calloc((size_t)c.threads, sizeof *c.ws);
  c.best_x = malloc(c.nv * sizeof *c.best_x);
  double *x = malloc(c.nv * sizeof *x);
  if (!c.ws || !c.best_x || !x) goto oom;
  for (int t = 0; t < c.threads; t++)
    if (!(c.ws[t] = gopt_env_ws_new(e))) goto oom;

  /* the start point is always evaluated first and is the initial best */
  if (o->x0) {
    if ((rc = search_check_x(c.vars, c.nv, o->x0, err))) goto done;
    memcpy(x, o->x0, c.nv * sizeof *x);
  } else {
    gopt_env_default(e, x);
  }
  memcpy(c.best_x, x, c.nv * sizeof *x);
  c.best.objective = INFINITY;
  gopt_env_result r0;
  if ((rc = gopt_env_evaluate(c.ws[0], x, &r0, NULL, err))) goto done;
  c.evals = 1;
  c.best = r0;
  c.start_obj = r0.objective;
  if (o->on_sample) o->on_sample(x, &r0, o->user);
  if (o->on_improve) o->on_improve(1, search_elapsed(&c), r0.objective, o->user);

  if (!search_done(&c)) rc = m->run(&c);
  else if (m->exact) rc = m->run(&c); /* exact methods decide themselves what they can do */
  if (rc) goto done;
  memcpy(x_best, c.best_x, c.nv * sizeof *x_best);
  res->best = c.best;
  res->evals = c.evals;
  res->seconds = search_elapsed(&c);
  res->interrupted = c.interrupted;
  res->optimal = c.optimal && !res->interrupted;
  search_progress(&c, 1);
  goto done;
oom:
  rc = gopt_error_set(err, GOPT_ENOMEM, "search: out of memory");
done:
  if (c.ws)
    for (int t = 0; t < c.threads; t++) gopt_env_ws_free(c.ws[t]);
  free(c.ws);
  free(c.best_x);
  free(x);
  return rc;
}
