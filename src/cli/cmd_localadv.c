/* cmd_localadv.c: the local advantage commands (localadv.h, docs/LEARNED.md "Local advantage"):
 * `gopt collect` (Gibbs sampling data into a dataset file), `gopt train --method localadv`
 * (regression of the advantage model on datasets) and the guided search's model loading for
 * `gopt optimize/compare --method guided`. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gopt/localadv.h"
#include "gopt/nn.h"
#include "gopt/util.h"

/* ---- guided search ------------------------------------------------------------------------- */
int cli_localadv_model_path(const cli_task_flags *f, int task, char *buf, size_t n, gopt_error *err) {
  if (f->policy) {
    if (strlen(f->policy) >= n) return gopt_error_set(err, GOPT_EINVAL, "--policy: path too long");
    memcpy(buf, f->policy, strlen(f->policy) + 1);
    return 0;
  }
  return gopt_localadv_find(task, NULL, buf, n, err);
}

int cli_localadv_guided(gopt_env *e, const cli_task_flags *f, const gopt_search_opts *o, double *x,
                        gopt_search_result *res, gopt_error *err) {
  char path[4096];
  gopt_policy *m = NULL;
  const char *why = NULL;
  if (!gopt_search_applicable("guided", e, &why))
    return gopt_error_set(err, GOPT_EINVAL, "search: method 'guided' does not apply: %s", why);
  int rc = cli_localadv_model_path(f, gopt_env_task(e), path, sizeof path, err);
  if (!rc) rc = gopt_localadv_load(path, gopt_env_task(e), &m, err);
  if (rc) return rc;
  gopt_localadv_guide g = {.model = m, .env = e};
  gopt_search_opts so = *o;
  so.guide = gopt_localadv_guide_fn;
  so.guide_user = &g;
  rc = gopt_search_run("guided", e, &so, x, res, err);
  gopt_localadv_guide_free(&g);
  gopt_policy_free(m);
  return rc;
}

/* ---- gopt collect ------------------------------------------------------------------------ */
static const char collect_help[] =
    "usage: gopt collect MODEL [MODEL...] --task fusion|placement --cluster C -o data.bin\n"
    "                    [--samples N | --sweeps N] [--tau T] [--seed S] [--append]\n"
    "  runs Gibbs sampling with temperature T from the default decisions on each model, evaluating\n"
    "  every choice of each visited variable, and writes the records (configuration, variable, cost\n"
    "  of every choice) to a local advantage dataset (docs/LEARNED.md \"Local advantage\").\n"
    "  MODEL: a model file or a zoo spec (gnmt:layers=2,steps=10).\n"
    "  --samples N  evaluations per model (default 2000);  --sweeps N  N sweeps over the variables\n"
    "  --tau T      Gibbs temperature (default 0.25, in units of the median single-change cost)\n"
    "  --seed S     sampling seed (default 1);  --append  add to an existing data.bin\n"
    "  Ctrl-C writes the records collected so far.\n";

typedef struct collect_args {
  const char *task, *cluster, *out, *models[256];
  int nmodels, append;
  long samples, sweeps, seed;
  double tau;
} collect_args;

