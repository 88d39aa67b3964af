/* test_search_start.c: search start points and the hard memory ranking.
 *  - gopt_env_result_cmp: fitting in memory beats any over-memory result, then the lower
 *    objective; NULL last.
 *  - gopt_search_start: "default", "best" (checked against an independent pick over the default
 *    and every applicable baseline, evaluations counted), a baseline name, a decisions file,
 *    one-line errors; gopt_search_budget_after_start's arithmetic; every heuristic method run
 *    from "best" ends no worse than the best baseline.
 *  - Gibbs within a budget smaller than one sweep of a ~1,000-node graph improves on its start
 *    on every task (placement, fusion, schedule, memory, joint), from the default and from "best".
 *  - Gibbs' samples: each visited variable's choices consecutively in increasing value, the
 *    current one included, true costs, the kinds mixed in a shuffled order.
 *  - Memory limits are hard: with the memory penalty off, the all-on-one-device placement is
 *    faster than any split but over memory; every method started from a split that fits ends on
 *    a placement that fits although it saw over-memory points with a lower objective. */
#include <unistd.h>

#include "gopt/baselines.h"
#include "gopt/decisions.h"
#include "search_fixture.h"

static const char *k_methods[] = {"random", "local", "anneal", "gibbs", "brkga"};
#define N_METHODS 5

/* The reference ranking, written independently of gopt_env_result_cmp: 1 when a ranks above b. */
static int ref_better(const gopt_env_result *a, const gopt_env_result *b) {
  if (a->feasible != b->feasible) return a->feasible;
  return a->objective < b->objective;
}

static void test_cmp(void) {
  gopt_env_result fit_slow = {.objective = 2.0, .feasible = 1};
  gopt_env_result over_fast = {.objective = 1.0, .feasible = 0, .mem_over = 5};
  gopt_env_result over_faster = {.objective = 0.5, .feasible = 0, .mem_over = 9};
  gopt_env_result fit_fast = {.objective = 1.5, .feasible = 1};
  CHECK(gopt_env_result_cmp(&fit_slow, &over_fast) < 0);
  CHECK(gopt_env_result_cmp(&over_fast, &fit_slow) > 0);
  CHECK(gopt_env_result_better(&fit_slow, &over_faster));
  CHECK(!gopt_env_result_better(&over_faster, &fit_slow));
  CHECK(gopt_env_result_better(&over_faster, &over_fast)); /* among over-memory: the objective */
  CHECK(gopt_env_result_better(&fit_fast, &fit_slow));
  CHECK(gopt_env_result_cmp(&fit_fast, &fit_fast) == 0);
  CHECK(!gopt_env_result_better(&fit_fast, &fit_fast));
  CHECK(gopt_env_result_cmp(&over_fast, NULL) < 0);
  CHECK(gopt_env_result_cmp(NULL, &over_fast) > 0);
}

typedef struct fixture {
  gopt_graph *g;
  gopt_cluster *c;
  gopt_env *e;
} fixture;

