/* test_task_delta.c: delta evaluation through the task environment, against full evaluation.
 * For every task (placement, fusion, schedule, memory, joint) on zoo graphs of ~3,000 nodes:
 * random changes of 1, 2 and 5 variables evaluated with gopt_env_evaluate_delta, moves accepted
 * or rejected at random as local search and annealing do (a rejected move is reverted: either
 * folded into the next candidate's changes or evaluated back on its own), each result compared
 * bit for bit with a fresh workspace's full evaluation of the same vector. Then the searches that
 * evaluate through gopt_env_evaluate_delta (local, anneal, gibbs) run with delta evaluation, with
 * replays to the end, and with full evaluations only: the same seed gives the same best objective,
 * the same evaluation count and the same best vector. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/ops.h"
#include "gopt/search.h"
#include "gopt/task.h"
#include "gopt/zoo.h"

static uint64_t rng_state = 0x5851f42d4c957f2dULL;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double urand(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

static int same_result(const gopt_env_result *a, const gopt_env_result *b) {
  return a->objective == b->objective && a->step_time == b->step_time && a->peak_mem == b->peak_mem &&
         a->mem_over == b->mem_over && a->feasible == b->feasible;
}

static gopt_env *open_env(const char *spec, const char *cluster, int task, gopt_graph **g,
                          gopt_cluster **c) {
  gopt_error err = {0};
  gopt_env *e = NULL;
  int rc = gopt_zoo_build(spec, g, &err);
  rc = rc ? rc : gopt_cluster_parse(cluster, c, &err);
  gopt_env_opts o = {.task = task};
  rc = rc ? rc : gopt_env_new(*g, *c, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s %s: %s", spec, cluster, err.msg);
  return rc ? NULL : e;
}

/* A new random value of variable i (a real change where the variable has more than one). */
static double new_value(const gopt_env_var *v, double cur) {
  if (v->kind == GOPT_VAR_PRIORITY) return urand();
  if (v->card < 2) return cur;
  double x = (double)(rnd() % (uint64_t)(v->card - 1));
  return x >= cur ? x + 1 : x;
}

/* Random moves of 1, 2 or 5 variables, accepted or rejected at random, each compared with a
 * fresh full evaluation. Device and priority variables are chosen 10 times as often as fusion
 * bits (a fusion change re-applies the decisions: a full evaluation either way). */
