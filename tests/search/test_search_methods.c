/* test_search_methods.c: the heuristic search methods (random, local, anneal, gibbs, brkga) on
 * every task (placement, fusion, schedule, memory, joint) over small zoo graphs and random DAGs:
 * never worse than the start (the environment default and a random x0), the reported best
 * re-evaluates to the same objective, evaluation budgets respected, on_improve strictly
 * decreasing, runs repeat bitwise with the same seed at 1 and 2 threads (objective, x, evals),
 * the stop flag ends a run promptly with interrupted = 1 and a valid best, a time budget alone
 * ends a run (its duration is not asserted), each method improves the default on its own on
 * instances where all can, BRKGA's decoder is a pure function into valid decisions, and Gibbs
 * sampling reports each variable's choices consecutively with their true costs. */
#include "search_fixture.h"
#include "search/search_internal.h"

static const char *k_methods[] = {"random", "local", "anneal", "gibbs", "brkga"};
#define N_METHODS 5

typedef struct improve_log {
  int n, bad;
  double last;
  uint64_t last_evals;
} improve_log;

static void on_improve(uint64_t evals, double seconds, double best, void *user) {
  improve_log *l = user;
  if (l->n > 0 && !(best < l->last)) l->bad++;
  if (evals < l->last_evals) l->bad++;
  l->last = best;
  l->last_evals = evals;
  l->n++;
}

/* The graph/cluster/env for a task. */
typedef struct fixture {
  gopt_graph *g;
  gopt_cluster *c;
  gopt_env *e;
  fx_costs k;
} fixture;

static int fixture_zoo(fixture *f, const char *spec, int ndev, int task) {
  memset(f, 0, sizeof *f);
  gopt_error err = {0};
  int rc = gopt_zoo_build(spec, &f->g, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) return rc;
  f->c = fx_cluster(ndev, 16e9, 0.25, 0);
  f->e = f->c ? fx_env(f->g, f->c, task, NULL, 1) : NULL;
  return f->e ? 0 : -1;
}
static void fixture_free(fixture *f) {
  gopt_env_free(f->e);
  gopt_cluster_free(f->c);
  gopt_graph_free(f->g);
  memset(f, 0, sizeof *f);
}

static const struct {
  const char *spec;
  int ndev, task;
} k_cases[] = {
    {"resnet50:depth=18", 4, GOPT_TASK_PLACEMENT}, {"resnet50:depth=18", 1, GOPT_TASK_FUSION},
    {"bert:layers=1", 2, GOPT_TASK_SCHEDULE},      {"bert:layers=1", 2, GOPT_TASK_MEMORY},
    {"gpt2:layers=1", 2, GOPT_TASK_JOINT},         {"wavenet:blocks=1,layers=2", 1, GOPT_TASK_MEMORY},
};
#define N_CASES (sizeof k_cases / sizeof k_cases[0])

