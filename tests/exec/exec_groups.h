/* exec_groups.h: helpers shared by the host fusion group tests (test_exec_groups.c,
 * test_exec_postops.c, test_exec_pairs.c): run a graph with fusion groups and read its outputs,
 * compare two runs' float outputs, and check that the simulator on the measured host device
 * prices a grouped run as the sum of its measured steps. Include after check.h. */
#ifndef GOPT_TESTS_EXEC_GROUPS_H
#define GOPT_TESTS_EXEC_GROUPS_H

#include <math.h>

#include "gopt/costdb.h"
#include "gopt/decisions.h"
#include "gopt/device.h"
#include "gopt/exec.h"
#include "gopt/sim.h"

/* Runs g with one thread (random inputs from seed in_seed) with the groups (NULL: none) under the
 * layout mode; its first n_out outputs into out[]; returns the number of steps, -1 on error. */
static inline int groups_run(const gopt_graph *g, const int32_t *group, int layouts, uint64_t in_seed,
                             gopt_host_tensor *out, int n_out, gopt_error *err) {
  gopt_exec *x = NULL;
  gopt_exec_opts o = {.threads = 1, .seed = 1, .group = group, .layouts = layouts};
  int rc = gopt_exec_new(g, &o, &x, NULL, err);
  if (!rc) rc = gopt_exec_random_inputs(x, in_seed, err);
  if (!rc) rc = gopt_exec_run(x, err);
  for (int i = 0; !rc && i < n_out; i++) rc = gopt_exec_get_output(x, (size_t)i, &out[i], err);
  int steps = rc ? -1 : (int)gopt_exec_n_steps(x);
  gopt_exec_free(x);
  return steps;
}

/* Largest |a - b| over the float outputs a[0..n), b[0..n) (infinity when a pair's sizes differ). */
static inline double groups_max_diff(const gopt_host_tensor *a, const gopt_host_tensor *b, int n) {
  double d = 0;
  for (int i = 0; i < n; i++) {
    if (!a[i].data || !b[i].data || a[i].nbytes != b[i].nbytes) return INFINITY;
    for (size_t j = 0; j < a[i].nbytes / sizeof(float); j++)
      d = fmax(d, fabs((double)((const float *)a[i].data)[j] - ((const float *)b[i].data)[j]));
  }
  return d;
}

/* Simulates g with the groups (n_groups of them) on the measured host device pricing from db, and
 * checks that the step equals sum (the measured steps' total). */
static inline void groups_check_sim(const gopt_graph *g, gopt_costdb *db, int32_t *group, int n_groups, double sum) {
  gopt_error err = {0};
  gopt_cluster *c = NULL;
  gopt_sim *s = NULL;
  gopt_sim_state *st = NULL;
  gopt_decisions d;
  gopt_decisions_init(&d, g);
  d.group = group;
  d.n_groups = n_groups;
  gopt_sim_opts so = {.costs = GOPT_SIM_COSTS_MEASURED, .costdb = db};
  gopt_sim_result r = {0};
  CHECK(gopt_cluster_parse("host", &c, &err) == 0 && c->devices[0].measured);
  CHECK_MSG(c && gopt_sim_new(g, c, &so, &s, &err) == 0 && (st = gopt_sim_state_new(s)) &&
                gopt_sim_state_apply(st, &d, &err) == 0 && gopt_sim_evaluate(st, &r, &err) == 0,
            "%s", err.msg);
  CHECK_MSG(fabs(r.step_time - sum) <= 1e-9 + 1e-6 * sum, "simulated %g s, measured steps sum to %g s", r.step_time,
            sum);
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  gopt_cluster_free(c);
}

#endif
