/* cmd_optimize.c: `gopt optimize MODEL --task T --cluster C --method NAME`: runs one heuristic
 * baseline (baselines.h) or search method (search.h) on a task environment (task.h) and reports
 * the objective, the improvement over the compiler's default heuristic, evaluations and time;
 * -o writes the decisions for `gopt simulate`. Also holds the pieces `gopt compare` shares
 * (method lookup, running one method, Ctrl-C handling, objective formatting). */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gopt/baselines.h"
#include "gopt/search.h"
#include "gopt/task.h"
#include "gopt/util.h"

/* ---- shared with cmd_compare.c ---------------------------------------------------------- */

typedef struct cli_task_run {
  gopt_env_result r;
  uint64_t evals;
  double seconds;
  size_t repaired;
  int interrupted, optimal;
} cli_task_run;

/* 1: a baseline (possibly composite), 2: a search method, 0: unknown. */
int cli_task_method_kind(const char *name) {
  for (size_t i = 0; i < gopt_search_method_count(); i++)
    if (!strcmp(gopt_search_method_name(i), name)) return 2;
  return gopt_baseline_known(name) ? 1 : 0;
}

/* Comma-separated names of the baselines of a task and the search methods, into buf. */
const char *cli_task_methods_text(int task, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = 0;
  for (size_t i = 0; i < gopt_baseline_task_count(task) && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", gopt_baseline_task_name(task, i));
  for (size_t i = 0; i < gopt_search_method_count() && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", gopt_search_method_name(i));
  return buf;
}

/* Whether method applies to e; *why says why not. */
int cli_task_applicable(const char *method, const gopt_env *e, const char **why) {
  if (cli_task_method_kind(method) == 2) return gopt_search_applicable(method, e, why);
  return gopt_baseline_applicable(method, e, why);
}

/* Runs a method: a baseline is one evaluation of its vector; a search method runs under so.
 * x receives the decision vector. Returns 0 or an error in err. */
int cli_task_run_method(const char *method, gopt_env *e, const gopt_search_opts *so, double *x,
                        cli_task_run *out, gopt_error *err) {
  memset(out, 0, sizeof *out);
  uint64_t ev0 = gopt_env_evaluations(e);
  double t0 = gopt_now();
  int rc;
  if (cli_task_method_kind(method) == 2) {
    gopt_search_result res;
    memset(&res, 0, sizeof res);
    rc = gopt_search_run(method, e, so, x, &res, err);
    if (rc) return rc;
    out->evals = res.evals;
    out->interrupted = res.interrupted;
    out->optimal = res.optimal;
  } else {
    rc = gopt_baseline_run(method, e, x, err);
    if (rc) return rc;
  }
  /* the reported result is always a fresh evaluation of x (and gives the repair count) */
  gopt_env_ws *w = gopt_env_ws_new(e);
  if (!w) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  gopt_env_result r;
  rc = gopt_env_evaluate(w, x, &r, &out->repaired, err);
  gopt_env_ws_free(w);
  if (rc) return rc;
  out->seconds = gopt_now() - t0;
  if (cli_task_method_kind(method) != 2) out->evals = gopt_env_evaluations(e) - ev0;
  out->r = r;
  return GOPT_OK;
}

static volatile sig_atomic_t interrupted_flag = 0;
static void on_sigint(int sig) {
  (void)sig;
  interrupted_flag = 1;
  gopt_search_request_stop();
}

/* Installs the Ctrl-C handler (stop the search, keep its best so far); returns 1 once Ctrl-C came. */
void cli_task_sigint(int install) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = install ? on_sigint : SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  if (install) {
    interrupted_flag = 0;
    gopt_search_clear_stop();
  }
}
int cli_task_interrupted(void) { return interrupted_flag != 0; }

/* Objective in its unit: milliseconds for time tasks, MB for memory. */
const char *cli_task_fmt(int task, double v, char *buf, size_t n) {
  if (task == GOPT_TASK_MEMORY) snprintf(buf, n, "%.3f MB", v / 1e6);
  else snprintf(buf, n, "%.4f ms", v * 1e3);
  return buf;
}

/* Parses the flags both commands share; returns 1 when argv[*i] was one of them, -1 on error. */
typedef struct cli_task_flags {
  const char *model, *task, *cluster, *out;
  long budget, threads, seed;
  int has_budget;
  double seconds;
  int json;
  cli_model_opts mo;
} cli_task_flags;

int cli_task_flag(const char *cmd, int argc, char **argv, int *i, cli_task_flags *f) {
  const char *a = argv[*i];
  int has = *i + 1 < argc;
  if (!strcmp(a, "--json")) {
    f->json = 1;
    return 1;
  }
  if (!strcmp(a, "--training")) {
    f->mo.training = 1;
    return 1;
  }
  if (strcmp(a, "--task") && strcmp(a, "--cluster") && strcmp(a, "--budget") && strcmp(a, "--seconds") &&
      strcmp(a, "--seed") && strcmp(a, "--threads") && strcmp(a, "--batch"))
    return 0;
  if (!has) {
    cli_usage_error(cmd, "%s needs a value", a);
    return -1;
  }
  const char *v = argv[++*i];
  if (!strcmp(a, "--task")) f->task = v;
  else if (!strcmp(a, "--cluster")) f->cluster = v;
  else if (!strcmp(a, "--budget")) {
    if (cli_parse_long(cmd, "--budget", v, 1, 1000000000L, &f->budget)) return -1;
    f->has_budget = 1;
  } else if (!strcmp(a, "--seed")) {
    if (cli_parse_long(cmd, "--seed", v, 0, 2147483647L, &f->seed)) return -1;
  } else if (!strcmp(a, "--threads")) {
    if (cli_parse_long(cmd, "--threads", v, 1, 4096, &f->threads)) return -1;
  } else if (!strcmp(a, "--batch")) {
    if (cli_parse_long(cmd, "--batch", v, 1, 1L << 30, &f->mo.batch)) return -1;
  } else {
    char *end = NULL;
    f->seconds = strtod(v, &end);
    if (!*v || *end || !(f->seconds > 0) || !isfinite(f->seconds)) {
      cli_usage_error(cmd, "--seconds: expected a positive number, got '%s'", v);
      return -1;
    }
  }
  return 1;
}

/* ---- gopt optimize ------------------------------------------------------------------------ */

static const char opt_help[] =
    "usage: gopt optimize MODEL --task T --cluster C --method NAME [--budget N] [--seconds S]\n"
    "                     [--seed S] [--threads N] [-o decisions.json] [--json] [--batch N] [--training]\n"
    "  --task T       placement | fusion | schedule | memory | joint (docs/TASKS.md)\n"
    "  --cluster C    a shorthand (4xV100-nvlink, V100, 8xH100, ...) or a cluster JSON file\n"
    "  --method NAME  a baseline (single, round_robin, metis, expert, m_etf, no_fusion, xla, tvm,\n"
    "                 bfs, dfs, critical_path, mem_greedy, or several joined by '+') or a search\n"
    "                 method (random, local, anneal, gibbs, brkga, ilp, dp)\n"
    "  --budget N     evaluations for a search method (default 1000 unless --seconds is given)\n"
    "  --seconds S    time limit for a search method;  --seed S  its seed (default 0)\n"
    "  --threads N    threads for batched evaluation (default: all)\n"
    "  -o FILE        write the decisions (gopt simulate --decisions FILE reproduces the objective)\n"
    "  --json         print one JSON object\n"
    "  Ctrl-C stops a search and keeps its best so far.\n";

int cli_optimize(int argc, char **argv) {
  cli_task_flags f;
  memset(&f, 0, sizeof f);
  const char *method = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(opt_help, stdout);
      return 0;
    }
    int k = cli_task_flag("optimize", argc, argv, &i, &f);
    if (k < 0) return 2;
    if (k) continue;
    if (!strcmp(a, "--method") || !strcmp(a, "-o")) {
      if (i + 1 >= argc) return cli_usage_error("optimize", "%s needs a value", a);
      if (!strcmp(a, "--method")) method = argv[++i];
      else f.out = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      return cli_usage_error("optimize", "unknown flag '%s' (see gopt optimize --help)", a);
    } else if (!f.model) {
      f.model = a;
    } else {
      return cli_usage_error("optimize", "unexpected argument '%s' (one MODEL)", a);
    }
  }
  if (!f.model) return cli_usage_error("optimize", "missing MODEL (see gopt optimize --help)");
  if (!f.task) return cli_usage_error("optimize", "missing --task (placement, fusion, schedule, memory, joint)");
  int task = gopt_task_from_name(f.task);
  if (task < 0)
    return cli_usage_error("optimize", "--task: unknown task '%s' (placement, fusion, schedule, memory, joint)", f.task);
  if (!f.cluster) return cli_usage_error("optimize", "missing --cluster (e.g. --cluster 4xV100-nvlink)");
  if (!method) return cli_usage_error("optimize", "missing --method (a baseline or a search method)");
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
  if (gopt_cluster_parse(f.cluster, &c, &err)) {
    fprintf(stderr, "gopt optimize: %s\n", err.msg);
    goto done;
  }
  if (!(g = cli_load_model(f.model, &f.mo))) goto done;
  gopt_env_opts eo = {.task = task, .threads = (int)f.threads};
  if (gopt_env_new(g, c, &eo, &e, &err)) {
    fprintf(stderr, "gopt optimize: %s\n", err.msg);
    goto done;
  }
  const char *why = NULL;
  if (!cli_task_applicable(method, e, &why)) {
    fprintf(stderr, "gopt optimize: method '%s' does not apply to the %s task: %s\n", method, f.task,
            why ? why : "not applicable");
    rc = 2;
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
  gopt_env_default(e, xd);
  if (gopt_env_evaluate(w, xd, &rd, NULL, &err)) {
    fprintf(stderr, "gopt optimize: default decisions: %s\n", err.msg);
    goto done;
  }
  gopt_search_opts so;
  memset(&so, 0, sizeof so);
  so.budget_evals = f.has_budget ? (uint64_t)f.budget : (f.seconds > 0 ? 0 : 1000);
  so.budget_seconds = f.seconds;
  so.seed = (uint64_t)f.seed;
  so.threads = (int)f.threads;
  so.progress = isatty(STDERR_FILENO);
  cli_task_run run;
  cli_task_sigint(1);
  int mrc = cli_task_run_method(method, e, &so, x, &run, &err);
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
  double impr = rd.objective > 0 ? 100.0 * (rd.objective - run.r.objective) / rd.objective : 0;
  if (f.json) {
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(f.model));
    json_object_set_new(o, "nodes", json_integer((json_int_t)gopt_graph_node_count(g)));
    json_object_set_new(o, "task", json_string(f.task));
    json_object_set_new(o, "cluster", json_string(c->name));
    json_object_set_new(o, "method", json_string(method));
    json_object_set_new(o, "kind", json_string(kind == 2 ? "search" : "baseline"));
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
    printf("\n%llu evaluations, %.3f s%s%s\n", (unsigned long long)run.evals, run.seconds,
           run.interrupted ? " (interrupted: best so far)" : "", run.optimal ? ", proven optimal" : "");
    if (f.out) printf("decisions written to %s\n", f.out);
  }
  rc = 0;
done:
  gopt_decisions_clear(&d);
  gopt_env_ws_free(w);
  free(x);
  free(xd);
  gopt_env_free(e);
  gopt_graph_free(g);
  gopt_cluster_free(c);
  return rc;
}