/* Never worse than the start, budgets, re-evaluation, improvement callbacks, reproducibility. */
static void test_methods_on_tasks(void) {
  for (size_t ci = 0; ci < N_CASES; ci++) {
    fixture f;
    if (fixture_zoo(&f, k_cases[ci].spec, k_cases[ci].ndev, k_cases[ci].task)) {
      fixture_free(&f);
      continue;
    }
    size_t nv = gopt_env_nvars(f.e);
    const gopt_env_var *vars = gopt_env_vars(f.e);
    double *x = malloc(nv * sizeof *x), *x2 = malloc(nv * sizeof *x2), *x0 = malloc(nv * sizeof *x0);
    double dflt_obj;
    gopt_env_default(f.e, x0);
    dflt_obj = fx_eval(f.e, x0, NULL);
    for (int m = 0; m < N_METHODS; m++) {
      for (uint64_t seed = 1; seed <= 2; seed++) {
        const char *label = k_methods[m];
        /* start: the default (seed 1) or a random x0 (seed 2) */
        double start = dflt_obj;
        gopt_search_opts o = {0};
        o.budget_evals = 240;
        o.seed = seed;
        o.threads = 1;
        if (seed == 2) {
          fx_rng_state = 99 + (uint64_t)m;
          for (size_t i = 0; i < nv; i++)
            x0[i] = vars[i].kind == GOPT_VAR_PRIORITY ? (double)fx_below(1000) / 999.0
                                                      : (double)fx_below(vars[i].card);
          start = fx_eval(f.e, x0, NULL);
          o.x0 = x0;
        }
        improve_log il = {0};
        o.on_improve = on_improve;
        o.user = &il;
        gopt_search_result r1, r2;
        double b1 = fx_run(label, f.e, &o, x, &r1);
        CHECK_MSG(b1 <= start, "%s on %s task %d seed %llu: %.17g worse than start %.17g", label,
                  k_cases[ci].spec, k_cases[ci].task, (unsigned long long)seed, b1, start);
        CHECK_MSG(r1.evals <= o.budget_evals, "%s: %llu evals, budget %llu", label,
                  (unsigned long long)r1.evals, (unsigned long long)o.budget_evals);
        CHECK_MSG(r1.evals >= o.budget_evals - 1 || strcmp(label, "local") == 0 ||
                      strcmp(label, "anneal") == 0 || strcmp(label, "gibbs") == 0,
                  "%s: stopped at %llu evals", label, (unsigned long long)r1.evals);
        CHECK(r1.interrupted == 0 && r1.optimal == 0);
        CHECK_MSG(il.bad == 0 && il.n >= 1 && il.last == b1, "%s: on_improve sequence wrong", label);
        double re = fx_eval(f.e, x, NULL);
        CHECK_MSG(re == b1, "%s: best re-evaluates to %.17g, reported %.17g", label, re, b1);
        /* same seed, threads 2: bitwise the same */
        o.threads = 2;
        o.on_improve = NULL;
        double b2 = fx_run(label, f.e, &o, x2, &r2);
        CHECK_MSG(b2 == b1 && r2.evals == r1.evals && memcmp(x, x2, nv * sizeof *x) == 0,
                  "%s on %s: threads 2 differs (%.17g vs %.17g, %llu vs %llu evals)", label,
                  k_cases[ci].spec, b2, b1, (unsigned long long)r2.evals, (unsigned long long)r1.evals);
        /* and again at 1 thread */
        o.threads = 1;
        b2 = fx_run(label, f.e, &o, x2, &r2);
        CHECK_MSG(b2 == b1 && memcmp(x, x2, nv * sizeof *x) == 0, "%s: repeat differs", label);
        if (seed == 1)
          fprintf(stderr, "  %-6s %-28s task %d: start %.6g -> %.6g (%.2f%%) in %llu evals, %.3f s\n",
                  label, k_cases[ci].spec, k_cases[ci].task, start, b1, 100 * (start - b1) / start,
                  (unsigned long long)r1.evals, r1.seconds);
      }
      gopt_env_default(f.e, x0);
    }
    free(x);
    free(x2);
    free(x0);
    fixture_free(&f);
  }
}

/* The searches do work: each of the 5 methods, on its own, improves the default within 240
 * evaluations on the memory task over 2 devices, on fusion and on the joint task (instances where
 * every method can improve; asserted per method, not as a count over methods). */
static void test_methods_improve(void) {
  const struct {
    const char *spec;
    int ndev, task;
  } cases[] = {{"bert:layers=1", 2, GOPT_TASK_MEMORY},
               {"resnet50:depth=18", 1, GOPT_TASK_FUSION},
               {"gpt2:layers=1", 2, GOPT_TASK_JOINT}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    fixture f;
    if (!fixture_zoo(&f, cases[ci].spec, cases[ci].ndev, cases[ci].task)) {
      size_t nv = gopt_env_nvars(f.e);
      double *x = malloc(nv * sizeof *x), *x0 = malloc(nv * sizeof *x0);
      gopt_env_default(f.e, x0);
      double start = fx_eval(f.e, x0, NULL);
      for (int m = 0; m < N_METHODS; m++) {
        gopt_search_opts o = {0};
        o.budget_evals = 240;
        o.seed = 3;
        gopt_search_result r;
        double best = fx_run(k_methods[m], f.e, &o, x, &r);
        CHECK_MSG(best < start, "%s on %s task %d: best %.17g does not improve the default %.17g",
                  k_methods[m], cases[ci].spec, cases[ci].task, best, start);
      }
      free(x);
      free(x0);
    }
    fixture_free(&f);
  }
}

/* Random tiny DAGs: local/anneal/brkga reach the brute-force placement optimum on easy cases
 * often; at least never worse than start on every case and seed. */