static int fixture_make(fixture *f, const char *spec, int ndev, double mem, int task, double penalty) {
  memset(f, 0, sizeof *f);
  gopt_error err = {0};
  int rc = gopt_zoo_build(spec, &f->g, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) return rc;
  f->c = fx_cluster(ndev, mem, 0.25, 0);
  if (!f->c) return -1;
  gopt_env_opts eo = {task, NULL, penalty, 1};
  rc = gopt_env_new(f->g, f->c, &eo, &f->e, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return rc;
}
static void fixture_free(fixture *f) {
  gopt_env_free(f->e);
  gopt_cluster_free(f->c);
  gopt_graph_free(f->g);
  memset(f, 0, sizeof *f);
}

static int run_method(const char *m, gopt_env *e, const gopt_search_opts *o, double *x,
                      gopt_search_result *r) {
  gopt_error err = {0};
  int rc = gopt_search_run(m, e, o, x, r, &err);
  CHECK_MSG(rc == 0, "%s: %s", m, err.msg);
  return rc;
}

/* Start specs on resnet18 placement over 4 devices whose memory rules some baselines out. */
static void test_start_specs(void) {
  fixture f;
  /* 4 devices of 45 MB: resnet18 (peak ~54 MB on one device) fits only when split */
  if (fixture_make(&f, "resnet50:depth=18", 4, 45e6, GOPT_TASK_PLACEMENT, 0)) {
    fixture_free(&f);
    return;
  }
  gopt_env *e = f.e;
  size_t nv = gopt_env_nvars(e);
  double *x0 = malloc(nv * sizeof *x0), *x = malloc(nv * sizeof *x), *xb = malloc(nv * sizeof *xb);
  gopt_error err = {0};
  gopt_search_start_info info;

  /* default */
  CHECK(gopt_search_start(e, "default", x0, &info, &err) == 0);
  gopt_env_default(e, x);
  CHECK(memcmp(x, x0, nv * sizeof *x) == 0);
  CHECK(info.evals == 0 && !strcmp(info.name, "default"));
  CHECK(gopt_search_start(e, NULL, x0, &info, &err) == 0 && info.evals == 0);

  /* best: the independent pick */
  gopt_env_result rbest;
  fx_eval(e, x, &rbest);
  CHECK_MSG(!rbest.feasible, "the default should be over memory here");
  const char *best_name = "default";
  memcpy(xb, x, nv * sizeof *x);
  uint64_t n_eval = 1;
  int task = gopt_env_task(e);
  for (size_t i = 0; i < gopt_baseline_task_count(task); i++) {
    const char *name = gopt_baseline_task_name(task, i);
    if (!gopt_baseline_applicable(name, e, NULL)) continue;
    if (gopt_baseline_run(name, e, x, &err)) continue;
    gopt_env_result r;
    fx_eval(e, x, &r);
    n_eval++;
    if (ref_better(&r, &rbest)) {
      rbest = r;
      best_name = name;
      memcpy(xb, x, nv * sizeof *x);
    }
  }
  CHECK(n_eval >= 4);
  CHECK_MSG(rbest.feasible, "no baseline fits: the test cluster is too small");
  uint64_t ev0 = gopt_env_evaluations(e);
  CHECK(gopt_search_start(e, "best", x0, &info, &err) == 0);
  CHECK_EQ_INT(gopt_env_evaluations(e) - ev0, n_eval);
  CHECK_EQ_INT(info.evals, n_eval);
  CHECK_MSG(!strcmp(info.name, best_name), "best start %s, expected %s", info.name, best_name);
  CHECK(memcmp(x0, xb, nv * sizeof *x0) == 0);
  CHECK(info.evaluated && info.result.objective == rbest.objective && info.result.feasible);

  /* every heuristic from "best" ends no worse than the best baseline (hard ranking) */
  for (int m = 0; m < N_METHODS; m++) {
    gopt_search_opts o = {0};
    o.budget_evals = gopt_search_budget_after_start(200, &info);
    o.x0 = x0;
    o.seed = 3;
    gopt_search_result r;
    if (run_method(k_methods[m], e, &o, x, &r)) continue;
    CHECK_MSG(gopt_env_result_cmp(&r.best, &info.result) <= 0, "%s ended worse than start %s",
              k_methods[m], info.name);
    CHECK_MSG(r.evals + info.evals <= 200, "%s: %llu + %llu evaluations", k_methods[m],
              (unsigned long long)r.evals, (unsigned long long)info.evals);
  }

  /* a baseline by name, and the same decisions through a file */
  CHECK(gopt_search_start(e, "metis", x0, &info, &err) == 0);
  CHECK(gopt_baseline_run("metis", e, x, &err) == 0);
  CHECK(memcmp(x0, x, nv * sizeof *x) == 0 && info.evals == 0 && !strcmp(info.name, "metis"));
  char path[64];
  snprintf(path, sizeof path, "/tmp/gopt_start_%d.json", (int)getpid());
  gopt_decisions d;
  gopt_decisions_init(&d, f.g);
  CHECK(gopt_env_to_decisions(e, x, &d, &err) == 0);
  CHECK_MSG(gopt_decisions_save(&d, f.g, path, &err) == 0, "%s", err.msg);
  gopt_decisions_clear(&d);
  CHECK_MSG(gopt_search_start(e, path, x0, &info, &err) == 0, "%s", err.msg);
  CHECK(memcmp(x0, x, nv * sizeof *x) == 0 && !strcmp(info.name, path));
  remove(path);

  /* errors: one line naming the start */
  CHECK(gopt_search_start(e, "nope", x0, &info, &err) != 0);
  CHECK_MSG(strstr(err.msg, "'nope'") && !strchr(err.msg, '\n'), "%s", err.msg);
  CHECK(gopt_search_start(e, "/nonexistent/d.json", x0, &info, &err) != 0);
  CHECK_MSG(strstr(err.msg, "/nonexistent/d.json") != NULL, "%s", err.msg);
  CHECK(gopt_search_start(e, "xla", x0, &info, &err) != 0);
  CHECK_MSG(strstr(err.msg, "does not apply") != NULL, "%s", err.msg);

  /* budget arithmetic */
  gopt_search_start_info six = {.evals = 6};
  CHECK_EQ_INT(gopt_search_budget_after_start(300, &six), 294);
  CHECK_EQ_INT(gopt_search_budget_after_start(7, &six), 1);
  CHECK_EQ_INT(gopt_search_budget_after_start(3, &six), 1);
  CHECK_EQ_INT(gopt_search_budget_after_start(0, &six), 0);
  CHECK_EQ_INT(gopt_search_budget_after_start(50, NULL), 50);
  free(x0);
  free(x);
  free(xb);
  fixture_free(&f);
}

/* Evaluations one Gibbs sweep needs: every movable variable's choices but its current value. */
static uint64_t sweep_evals(const gopt_env *e) {
  const gopt_env_var *v = gopt_env_vars(e);
  uint64_t n = 0;
  for (size_t i = 0; i < gopt_env_nvars(e); i++)
    if (v[i].kind == GOPT_VAR_PRIORITY) n += 4; /* at least 4 of its up to 6 other choices */
    else if (v[i].card > 1) n += (uint64_t)v[i].card - 1;
  return n;
}

static void test_gibbs_budget(void) {
  static const struct {
    int task, ndev;
  } cases[] = {{GOPT_TASK_PLACEMENT, 4}, {GOPT_TASK_FUSION, 1}, {GOPT_TASK_SCHEDULE, 4},
               {GOPT_TASK_MEMORY, 2},    {GOPT_TASK_JOINT, 4}};
  const char *spec = "amoebanet";
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    fixture f;
    if (fixture_make(&f, spec, cases[ci].ndev, 16e9, cases[ci].task, 0)) {
      fixture_free(&f);
      continue;
    }
    size_t nv = gopt_env_nvars(f.e), live = gopt_graph_node_count(f.g);
    CHECK_MSG(live >= 900, "%s has %zu nodes", spec, live);
    double *x0 = malloc(nv * sizeof *x0), *x = malloc(nv * sizeof *x);
    for (int from = 0; from < 2; from++) {
      gopt_error err = {0};
      gopt_search_start_info info;
      CHECK(gopt_search_start(f.e, from ? "best" : "default", x0, &info, &err) == 0);
      gopt_env_result r0;
      fx_eval(f.e, x0, &r0);
      /* half a sweep at most (fusion: ~500 evaluations; schedule: 3,000 of the >= 4,400) */
      uint64_t sweep = sweep_evals(f.e), budget = sweep / 2 < 3000 ? sweep / 2 : 3000;
      gopt_search_opts o = {0};
      o.budget_evals = budget;
      o.x0 = x0;
      o.seed = 1;
      gopt_search_result r;
      if (run_method("gibbs", f.e, &o, x, &r)) continue;
      CHECK_MSG(gopt_env_result_better(&r.best, &r0), "gibbs %s from %s (%s): %.9g, start %.9g",
                gopt_task_name(cases[ci].task), from ? "best" : "default", info.name, r.best.objective,
                r0.objective);
      CHECK(r.evals <= budget);
      if (getenv("GOPT_TEST_VERBOSE"))
        fprintf(stderr, "gibbs %s from %s (%s): %llu of a sweep's %llu evaluations: %.9g -> %.9g\n",
                gopt_task_name(cases[ci].task), from ? "best" : "default", info.name,
                (unsigned long long)r.evals, (unsigned long long)sweep, r0.objective, r.best.objective);
    }
    free(x0);
    free(x);
    fixture_free(&f);
  }
}

