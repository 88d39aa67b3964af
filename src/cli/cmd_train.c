/* cmd_train.c: `gopt train`: trains a GO-style policy (learn.h) with PPO, or a REGAL policy with
 * REINFORCE (--method regal), over a set of graphs and clusters and writes it as a .gpol policy
 * file; Ctrl-C writes the file and --resume continues. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gopt/learn.h"
#include "gopt/history.h"
#include "gopt/nn.h"
#include "gopt/util.h"

static const char train_help[] =
    "usage: gopt train --task T --cluster C[,C2...] --graphs SPEC[;SPEC...] -o P.gpol\n"
    "                  [--iters N] [--imitate M] [--seed S] [--threads N] [--samples K] [--resume]\n"
    "                  [--method ppo|regal] [--regal-evals N]\n"
    "       gopt train --method localadv --data data.bin -o P.gpol ... (see gopt train --method localadv --help)\n"
    "  trains a policy with PPO on every graph x cluster pair and writes P.gpol.\n"
    "  --method regal  trains a REGAL policy (gopt optimize --method regal) with REINFORCE: per graph\n"
    "                 and iteration K pairs of brkga-regal runs of --regal-evals evaluations (default\n"
    "                 1000) with one seed, one sampling from the policy, one uniform; reward: the\n"
    "                 guided best's improvement over the uniform best (docs/LEARNED.md, REGAL).\n"
    "                 K = --samples (default 8); under mpirun the K pairs are split over the ranks.\n"
    "  SPEC: a model file (.onnx), a zoo spec (gnmt:layers=8,steps=100) or a folder (its *.onnx);\n"
    "  SPEC@training is its training step (as --training elsewhere);\n"
    "  separate several with ';' or repeat --graphs. Ctrl-C writes P.gpol; --resume continues it\n"
    "  exactly (same --task, --cluster, --graphs, --iters, --seed, --threads). Defaults: --iters 100,\n"
    "  --seed 1, --samples 8, --threads 2. --stop-after N stops after iteration N as Ctrl-C would.\n"
    "  --lr R: Adam's learning rate (default 3e-3).\n"
    "  --kl W: placement's segment head: weight of the KL divergence of its cluster decisions from its\n"
    "  fixed-feature prior, summed over the clusters (default 0; --resume needs the same W).\n"
    "  --coarse F: placement's segment head: the share F of a training step's PPO batches decided at\n"
    "  go's coarsest zero-shot level, S / 64 clusters (default 0; --resume needs the same F).\n"
    "  --imitate M: the first M of the N iterations imitate each graph's best baseline (cross-entropy\n"
    "  warm start, no PPO); default 0. --resume needs the same --imitate.\n"
    "  --rollout-groups G  split each batch's samples into G gradient groups summed in order (default 1).\n"
    "  Under `mpirun -np P` every rank evaluates and differentiates one group (G = P, K % P == 0) and\n"
    "  rank 0 writes P.gpol: bitwise the weights of one process with --rollout-groups P (docs/SCALING.md).\n"
    "  --no-history   do not record the run in the history (also GOPT_HISTORY=0; gopt history)\n"
    "usage: gopt train --method rewrite MODEL... -o P.gpol [...]: the rewrite agent of\n"
    "  `gopt rewrite --method rl` (see gopt train --method rewrite --help)\n"
    "usage: gopt train --method passes MODULE|DIR... -o P.gpol [...]: the pass-ordering agent of\n"
    "  `gopt passes --order rl` (see gopt train --method passes --help)\n";

#define MAX_ITEMS 4096

typedef struct train_set {
  gopt_graph *g[MAX_ITEMS];
  char *gname[MAX_ITEMS];
  size_t ng;
  gopt_cluster *c[64];
  size_t nc;
  gopt_env *e[MAX_ITEMS];
  char *name[MAX_ITEMS];
  size_t n;
} train_set;

static int cmpstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Adds one model (loaded) to the set; returns 0 or 1 after printing. SPEC@training is SPEC's
 * training step (as --training elsewhere). */
static int add_model(train_set *s, const char *spec) {
  if (s->ng >= MAX_ITEMS) { cli_usage_error("train", "--graphs: more than %d models", MAX_ITEMS); return 1; }
  cli_model_opts mo = {0};
  size_t l = strlen(spec), k = strlen("@training");
  char *base = strdup(spec);
  if (!base) { fprintf(stderr, "gopt train: out of memory\n"); return 1; }
  if (l > k && !strcmp(spec + l - k, "@training")) { base[l - k] = 0; mo.training = 1; }
  gopt_graph *g = cli_load_model(base, &mo);
  free(base);
  if (!g) return 1;
  s->g[s->ng] = g;
  s->gname[s->ng++] = strdup(spec);
  return 0;
}