static int collect_parse(int argc, char **argv, collect_args *a) {
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) { fputs(collect_help, stdout); return 0; }
    if (!strcmp(f, "--append")) { a->append = 1; continue; }
    if (f[0] != '-') {
      if (a->nmodels >= 256) return cli_usage_error("collect", "more than 256 models");
      a->models[a->nmodels++] = f;
      continue;
    }
    int takes = !strcmp(f, "--task") || !strcmp(f, "--cluster") || !strcmp(f, "-o") || !strcmp(f, "--samples") ||
                !strcmp(f, "--sweeps") || !strcmp(f, "--seed") || !strcmp(f, "--tau");
    if (!takes) return cli_usage_error("collect", "unknown flag '%s' (see gopt collect --help)", f);
    if (!v) return cli_usage_error("collect", "%s needs a value", f);
    i++;
    if (!strcmp(f, "--task")) a->task = v;
    else if (!strcmp(f, "--cluster")) a->cluster = v;
    else if (!strcmp(f, "-o")) a->out = v;
    else if (!strcmp(f, "--tau")) {
      char *end = NULL;
      a->tau = strtod(v, &end);
      if (!*v || *end || !(a->tau > 0) || !isfinite(a->tau))
        return cli_usage_error("collect", "--tau: expected a positive number, got '%s'", v);
    } else if (cli_parse_long("collect", f, v, !strcmp(f, "--seed") ? 0 : 1, 1000000000L,
                              !strcmp(f, "--samples") ? &a->samples : !strcmp(f, "--sweeps") ? &a->sweeps : &a->seed))
      return 2;
  }
  if (!a->nmodels) return cli_usage_error("collect", "missing MODEL (see gopt collect --help)");
  if (!a->task) return cli_usage_error("collect", "missing --task (fusion, placement)");
  int t = gopt_task_from_name(a->task);
  if (t != GOPT_TASK_FUSION && t != GOPT_TASK_PLACEMENT)
    return cli_usage_error("collect", "--task: '%s' is not fusion or placement (the tasks with discrete decisions)", a->task);
  if (!a->cluster) return cli_usage_error("collect", "missing --cluster (e.g. --cluster V100)");
  if (!a->out) return cli_usage_error("collect", "missing -o data.bin");
  if (a->samples && a->sweeps) return cli_usage_error("collect", "--samples and --sweeps exclude each other");
  return -1;
}

/* Collects one model into d; returns 0, 1 after printing, or 130 when interrupted. */
static int collect_one(const collect_args *a, int task, gopt_cluster *c, const char *model, gopt_ladata *d) {
  cli_model_opts mo = {0};
  gopt_graph *g = cli_load_model(model, &mo);
  if (!g) return 1;
  gopt_error err = {0};
  gopt_env *e = NULL;
  gopt_env_opts eo = {.task = task, .threads = 1};
  int rc = 1;
  if (gopt_env_new(g, c, &eo, &e, &err)) { fprintf(stderr, "gopt collect: %s: %s\n", model, err.msg); goto done; }
  uint64_t budget = a->samples ? (uint64_t)a->samples : 2000;
  if (a->sweeps) { /* a sweep evaluates every other choice of every movable variable */
    uint64_t per = 0;
    const gopt_env_var *v = gopt_env_vars(e);
    for (size_t i = 0; i < gopt_env_nvars(e); i++) per += v[i].card > 1 ? (uint64_t)v[i].card - 1 : 0;
    budget = 1 + (uint64_t)a->sweeps * (per ? per : 1);
  }
  gopt_search_opts so = {.budget_evals = budget, .seed = (uint64_t)a->seed, .temperature = a->tau, .threads = 1};
  const char *pe = getenv("GOPT_PROGRESS");
  so.progress = pe && !strcmp(pe, "0") ? 0 : isatty(2) ? 1 : 2;
  size_t nrec = 0;
  if (gopt_ladata_collect(d, e, model, a->cluster, &so, &nrec, &err)) {
    fprintf(stderr, "gopt collect: %s: %s\n", model, err.msg);
    goto done;
  }
  printf("%s: %zu records from %llu evaluations\n", model, nrec, (unsigned long long)budget);
  rc = cli_task_interrupted() ? 130 : 0;
done:
  gopt_env_free(e);
  gopt_graph_free(g);
  return rc;
}

