/* test_pass_env.c: the pass-ordering environment and its searches (gopt/passes.h) on a hand-written
 * HLO module. The environment: rewards sum to (C0 - CT) / D, STOP and the step cap end an episode,
 * history and per-pass counters, the time objective. The searches against an independent
 * reference: the brute-force optimum over every sequence of at most 2 passes; random and genetic
 * search reach it, greedy never beats it, every reported sequence replays to its reported cost,
 * and the same seed gives the same sequence. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pass_test_util.h"
#include "gopt/hlo.h"
#include "gopt/passes.h"

static const char mod[] =
    "HloModule a\n\nENTRY e {\n"
    "  x = f32[2,3] parameter(0)\n  y = f32[2,3] parameter(1)\n"
    "  z = f32[2,3] constant({ {0,0,0}, {0,0,0} })\n  o = f32[2,3] constant({ {1,1,1}, {1,1,1} })\n"
    "  c1 = f32[2,3] constant({ {1,2,3}, {4,5,6} })\n  c2 = f32[2,3] add(c1, o)\n"
    "  a0 = f32[2,3] add(x, z)\n  a1 = f32[2,3] multiply(a0, o)\n  n1 = f32[2,3] negate(a1)\n"
    "  n2 = f32[2,3] negate(n1)\n  lg = f32[2,3] logistic(n2)\n"
    "  m = f32[2,3] maximum(lg, lg)\n  s1 = f32[2,3] add(m, y)\n  s2 = f32[2,3] add(m, y)\n"
    "  dead = f32[2,3] exponential(s1)\n  mx = f32[2,3] maximum(s1, s2)\n"
    "  r = f32[2,3] subtract(mx, c2)\n  ROOT out = f32[2,3] multiply(r, c2)\n}\n";

/* Instruction count after seq[0..n) on g. */
static size_t ops_after(const gopt_graph *g, const int *seq, size_t n) {
  gopt_graph *cur = gopt_graph_clone(g);
  for (size_t i = 0; i < n && cur; i++) {
    gopt_graph *h = NULL;
    gopt_error err = {0};
    CHECK_MSG(gopt_pass_run(seq[i], cur, &h, NULL, &err) == 0, "%s", err.msg);
    gopt_graph_free(cur);
    cur = h;
  }
  size_t c = cur ? gopt_hlo_instruction_count(cur) : 0;
  gopt_graph_free(cur);
  return c;
}

static void test_env(const gopt_graph *g) {
  gopt_error err = {0};
  gopt_pass_env *e = NULL;
  gopt_pass_env_opts o = {GOPT_PASS_OBJ_OPS, 4, NULL, NULL};
  CHECK_MSG(gopt_pass_env_new(g, &o, &e, &err) == 0, "%s", err.msg);
  if (!e) return;
  double c0 = gopt_pass_env_initial_cost(e), cb = gopt_pass_env_baseline_cost(e), d = gopt_pass_env_reward_scale(e);
  CHECK_EQ_INT(c0, gopt_hlo_instruction_count(g));
  CHECK(cb < c0);
  CHECK_NEAR(d, c0 - cb > 0.05 * c0 ? c0 - cb : 0.05 * c0, 1e-9);
  int seq[] = {gopt_pass_find("cse"), gopt_pass_find("algsimp"), gopt_pass_find("dce"), gopt_pass_find("algsimp")};
  double sum = 0, r;
  int done = 0;
  for (int i = 0; i < 4; i++) {
    CHECK(!done);
    CHECK_MSG(gopt_pass_env_step(e, seq[i], &r, &done, &err) == 0, "%s", err.msg);
    sum += r;
  }
  CHECK(done); /* the cap */
  CHECK(gopt_pass_env_step(e, seq[0], &r, &done, &err) == GOPT_EINVAL);
  CHECK_NEAR(sum, (c0 - gopt_pass_env_cost(e)) / d, 1e-12);
  CHECK_EQ_INT(gopt_pass_env_cost(e), ops_after(g, seq, 4));
  const int *h = NULL;
  CHECK_EQ_INT(gopt_pass_env_history(e, &h), 4);
  CHECK(h && !memcmp(h, seq, sizeof seq));
  CHECK_EQ_INT(gopt_pass_env_applied(e, seq[1]), 2);
  CHECK_EQ_INT(gopt_pass_env_applied(e, gopt_pass_find("call-inliner")), 0);
  CHECK(gopt_pass_env_last_delta(e, seq[0]) < 0); /* cse removed the duplicate add */
  CHECK(gopt_pass_env_evals(e) == 4);
  gopt_pass_env_reset(e);
  CHECK_EQ_INT(gopt_pass_env_cost(e), c0);
  CHECK_EQ_INT(gopt_pass_env_history(e, NULL), 0);
  CHECK(gopt_pass_env_step(e, 999, &r, &done, &err) == GOPT_EINVAL);
  CHECK(gopt_pass_env_step(e, GOPT_PASS_STOP, &r, &done, &err) == 0 && done && r == 0);
  gopt_pass_env_free(e);

  gopt_pass_env_opts ot = {GOPT_PASS_OBJ_TIME, 8, "V100", NULL};
  CHECK_MSG(gopt_pass_env_new(g, &ot, &e, &err) == 0, "%s", err.msg);
  if (!e) return;
  double t = 0;
  size_t n = 0;
  CHECK(gopt_pass_env_measure(e, g, NULL, &n, &t, &err) == 0);
  CHECK(t > 0 && n == gopt_hlo_instruction_count(g));
  CHECK_NEAR(gopt_pass_env_initial_cost(e), t, 1e-15);
  gopt_pass_env_free(e);
  gopt_pass_env_opts bad = {7, 0, NULL, NULL};
  CHECK(gopt_pass_env_new(g, &bad, &e, &err) == GOPT_EINVAL && !e);
}

