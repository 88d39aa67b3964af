/* test_search_exact.c: the exact methods against brute force through the same environment.
 * Placement ILP: on random tiny DAGs (5-8 nodes) over 2 and 3 devices (identical and
 * heterogeneous devices, one shared bus or a link per pair) the ILP's best objective equals the
 * minimum over all D^n placements and is flagged optimal; with a memory capacity that rules some
 * placements out, it equals the minimum over the feasible ones. Peak memory on one device: dp
 * and the time-indexed ILP equal the minimum over every topological order (random DAGs with
 * weights, two-output nodes and graph outputs; zoo wavenet and rnnlm at their smallest), are
 * flagged optimal, and the reported best re-evaluates to the same value. Applicability: the
 * exact methods refuse large graphs and other tasks with a reason. */
#include "search_fixture.h"

static void check_reeval(gopt_env *e, const double *x, const gopt_search_result *res) {
  gopt_env_result r;
  double v = fx_eval(e, x, &r);
  CHECK_MSG(v == res->best.objective, "re-evaluated %.17g vs reported %.17g", v, res->best.objective);
}

static void test_placement_vs_brute(void) {
  int cases = 0, multi = 0;
  for (uint64_t seed = 1; seed <= 10; seed++) {
    int D = seed % 3 == 0 ? 3 : 2;
    int n = D == 3 ? 5 + (int)(seed % 2) : 5 + (int)(seed % 4);
    double hetero = (seed % 2) ? 0.5 : 0;
    int shared = (seed % 4) < 2;
    fx_costs k;
    gopt_graph *g = fx_random_dag(n, seed, &k);
    gopt_cluster *c = fx_cluster(D, 1e12, hetero, shared);
    gopt_env *e = fx_env(g, c, GOPT_TASK_PLACEMENT, &k, 1);
    if (!e) goto next;
    size_t cnt = 0;
    double brute = fx_brute_placement(e, 0, &cnt);
    size_t want = 1;
    for (int i = 0; i < n; i++) want *= (size_t)D;
    CHECK_EQ_INT(cnt, want);
    double *x = malloc(gopt_env_nvars(e) * sizeof *x);
    gopt_search_opts o = {0};
    o.seed = seed;
    o.threads = 1;
    gopt_search_result res;
    double got = fx_run("ilp", e, &o, x, &res);
    CHECK_MSG(got == brute, "seed %llu (n=%d D=%d hetero=%g shared=%d): ilp %.17g brute %.17g",
              (unsigned long long)seed, n, D, hetero, shared, got, brute);
    CHECK_MSG(res.optimal == 1, "seed %llu: not flagged optimal", (unsigned long long)seed);
    CHECK(res.interrupted == 0);
    check_reeval(e, x, &res);
    int used[3] = {0, 0, 0}, nused = 0;
    for (size_t i = 0; i < gopt_env_nvars(e); i++) used[(int)x[i]] = 1;
    for (int d = 0; d < D; d++) nused += used[d];
    multi += nused > 1;
    fprintf(stderr, "  placement seed %llu: n=%d D=%d optimum %.6g us on %d devices in %llu evals, "
            "%.2f s (brute %zu)\n", (unsigned long long)seed, n, D, got * 1e6, nused,
            (unsigned long long)res.evals, res.seconds, cnt);
    cases++;
    free(x);
  next:
    gopt_env_free(e);
    gopt_cluster_free(c);
    gopt_graph_free(g);
  }
  CHECK_EQ_INT(cases, 10);
  CHECK_MSG(multi >= 3, "only %d optima use several devices: the instances are too easy", multi);
}

/* Memory capacity that makes some placements infeasible: the ILP's answer is the best feasible. */
static void test_placement_memory(void) {
  for (uint64_t seed = 21; seed <= 24; seed++) {
    int n = 6, D = 2;
    fx_costs k;
    gopt_graph *g = fx_random_dag(n, seed, &k);
    /* capacity: 60% of everything on one device */
    double total = 0;
    for (size_t t = 0; t < g->tensors.n; t++)
      total += (double)gopt_tensor_numel(g, (int32_t)t) * 4;
    gopt_cluster *c = fx_cluster(D, 0.6 * total, 0.5, 0);
    gopt_env *e = fx_env(g, c, GOPT_TASK_PLACEMENT, &k, 1);
    if (e) {
      double brute_feasible = fx_brute_placement(e, 1, NULL);
      double *x = malloc(gopt_env_nvars(e) * sizeof *x);
      gopt_search_opts o = {0};
      o.threads = 1;
      gopt_search_result res;
      double got = fx_run("ilp", e, &o, x, &res);
      CHECK(got <= brute_feasible);
      if (res.best.feasible) {
        CHECK_MSG(got == brute_feasible, "seed %llu: ilp %.17g, best feasible %.17g",
                  (unsigned long long)seed, got, brute_feasible);
        CHECK(res.optimal == 1);
      }
      check_reeval(e, x, &res);
      free(x);
    }
    gopt_env_free(e);
    gopt_cluster_free(c);
    gopt_graph_free(g);
  }
}