int cli_collect(int argc, char **argv) {
  collect_args a = {.seed = 1};
  int rc = collect_parse(argc, argv, &a);
  if (rc >= 0) return rc;
  int task = gopt_task_from_name(a.task);
  gopt_error err = {0};
  gopt_cluster *c = NULL;
  gopt_ladata *d = NULL;
  if (gopt_cluster_parse(a.cluster, &c, &err)) { fprintf(stderr, "gopt collect: %s\n", err.msg); return 1; }
  rc = 1;
  if (a.append && access(a.out, F_OK) == 0) {
    if (gopt_ladata_load(a.out, &d, &err)) { fprintf(stderr, "gopt collect: %s\n", err.msg); goto done; }
    if (gopt_ladata_task(d) != task) {
      fprintf(stderr, "gopt collect: %s: a '%s' dataset, not '%s'\n", a.out, gopt_task_name(gopt_ladata_task(d)), a.task);
      goto done;
    }
  } else if (gopt_ladata_new(task, &d, &err)) {
    fprintf(stderr, "gopt collect: %s\n", err.msg);
    goto done;
  }
  cli_task_sigint(1);
  int orc = 0;
  for (int i = 0; i < a.nmodels && !orc; i++) orc = collect_one(&a, task, c, a.models[i], d);
  cli_task_sigint(0);
  if (orc == 1) goto done;
  if (gopt_ladata_save(d, a.out, &err)) { fprintf(stderr, "gopt collect: %s\n", err.msg); goto done; }
  size_t nr = 0;
  for (size_t i = 0; i < gopt_ladata_graphs(d); i++) nr += gopt_ladata_records(d, i);
  printf("wrote %s: %zu graphs, %zu records\n", a.out, gopt_ladata_graphs(d), nr);
  if (orc == 130) fprintf(stderr, "gopt collect: interrupted; wrote the records collected so far\n");
  rc = orc;
done:
  gopt_ladata_free(d);
  gopt_cluster_free(c);
  return rc;
}

/* ---- gopt train --method localadv ------------------------------------------------------- */
static const char la_train_help[] =
    "usage: gopt train --method localadv --data data.bin[,data2.bin...] -o P.gpol\n"
    "                  [--iters N] [--batch B] [--lr LR] [--seed S] [--threads N] [--resume]\n"
    "  trains a local advantage model by regression on datasets from gopt collect: it predicts\n"
    "  cost(k) - cost(default) of every choice k of every variable, labels transformed as\n"
    "  sign(a) log(1 + |a| / sigma) (sigma: each graph's median |a|), minibatches drawn 90% of the\n"
    "  time from each graph's top 10% |a|. The models and clusters are rebuilt from the dataset.\n"
    "  Defaults: --iters 2000 (minibatch steps), --batch 16, --lr 0.003, --seed 1, --threads 2.\n"
    "  Ctrl-C writes P.gpol; --resume continues it exactly (same data, --iters, --batch, --seed).\n"
    "  --stop-after N stops after step N as Ctrl-C would.\n"
    "  --evaluate P.gpol  instead of training: Kendall tau of P's predicted against the dataset's true\n"
    "  advantages (signed: guided ranks by the gain; and absolute), one line per graph.\n";

typedef struct la_train_args {
  const char *data, *out, *evaluate;
  long iters, batch, seed, threads, stop_after;
  double lr;
  int resume;
} la_train_args;