static void test_search(const gopt_graph *g) {
  size_t opt = ptu_brute(g, 2);
  CHECK(opt < gopt_hlo_instruction_count(g));
  static const char *const methods[] = {"random", "genetic", "greedy"};
  for (int m = 0; m < 3; m++) {
    gopt_error err = {0};
    gopt_pass_env *e = NULL;
    gopt_pass_env_opts o = {GOPT_PASS_OBJ_OPS, 2, NULL, NULL};
    CHECK_MSG(gopt_pass_env_new(g, &o, &e, &err) == 0, "%s", err.msg);
    if (!e) return;
    gopt_pass_search_opts so = {3000, 5, 0};
    gopt_pass_search_result r1, r2;
    CHECK_MSG(gopt_pass_search(e, methods[m], &so, &r1, &err) == 0, "%s", err.msg);
    CHECK_MSG(gopt_pass_search(e, methods[m], &so, &r2, &err) == 0, "%s", err.msg);
    CHECK(r1.n <= 2 && r1.evals <= 3000);
    CHECK_EQ_INT(ops_after(g, r1.seq, r1.n), (size_t)r1.cost);
    CHECK(r1.n == r2.n && !memcmp(r1.seq, r2.seq, r1.n * sizeof *r1.seq));
    if (m < 2) CHECK_MSG((size_t)r1.cost == opt, "%s: %g, optimum %zu", methods[m], r1.cost, opt);
    else CHECK((size_t)r1.cost >= opt && r1.cost < gopt_pass_env_initial_cost(e));
    gopt_pass_search_result_free(&r1);
    gopt_pass_search_result_free(&r2);
    gopt_pass_env_free(e);
  }
  gopt_pass_env *e = NULL;
  gopt_pass_search_result r;
  gopt_error err = {0};
  CHECK(gopt_pass_env_new(g, NULL, &e, NULL) == 0);
  CHECK(gopt_pass_search(e, "annealing", NULL, &r, &err) == GOPT_EINVAL && strstr(err.msg, "annealing"));
  gopt_pass_env_free(e);
  gopt_pass_search_result_free(NULL);
}

static void test_pipelines(const gopt_graph *g) {
  gopt_graph *a = NULL, *b = NULL;
  gopt_error err = {0};
  CHECK(gopt_pipeline_run("default", g, &a, NULL, NULL, &err) == 0);
  CHECK(gopt_pipeline_run("default-gpu", g, &b, NULL, NULL, &err) == 0);
  CHECK(a && b && gopt_hlo_instruction_count(a) < gopt_hlo_instruction_count(g));
  CHECK(b && gopt_hlo_instruction_count(b) < gopt_hlo_instruction_count(g));
  gopt_graph_free(a);
  gopt_graph_free(b);
}

int main(void) {
  gopt_graph *g = load(mod);
  if (g) {
    test_env(g);
    test_search(g);
    test_pipelines(g);
  }
  gopt_graph_free(g);
  return check_exit("test_pass_env");
}