static void test_moves(const char *spec, const char *cluster, int task, int rounds) {
  rounds = CHECK_ROUNDS(rounds);
  gopt_graph *g = NULL;
  gopt_cluster *c = NULL;
  gopt_env *e = open_env(spec, cluster, task, &g, &c);
  if (!e) return;
  gopt_error err = {0};
  const size_t nv = gopt_env_nvars(e);
  const gopt_env_var *vars = gopt_env_vars(e);
  double *x = malloc(nv * sizeof *x), *old = malloc(nv * sizeof *old);
  gopt_env_ws *w = gopt_env_ws_new(e), *fresh = gopt_env_ws_new(e);
  gopt_env_result r1, r2;
  gopt_env_default(e, x);
  CHECK_EQ_INT(gopt_env_evaluate(w, x, &r1, NULL, &err), 0);
  size_t idx[16], nidx = 0; /* changes since w's last evaluation (a pending revert included) */
  int bad = 0;
  for (int it = 0; it < rounds && nv; it++) {
    static const int ks[3] = {1, 2, 5};
    int k = ks[rnd() % 3];
    size_t mv[5];
    for (int j = 0; j < k; j++) {
      size_t i;
      do i = rnd() % nv;
      while (vars[i].kind == GOPT_VAR_FUSE && rnd() % 10 != 0);
      mv[j] = i;
      old[j] = x[i];
      x[i] = new_value(&vars[i], x[i]);
      if (nidx < 16) idx[nidx++] = i;
    }
    int rc = gopt_env_evaluate_delta(w, x, idx, nidx, &r1, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    nidx = 0;
    rc = gopt_env_evaluate(fresh, x, &r2, NULL, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (!same_result(&r1, &r2)) {
      bad++;
      fprintf(stderr, "%s %s %s round %d (%d changes): delta %.17g / %.17g vs full %.17g / %.17g\n",
              spec, cluster, gopt_task_name(task), it, k, r1.step_time, r1.peak_mem, r2.step_time,
              r2.peak_mem);
    }
    if (rnd() % 2) continue; /* accepted */
    /* rejected: restore the previous values (in reverse, in case a variable moved twice) */
    for (int j = k - 1; j >= 0; j--) {
      x[mv[j]] = old[j];
      if (nidx < 16) idx[nidx++] = mv[j];
    }
    if (rnd() % 3 == 0) { /* evaluate the restored vector on its own */
      rc = gopt_env_evaluate_delta(w, x, idx, nidx, &r1, &err);
      CHECK_MSG(rc == 0, "%s", err.msg);
      nidx = 0;
      rc = gopt_env_evaluate(fresh, x, &r2, NULL, &err);
      CHECK_MSG(rc == 0, "%s", err.msg);
      if (!same_result(&r1, &r2)) {
        bad++;
        fprintf(stderr, "%s %s %s round %d: reverted delta %.17g vs full %.17g\n", spec, cluster,
                gopt_task_name(task), it, r1.step_time, r2.step_time);
      }
    }
    if (bad > 3) break;
  }
  CHECK_MSG(bad == 0, "%s %s %s: %d mismatches", spec, cluster, gopt_task_name(task), bad);
  gopt_env_ws_free(w);
  gopt_env_ws_free(fresh);
  free(x);
  free(old);
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

/* The same search, seed and budget with delta, incremental-only and full evaluation. */
static void test_search_same(const char *method, const char *spec, const char *cluster, int task,
                             uint64_t budget) {
  budget = CHECK_ROUNDS(budget);
  gopt_graph *g = NULL;
  gopt_cluster *c = NULL;
  gopt_env *e = open_env(spec, cluster, task, &g, &c);
  if (!e) return;
  const size_t nv = gopt_env_nvars(e);
  const char *why = NULL;
  if (!gopt_search_applicable(method, e, &why)) {
    fprintf(stderr, "%s not applicable: %s\n", method, why ? why : "");
    goto done;
  }
  double *xb[3];
  gopt_search_result res[3];
  for (int m = 0; m < 3; m++) {
    gopt_error err = {0};
    gopt_env_set_evaluation(e, m == 0 ? GOPT_ENV_EVAL_DELTA : m == 1 ? GOPT_ENV_EVAL_INCREMENTAL
                                                                      : GOPT_ENV_EVAL_FULL);
    xb[m] = malloc(nv * sizeof *xb[m]);
    gopt_search_opts o = {0};
    o.budget_evals = budget;
    o.seed = 42;
    o.threads = 1;
    int rc = gopt_search_run(method, e, &o, xb[m], &res[m], &err);
    CHECK_MSG(rc == 0, "%s: %s", method, err.msg);
  }
  for (int m = 1; m < 3; m++) {
    CHECK_MSG(res[m].best.objective == res[0].best.objective,
              "%s %s %s: best %.17g (delta) vs %.17g (%s)", method, spec, gopt_task_name(task),
              res[0].best.objective, res[m].best.objective, m == 1 ? "incremental" : "full");
    CHECK_MSG(res[m].evals == res[0].evals, "%s: %llu vs %llu evaluations", method,
              (unsigned long long)res[0].evals, (unsigned long long)res[m].evals);
    CHECK_MSG(memcmp(xb[m], xb[0], nv * sizeof *xb[0]) == 0, "%s %s: best vectors differ", method,
              gopt_task_name(task));
  }
  fprintf(stderr, "%s %s %s: best %.9g after %llu evaluations (delta = incremental = full)\n",
          method, spec, gopt_task_name(task), res[0].best.objective,
          (unsigned long long)res[0].evals);
  for (int m = 0; m < 3; m++) free(xb[m]);
done:
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

int main(void) {
  /* ~3,100-node graphs: GNMT (long dependency chains, long ready queues) and Inception */
  const char *graphs[2] = {"gnmt:steps=12", "inception_v3:repeat=12"};
  for (int gi = 0; gi < 2; gi++) {
    test_moves(graphs[gi], "4xV100-nvlink", GOPT_TASK_PLACEMENT, 150);
    test_moves(graphs[gi], "V100", GOPT_TASK_FUSION, 60);
    test_moves(graphs[gi], "4xV100-nvlink", GOPT_TASK_SCHEDULE, 150);
    test_moves(graphs[gi], "2xV100-nvlink", GOPT_TASK_MEMORY, 150);
    test_moves(graphs[gi], "4xV100-nvlink", GOPT_TASK_JOINT, 150);
  }
  test_moves("transformer:layers=40", "8xH100", GOPT_TASK_JOINT, 100);
  const char *methods[3] = {"local", "anneal", "gibbs"};
  for (int m = 0; m < 3; m++) {
    test_search_same(methods[m], "gnmt:steps=12", "4xV100-nvlink", GOPT_TASK_PLACEMENT, 300);
    test_search_same(methods[m], "inception_v3:repeat=12", "4xV100-nvlink", GOPT_TASK_SCHEDULE, 300);
    test_search_same(methods[m], "inception_v3:repeat=12", "4xV100-nvlink", GOPT_TASK_JOINT, 200);
  }
  return check_exit("test_task_delta");
}