static int la_train_parse(int argc, char **argv, la_train_args *a) {
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) { fputs(la_train_help, stdout); return 0; }
    if (!strcmp(f, "--resume")) { a->resume = 1; continue; }
    int takes = !strcmp(f, "--method") || !strcmp(f, "--data") || !strcmp(f, "-o") || !strcmp(f, "--iters") ||
                !strcmp(f, "--batch") || !strcmp(f, "--seed") || !strcmp(f, "--threads") || !strcmp(f, "--lr") ||
                !strcmp(f, "--stop-after") || !strcmp(f, "--evaluate");
    if (!takes)
      return cli_usage_error("train", f[0] == '-' ? "unknown flag '%s' (see gopt train --method localadv --help)"
                                                  : "unexpected argument '%s'", f);
    if (!v) return cli_usage_error("train", "%s: missing value", f);
    i++;
    if (!strcmp(f, "--method")) continue;
    if (!strcmp(f, "--data")) a->data = v;
    else if (!strcmp(f, "--evaluate")) a->evaluate = v;
    else if (!strcmp(f, "-o")) a->out = v;
    else if (!strcmp(f, "--lr")) {
      char *end = NULL;
      a->lr = strtod(v, &end);
      if (!*v || *end || !(a->lr > 0) || a->lr > 1) return cli_usage_error("train", "--lr: expected a number in (0, 1], got '%s'", v);
    } else if (cli_parse_long("train", f, v, !strcmp(f, "--seed") ? 0 : 1, !strcmp(f, "--batch") ? 4096 : 1000000000L,
                              !strcmp(f, "--iters") ? &a->iters : !strcmp(f, "--batch") ? &a->batch
                              : !strcmp(f, "--seed") ? &a->seed : !strcmp(f, "--threads") ? &a->threads : &a->stop_after))
      return 2;
  }
  if (!a->data) return cli_usage_error("train", "--method localadv: missing --data data.bin");
  if (!a->out && !a->evaluate) return cli_usage_error("train", "missing -o");
  return -1;
}

/* --evaluate: per-graph Kendall tau of m on the dataset; returns the exit code. */
static int la_evaluate(const char *path, const gopt_ladata *d, gopt_env *const *es) {
  gopt_error err = {0};
  gopt_policy *m = NULL;
  size_t n = gopt_ladata_graphs(d);
  double *tau = calloc(n + 1, sizeof *tau), *tabs = calloc(n + 1, sizeof *tabs);
  int rc = 1;
  if (!tau || !tabs) goto done;
  if (gopt_localadv_load(path, gopt_ladata_task(d), &m, &err) || gopt_localadv_evaluate(m, d, es, tau, tabs, &err)) {
    fprintf(stderr, "gopt train: %s\n", err.msg);
    goto done;
  }
  printf("graph\tcluster\trecords\tkendall_tau\tkendall_tau_abs\n");
  for (size_t i = 0; i < n; i++)
    printf("%s\t%s\t%zu\t%.4f\t%.4f\n", gopt_ladata_model(d, i), gopt_ladata_cluster(d, i), gopt_ladata_records(d, i),
           tau[i], tabs[i]);
  rc = 0;
done:
  gopt_policy_free(m);
  free(tau);
  free(tabs);
  return rc;
}

/* Loads and joins the comma-separated datasets; returns NULL after printing. */
static gopt_ladata *la_load_data(const char *list) {
  gopt_ladata *d = NULL;
  gopt_error err = {0};
  char *s = strdup(list);
  for (char *t = s ? strtok(s, ",") : NULL; t; t = strtok(NULL, ",")) {
    gopt_ladata *x = NULL;
    int rc = gopt_ladata_load(t, &x, &err);
    if (!rc && d) rc = gopt_ladata_append(d, x, &err);
    if (rc) {
      fprintf(stderr, "gopt train: %s\n", err.msg);
      gopt_ladata_free(x);
      gopt_ladata_free(d);
      free(s);
      return NULL;
    }
    if (!d) d = x;
    else gopt_ladata_free(x);
  }
  free(s);
  return d;
}

static int la_tty;
static double la_t0, la_last;
static void la_on_step(int64_t step, int64_t steps, double loss, void *user) {
  (void)user;
  double now = gopt_now();
  if (step != steps && now - la_last < (la_tty ? 0.2 : 5.0)) return;
  la_last = now;
  fprintf(stderr, la_tty ? "\rtrain localadv: step %lld/%lld  loss %.4f  %.1f s   " : "train localadv: step %lld/%lld  loss %.4f  %.1f s\n",
          (long long)step, (long long)steps, loss, now - la_t0);
  if (la_tty && step == steps) fputc('\n', stderr);
}