/* Adds SPEC: a folder's *.onnx (sorted), else one model. */
static int add_spec(train_set *s, const char *spec) {
  DIR *d = opendir(spec);
  if (!d) return add_model(s, spec);
  char *names[MAX_ITEMS];
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < MAX_ITEMS) {
    size_t l = strlen(de->d_name);
    if (l > 5 && !strcmp(de->d_name + l - 5, ".onnx")) {
      size_t k = strlen(spec) + l + 2;
      names[n] = malloc(k);
      if (names[n]) snprintf(names[n++], k, "%s/%s", spec, de->d_name);
    }
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmpstr);
  int rc = n ? 0 : (fprintf(stderr, "gopt train: %s: folder has no .onnx model\n", spec), 1);
  for (size_t i = 0; i < n; i++) {
    if (!rc) rc = add_model(s, names[i]);
    free(names[i]);
  }
  return rc;
}

/* Splits list by sep and calls fn on each non-empty item. */
static int each(train_set *s, const char *list, char sep, int (*fn)(train_set *, const char *)) {
  char *copy = strdup(list), *p = copy;
  int rc = copy ? 0 : 1;
  while (!rc && p) {
    char *q = strchr(p, sep);
    if (q) *q = 0;
    if (*p) rc = fn(s, p);
    p = q ? q + 1 : NULL;
  }
  free(copy);
  return rc;
}

static int add_cluster(train_set *s, const char *spec) {
  gopt_error err = {0};
  if (s->nc >= 64) { cli_usage_error("train", "--cluster: more than 64 clusters"); return 1; }
  if (gopt_cluster_parse(spec, &s->c[s->nc], &err)) {
    fprintf(stderr, "gopt train: %s\n", err.msg);
    return 1;
  }
  s->nc++;
  return 0;
}

static void set_free(train_set *s) {
  for (size_t i = 0; i < s->n; i++) { gopt_env_free(s->e[i]); free(s->name[i]); }
  for (size_t i = 0; i < s->ng; i++) { gopt_graph_free(s->g[i]); free(s->gname[i]); }
  for (size_t i = 0; i < s->nc; i++) gopt_cluster_free(s->c[i]);
}

static int tty;
static long total_iters;
static double t_start, t_last;
/* Progress: every iteration with the ETA on a terminal, one plain line every 2 s otherwise. */
static void on_iter(const gopt_learn_iter_info *in, void *user) {
  const train_set *s = user;
  double now = gopt_now();
  if (!tty && now - t_last < 2.0) return;
  t_last = now;
  long k = (long)in->iter + 1;
  double eta = k < total_iters ? (now - t_start) * (double)(total_iters - k) / (double)k : 0;
  fprintf(stderr, "iter %ld/%ld  loss %+.4f  reward %+.4f  lr %.2e  %s: best %.6g (baseline %.6g)  ETA %.0f s\n",
          k, total_iters, in->loss, in->reward, in->lr, s->name[in->graph], in->best_obj, in->ref_obj, eta);
}

static void on_sigint(int sig) {
  (void)sig;
  gopt_learn_request_stop();
}

typedef struct train_args {
  const char *task, *out, *clusters, *method;
  char graphs[8192];
  long iters, seed, threads, samples, stop_after, imitate, groups, regal_evals;
  double lr, kl, coarse;
  int resume, no_history;
} train_args;

/* --lr (in (0, 1]), --kl (a weight in [0, 1e6]) or --coarse (a share in [0, 1]) from v into *out;
 * 0, or 2 after the usage error. */
static int parse_real(const char *f, const char *v, double *out) {
  char *end = NULL;
  double x = v ? strtod(v, &end) : -1;
  int lr = !strcmp(f, "--lr"), kl = !strcmp(f, "--kl");
  int ok = v && *v && !*end && (lr ? x > 0 && x <= 1 : x >= 0 && x <= (kl ? 1e6 : 1));
  if (!ok)
    return cli_usage_error("train", "%s: expected %s, got '%s'", f,
                           lr ? "a learning rate in (0, 1]" : kl ? "a weight >= 0" : "a share in [0, 1]", v ? v : "(nothing)");
  *out = x;
  return 0;
}

