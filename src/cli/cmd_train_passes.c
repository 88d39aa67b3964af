/* cmd_train_passes.c: `gopt train --method passes MODULE|DIR... -o P.gpol`: trains the pass-ordering
 * agent (gopt_pass_rl_train: the learn module's sequential agent on the pass environment) with PPO
 * on HLO modules (a folder adds its HLO files, sorted) and writes the policy; Ctrl-C writes it and
 * --resume continues it (as `gopt train`). Under mpirun each rank takes one rollout group (the
 * learn module's gopt_learn_dist hook) and rank 0 writes the policy (docs/SCALING.md). */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gopt/hlo.h"
#include "gopt/nn.h"
#include "gopt/passes.h"
#include "gopt/util.h"

static const char tp_help[] =
    "usage: gopt train --method passes MODULE|DIR... -o P.gpol [--iters N] [--episodes E]\n"
    "                  [--max-steps T] [--objective ops|time] [--seed S] [--threads N] [--resume]\n"
    "                  [--stop-after N] [--rollout-groups G]\n"
    "  trains the pass-ordering agent (gopt passes --order rl) with PPO on HLO modules (a folder adds\n"
    "  every HLO file under it): per iteration E episodes (default 8) of at most T passes (default 32),\n"
    "  reward = the CompilerGym-normalised cost reduction of each pass (docs/PASSES.md).\n"
    "  Defaults: --iters 200, --seed 1, --threads 2, --objective ops. Ctrl-C writes P.gpol; --resume\n"
    "  continues it exactly (same modules and flags). --rollout-groups G splits each iteration's\n"
    "  episodes into G gradient groups summed in order (default 1); under `mpirun -np P` each rank\n"
    "  collects and differentiates one group and rank 0 writes P.gpol: bitwise the weights of\n"
    "  --rollout-groups P (E must be a multiple of P; docs/SCALING.md).\n";

#define TP_MAX 1024

typedef struct tp_args {
  const char *out;
  char *files[TP_MAX];
  int n;
  long iters, seed, threads, episodes, steps, stop_after, groups;
  int resume, objective;
} tp_args;

static tp_args *tp_collecting;

static int tp_collect(const char *path, const struct stat *sb, int type, struct FTW *f) {
  (void)sb, (void)f;
  if (type == FTW_F && gopt_hlo_is_hlo_file(path) && tp_collecting->n < TP_MAX)
    tp_collecting->files[tp_collecting->n++] = strdup(path);
  return 0;
}

static int tp_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Adds a module, or the HLO files under a folder (sorted). */
static int tp_add(tp_args *a, const char *path) {
  struct stat st;
  if (stat(path, &st) || !S_ISDIR(st.st_mode)) {
    if (a->n >= TP_MAX) return cli_usage_error("train", "more than %d modules", TP_MAX);
    a->files[a->n++] = strdup(path);
    return 0;
  }
  int first = a->n;
  tp_collecting = a;
  nftw(path, tp_collect, 16, FTW_PHYS);
  qsort(a->files + first, (size_t)(a->n - first), sizeof *a->files, tp_cmp);
  return a->n > first ? 0 : cli_usage_error("train", "%s: no HLO modules in this folder", path);
}

static int tp_parse(int argc, char **argv, tp_args *a) {
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) return fputs(tp_help, stdout), 0;
    if (!strcmp(f, "--resume")) { a->resume = 1; continue; }
    if (f[0] != '-') {
      if (tp_add(a, f)) return 2;
      continue;
    }
    if (!v) return cli_usage_error("train", "%s: missing value", f);
    i++;
    long *dst = !strcmp(f, "--iters") ? &a->iters : !strcmp(f, "--seed") ? &a->seed : !strcmp(f, "--threads") ? &a->threads
              : !strcmp(f, "--episodes") ? &a->episodes : !strcmp(f, "--max-steps") ? &a->steps
              : !strcmp(f, "--stop-after") ? &a->stop_after : !strcmp(f, "--rollout-groups") ? &a->groups : NULL;
    if (!strcmp(f, "--method")) continue; /* "passes": checked by cli_train */
    if (!strcmp(f, "-o")) a->out = v;
    else if (!strcmp(f, "--objective") && (!strcmp(v, "ops") || !strcmp(v, "time"))) a->objective = !strcmp(v, "time");
    else if (!strcmp(f, "--objective")) return cli_usage_error("train", "--objective: '%s' is not ops or time", v);
    else if (!dst) return cli_usage_error("train", "unknown flag '%s' (with --method passes; see gopt train --method passes --help)", f);
    else if (cli_parse_long("train", f, v, dst == &a->seed ? 0 : 1, dst == &a->episodes ? 4096 : 1000000000L, dst)) return 2;
  }
  if (!a->n) return cli_usage_error("train", "--method passes: missing MODULE (see gopt train --method passes --help)");
  if (!a->out) return cli_usage_error("train", "missing -o");
  return -1;
}

