/* cli_history.c: recording task-command runs in the run history (gopt/history.h) unless
 * --no-history or GOPT_HISTORY=0; a failure to record is a warning, never a failed run. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "gopt/decisions.h"
#include "gopt/history.h"

void cli_history_record(const char *cmd, const cli_task_flags *f, const gopt_env *e, const char *method,
                        const double *x, const cli_task_run *run) {
  if (f->no_history || !gopt_history_enabled() || cli_mpi_rank() != 0) return; /* rank 0 records for the job */
  const gopt_graph *g = gopt_env_graph(e);
  gopt_decisions d;
  gopt_decisions_init(&d, g);
  gopt_error err = {0};
  char *text = NULL;
  if (x && !gopt_env_to_decisions(e, x, &d, &err)) text = gopt_decisions_dumps(&d, g);
  gopt_history_record r = {0};
  r.model_hash = gopt_graph_hash(g);
  r.model = f->model;
  r.command = cmd;
  r.task = gopt_task_name(gopt_env_task(e));
  r.cluster = gopt_env_cluster(e)->name;
  r.method = method;
  r.seed = (uint64_t)f->seed;
  r.objective = run->r.objective;
  r.feasible = run->r.feasible;
  r.evaluations = run->evals;
  r.seconds = run->seconds;
  r.decisions = text;
  r.decisions_file = f->out;
  if (gopt_history_add(NULL, &r, &err))
    fprintf(stderr, "gopt %s: warning: run not recorded in the history: %s\n", cmd, err.msg);
  free(text);
  gopt_decisions_clear(&d);
}