/* Parses argv; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, train_args *a) {
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) { fputs(train_help, stdout); return 0; }
    if (!strcmp(f, "--resume")) { a->resume = 1; continue; }
    if (!strcmp(f, "--no-history")) { a->no_history = 1; continue; }
    if (!strcmp(f, "--method") && v && !strcmp(v, "ppo")) { i++; continue; }
    double *real = !strcmp(f, "--lr") ? &a->lr : !strcmp(f, "--kl") ? &a->kl : !strcmp(f, "--coarse") ? &a->coarse : NULL;
    if (real) {
      if (parse_real(f, v, real)) return 2;
      i++;
      continue;
    }
    int takes = !strcmp(f, "--task") || !strcmp(f, "--cluster") || !strcmp(f, "--graphs") || !strcmp(f, "-o") ||
                !strcmp(f, "--iters") || !strcmp(f, "--seed") || !strcmp(f, "--threads") || !strcmp(f, "--samples") || !strcmp(f, "--stop-after") ||
                !strcmp(f, "--imitate") || !strcmp(f, "--rollout-groups") || !strcmp(f, "--method") ||
                !strcmp(f, "--regal-evals");
    if (!takes) return cli_usage_error("train", f[0] == '-' ? "unknown flag '%s'" : "unexpected argument '%s'", f);
    if (!v) return cli_usage_error("train", "%s: missing value", f);
    i++;
    if (!strcmp(f, "--task")) a->task = v;
    else if (!strcmp(f, "--cluster")) a->clusters = v;
    else if (!strcmp(f, "-o")) a->out = v;
    else if (!strcmp(f, "--method")) {
      if (strcmp(v, "ppo") && strcmp(v, "regal")) return cli_usage_error("train", "--method: unknown method '%s' (ppo, regal, localadv, rewrite, passes)", v);
      a->method = v;
    } else if (!strcmp(f, "--regal-evals")) {
      if (cli_parse_long("train", f, v, 1, 1000000000L, &a->regal_evals)) return 2;
    }
    else if (!strcmp(f, "--graphs")) {
      size_t l = strlen(a->graphs);
      if (l + strlen(v) + 2 > sizeof a->graphs) return cli_usage_error("train", "--graphs: list too long");
      snprintf(a->graphs + l, sizeof a->graphs - l, "%s%s", l ? ";" : "", v);
    } else if (!strcmp(f, "--imitate")) {
      if (cli_parse_long("train", f, v, 0, 1000000000L, &a->imitate)) return 2;
    } else if (cli_parse_long("train", f, v, !strcmp(f, "--seed") ? 0 : 1,
                              !strcmp(f, "--samples") ? 255 : 1000000000L,
                              !strcmp(f, "--iters") ? &a->iters : !strcmp(f, "--seed") ? &a->seed
                              : !strcmp(f, "--threads") ? &a->threads : !strcmp(f, "--samples") ? &a->samples
                              : !strcmp(f, "--rollout-groups") ? &a->groups : &a->stop_after)) return 2;
  }
  if (!a->task) return cli_usage_error("train", "missing --task");
  if (gopt_task_from_name(a->task) < 0) return cli_usage_error("train", "--task: unknown task '%s'", a->task);
  if (!a->clusters) return cli_usage_error("train", "missing --cluster");
  if (!a->graphs[0]) return cli_usage_error("train", "missing --graphs");
  if (!a->out) return cli_usage_error("train", "missing -o");
  if (a->regal_evals && strcmp(a->method, "regal")) return cli_usage_error("train", "--regal-evals needs --method regal");
  if (a->coarse > 0 && (strcmp(a->task, "placement") || strcmp(a->method, "ppo")))
    return cli_usage_error("train", "--coarse: only the placement policy's segment head decodes at levels (--task placement, --method ppo)");
  if (a->kl > 0 && (strcmp(a->task, "placement") || strcmp(a->method, "ppo")))
    return cli_usage_error("train", "--kl: only the placement policy's segment head has a KL anchor (--task placement, --method ppo)");
  return -1;
}

/* Records the training run in the history: the model hash combines the graphs' structural hashes,
 * the decisions file is the policy written. */
static void record(const train_args *a, const train_set *s, const gopt_learn_train_result *tr) {
  if (!gopt_history_enabled()) return;
  uint64_t h = 0x7472;
  for (size_t i = 0; i < s->ng; i++) h = gopt_hash_mix(h, gopt_graph_hash(s->g[i]));
  gopt_history_record r = {.model_hash = h, .model = a->graphs, .command = "train", .task = a->task,
                           .cluster = a->clusters, .method = a->method, .seed = (uint64_t)a->seed,
                           .objective = 0, .feasible = 1, .evaluations = (uint64_t)tr->iters_done,
                           .seconds = tr->seconds, .decisions_file = a->out};
  gopt_error err = {0};
  if (gopt_history_add(NULL, &r, &err))
    fprintf(stderr, "gopt train: warning: run not recorded in the history: %s\n", err.msg);
}

int cli_train_localadv(int argc, char **argv); /* cmd_localadv.c */

