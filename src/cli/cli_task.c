/* cli_task.c: the pieces `gopt optimize` and `gopt compare` share: the task flags and their
 * checks, method lookup, setting up the environment, evaluating the default decisions, the search
 * start (--start), running one method, Ctrl-C handling and objective formatting. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/baselines.h"
#include "gopt/learn.h"
#include "gopt/search.h"
#include "gopt/task.h"
#include "gopt/util.h"

/* 1: a baseline (possibly composite), 2: a search method, 0: unknown. */
int cli_task_method_kind(const char *name) {
  if (!strcmp(name, "go")) return CLI_METHOD_LEARNED;
  if (!strcmp(name, "regal")) return CLI_METHOD_GUIDED;
  for (size_t i = 0; i < gopt_search_method_count(); i++)
    if (!strcmp(gopt_search_method_name(i), name)) return CLI_METHOD_SEARCH;
  return gopt_baseline_known(name) ? CLI_METHOD_BASELINE : 0;
}

/* Comma-separated names of the baselines of a task and the search methods, into buf. */
const char *cli_task_methods_text(int task, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = 0;
  for (size_t i = 0; i < gopt_baseline_task_count(task) && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", gopt_baseline_task_name(task, i));
  for (size_t i = 0; i < gopt_search_method_count() && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", gopt_search_method_name(i));
  if (k < n) snprintf(buf + k, n - k, "%sgo, regal", k ? ", " : "");
  return buf;
}

/* Whether method applies to e; *why says why not. */
int cli_task_applicable(const char *method, const gopt_env *e, const char **why) {
  int kind = cli_task_method_kind(method);
  if (kind == CLI_METHOD_LEARNED) {
    if (gopt_env_nvars(e) > 0) return 1;
    if (why) *why = "the task has no decision variables on this graph";
    return 0;
  }
  if (kind == CLI_METHOD_SEARCH) return gopt_search_applicable(method, e, why);
  if (kind == CLI_METHOD_GUIDED) return gopt_search_applicable("brkga-regal", e, why);
  return gopt_baseline_applicable(method, e, why);
}

int cli_task_start_resolve(const char *cmd, const cli_task_flags *f, gopt_env *e, cli_task_start *s) {
  gopt_error err = {0};
  memset(s, 0, sizeof *s);
  s->x0 = calloc(gopt_env_nvars(e) + 1, sizeof *s->x0);
  if (!s->x0) {
    fprintf(stderr, "gopt %s: out of memory\n", cmd);
    return 1;
  }
  if (gopt_search_start(e, f->start ? f->start : "best", s->x0, &s->info, &err)) {
    fprintf(stderr, "gopt %s: --start: %s\n", cmd, err.msg);
    cli_task_start_free(s);
    return 2;
  }
  return 0;
}

void cli_task_start_free(cli_task_start *s) {
  if (!s) return;
  free(s->x0);
  s->x0 = NULL;
}

int cli_task_policy_path(const cli_task_flags *f, int task, const char *method, char *buf, size_t n,
                         gopt_error *err) {
  if (f->policy) {
    if (strlen(f->policy) >= n) return gopt_error_set(err, GOPT_EINVAL, "--policy: path too long");
    memcpy(buf, f->policy, strlen(f->policy) + 1);
    return 0;
  }
  return gopt_learn_find_policy_kind(task, method, NULL, buf, n, err);
}

/* The learned method: loads the policy and runs gopt_learn_optimize (its own result, never a
 * baseline's). */
static int run_learned(gopt_env *e, const cli_task_flags *f, const gopt_search_opts *so, double *x,
                       cli_task_run *out, gopt_error *err) {
  char path[4096];
  gopt_policy *p = NULL;
  const gopt_cluster *c = gopt_env_cluster(e);
  int cpu = 1, rc = 1;
  for (int d = 0; d < c->n_devices; d++) cpu &= !strcmp(c->devices[d].kind, "cpu");
  /* on the host target, a policy trained there (<task>_host.gpol) when one is shipped */
  if (cpu && !f->policy) rc = gopt_learn_find_policy_kind(gopt_env_task(e), "host", NULL, path, sizeof path, NULL);
  if (rc) rc = cli_task_policy_path(f, gopt_env_task(e), "go", path, sizeof path, err);
  if (!rc) rc = gopt_policy_load(path, gopt_env_task(e), &p, err);
  if (rc) return rc;
  if (strcmp(gopt_policy_kind(p), "go")) {
    rc = gopt_error_set(err, GOPT_EINVAL, "%s: a '%s' policy (use --method %s)", path, gopt_policy_kind(p),
                        gopt_policy_kind(p));
    gopt_policy_free(p);
    return rc;
  }
  gopt_learn_opt_opts lo;
  memset(&lo, 0, sizeof lo);
  lo.samples = f->has_samples ? (int)f->samples : 16;
  lo.finetune_evals = (uint64_t)f->finetune;
  lo.seed = (uint64_t)f->seed;
  lo.raw = f->raw_decodes;
  lo.on_improve = so->on_improve;
  lo.user = so->user;
  gopt_search_result res;
  memset(&res, 0, sizeof res);
  rc = gopt_learn_optimize(p, e, &lo, x, &res, err);
  gopt_policy_free(p);
  if (rc) return rc;
  out->evals = res.evals;
  out->interrupted = res.interrupted;
  return 0;
}

/* A search method ("guided": with its advantage model; "regal": brkga-regal sampling from its
 * policy) from st under so. */
static int run_search(const char *method, gopt_env *e, const cli_task_flags *f, const gopt_search_opts *so,
                      const cli_task_start *st, double *x, cli_task_run *out, gopt_error *err) {
  gopt_search_result res;
  memset(&res, 0, sizeof res);
  gopt_search_opts o = *so;
  if (st) {
    o.x0 = st->x0;
    o.budget_evals = gopt_search_budget_after_start(so->budget_evals, &st->info);
  }
  gopt_policy *p = NULL;
  gopt_regal_sampler *smp = NULL;
  int rc = 0;
  if (!strcmp(method, "regal")) {
    char path[4096];
    rc = cli_task_policy_path(f, gopt_env_task(e), "regal", path, sizeof path, err);
    rc = rc ? rc : gopt_policy_load(path, gopt_env_task(e), &p, err);
    if (!rc && (rc = gopt_regal_sampler_new(p, e, &smp, err))) gopt_error_prefix(err, "%s: ", path);
    if (!rc) gopt_regal_sampler_attach(smp, &o);
    method = "brkga-regal";
  }
  /* under mpirun (docs/SCALING.md): by default one logical search on every rank whose batch
   * evaluations are spread over the ranks (bitwise the one-process search); with --mpi-search
   * islands the stochastic methods run as islands. The exact ones (ilp, dp) run on every rank. */
  int dist = cli_mpi_size() > 1 && cli_mpi_search;
  int islands = dist && f->mpi_islands && strcmp(method, "ilp") && strcmp(method, "dp");
  if (dist) o.dist = cli_mpi_learn_dist();
  if (!rc && !strcmp(method, "guided")) /* the advantage model guides it (cmd_localadv.c) */
    rc = cli_localadv_guided(e, f, &o, x, &res, err);
  else if (!rc)
    rc = islands ? cli_mpi_island_search(method, e, &o, x, &res, err) : gopt_search_run(method, e, &o, x, &res, err);
  gopt_regal_sampler_free(smp);
  gopt_policy_free(p);
  if (rc) return rc;
  out->evals = res.evals + (st ? st->info.evals : 0);
  out->interrupted = res.interrupted;
  out->optimal = res.optimal;
  return 0;
}

int cli_task_run_method(const char *method, gopt_env *e, const cli_task_flags *f,
                        const gopt_search_opts *so, const cli_task_start *st, double *x,
                        cli_task_run *out, gopt_error *err) {
  memset(out, 0, sizeof *out);
  uint64_t ev0 = gopt_env_evaluations(e);
  double t0 = gopt_now();
  int rc;
  int kind = cli_task_method_kind(method);
  if (kind == CLI_METHOD_LEARNED) {
    if ((rc = run_learned(e, f, so, x, out, err))) return rc;
  } else if (CLI_METHOD_SEARCHES(kind)) {
    if ((rc = run_search(method, e, f, so, st, x, out, err))) return rc;
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
  if (kind == CLI_METHOD_BASELINE) out->evals = gopt_env_evaluations(e) - ev0;
  out->r = r;
  return GOPT_OK;
}

static volatile sig_atomic_t interrupted_flag = 0;
static void on_sigint(int sig) {
  (void)sig;
  interrupted_flag = 1;
  gopt_search_request_stop();
  gopt_learn_request_stop();
}

/* Installs the Ctrl-C handler (stop the search, keep its best so far); returns 1 once Ctrl-C came. */
void cli_task_sigint(int install) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = install ? on_sigint : SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  /* under mpirun: Ctrl-C on mpirun reaches the ranks as SIGTERM (SIGUSR1 when forwarded) */
  if (cli_mpi_size() > 1) {
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
  }
  if (install) {
    interrupted_flag = 0;
    gopt_search_clear_stop();
    gopt_learn_clear_stop();
  }
}
int cli_task_interrupted(void) { return interrupted_flag != 0; }

int cli_task_interrupted_agreed(void) {
  int n = cli_mpi_size(), any = cli_task_interrupted();
  if (n == 1) return any;
  int *flags = calloc((size_t)n, sizeof *flags);
  gopt_error err = {0};
  if (!flags) return 1;
  flags[cli_mpi_rank()] = any;
  if (cli_mpi_allgather(flags, sizeof *flags, 0, NULL, &err)) any = 1;
  for (int r = 0; r < n; r++) any |= flags[r];
  free(flags);
  if (any) interrupted_flag = 1;
  return any;
}

/* Objective in its unit: milliseconds for time tasks, MB for memory. */
const char *cli_task_fmt(int task, double v, char *buf, size_t n) {
  if (task == GOPT_TASK_MEMORY) snprintf(buf, n, "%.3f MB", v / 1e6);
  else snprintf(buf, n, "%.4f ms", v * 1e3);
  return buf;
}

/* Parses the flags both commands share; returns 1 when argv[*i] was one of them, -1 on error. */
int cli_task_flag(const char *cmd, int argc, char **argv, int *i, cli_task_flags *f) {
  const char *a = argv[*i];
  int has = *i + 1 < argc;
  if (!strcmp(a, "--json")) {
    f->json = 1;
    return 1;
  }
  if (!strcmp(a, "--no-history")) {
    f->no_history = 1;
    return 1;
  }
  if (!strcmp(a, "--raw-decodes")) {
    f->raw_decodes = 1;
    return 1;
  }
  if (!strcmp(a, "--mpi-search")) {
    const char *v = *i + 1 < argc ? argv[++*i] : "";
    if (strcmp(v, "eval") && strcmp(v, "islands")) {
      cli_usage_error(cmd, "--mpi-search: expected eval or islands, got '%s'", v);
      return -1;
    }
    f->mpi_islands = !strcmp(v, "islands");
    f->mpi_search_set = 1;
    return 1;
  }
  if (!strcmp(a, "--training")) {
    f->mo.training = 1;
    return 1;
  }
  if (strcmp(a, "--task") && strcmp(a, "--cluster") && strcmp(a, "--budget") && strcmp(a, "--seconds") &&
      strcmp(a, "--seed") && strcmp(a, "--threads") && strcmp(a, "--batch") && strcmp(a, "--start") &&
      strcmp(a, "--policy") && strcmp(a, "--samples") && strcmp(a, "--finetune") && strcmp(a, "--brkga") &&
      strcmp(a, "--alpha") && strcmp(a, "--hops"))
    return 0;
  if (!has) {
    cli_usage_error(cmd, "%s needs a value", a);
    return -1;
  }
  const char *v = argv[++*i];
  if (!strcmp(a, "--task")) f->task = v;
  else if (!strcmp(a, "--start")) {
    if (!*v) {
      cli_usage_error(cmd, "--start: empty (default, best, history, a baseline name or a decisions file)");
      return -1;
    }
    f->start = v;
  }
  else if (!strcmp(a, "--cluster")) f->cluster = v;
  else if (!strcmp(a, "--policy")) f->policy = v;
  else if (!strcmp(a, "--brkga")) {
    int k = 0;
    char c = 0;
    if (sscanf(v, "%lf,%lf,%lf,%lf%n%c", &f->ga[0], &f->ga[1], &f->ga[2], &f->ga[3], &k, &c) != 4 || v[k] ||
        f->ga[0] != floor(f->ga[0]) || f->ga[0] < 2 || f->ga[0] > 1e6) {
      cli_usage_error(cmd, "--brkga: expected POPULATION,ELITE,MUTANT,BIAS (e.g. 50,0.2,0.1,0.7), got '%s'", v);
      return -1;
    }
  }
  else if (!strcmp(a, "--samples")) {
    if (cli_parse_long(cmd, "--samples", v, 0, 4096, &f->samples)) return -1;
    f->has_samples = 1;
  } else if (!strcmp(a, "--finetune")) {
    if (cli_parse_long(cmd, "--finetune", v, 1, 1000000000L, &f->finetune)) return -1;
  } else if (!strcmp(a, "--hops")) {
    if (cli_parse_long(cmd, "--hops", v, 1, 1000, &f->hops)) return -1;
  } else if (!strcmp(a, "--alpha")) {
    char *end = NULL;
    f->alpha = strtod(v, &end);
    if (!*v || *end || !(f->alpha > 0) || f->alpha > 100) {
      cli_usage_error(cmd, "--alpha: expected a percentage in (0, 100], got '%s'", v);
      return -1;
    }
  }
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

int cli_task_args(const char *cmd, const char *help, int argc, char **argv, const cli_task_extra *extra,
                  size_t n_extra, cli_task_flags *f, int *task) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(help, stdout);
      return 0;
    }
    int k = cli_task_flag(cmd, argc, argv, &i, f);
    if (k < 0) return 2;
    if (k) continue;
    size_t j = 0;
    while (j < n_extra && strcmp(a, extra[j].flag)) j++;
    if (j < n_extra) {
      if (i + 1 >= argc) return cli_usage_error(cmd, "%s needs a value", a);
      *extra[j].value = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      return cli_usage_error(cmd, "unknown flag '%s' (see gopt %s --help)", a, cmd);
    } else if (!f->model) {
      f->model = a;
    } else {
      return cli_usage_error(cmd, "unexpected argument '%s' (one MODEL)", a);
    }
  }
  if (!f->model) return cli_usage_error(cmd, "missing MODEL (see gopt %s --help)", cmd);
  if (!f->task) return cli_usage_error(cmd, "missing --task (placement, fusion, schedule, memory, joint)");
  *task = gopt_task_from_name(f->task);
  if (*task < 0)
    return cli_usage_error(cmd, "--task: unknown task '%s' (placement, fusion, schedule, memory, joint)", f->task);
  if (!f->cluster) return cli_usage_error(cmd, "missing --cluster (e.g. --cluster 4xV100-nvlink)");
  return -1;
}