/* Gibbs' on_sample contract: after the start, each visited variable's choices are reported
 * consecutively, in increasing value, the current one included, each with its true cost; within
 * a sweep every variable is visited once, in a shuffled order mixing the kinds. */

/* The one variable where a and b differ, or -1 (none or several). */
static long diff_at(const double *a, const double *b, size_t nv) {
  long at = -1;
  for (size_t i = 0; i < nv; i++)
    if (a[i] != b[i]) {
      if (at >= 0) return -1;
      at = (long)i;
    }
  return at;
}

static void test_gibbs_samples(void) {
  fixture f;
  if (fixture_make(&f, "gpt2:layers=1", 2, 16e9, GOPT_TASK_JOINT, 0)) {
    fixture_free(&f);
    return;
  }
  size_t nv = gopt_env_nvars(f.e);
  const gopt_env_var *vars = gopt_env_vars(f.e);
  size_t nm = 0;
  for (size_t i = 0; i < nv; i++) nm += vars[i].kind == GOPT_VAR_PRIORITY || vars[i].card > 1;
  sample_log l = {0, 4000, nv, NULL, NULL};
  l.xs = malloc(l.cap * nv * sizeof *l.xs);
  l.obj = malloc(l.cap * sizeof *l.obj);
  double *x = malloc(nv * sizeof *x);
  uint8_t *seen = calloc(nv, 1);
  gopt_search_opts o = {0};
  o.budget_evals = 2 * nm; /* under half a sweep: no variable twice */
  o.seed = 5;
  o.on_sample = log_sample;
  o.user = &l;
  gopt_search_result r;
  if (run_method("gibbs", f.e, &o, x, &r) == 0) {
    size_t s = 1, groups = 0, kinds[3] = {0, 0, 0}, in_order = 0;
    int ok = 1;
    long last_var = -1;
    while (s + 1 < l.n && ok) {
      long at = diff_at(l.xs + s * nv, l.xs + (s + 1) * nv, nv);
      ok &= at >= 0;
      if (!ok) break;
      size_t t = s + 1;
      /* a group: rows differing from its first only at `at`, in increasing value (the next group
       * starts at the sampled value, which is not above the group's last) */
      ok &= l.xs[(s + 1) * nv + at] > l.xs[s * nv + at];
      while (t < l.n && diff_at(l.xs + s * nv, l.xs + t * nv, nv) == at &&
             l.xs[t * nv + at] > l.xs[(t - 1) * nv + at])
        t++;
      size_t k = t - s;
      if (t < l.n) { /* a complete group: its size is the number of choices */
        if (vars[at].kind == GOPT_VAR_PRIORITY) ok &= k >= 3 && k <= 7;
        else ok &= k == (size_t)vars[at].card;
      }
      ok &= !seen[at];
      seen[at] = 1;
      kinds[vars[at].kind]++;
      in_order += last_var >= 0 && at > last_var;
      last_var = at;
      groups++;
      s = t;
    }
    CHECK_MSG(ok, "gibbs samples are not per-variable choice groups (at sample %zu)", s);
    CHECK(groups > 20);
    CHECK_MSG(kinds[0] && kinds[1] && kinds[2], "kinds visited %zu %zu %zu", kinds[0], kinds[1], kinds[2]);
    CHECK_MSG(in_order < groups - 1, "variables visited in their fixed order"); /* shuffled */
    for (size_t u = 0; u < l.n; u += 17)
      CHECK_MSG(fx_eval(f.e, l.xs + u * nv, NULL) == l.obj[u], "sample %zu cost wrong", u);
    CHECK(r.evals == o.budget_evals);
  }
  free(seen);
  free(l.xs);
  free(l.obj);
  free(x);
  fixture_free(&f);
}