static int tp_tty;
static long tp_total;
static double tp_t0, tp_last;
static char **tp_names;

/* Progress: every iteration with the ETA on a terminal, one line every 5 s otherwise. */
static void tp_on_iter(const gopt_learn_iter_info *in, void *user) {
  (void)user;
  double now = gopt_now();
  if (!tp_tty && now - tp_last < 5.0) return;
  tp_last = now;
  long k = (long)in->iter + 1;
  fprintf(stderr, "iter %ld/%ld  loss %+.4f  mean return %+.4f  best %+.4f  last %s  ETA %.0f s\n", k, tp_total,
          in->loss, in->reward, in->best_obj, tp_names[in->graph],
          k < tp_total ? (now - tp_t0) * (double)(tp_total - k) / (double)k : 0.0);
}

/* Loads the modules and their environments. */
static int tp_envs(const tp_args *a, gopt_pass_env **envs, gopt_error *err) {
  gopt_pass_env_opts eo = {a->objective, (int)a->steps, NULL, NULL};
  for (int i = 0; i < a->n; i++) {
    cli_model_opts mo = {0};
    gopt_graph *g = cli_load_model(a->files[i], &mo);
    if (!g) return 1;
    int rc = gopt_pass_env_new(g, &eo, &envs[i], err);
    gopt_graph_free(g);
    if (rc) {
      gopt_error_prefix(err, "%s: ", a->files[i]);
      fprintf(stderr, "gopt train: %s\n", err->msg);
      return 1;
    }
  }
  return 0;
}

int cli_train_passes(int argc, char **argv) {
  tp_args a = {.iters = 200, .seed = 1, .threads = 2, .episodes = 8, .steps = 32};
  int rc = tp_parse(argc, argv, &a);
  if (rc >= 0) goto done;
  rc = 1;
  gopt_error err = {0};
  gopt_pass_env **envs = calloc((size_t)a.n, sizeof *envs);
  gopt_seq_policy *p = NULL;
  gopt_nn_set_threads((int)a.threads);
  if (!envs || tp_envs(&a, envs, &err)) goto out;
  if (a.resume ? gopt_pass_rl_policy_load(a.out, &p, &err) : gopt_pass_rl_policy_new((uint64_t)a.seed, &p, &err)) {
    fprintf(stderr, "gopt train: %s\n", err.msg);
    goto out;
  }
  gopt_seq_train_opts to = {.iters = a.iters, .stop_after = a.stop_after, .seed = (uint64_t)a.seed,
                            .episodes = (int)a.episodes, .rollout_groups = (int)a.groups,
                            .dist = cli_mpi_learn_dist(), .on_iter = tp_on_iter};
  gopt_learn_train_result tr;
  tp_tty = isatty(2);
  tp_total = a.iters;
  tp_t0 = tp_last = gopt_now();
  tp_names = a.files;
  cli_task_sigint(1); /* Ctrl-C (SIGTERM from mpirun): stop at the next iteration boundary, write the policy */
  int trc = gopt_pass_rl_train(p, envs, (const char *const *)a.files, (size_t)a.n, &to, &tr, &err);
  cli_task_sigint(0);
  rc = cli_train_seq_finish(p, trc, &tr, cli_mpi_rank() == 0, a.out, a.iters, "pass-ordering agent", a.n, "modules", &err);
out:
  for (int i = 0; envs && i < a.n; i++) gopt_pass_env_free(envs[i]);
  free(envs);
  gopt_seq_policy_free(p);
done:
  for (int i = 0; i < a.n; i++) free(a.files[i]);
  return rc;
}