int cli_task_env(const char *cmd, const cli_task_flags *f, int task, gopt_cluster **c, gopt_graph **g,
                 gopt_env **e) {
  gopt_error err = {0};
  if (gopt_cluster_parse(f->cluster, c, &err)) {
    fprintf(stderr, "gopt %s: %s\n", cmd, err.msg);
    return 1;
  }
  if (!(*g = cli_load_model(f->model, &f->mo))) return 1;
  gopt_env_opts eo = {.task = task, .threads = (int)f->threads};
  if (gopt_env_new(*g, *c, &eo, e, &err)) {
    fprintf(stderr, "gopt %s: %s\n", cmd, err.msg);
    return 1;
  }
  return 0;
}

int cli_task_not_applicable(const char *cmd, const char *method, const char *task, const char *why) {
  fprintf(stderr, "gopt %s: method '%s' does not apply to the %s task: %s\n", cmd, method, task,
          why ? why : "not applicable");
  return 2;
}

int cli_task_default(const char *cmd, gopt_env *e, gopt_env_ws *w, double *x, gopt_env_result *rd) {
  gopt_error err = {0};
  gopt_env_default(e, x);
  if (gopt_env_evaluate(w, x, rd, NULL, &err)) {
    fprintf(stderr, "gopt %s: default decisions: %s\n", cmd, err.msg);
    return 1;
  }
  return 0;
}