static void test_methods_tiny(void) {
  for (uint64_t seed = 1; seed <= 4; seed++) {
    fx_costs k;
    gopt_graph *g = fx_random_dag(6, seed, &k);
    gopt_cluster *c = fx_cluster(2, 1e12, 0.5, 0);
    gopt_env *e = fx_env(g, c, GOPT_TASK_PLACEMENT, &k, 1);
    if (e) {
      double brute = fx_brute_placement(e, 0, NULL);
      size_t nv = gopt_env_nvars(e);
      double *x = malloc(nv * sizeof *x);
      for (int m = 0; m < N_METHODS; m++) {
        gopt_search_opts o = {0};
        o.budget_evals = 400;
        o.seed = seed;
        gopt_search_result r;
        double b = fx_run(k_methods[m], e, &o, x, &r);
        CHECK(b >= brute);
        /* 64 placements, 400 evaluations: random, local search (restarts) and brkga find the
         * optimum; annealing and Gibbs sampling may settle in another mode */
        int must = strcmp(k_methods[m], "anneal") && strcmp(k_methods[m], "gibbs");
        CHECK_MSG(b == brute || !must, "%s seed %llu: %.17g, optimum %.17g", k_methods[m],
                  (unsigned long long)seed, b, brute);
      }
      free(x);
    }
    gopt_env_free(e);
    gopt_cluster_free(c);
    gopt_graph_free(g);
  }
}

typedef struct stop_ctx {
  uint64_t n, at;
} stop_ctx;
static void stop_after(const double *x, const gopt_env_result *r, void *user) {
  stop_ctx *s = user;
  if (++s->n == s->at) gopt_search_request_stop();
}

static void test_stop_and_time(void) {
  fixture f;
  if (fixture_zoo(&f, "resnet50:depth=18", 4, GOPT_TASK_PLACEMENT)) {
    fixture_free(&f);
    return;
  }
  size_t nv = gopt_env_nvars(f.e);
  double *x = malloc(nv * sizeof *x), *x0 = malloc(nv * sizeof *x0);
  gopt_env_default(f.e, x0);
  double start = fx_eval(f.e, x0, NULL);
  for (int m = 0; m < N_METHODS; m++) {
    stop_ctx s = {0, 50};
    gopt_search_opts o = {0};
    o.budget_evals = 1000000;
    o.threads = 2;
    o.on_sample = stop_after;
    o.user = &s;
    gopt_search_result r;
    gopt_search_clear_stop();
    double b = fx_run(k_methods[m], f.e, &o, x, &r);
    gopt_search_clear_stop();
    CHECK_MSG(r.interrupted == 1, "%s: not interrupted", k_methods[m]);
    /* promptly: within one batch (random 64, brkga population 100, gibbs one variable) */
    CHECK_MSG(r.evals <= 50 + 100, "%s: %llu evals after the stop", k_methods[m],
              (unsigned long long)r.evals);
    CHECK(b <= start);
    CHECK(fx_eval(f.e, x, NULL) == b);
  }
  /* a stop requested before the run: only the start point is evaluated */
  gopt_search_request_stop();
  gopt_search_opts o = {0};
  o.budget_evals = 1000;
  gopt_search_result r;
  double b = fx_run("anneal", f.e, &o, x, &r);
  gopt_search_clear_stop();
  CHECK(r.interrupted == 1 && r.evals == 1 && b == start);
  /* time budget only: the run ends by itself (not interrupted) with a valid best; how long it
   * took is not asserted (no wall-clock checks; budgets elsewhere are in evaluations) */
  for (int m = 0; m < N_METHODS; m++) {
    gopt_search_opts ot = {0};
    ot.budget_seconds = 0.05;
    ot.threads = 2;
    b = fx_run(k_methods[m], f.e, &ot, x, &r);
    CHECK(r.interrupted == 0 && b <= start && r.evals >= 1);
    CHECK(fx_eval(f.e, x, NULL) == b);
  }
  /* no budget at all: refused */
  gopt_search_opts on = {0};
  gopt_error err = {0};
  CHECK(gopt_search_run("random", f.e, &on, x, &r, &err) == GOPT_EINVAL && strstr(err.msg, "budget"));
  /* a bad start point: refused naming the variable */
  x0[3] = 7;
  on.budget_evals = 10;
  on.x0 = x0;
  CHECK(gopt_search_run("random", f.e, &on, x, &r, &err) == GOPT_EINVAL && strstr(err.msg, "variable 3"));
  /* progress line (stderr) does not change the result */
  gopt_search_opts op = {0};
  op.budget_evals = 200;
  op.progress = 1;
  double bp = fx_run("brkga", f.e, &op, x, &r);
  op.progress = 0;
  CHECK(fx_run("brkga", f.e, &op, x, &r) == bp);
  free(x);
  free(x0);
  fixture_free(&f);
}

