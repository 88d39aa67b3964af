/* cmd_optimize.c: `gopt optimize MODEL --task T --cluster C --method NAME`: runs one heuristic
 * baseline (baselines.h), search method (search.h) or the learned policy ("go", learn.h) on a
 * task environment (task.h) and reports
 * the objective, the improvement over the compiler's default heuristic, evaluations and time;
 * -o writes the decisions for `gopt simulate`. The pieces shared with `gopt compare` live in
 * cli_task.c. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gopt/baselines.h"
#include "gopt/search.h"
#include "gopt/task.h"
#include "gopt/util.h"

static const char opt_help[] =
    "usage: gopt optimize MODEL --task T --cluster C --method NAME [--budget N] [--seconds S]\n"
    "                     [--seed S] [--threads N] [--start S] [-o decisions.json] [--json] [--batch N]\n"
    "                     [--training] [--policy P.gpol] [--samples K] [--finetune N] [--alpha A] [--hops K]\n"
    "                     [--raw-decodes] [--mpi-search eval|islands]\n"
    "  --task T       placement | fusion | schedule | memory | joint (docs/TASKS.md)\n"
    "  --cluster C    a shorthand (4xV100-nvlink, V100, 8xH100, ...) or a cluster JSON file\n"
    "  --method NAME  a baseline (single, round_robin, metis, expert, m_etf, no_fusion, xla, tvm,\n"
    "                 bfs, dfs, critical_path, mem_greedy, or several joined by '+') or a search\n"
    "                 method (random, local, anneal, gibbs, brkga, brkga-regal, brkga-tuned, khop,\n"
    "                 guided, ilp, dp), go, the learned policy, or regal, brkga-regal sampling from\n"
    "                 a learned policy (REGAL)\n"
    "  --brkga P,E,M,B  brkga, brkga-regal, brkga-tuned, regal: population, elite and mutant\n"
    "                 fractions, elite bias (e.g. 50,0.2,0.1,0.7; 0 keeps a default)\n"
    "  --policy P     go, regal: the policy file (default: the shipped policies/<task>.gpol,\n"
    "                 policies/<task>_regal.gpol); guided: the local advantage model (default:\n"
    "                 policies/<task>_localadv.gpol)\n"
    CLI_HELP_GUIDED_GO
    "  --finetune N   go: fine-tune the policy on this graph for N evaluations (PPO)\n"
    "  --budget N     evaluations for a search method, its start's included (default 1000 unless\n"
    "                 --seconds is given)\n"
    "  --start S      where a search method starts: best (default: the best of the default and the\n"
    "                 task's baselines, their evaluations counted in the budget), default, a\n"
    "                 baseline name, a decisions file, or history (the best decisions recorded\n"
    "                 for this model, cluster and task)\n"
    "  --no-history   do not record the run in the history (also GOPT_HISTORY=0; gopt history)\n"
    "  --seconds S    time limit for a search method;  --seed S  its seed (default 0)\n"
    "  --threads N    threads for batched evaluation (default: all)\n"
    "  -o FILE        write the decisions (gopt simulate --decisions FILE reproduces the objective)\n"
    "  --json         print one JSON object\n"
    "  --mpi-search M under mpirun -np P (docs/SCALING.md): eval (default) runs one search whose\n"
    "                 batches the ranks share: bitwise the one-process result, the evaluations of\n"
    "                 random, brkga and regal divided; the methods that evaluate one point at a\n"
    "                 time (local, anneal, gibbs, khop, guided) run whole on every rank.\n"
    "                 islands: every rank searches its share of the budget with its own seeds and\n"
    "                 the best migrates every GOPT_MPI_MIGRATE evaluations (faster, not always as good)\n"
    "  Ctrl-C stops a search and keeps its best so far (under mpirun too: rank 0 prints it).\n";

/* Appends [evaluations + offset, best] to the curve (a JSON array in user). */
typedef struct opt_curve {
  json_t *a;
  uint64_t offset;
} opt_curve;
static void on_improve(uint64_t evals, double seconds, double best, void *user) {
  (void)seconds;
  opt_curve *c = user;
  json_t *p = json_array();
  json_array_append_new(p, json_integer((json_int_t)(evals + c->offset)));
  json_array_append_new(p, json_real(best));
  json_array_append_new(c->a, p);
}

