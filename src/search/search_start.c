/* search_start.c: where a search starts (search.h, gopt_search_start): the default vector, the
 * best of the default and the task's standard baselines (ranked with gopt_env_result_cmp, so a
 * start that fits in memory wins over any over-memory one), one named baseline, a decisions
 * file, or the best decisions the run history holds for this model, cluster and task; and the evaluation budget left to the search after choosing its start. The search
 * methods and the learned optimizers share it so that "refine the best heuristic" means the same
 * thing everywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/baselines.h"
#include "gopt/decisions.h"
#include "gopt/history.h"
#include "search/search_internal.h"

uint64_t gopt_search_budget_after_start(uint64_t budget, const gopt_search_start_info *info) {
  if (budget == 0) return 0;
  uint64_t used = info ? info->evals : 0;
  return budget > used + 1 ? budget - used : 1;
}

/* "best": evaluates the default and every applicable standard baseline once (counted in
 * info->evals) and keeps the first best in the gopt_env_result_cmp ranking. */
static int start_best(gopt_env *e, double *x0, gopt_search_start_info *info, gopt_error *err) {
  const size_t nv = gopt_env_nvars(e);
  const int task = gopt_env_task(e);
  int rc = 0;
  double *x = malloc((nv + 1) * sizeof *x);
  gopt_env_ws *w = gopt_env_ws_new(e);
  if (!x || !w) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "search start 'best': out of memory");
    goto done;
  }
  gopt_env_default(e, x0);
  if ((rc = gopt_env_evaluate(w, x0, &info->result, NULL, err))) goto done;
  info->evals = 1;
  info->evaluated = 1;
  snprintf(info->name, sizeof info->name, "default");
  for (size_t i = 0; i < gopt_baseline_task_count(task); i++) {
    const char *name = gopt_baseline_task_name(task, i);
    if (!gopt_baseline_applicable(name, e, NULL)) continue;
    gopt_error berr = {0};
    int brc = gopt_baseline_run(name, e, x, &berr);
    if (brc == GOPT_ENOMEM) {
      rc = gopt_error_set(err, brc, "search start 'best': baseline '%s': %s", name, berr.msg);
      goto done;
    }
    if (brc) continue; /* a failing baseline is left out of the choice */
    gopt_env_result r;
    if ((rc = gopt_env_evaluate(w, x, &r, NULL, err))) goto done;
    info->evals++;
    if (gopt_env_result_better(&r, &info->result)) {
      info->result = r;
      memcpy(x0, x, nv * sizeof *x);
      snprintf(info->name, sizeof info->name, "%s", name);
    }
  }
done:
  gopt_env_ws_free(w);
  free(x);
  return rc;
}

/* A decisions file read onto the default vector. */
static int start_file(gopt_env *e, const char *path, double *x0, gopt_error *err) {
  gopt_decisions d;
  gopt_decisions_init(&d, gopt_env_graph(e));
  int rc = gopt_decisions_load(&d, gopt_env_graph(e), path, err);
  if (!rc) rc = gopt_env_from_decisions(e, &d, x0, err);
  gopt_decisions_clear(&d);
  return rc;
}

/* "history": the best recorded decisions for e's graph (structural hash), cluster and task. */
static int start_history(gopt_env *e, double *x0, gopt_search_start_info *info, gopt_error *err) {
  const gopt_graph *g = gopt_env_graph(e);
  const char *task = gopt_task_name(gopt_env_task(e)), *cl = gopt_env_cluster(e)->name;
  char *text = NULL, method[64] = "";
  int rc = gopt_history_best(NULL, gopt_graph_hash(g), cl, task, &text, method, sizeof method, err);
  if (rc < 0) return rc;
  if (rc == 0)
    return gopt_error_set(err, GOPT_EINVAL,
                          "start 'history': no recorded run of this model on %s for the %s task "
                          "(gopt history lists the records)", cl, task);
  gopt_decisions d;
  gopt_decisions_init(&d, g);
  rc = gopt_decisions_loads(&d, g, text, "start 'history' decisions", err);
  if (!rc) rc = gopt_env_from_decisions(e, &d, x0, err);
  gopt_decisions_clear(&d);
  free(text);
  if (!rc) snprintf(info->name, sizeof info->name, "history (%s)", method);
  return rc;
}

int gopt_search_start(gopt_env *e, const char *spec, double *x0, gopt_search_start_info *info,
                      gopt_error *err) {
  gopt_search_start_info dummy;
  if (!info) info = &dummy;
  memset(info, 0, sizeof *info);
  if (!e || !x0) return gopt_error_set(err, GOPT_EINVAL, "search start: missing argument");
  if (!spec || !*spec || !strcmp(spec, "default")) {
    gopt_env_default(e, x0);
    snprintf(info->name, sizeof info->name, "default");
    return 0;
  }
  if (!strcmp(spec, "best")) return start_best(e, x0, info, err);
  int rc;
  if (!strcmp(spec, "history")) {
    gopt_env_default(e, x0);
    rc = start_history(e, x0, info, err);
    if (!rc) rc = search_check_x(gopt_env_vars(e), gopt_env_nvars(e), x0, err);
    return rc;
  }
  if (gopt_baseline_known(spec)) {
    const char *why = NULL;
    if (!gopt_baseline_applicable(spec, e, &why))
      return gopt_error_set(err, GOPT_EINVAL, "start '%s' does not apply to the %s task: %s", spec,
                            gopt_task_name(gopt_env_task(e)), why ? why : "not applicable");
    rc = gopt_baseline_run(spec, e, x0, err);
  } else {
    FILE *f = fopen(spec, "rb");
    if (!f)
      return gopt_error_set(err, GOPT_EIO,
                            "start '%s': not default, best, a baseline name or a readable decisions file",
                            spec);
    fclose(f);
    rc = start_file(e, spec, x0, err);
  }
  if (!rc) rc = search_check_x(gopt_env_vars(e), gopt_env_nvars(e), x0, err);
  if (rc) return rc;
  snprintf(info->name, sizeof info->name, "%s", spec);
  return 0;
}