typedef struct over_log {
  double best_over;   /* lowest objective among over-memory samples */
} over_log;
static void log_over(const double *x, const gopt_env_result *r, void *user) {
  (void)x;
  over_log *l = user;
  if (!r->feasible && r->objective < l->best_over) l->best_over = r->objective;
}

static void test_memory_hard(void) {
  /* resnet18 on 2 devices behind a slow link: one device is fastest (no transfers) */
  double bw = fx_link_bw;
  fx_link_bw = 1e8;
  fixture big, f;
  if (fixture_make(&big, "resnet50:depth=18", 2, 1e12, GOPT_TASK_PLACEMENT, -1)) {
    fixture_free(&big);
    fx_link_bw = bw;
    return;
  }
  size_t nv = gopt_env_nvars(big.e);
  double *x0 = malloc(nv * sizeof *x0), *x = malloc(nv * sizeof *x);
  gopt_env_default(big.e, x);
  gopt_env_result one;
  fx_eval(big.e, x, &one);
  fixture_free(&big);
  /* memory for 90 % of the one-device peak: the one-device placement is over memory; the start
   * moves nodes from the end of the graph to device 1 until it fits, so single moves back lead
   * to faster placements over memory */
  if (fixture_make(&f, "resnet50:depth=18", 2, 0.9 * one.peak_mem, GOPT_TASK_PLACEMENT, -1)) goto done;
  gopt_search_start_info info;
  memset(&info, 0, sizeof info);
  gopt_env_default(f.e, x0);
  for (size_t i = nv; i-- > 0 && !info.result.feasible;) {
    x0[i] = 1;
    fx_eval(f.e, x0, &info.result);
  }
  CHECK_MSG(info.result.feasible, "no start fits");
  gopt_env_default(f.e, x);
  gopt_env_result r1;
  fx_eval(f.e, x, &r1);
  CHECK(!r1.feasible && r1.objective < info.result.objective); /* the trap exists */
  int saw_trap = 0;
  for (int m = 0; m < N_METHODS; m++) {
    over_log l = {INFINITY};
    gopt_search_opts o = {0};
    o.budget_evals = 300;
    o.x0 = x0;
    o.seed = 2;
    o.on_sample = log_over;
    o.user = &l;
    gopt_search_result r;
    if (run_method(k_methods[m], f.e, &o, x, &r)) continue;
    CHECK_MSG(r.best.feasible, "%s ended over memory (objective %.9g)", k_methods[m], r.best.objective);
    gopt_env_result re;
    fx_eval(f.e, x, &re);
    CHECK(re.feasible && re.objective == r.best.objective);
    CHECK(gopt_env_result_cmp(&r.best, &info.result) <= 0);
    saw_trap += l.best_over < r.best.objective;
    if (getenv("GOPT_TEST_VERBOSE"))
      fprintf(stderr, "%s: best %.9g, fastest over-memory %.9g\n", k_methods[m], r.best.objective,
              l.best_over);
  }
  CHECK_MSG(saw_trap >= 2, "only %d methods saw a faster over-memory point", saw_trap);
done:
  free(x0);
  free(x);
  fixture_free(&f);
  fx_link_bw = bw;
}

int main(void) {
  gopt_search_clear_stop();
  test_cmp();
  test_start_specs();
  test_memory_hard();
  test_gibbs_budget();
  test_gibbs_samples();
  return check_exit("test_search_start");
}
