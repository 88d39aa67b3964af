/* pass_env.c: pass ordering as an environment (gopt/passes.h): the state is the current graph and
 * the history of passes, an action is the next pass or STOP, the reward CompilerGym's normalised
 * cost reduction (instruction count or simulated step time). The searches (pass_search.c) and the
 * learned agent step it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/device.h"
#include "gopt/hlo.h"
#include "gopt/passes.h"
#include "gopt/sim.h"
#include "passes/pass_env_internal.h"

struct gopt_pass_env {
  gopt_pass_env_opts o;
  gopt_cluster *cluster;
  gopt_graph *g0, *g;       /* initial and current graph */
  double c0, c_base, c, scale;
  int *hist;                /* [max_steps] */
  size_t n_hist;
  int done;
  int *applied;             /* [passes] */
  double *last;             /* [passes] */
  uint64_t evals;
};

int gopt_pass_env_measure(const gopt_pass_env *e, const gopt_graph *g, double *cost, size_t *ops,
                          double *step_time, gopt_error *err) {
  size_t n = gopt_hlo_instruction_count(g);
  double t = 0;
  if (step_time || e->o.objective == GOPT_PASS_OBJ_TIME) {
    gopt_sim *s = NULL;
    int rc = gopt_sim_new(g, e->cluster, NULL, &s, err);
    gopt_sim_state *st = rc ? NULL : gopt_sim_state_new(s);
    gopt_sim_result r;
    if (!rc && !st) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    if (!rc) rc = gopt_sim_evaluate(st, &r, err);
    if (!rc) t = r.step_time;
    gopt_sim_state_free(st);
    gopt_sim_free(s);
    if (rc) return rc;
  }
  if (ops) *ops = n;
  if (step_time) *step_time = t;
  if (cost) *cost = e->o.objective == GOPT_PASS_OBJ_TIME ? t : (double)n;
  return 0;
}

int pass_env_try(gopt_pass_env *e, const gopt_graph *g, int pass, gopt_graph **out, double *cost,
                 int *changed, gopt_error *err) {
  gopt_pass_stats st;
  *out = NULL;
  int rc = gopt_pass_run(pass, g, out, &st, err);
  e->evals++;
  if (!rc) rc = gopt_pass_env_measure(e, *out, cost, NULL, NULL, err);
  if (rc) {
    gopt_graph_free(*out);
    *out = NULL;
    return rc;
  }
  if (changed) *changed = st.rewrites > 0 || st.ops_after != st.ops_before;
  return 0;
}

int gopt_pass_env_new(const gopt_graph *g, const gopt_pass_env_opts *o, gopt_pass_env **out,
                      gopt_error *err) {
  *out = NULL;
  gopt_pass_env *e = calloc(1, sizeof *e);
  if (!e) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if (o) e->o = *o;
  if (e->o.max_steps <= 0) e->o.max_steps = 32;
  if (!e->o.cluster) e->o.cluster = "V100";
  if (!e->o.baseline) e->o.baseline = "default";
  int np = gopt_pass_count(), rc = 0;
  gopt_graph *base = NULL;
  e->hist = malloc((size_t)e->o.max_steps * sizeof *e->hist);
  e->applied = calloc((size_t)np, sizeof *e->applied);
  e->last = calloc((size_t)np, sizeof *e->last);
  e->g0 = gopt_graph_clone(g);
  if (!e->hist || !e->applied || !e->last || !e->g0) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if (e->o.objective != GOPT_PASS_OBJ_OPS && e->o.objective != GOPT_PASS_OBJ_TIME && !rc)
    rc = gopt_error_set(err, GOPT_EINVAL, "pass env: unknown objective %d", e->o.objective);
  if (!rc) rc = gopt_cluster_parse(e->o.cluster, &e->cluster, err);
  if (!rc) rc = gopt_pass_env_measure(e, e->g0, &e->c0, NULL, NULL, err);
  if (!rc) rc = gopt_pipeline_run(e->o.baseline, e->g0, &base, NULL, NULL, err);
  if (!rc) rc = gopt_pass_env_measure(e, base, &e->c_base, NULL, NULL, err);
  gopt_graph_free(base);
  if (rc) {
    gopt_pass_env_free(e);
    return rc;
  }
  e->scale = fmax(e->c0 - e->c_base, 0.05 * e->c0);
  if (!(e->scale > 0)) e->scale = 1;
  gopt_pass_env_reset(e);
  *out = e;
  return 0;
}

void gopt_pass_env_free(gopt_pass_env *e) {
  if (!e) return;
  if (e->g != e->g0) gopt_graph_free(e->g);
  gopt_graph_free(e->g0);
  gopt_cluster_free(e->cluster);
  free(e->hist);
  free(e->applied);
  free(e->last);
  free(e);
}

void gopt_pass_env_reset(gopt_pass_env *e) {
  if (e->g != e->g0) gopt_graph_free(e->g);
  e->g = e->g0;
  e->c = e->c0;
  e->n_hist = 0;
  e->done = 0;
  memset(e->applied, 0, (size_t)gopt_pass_count() * sizeof *e->applied);
  memset(e->last, 0, (size_t)gopt_pass_count() * sizeof *e->last);
}

int gopt_pass_env_step(gopt_pass_env *e, int action, double *reward, int *done, gopt_error *err) {
  if (reward) *reward = 0;
  if (e->done) return gopt_error_set(err, GOPT_EINVAL, "pass env: step after the episode ended");
  if (action == GOPT_PASS_STOP) {
    e->done = 1;
  } else {
    if (action < 0 || action >= gopt_pass_count())
      return gopt_error_set(err, GOPT_EINVAL, "pass env: no pass #%d", action);
    gopt_graph *h = NULL;
    double c = 0;
    int rc = pass_env_try(e, e->g, action, &h, &c, NULL, err);
    if (rc) return rc;
    if (reward) *reward = (e->c - c) / e->scale;
    e->applied[action]++;
    e->last[action] = e->c0 > 0 ? (c - e->c) / e->c0 : 0;
    if (e->g != e->g0) gopt_graph_free(e->g);
    e->g = h;
    e->c = c;
    e->hist[e->n_hist++] = action;
    if ((int)e->n_hist >= e->o.max_steps) e->done = 1;
  }
  if (done) *done = e->done;
  return 0;
}

const gopt_graph *gopt_pass_env_graph(const gopt_pass_env *e) { return e->g; }
size_t gopt_pass_env_history(const gopt_pass_env *e, const int **passes) {
  if (passes) *passes = e->hist;
  return e->n_hist;
}
int gopt_pass_env_done(const gopt_pass_env *e) { return e->done; }
int gopt_pass_env_max_steps(const gopt_pass_env *e) { return e->o.max_steps; }
double gopt_pass_env_cost(const gopt_pass_env *e) { return e->c; }
double gopt_pass_env_initial_cost(const gopt_pass_env *e) { return e->c0; }
double gopt_pass_env_baseline_cost(const gopt_pass_env *e) { return e->c_base; }
double gopt_pass_env_reward_scale(const gopt_pass_env *e) { return e->scale; }
int gopt_pass_env_applied(const gopt_pass_env *e, int pass) {
  return pass >= 0 && pass < gopt_pass_count() ? e->applied[pass] : 0;
}
double gopt_pass_env_last_delta(const gopt_pass_env *e, int pass) {
  return pass >= 0 && pass < gopt_pass_count() ? e->last[pass] : 0;
}
uint64_t gopt_pass_env_evals(const gopt_pass_env *e) { return e->evals; }
const gopt_graph *pass_env_initial_graph(const gopt_pass_env *e) { return e->g0; }