int cli_train(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++) /* --method localadv / rewrite / passes: their own trainers */
    if (!strcmp(argv[i], "--method")) {
      if (!strcmp(argv[i + 1], "localadv")) return cli_train_localadv(argc, argv);
      if (!strcmp(argv[i + 1], "rewrite")) return cli_train_rewrite(argc, argv); /* cmd_train_rewrite.c */
      if (!strcmp(argv[i + 1], "passes")) return cli_train_passes(argc, argv); /* cmd_train_passes.c */
    }
  train_args a = {.iters = 100, .seed = 1, .threads = 2, .samples = 8, .method = "ppo"};
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) return rc;
  int task = gopt_task_from_name(a.task);
  gopt_error err = {0};
  gopt_policy *p = NULL;
  train_set *s = calloc(1, sizeof *s);
  if (!s) return 1;
  rc = 1;
  gopt_nn_set_threads((int)a.threads);
  if (a.resume) {
    if (gopt_policy_load(a.out, task, &p, &err)) { fprintf(stderr, "gopt train: %s\n", err.msg); goto done; }
    if (!gopt_policy_trainset(p)[0]) { fprintf(stderr, "gopt train: %s: no training state to resume\n", a.out); goto done; }
    if (strcmp(gopt_policy_kind(p), !strcmp(a.method, "regal") ? "regal" : "go")) {
      fprintf(stderr, "gopt train: %s: a '%s' policy; resume it with%s --method regal\n", a.out, gopt_policy_kind(p),
              !strcmp(a.method, "regal") ? "out" : "");
      goto done;
    }
  }
  if (each(s, a.clusters, ',', add_cluster) || each(s, a.graphs, ';', add_spec)) goto done;
  for (size_t i = 0; i < s->ng; i++)
    for (size_t j = 0; j < s->nc; j++) {
      if (s->n >= MAX_ITEMS) { fprintf(stderr, "gopt train: more than %d graph x cluster pairs\n", MAX_ITEMS); goto done; }
      gopt_env_opts eo = {.task = task, .threads = (int)a.threads};
      if (gopt_env_new(s->g[i], s->c[j], &eo, &s->e[s->n], &err)) {
        fprintf(stderr, "gopt train: %s on %s: %s\n", s->gname[i], s->c[j]->name, err.msg);
        goto done;
      }
      size_t k = strlen(s->gname[i]) + strlen(s->c[j]->name) + 2;
      if (!(s->name[s->n] = malloc(k))) goto done;
      snprintf(s->name[s->n++], k, "%s@%s", s->gname[i], s->c[j]->name);
    }
  int regal = !strcmp(a.method, "regal");
  if (!p && (regal ? gopt_policy_new_regal(task, NULL, (uint64_t)a.seed, &p, &err)
                   : gopt_policy_new(task, NULL, (uint64_t)a.seed, &p, &err))) { fprintf(stderr, "gopt train: %s\n", err.msg); goto done; }
  tty = isatty(2);
  total_iters = a.iters;
  t_start = t_last = gopt_now();
  gopt_learn_train_opts o = {.iters = a.iters, .seed = (uint64_t)a.seed, .samples = (int)a.samples,
                             .stop_after = a.stop_after, .imitate_iters = a.imitate, .lr = (float)a.lr, .kl_coef = (float)a.kl,
                             .coarse_frac = (float)a.coarse,
                             .rollout_groups = (int)a.groups, .regal_evals = (uint64_t)a.regal_evals,
                             .dist = cli_mpi_learn_dist(),
                             .on_iter = on_iter, .user = s};
  gopt_learn_train_result tr;
  gopt_learn_clear_stop();
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, &old);
  if (cli_mpi_size() > 1) { /* see cli_task_sigint */
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
  }
  int trc = gopt_learn_train(p, s->e, (const char *const *)s->name, s->n, &o, &tr, &err);
  sigaction(SIGINT, &old, NULL);
  if (trc) { fprintf(stderr, "gopt train: %s\n", err.msg); goto done; }
  if (cli_mpi_rank() == 0 && gopt_policy_save(p, a.out, &err)) { fprintf(stderr, "gopt train: %s\n", err.msg); goto done; }
  if (tr.interrupted) {
    fprintf(stderr, "gopt train: interrupted at iteration %lld of %ld; wrote %s (continue with --resume)\n",
            (long long)tr.iters_done, a.iters, a.out);
    rc = 130;
    goto done;
  }
  if (!a.no_history && cli_mpi_rank() == 0) record(&a, s, &tr);
  printf("wrote %s: task %s, %zu graph x cluster pairs, %lld iterations, %zu weights, %.1f s\n", a.out,
         a.task, s->n, (long long)tr.iters_done, gopt_policy_param_count(p), tr.seconds);
  rc = 0;
done:
  gopt_policy_free(p);
  set_free(s);
  free(s);
  return rc;
}
