/* cmd_compare.c: `gopt compare MODEL --task T --cluster C`: runs every applicable heuristic
 * baseline and search method on the same model, task and evaluation budget and prints one table
 * (objective, improvement over the compiler's default heuristic, evaluations, time, the searches'
 * start) and the best row in the hard memory ranking, with the learned policy "go" as a row when
 * one is found for the task; the search methods start from --start
 * (default: the best of the default and the baselines, its evaluations counted in each search's
 * budget); --json adds each search's curve; --plot writes an SVG of best objective vs evaluations
 * for the search methods, with the baselines as horizontal lines. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_compare.h"
#include "gopt/baselines.h"
#include "gopt/search.h"
#include "gopt/task.h"
#include "gopt/util.h"

static const char cmp_help[] =
    "usage: gopt compare MODEL --task T --cluster C [--budget N] [--seconds S] [--seed S]\n"
    "                    [--threads N] [--methods a,b,...] [--start S] [--json] [--plot FILE.svg] [--batch N]\n"
    "                    [--training] [--mpi-search eval|islands]\n"
    "  runs every baseline of the task and every applicable search method with the same budget\n"
    "  --budget N     evaluations per search method, its start's included (default 1000)\n"
    "  --start S      where the search methods start: best (default: the best of the default and\n"
    "                 the task's baselines, their evaluations counted in the budget), default, a\n"
    "                 baseline name, a decisions file, or history (the best decisions recorded\n"
    "                 for this model, cluster and task)\n"
    "  --no-history   do not record the run in the history (also GOPT_HISTORY=0; gopt history)\n"
    "  --methods L    comma-separated subset (baselines, composite baselines, search methods)\n"
    "  --plot F       SVG of best objective vs evaluations (search methods; baselines as lines)\n"
    "  --policy P     a learned policy: its row (go or regal, the policy's kind) replaces the shipped\n"
    "                 ones (policies/<task>.gpol, policies/<task>_regal.gpol; a row is listed as\n"
    "                 skipped when there is none); also guided's local advantage model (default:\n"
    "                 policies/<task>_localadv.gpol; guided is skipped without one)\n"
    "  --brkga P,E,M,B  population, elite and mutant fractions, elite bias of the BRKGA methods\n"
    CLI_HELP_GUIDED_GO
    "  --finetune N   go: fine-tune the policy on this graph for N evaluations (default: zero-shot)\n"
    "  Under mpirun -np P (docs/SCALING.md) the methods are spread over the ranks (method i on rank\n"
    "  i mod P, each whole). --mpi-search eval|islands instead runs every method on all ranks, one\n"
    "  after another, each search distributed as gopt optimize --mpi-search would run it (eval:\n"
    "  bitwise the one-process results). Without mpirun --mpi-search changes nothing.\n";

int cli_compare(int argc, char **argv) {
  cli_task_flags f;
  memset(&f, 0, sizeof f);
  const char *methods = NULL, *plot = NULL;
  const cli_task_extra extra[] = {{"--methods", &methods}, {"--plot", &plot}};
  int task;
  int arc = cli_task_args("compare", cmp_help, argc, argv, extra, sizeof extra / sizeof extra[0], &f,
                          &task);
  if (arc >= 0) return arc;
  cli_cmp m;
  int rc = cli_cmp_methods("compare", methods, task, &f, &m);
  if (rc) {
    cli_cmp_free(&m);
    return rc;
  }
  gopt_error err = {0};
  gopt_cluster *c = NULL;
  gopt_graph *g = NULL;
  gopt_env *e = NULL;
  rc = 1;
  if (cli_task_env("compare", &f, task, &c, &g, &e)) goto done;
  if ((rc = cli_cmp_run("compare", &f, e, &m))) goto done;
  rc = 1;
  const cli_cmp_row *rows = m.rows;
  size_t nr = m.nr, best = m.best;
  const gopt_env_result rd = m.rd;
  uint64_t budget = m.budget;
  char title[256];
  if (budget)
    snprintf(title, sizeof title, "%s: %s task on %s, %llu evaluations per search method", f.model, f.task,
             c->name, (unsigned long long)budget);
  else
    snprintf(title, sizeof title, "%s: %s task on %s, %g s per search method", f.model, f.task, c->name, f.seconds);
  if (f.json) {
    json_t *o = cli_task_json_head(&f, g, c), *jr = json_array(), *js = json_array();
    json_object_set_new(o, "budget", json_integer((json_int_t)budget));
    json_object_set_new(o, "seed", json_integer(f.seed));
    json_object_set_new(o, "objective_unit", json_string(task == GOPT_TASK_MEMORY ? "bytes" : "seconds"));
    json_object_set_new(o, "default_objective", json_real(rd.objective));
    for (size_t i = 0; i < nr; i++) {
      if (!rows[i].done) continue;
      json_t *r = json_object();
      const cli_task_run *u = &rows[i].run;
      json_object_set_new(r, "method", json_string(rows[i].name));
      json_object_set_new(r, "kind", json_string(cli_cmp_kind_name(rows[i].kind)));
      json_object_set_new(r, "objective", json_real(u->r.objective));
      json_object_set_new(r, "improvement_pct",
                          json_real(rd.objective > 0 ? 100 * (rd.objective - u->r.objective) / rd.objective : 0));
      json_object_set_new(r, "step_time_s", json_real(u->r.step_time));
      json_object_set_new(r, "peak_mem_bytes", json_real(u->r.peak_mem));
      json_object_set_new(r, "feasible", json_boolean(u->r.feasible));
      json_object_set_new(r, "evaluations", json_integer((json_int_t)u->evals));
      json_object_set_new(r, "seconds", json_real(u->seconds));
      json_object_set_new(r, "optimal", json_boolean(u->optimal));
      json_object_set_new(r, "interrupted", json_boolean(u->interrupted));
      if (CLI_METHOD_SEARCHES(rows[i].kind)) {
        json_object_set_new(r, "start", json_string(m.start.info.name));
        json_object_set_new(r, "start_evaluations", json_integer((json_int_t)m.start.info.evals));
      }
      if (rows[i].kind != CLI_METHOD_BASELINE) json_object_set_new(r, "curve", cli_cmp_curve_json(&rows[i].cv));
      json_array_append_new(jr, r);
    }
    for (size_t i = 0; i < m.nskip; i++) json_array_append_new(js, json_string(m.skipped[i]));
    json_object_set_new(o, "results", jr);
    json_object_set_new(o, "best", best < nr ? json_string(rows[best].name) : json_null());
    json_object_set_new(o, "skipped", js);
    if (plot) json_object_set_new(o, "plot", json_string(plot));
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(o);
  } else {
    char b1[64];
    printf("%s (%zu nodes)\n\n", title, gopt_graph_node_count(g));
    printf("%-28s %16s %10s %12s %10s  %-20s\n", "method", "objective", "vs default", "evaluations", "time s",
           "start");
    printf("%-28s %16s %10s %12s %10s  %-20s\n", "default heuristic", cli_task_fmt(task, rd.objective, b1, sizeof b1),
           "0.00%", "1", "-", "-");
    for (size_t i = 0; i < nr; i++) {
      if (!rows[i].done) continue;
      const cli_task_run *u = &rows[i].run;
      double impr = rd.objective > 0 ? 100 * (rd.objective - u->r.objective) / rd.objective : 0;
      printf("%-28s %16s %+9.2f%% %12llu %10.3f  %-20s%s%s%s\n", rows[i].name,
             cli_task_fmt(task, u->r.objective, b1, sizeof b1), impr, (unsigned long long)u->evals, u->seconds,
             cli_cmp_start_col(rows[i].kind, &f, &m.start), u->r.feasible ? "" : "  INFEASIBLE",
             u->optimal ? "  optimal" : "", u->interrupted ? "  interrupted" : "");
    }
    if (best < nr) printf("\nbest: %s%s\n", rows[best].name, rows[best].run.r.feasible ? "" : " (nothing fits in memory)");
    for (size_t i = 0; i < m.nskip; i++) printf("%s%s\n", i ? "         " : "\nskipped: ", m.skipped[i]);
    if (cli_task_interrupted()) printf("\ninterrupted: the remaining methods were not run\n");
  }
  if (plot && cli_mpi_rank() == 0) { /* under mpirun rank 0 writes (it has every curve) */
    cli_sbuf b = {0};
    cli_cmp_plot_svg(&b, title, task, &m, 1);
    int prc = b.oom ? gopt_error_set(&err, GOPT_ENOMEM, "--plot: out of memory")
                    : gopt_file_write_atomic(plot, b.s, b.n, &err);
    free(b.s);
    if (prc) {
      fprintf(stderr, "gopt compare: %s\n", err.msg);
      goto done;
    }
  }
  if (plot && !f.json) printf("\nplot written to %s\n", plot);
  rc = 0;
done:
  cli_cmp_free(&m);
  gopt_env_free(e);
  gopt_graph_free(g);
  gopt_cluster_free(c);
  return rc;
}