static void test_brkga_decode(void) {
  fixture f;
  if (fixture_zoo(&f, "gpt2:layers=1", 3, GOPT_TASK_JOINT)) {
    fixture_free(&f);
    return;
  }
  size_t nv = gopt_env_nvars(f.e);
  const gopt_env_var *v = gopt_env_vars(f.e);
  double *keys = malloc(nv * sizeof *keys), *a = malloc(nv * sizeof *a), *b = malloc(nv * sizeof *b);
  int kinds[3] = {0, 0, 0};
  for (size_t i = 0; i < nv; i++) kinds[v[i].kind]++;
  CHECK(kinds[GOPT_VAR_DEVICE] > 0 && kinds[GOPT_VAR_PRIORITY] > 0 && kinds[GOPT_VAR_FUSE] > 0);
  fx_rng_state = 5;
  for (int rep = 0; rep < 50; rep++) {
    for (size_t i = 0; i < nv; i++) keys[i] = (double)(fx_next() >> 11) * 0x1.0p-53;
    if (rep == 0)
      for (size_t i = 0; i < nv; i++) keys[i] = 1.0; /* the upper edge */
    if (rep == 1)
      for (size_t i = 0; i < nv; i++) keys[i] = 0.0;
    search_brkga_decode(v, nv, keys, a);
    search_brkga_decode(v, nv, keys, b);
    CHECK(memcmp(a, b, nv * sizeof *a) == 0);
    int ok = 1;
    for (size_t i = 0; i < nv; i++) {
      if (v[i].kind == GOPT_VAR_PRIORITY) ok &= a[i] == keys[i];
      else if (v[i].kind == GOPT_VAR_FUSE) ok &= a[i] == (keys[i] > 0.5 ? 1.0 : 0.0);
      else ok &= a[i] == floor(a[i]) && a[i] >= 0 && a[i] < v[i].card &&
                 (rep == 0 ? a[i] == v[i].card - 1 : a[i] == floor(keys[i] * v[i].card));
    }
    CHECK_MSG(ok, "decode rep %d: bad value", rep);
    /* decoded vectors are valid decisions */
    gopt_env_result r;
    CHECK(isfinite(fx_eval(f.e, a, &r)));
  }
  /* encode(x) decodes back to x (the start point enters the first population unchanged) */
  gopt_env_default(f.e, a);
  search_brkga_encode(v, nv, a, keys);
  search_brkga_decode(v, nv, keys, b);
  CHECK(memcmp(a, b, nv * sizeof *a) == 0);
  free(keys);
  free(a);
  free(b);
  fixture_free(&f);
}


static void test_gibbs_samples(void) {
  fixture f;
  if (fixture_zoo(&f, "resnet50:depth=18", 1, GOPT_TASK_FUSION)) {
    fixture_free(&f);
    return;
  }
  size_t nv = gopt_env_nvars(f.e);
  sample_log l = {0, 400, nv, NULL, NULL};
  l.xs = malloc(l.cap * nv * sizeof *l.xs);
  l.obj = malloc(l.cap * sizeof *l.obj);
  double *x = malloc(nv * sizeof *x);
  gopt_search_opts o = {0};
  o.budget_evals = 101;
  o.seed = 7;
  o.on_sample = log_sample;
  o.user = &l;
  gopt_search_result r;
  fx_run("gibbs", f.e, &o, x, &r);
  /* first sample: the start; then per visited FUSE variable i its 2 choices, consecutive,
   * differing only in variable i (the current one is reported from cache, not re-evaluated);
   * a sweep visits every variable once, in a shuffled order */
  CHECK(nv > 10 && nv < 100);
  CHECK(l.n == 1 + 2 * 100);
  int ok = 1;
  unsigned char *seen = calloc(nv, 1);
  size_t distinct = 0;
  for (size_t s = 0; s + 1 < 100 && ok; s++) {
    const double *a = l.xs + (1 + 2 * s) * nv, *b = a + nv;
    size_t diff = 0, at = 0;
    for (size_t i = 0; i < nv; i++)
      if (a[i] != b[i]) {
        diff++;
        at = i;
      }
    ok &= diff == 1 && a[at] == 0 && b[at] == 1;
    if (ok && s < nv && !seen[at]) {
      seen[at] = 1;
      distinct++;
    }
  }
  CHECK_MSG(ok, "gibbs samples are not per-variable choice pairs");
  CHECK_MSG(distinct == nv, "the first sweep visited %zu of %zu variables", distinct, nv);
  free(seen);
  for (size_t s = 0; s < l.n; s += 37)
    CHECK_MSG(fx_eval(f.e, l.xs + s * nv, NULL) == l.obj[s], "sample %zu cost wrong", s);
  CHECK(r.evals == 101);
  free(l.xs);
  free(l.obj);
  free(x);
  fixture_free(&f);
}

int main(void) {
  gopt_search_clear_stop();
  test_brkga_decode();
  test_gibbs_samples();
  test_methods_tiny();
  test_methods_on_tasks();
  test_methods_improve();
  test_stop_and_time();
  return check_exit("test_search_methods");
}