uint64_t cli_task_budget(const cli_task_flags *f) {
  return f->has_budget ? (uint64_t)f->budget : (f->seconds > 0 ? 0 : 1000);
}

void cli_task_search_opts(const cli_task_flags *f, int progress, gopt_search_opts *so) {
  memset(so, 0, sizeof *so);
  so->budget_evals = cli_task_budget(f);
  so->budget_seconds = f->seconds;
  so->seed = (uint64_t)f->seed;
  so->threads = (int)f->threads;
  so->population = (int)f->ga[0];
  so->elite_frac = f->ga[1];
  so->mutant_frac = f->ga[2];
  so->elite_bias = f->ga[3];
  so->alpha = f->alpha;
  so->hops = (int)f->hops;
  const char *env = getenv("GOPT_PROGRESS");
  so->progress = env && !strcmp(env, "0") ? 0 : progress ? 1 : 2; /* a bar, or a plain log */
}

struct json_t *cli_task_json_head(const cli_task_flags *f, const gopt_graph *g, const gopt_cluster *c) {
  json_t *o = json_object();
  json_object_set_new(o, "model", json_string(f->model));
  json_object_set_new(o, "nodes", json_integer((json_int_t)gopt_graph_node_count(g)));
  json_object_set_new(o, "task", json_string(f->task));
  json_object_set_new(o, "cluster", json_string(c->name));
  return o;
}