static void la_on_sigint(int sig) {
  (void)sig;
  gopt_learn_request_stop();
}

int cli_train_localadv(int argc, char **argv) {
  la_train_args a = {.iters = 2000, .batch = 16, .seed = 1, .threads = 2};
  int rc = la_train_parse(argc, argv, &a);
  if (rc >= 0) return rc;
  gopt_ladata *d = la_load_data(a.data);
  if (!d) return 1;
  size_t n = gopt_ladata_graphs(d);
  int task = gopt_ladata_task(d);
  gopt_graph **gs = calloc(n + 1, sizeof *gs);
  gopt_cluster **cs = calloc(n + 1, sizeof *cs);
  gopt_env **es = calloc(n + 1, sizeof *es);
  gopt_policy *p = NULL;
  gopt_error err = {0};
  rc = 1;
  if (!gs || !cs || !es) goto done;
  gopt_nn_set_threads((int)a.threads);
  for (size_t i = 0; i < n; i++) {
    cli_model_opts mo = {0};
    if (!(gs[i] = cli_load_model(gopt_ladata_model(d, i), &mo))) goto done;
    gopt_env_opts eo = {.task = task, .threads = 1};
    if (gopt_cluster_parse(gopt_ladata_cluster(d, i), &cs[i], &err) || gopt_env_new(gs[i], cs[i], &eo, &es[i], &err) ||
        gopt_ladata_check_env(d, i, es[i], &err)) {
      fprintf(stderr, "gopt train: %s: %s\n", a.data, err.msg);
      goto done;
    }
  }
  if (a.evaluate) {
    rc = la_evaluate(a.evaluate, d, es);
    goto done;
  }
  if (a.resume) {
    if (gopt_localadv_load(a.out, task, &p, &err)) { fprintf(stderr, "gopt train: %s\n", err.msg); goto done; }
    if (!gopt_policy_trainset(p)[0]) { fprintf(stderr, "gopt train: %s: no training state to resume\n", a.out); goto done; }
  } else if (gopt_localadv_new(task, NULL, (uint64_t)a.seed, &p, &err)) {
    fprintf(stderr, "gopt train: %s\n", err.msg);
    goto done;
  }
  la_tty = isatty(2);
  la_t0 = la_last = gopt_now();
  gopt_localadv_train_opts o = {.steps = a.iters, .stop_after = a.stop_after, .seed = (uint64_t)a.seed,
                                .batch = (int)a.batch, .lr = (float)a.lr, .on_step = la_on_step};
  gopt_learn_train_result tr;
  gopt_learn_clear_stop();
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = la_on_sigint;
  sigaction(SIGINT, &sa, &old);
  int trc = gopt_localadv_train(p, d, es, &o, &tr, &err);
  sigaction(SIGINT, &old, NULL);
  if (trc) { fprintf(stderr, "gopt train: %s\n", err.msg); goto done; }
  if (gopt_policy_save(p, a.out, &err)) { fprintf(stderr, "gopt train: %s\n", err.msg); goto done; }
  if (tr.interrupted) {
    fprintf(stderr, "gopt train: interrupted at step %lld of %ld; wrote %s (continue with --resume)\n",
            (long long)tr.iters_done, a.iters, a.out);
    rc = 130;
    goto done;
  }
  printf("wrote %s: local advantage model, task %s, %zu graphs, %lld steps, %zu weights, %.1f s\n", a.out,
         gopt_task_name(task), n, (long long)tr.iters_done, gopt_policy_param_count(p), tr.seconds);
  rc = 0;
done:
  gopt_policy_free(p);
  for (size_t i = 0; i < n; i++) {
    if (es) gopt_env_free(es[i]);
    if (cs) gopt_cluster_free(cs[i]);
    if (gs) gopt_graph_free(gs[i]);
  }
  free(es);
  free(cs);
  free(gs);
  gopt_ladata_free(d);
  return rc;
}