static void check_memory_methods(gopt_env *e, const char *label) {
  size_t cnt = 0;
  double brute = fx_brute_orders(e, 2000000, &cnt);
  CHECK_MSG(cnt < 2000000, "%s: too many orders for brute force", label);
  double *x = malloc(gopt_env_nvars(e) * sizeof *x);
  const char *methods[] = {"dp", "ilp"};
  for (int m = 0; m < 2; m++) {
    const char *why = NULL;
    int ok = gopt_search_applicable(methods[m], e, &why);
    CHECK_MSG(ok, "%s: %s not applicable: %s", label, methods[m], why ? why : "");
    if (!ok) continue;
    gopt_search_opts o = {0};
    o.threads = 1;
    gopt_search_result res;
    double got = fx_run(methods[m], e, &o, x, &res);
    CHECK_MSG(got == brute, "%s: %s %.17g, brute force over %zu orders %.17g", label, methods[m], got,
              cnt, brute);
    CHECK_MSG(res.optimal == 1, "%s: %s not flagged optimal", label, methods[m]);
    CHECK(res.evals <= 2);
    check_reeval(e, x, &res);
  }
  fprintf(stderr, "  memory %s: optimum %.0f bytes over %zu orders\n", label, brute, cnt);
  free(x);
}

static void test_memory_vs_brute(void) {
  for (uint64_t seed = 1; seed <= 8; seed++) {
    int n = 6 + (int)(seed % 4);
    fx_costs k;
    gopt_graph *g = fx_random_dag(n, seed + 100, &k);
    gopt_cluster *c = fx_cluster(1, 1e12, 0, 0);
    gopt_env *e = fx_env(g, c, GOPT_TASK_MEMORY, &k, 1);
    char label[64];
    snprintf(label, sizeof label, "random seed %llu n=%d", (unsigned long long)seed, n);
    if (e) check_memory_methods(e, label);
    gopt_env_free(e);
    gopt_cluster_free(c);
    gopt_graph_free(g);
  }
}

static void test_memory_zoo(void) {
  const char *specs[] = {"wavenet:blocks=1,layers=1", "rnnlm:layers=1,steps=1"};
  for (int i = 0; i < 2; i++) {
    gopt_graph *g = NULL;
    gopt_error err = {0};
    int rc = gopt_zoo_build(specs[i], &g, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) continue;
    gopt_cluster *c = fx_cluster(1, 1e12, 0, 0);
    gopt_env *e = fx_env(g, c, GOPT_TASK_MEMORY, NULL, 1);
    if (e) check_memory_methods(e, specs[i]);
    gopt_env_free(e);
    gopt_cluster_free(c);
    gopt_graph_free(g);
  }
}

/* dp on a 40-node zoo graph (beyond brute force): optimal, never above the default order. */
static void test_dp_larger(void) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  int rc = gopt_zoo_build("gpt2:layers=1", &g, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) return;
  gopt_cluster *c = fx_cluster(1, 1e12, 0, 0);
  gopt_env *e = fx_env(g, c, GOPT_TASK_MEMORY, NULL, 1);
  if (e) {
    const char *why = NULL;
    int ok = gopt_search_applicable("dp", e, &why);
    CHECK_MSG(ok, "dp on gpt2:layers=1 (%zu nodes): %s", gopt_graph_node_count(g), why ? why : "");
    double *x = malloc(gopt_env_nvars(e) * sizeof *x), *x0 = malloc(gopt_env_nvars(e) * sizeof *x0);
    gopt_env_default(e, x0);
    double start = fx_eval(e, x0, NULL);
    gopt_search_opts o = {0};
    o.budget_seconds = 60;
    gopt_search_result res;
    double got = ok ? fx_run("dp", e, &o, x, &res) : NAN;
    if (ok) {
      CHECK(got <= start);
      CHECK(res.optimal == 1);
      check_reeval(e, x, &res);
      fprintf(stderr, "  dp gpt2:layers=1: default order %.0f, optimum %.0f bytes, %.2f s\n", start, got,
              res.seconds);
    }
    free(x);
    free(x0);
  }
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

/* Limits: the placement ILP on a 24-node graph with a 0.5 s budget returns on time with a valid
 * best no worse than the start; dp past its state cap (GOPT_SEARCH_DP_MAX_STATES) returns the
 * start, not flagged optimal; an evaluation budget of 1 leaves only the start. */