int cli_optimize(int argc, char **argv) {
  cli_task_flags f;
  memset(&f, 0, sizeof f);
  const char *method = NULL;
  const cli_task_extra extra[] = {{"--method", &method}, {"-o", &f.out}};
  int task;
  int arc = cli_task_args("optimize", opt_help, argc, argv, extra, sizeof extra / sizeof extra[0], &f,
                          &task);
  if (arc >= 0) return arc;
  if (!method) return cli_usage_error("optimize", "missing --method (a baseline, a search method or go)");
  char list[1024];
  int kind = cli_task_method_kind(method);
  if (!kind)
    return cli_usage_error("optimize", "--method: unknown method '%s' (%s)", method,
                           cli_task_methods_text(task, list, sizeof list));

  int rc = 1;
  gopt_error err = {0};
  gopt_cluster *c = NULL;
  gopt_graph *g = NULL;
  gopt_env *e = NULL;
  gopt_env_ws *w = NULL;
  double *x = NULL, *xd = NULL;
  gopt_decisions d;
  memset(&d, 0, sizeof d);
  cli_task_start start;
  memset(&start, 0, sizeof start);
  opt_curve cv = {json_array(), 0}; /* the search's curve: [[evaluations, best], ...] */
  if (cli_task_env("optimize", &f, task, &c, &g, &e)) goto done;
  const char *why = NULL;
  if (!cli_task_applicable(method, e, &why)) {
    rc = cli_task_not_applicable("optimize", method, f.task, why);
    goto done;
  }
  size_t nv = gopt_env_nvars(e);
  x = calloc(nv + 1, sizeof *x);
  xd = calloc(nv + 1, sizeof *xd);
  w = gopt_env_ws_new(e);
  if (!x || !xd || !w) {
    fprintf(stderr, "gopt optimize: out of memory\n");
    goto done;
  }
  gopt_env_result rd;
  if (cli_task_default("optimize", e, w, xd, &rd)) goto done;
  if (CLI_METHOD_SEARCHES(kind) && (rc = cli_task_start_resolve("optimize", &f, e, &start))) goto done;
  rc = 1;
  gopt_search_opts so;
  cli_task_search_opts(&f, isatty(STDERR_FILENO), &so);
  so.on_improve = on_improve;
  so.user = &cv;
  cv.offset = start.info.evals;
  cli_task_run run;
  cli_task_sigint(1);
  int mrc = cli_task_run_method(method, e, &f, &so, CLI_METHOD_SEARCHES(kind) ? &start : NULL, x, &run, &err);
  cli_task_sigint(0);
  if (mrc) {
    fprintf(stderr, "gopt optimize: %s\n", err.msg);
    goto done;
  }
  if (f.out) {
    if (gopt_env_to_decisions(e, x, &d, &err) || gopt_decisions_save(&d, g, f.out, &err)) {
      fprintf(stderr, "gopt optimize: %s\n", err.msg);
      goto done;
    }
  }
  cli_history_record("optimize", &f, e, method, x, &run);
  double impr = rd.objective > 0 ? 100.0 * (rd.objective - run.r.objective) / rd.objective : 0;
  if (f.json) {
    json_t *o = cli_task_json_head(&f, g, c);
    json_object_set_new(o, "method", json_string(method));
    json_object_set_new(o, "kind", json_string(kind == CLI_METHOD_SEARCH    ? "search"
                                               : kind != CLI_METHOD_BASELINE ? "learned"
                                                                            : "baseline"));
    json_object_set_new(o, "objective", json_real(run.r.objective));
    json_object_set_new(o, "objective_unit", json_string(task == GOPT_TASK_MEMORY ? "bytes" : "seconds"));
    json_object_set_new(o, "default_objective", json_real(rd.objective));
    json_object_set_new(o, "improvement_pct", json_real(impr));
    json_object_set_new(o, "step_time_s", json_real(run.r.step_time));
    json_object_set_new(o, "peak_mem_bytes", json_real(run.r.peak_mem));
    json_object_set_new(o, "mem_over_bytes", json_real(run.r.mem_over));
    json_object_set_new(o, "feasible", json_boolean(run.r.feasible));
    json_object_set_new(o, "evaluations", json_integer((json_int_t)run.evals));
    json_object_set_new(o, "seconds", json_real(run.seconds));
    json_object_set_new(o, "repaired", json_integer((json_int_t)run.repaired));
    json_object_set_new(o, "interrupted", json_boolean(run.interrupted));
    json_object_set_new(o, "optimal", json_boolean(run.optimal));
    json_object_set_new(o, "seed", json_integer(f.seed));
    if (CLI_METHOD_SEARCHES(kind)) {
      json_object_set_new(o, "start", json_string(start.info.name));
      json_object_set_new(o, "start_evaluations", json_integer((json_int_t)start.info.evals));
    }
    if (kind != CLI_METHOD_BASELINE) json_object_set_new(o, "curve", json_incref(cv.a));
    if (kind == CLI_METHOD_LEARNED || kind == CLI_METHOD_GUIDED) {
      char pp[4096];
      gopt_error perr = {0};
      if (!cli_task_policy_path(&f, task, method, pp, sizeof pp, &perr)) json_object_set_new(o, "policy", json_string(pp));
      if (kind == CLI_METHOD_LEARNED) json_object_set_new(o, "finetune_evaluations", json_integer((json_int_t)f.finetune));
    }
    if (f.out) json_object_set_new(o, "decisions", json_string(f.out));
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(o);
  } else {
    char b1[64], b2[64];
    printf("model %s: %zu nodes, %s task on %s, method %s\n", f.model, gopt_graph_node_count(g), f.task,
           c->name, method);
    printf("objective %s (default heuristic %s): %.2f%% %s\n", cli_task_fmt(task, run.r.objective, b1, sizeof b1),
           cli_task_fmt(task, rd.objective, b2, sizeof b2), fabs(impr), impr >= 0 ? "better" : "worse");
    printf("step time %.4f ms, peak memory %.3f MB, %s", run.r.step_time * 1e3, run.r.peak_mem / 1e6,
           run.r.feasible ? "feasible" : "INFEASIBLE (over memory)");
    if (run.repaired) printf(", %zu fusion bits repaired", run.repaired);
    if (CLI_METHOD_SEARCHES(kind)) printf("\nstarted from %s", start.info.name);
    if (kind == CLI_METHOD_GUIDED) printf(" (brkga-regal sampling from the REGAL policy)");
    if (kind == CLI_METHOD_LEARNED) printf("\n%s", f.finetune ? "fine-tuned policy" : "zero-shot policy");
    printf("\n%llu evaluations, %.3f s%s%s\n", (unsigned long long)run.evals, run.seconds,
           run.interrupted ? " (interrupted: best so far)" : "", run.optimal ? ", proven optimal" : "");
    if (f.out) printf("decisions written to %s\n", f.out);
  }
  rc = 0;
done:
  json_decref(cv.a);
  cli_task_start_free(&start);
  gopt_decisions_clear(&d);
  gopt_env_ws_free(w);
  free(x);
  free(xd);
  gopt_env_free(e);
  gopt_graph_free(g);
  gopt_cluster_free(c);
  return rc;
}