static void test_exact_limits(void) {
  fx_costs k;
  gopt_graph *g = fx_random_dag(24, 5, &k);
  gopt_cluster *c2 = fx_cluster(2, 1e12, 0.25, 0), *c1 = fx_cluster(1, 1e12, 0, 0);
  gopt_env *ep = fx_env(g, c2, GOPT_TASK_PLACEMENT, &k, 1), *em = fx_env(g, c1, GOPT_TASK_MEMORY, &k, 1);
  if (ep && em) {
    size_t nv = gopt_env_nvars(em) > gopt_env_nvars(ep) ? gopt_env_nvars(em) : gopt_env_nvars(ep);
    double *x = malloc(nv * sizeof *x), *x0 = malloc(nv * sizeof *x0);
    gopt_env_default(ep, x0);
    double start = fx_eval(ep, x0, NULL);
    gopt_search_opts o = {0};
    o.budget_seconds = 0.5;
    gopt_search_result res;
    double b = fx_run("ilp", ep, &o, x, &res);
    CHECK(b <= start && res.seconds < 2.0 && res.evals >= 1);
    CHECK(fx_eval(ep, x, NULL) == b);
    fprintf(stderr, "  ilp placement n=24 in 0.5 s: default %.4g us, best %.4g us, optimal %d\n",
            start * 1e6, b * 1e6, res.optimal);
    /* dp with a tiny state cap */
    gopt_env_default(em, x0);
    double mstart = fx_eval(em, x0, NULL);
    setenv("GOPT_SEARCH_DP_MAX_STATES", "50", 1);
    gopt_search_opts od = {0};
    b = fx_run("dp", em, &od, x, &res);
    unsetenv("GOPT_SEARCH_DP_MAX_STATES");
    CHECK(b == mstart && res.optimal == 0 && res.evals == 1);
    /* without the cap it is solved */
    b = fx_run("dp", em, &od, x, &res);
    CHECK(b <= mstart && res.optimal == 1);
    /* budget of one evaluation: the start only */
    od.budget_evals = 1;
    b = fx_run("dp", em, &od, x, &res);
    CHECK(b == mstart && res.evals == 1 && res.optimal == 0);
    free(x);
    free(x0);
  }
  gopt_env_free(ep);
  gopt_env_free(em);
  gopt_cluster_free(c1);
  gopt_cluster_free(c2);
  gopt_graph_free(g);
}

static void test_applicable(void) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  int rc = gopt_zoo_build("resnet50", &g, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) return;
  gopt_cluster *c1 = fx_cluster(1, 1e12, 0, 0), *c2 = fx_cluster(2, 1e12, 0, 0);
  const char *why = NULL;
  gopt_env *ep = fx_env(g, c2, GOPT_TASK_PLACEMENT, NULL, 1);
  gopt_env *em2 = fx_env(g, c2, GOPT_TASK_MEMORY, NULL, 1);
  gopt_env *em1 = fx_env(g, c1, GOPT_TASK_MEMORY, NULL, 1);
  gopt_env *ef = fx_env(g, c1, GOPT_TASK_FUSION, NULL, 1);
  if (ep && em2 && em1 && ef) {
    CHECK(!gopt_search_applicable("ilp", ep, &why) && why && strstr(why, "too large"));
    CHECK(!gopt_search_applicable("dp", ep, &why) && why && strstr(why, "memory"));
    CHECK(!gopt_search_applicable("dp", em2, &why) && why && strstr(why, "one device"));
    CHECK(!gopt_search_applicable("ilp", em2, &why) && why);
    CHECK(!gopt_search_applicable("dp", em1, &why) && why && strstr(why, "too large"));
    CHECK(!gopt_search_applicable("ilp", ef, &why) && why && strstr(why, "placement"));
    CHECK(!gopt_search_applicable("nosuch", ef, &why) && why);
    for (size_t i = 0; i < gopt_search_method_count(); i++) {
      const char *m = gopt_search_method_name(i);
      if (strcmp(m, "ilp") && strcmp(m, "dp")) CHECK(gopt_search_applicable(m, ep, &why));
    }
    CHECK_EQ_INT(gopt_search_method_count(), 11);
    CHECK(gopt_search_method_name(11) == NULL);
    /* running an inapplicable method fails with the reason */
    double *x = malloc(gopt_env_nvars(ep) * sizeof *x);
    gopt_search_opts o = {0};
    o.budget_evals = 10;
    gopt_search_result res;
    rc = gopt_search_run("dp", ep, &o, x, &res, &err);
    CHECK(rc == GOPT_EINVAL && strstr(err.msg, "does not apply"));
    rc = gopt_search_run("nosuch", ep, &o, x, &res, &err);
    CHECK(rc == GOPT_EINVAL && strstr(err.msg, "unknown method"));
    free(x);
  }
  gopt_env_free(ep);
  gopt_env_free(em2);
  gopt_env_free(em1);
  gopt_env_free(ef);
  gopt_cluster_free(c1);
  gopt_cluster_free(c2);
  gopt_graph_free(g);
}

int main(void) {
  test_placement_vs_brute();
  test_placement_memory();
  test_memory_vs_brute();
  test_memory_zoo();
  test_dp_larger();
  test_exact_limits();
  test_applicable();
  return check_exit("test_search_exact");
}
