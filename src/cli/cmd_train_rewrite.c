/* cmd_train_rewrite.c: `gopt train --method rewrite MODELS... -o P.gpol`: trains the X-RLflow-style
 * rewrite agent (the learn module's sequential agent on the rewriting MDP of rewrite.h) with PPO on
 * the models and writes the policy; Ctrl-C writes it and --resume continues (as `gopt train`). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gopt/learn_seq.h"
#include "gopt/nn.h"
#include "gopt/rewrite.h"
#include "gopt/util.h"

static const char trw_help[] =
    "usage: gopt train --method rewrite MODEL... -o P.gpol [--iters N] [--episodes E] [--steps T]\n"
    "                  [--seed S] [--threads N] [--cluster C] [--rules F] [--resume] [--stop-after N]\n"
    "                  [--rollout-groups G] [--imitate M]\n"
    "  trains the rewrite agent (gopt rewrite --method rl) with PPO on the models (.onnx files or\n"
    "  zoo specs): per iteration E episodes (default 8) of at most T rewrites (default 16), reward =\n"
    "  the relative simulated cost change of each rewrite on cluster C (default V100).\n"
    "  --imitate M: the first M of the N iterations are a warm start that imitates steepest descent\n"
    "  (the cheapest candidate while it lowers the cost; cross-entropy, no PPO); default 0.\n"
    "  Defaults: --iters 100, --seed 1, --threads 2, --rules the shipped rules.json. Ctrl-C writes\n"
    "  P.gpol; --resume continues it exactly (same models and flags). Under `mpirun -np P` each rank\n"
    "  collects and differentiates one rollout group: bitwise the weights of --rollout-groups P.\n";

#define TRW_MAX 256

typedef struct trw_args {
  const char *out, *cluster, *rules;
  const char *models[TRW_MAX];
  int n_models;
  long iters, seed, threads, episodes, steps, stop_after, groups, imitate;
  int resume;
} trw_args;

static int trw_parse(int argc, char **argv, trw_args *a) {
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) { fputs(trw_help, stdout); return 0; }
    if (!strcmp(f, "--resume")) { a->resume = 1; continue; }
    if (f[0] != '-') {
      if (a->n_models >= TRW_MAX) return cli_usage_error("train", "more than %d models", TRW_MAX);
      a->models[a->n_models++] = f;
      continue;
    }
    int takes = !strcmp(f, "--method") || !strcmp(f, "-o") || !strcmp(f, "--cluster") || !strcmp(f, "--rules") ||
                !strcmp(f, "--iters") || !strcmp(f, "--seed") || !strcmp(f, "--threads") || !strcmp(f, "--episodes") ||
                !strcmp(f, "--steps") || !strcmp(f, "--stop-after") || !strcmp(f, "--rollout-groups") ||
                !strcmp(f, "--imitate");
    if (!takes) return cli_usage_error("train", "unknown flag '%s' (with --method rewrite; see gopt train --method rewrite --help)", f);
    if (!v) return cli_usage_error("train", "%s: missing value", f);
    i++;
    if (!strcmp(f, "--method")) continue; /* "rewrite": checked by cli_train */
    if (!strcmp(f, "-o")) a->out = v;
    else if (!strcmp(f, "--cluster")) a->cluster = v;
    else if (!strcmp(f, "--rules")) a->rules = v;
    else if (!strcmp(f, "--imitate")) {
      if (cli_parse_long("train", f, v, 0, 1000000000L, &a->imitate)) return 2;
    } else if (cli_parse_long("train", f, v, !strcmp(f, "--seed") ? 0 : 1, !strcmp(f, "--episodes") ? 4096 : 1000000000L,
                            !strcmp(f, "--iters") ? &a->iters : !strcmp(f, "--seed") ? &a->seed
                            : !strcmp(f, "--threads") ? &a->threads : !strcmp(f, "--episodes") ? &a->episodes
                            : !strcmp(f, "--steps") ? &a->steps : !strcmp(f, "--rollout-groups") ? &a->groups
                            : &a->stop_after)) return 2;
  }
  if (!a->n_models) return cli_usage_error("train", "--method rewrite: missing MODEL (see gopt train --method rewrite --help)");
  if (!a->out) return cli_usage_error("train", "missing -o");
  return -1;
}

static int trw_tty;
static long trw_total;
static double trw_t0, trw_last;
static const char *const *trw_names;

/* Progress: every iteration with the ETA on a terminal, one plain line every 2 s otherwise. */
static void trw_on_iter(const gopt_learn_iter_info *in, void *user) {
  (void)user;
  double now = gopt_now();
  if (!trw_tty && now - trw_last < 2.0) return;
  trw_last = now;
  long k = (long)in->iter + 1;
  double eta = k < trw_total ? (now - trw_t0) * (double)(trw_total - k) / (double)k : 0;
  fprintf(stderr, "iter %ld/%ld  loss %+.4f  mean return %+.4f  best return %+.4f  lr %.2e  last %s  ETA %.0f s\n", k,
          trw_total, in->loss, in->reward, in->best_obj, in->lr, trw_names[in->graph], eta);
}

int cli_train_rewrite(int argc, char **argv) {
  trw_args a = {.iters = 100, .seed = 1, .threads = 2, .episodes = 8, .steps = 16};
  int rc = trw_parse(argc, argv, &a);
  if (rc >= 0) return rc;
  rc = 1;
  gopt_error err = {0};
  gopt_graph *gs[TRW_MAX] = {0};
  gopt_cluster *c = NULL;
  gopt_ruleset *rs = NULL;
  gopt_seq_policy *p = NULL;
  char rules[1200] = "";
  gopt_nn_set_threads((int)a.threads);
  if (gopt_cluster_parse(a.cluster ? a.cluster : "V100", &c, &err)) { fprintf(stderr, "gopt train: %s\n", err.msg); goto done; }
  if (a.rules) snprintf(rules, sizeof rules, "%s", a.rules);
  else cli_rewrite_find_rules(rules, sizeof rules);
  if (rules[0] ? gopt_ruleset_load(rules, &rs, &err) : !(rs = gopt_ruleset_builtin())) {
    fprintf(stderr, "gopt train: %s\n", rules[0] ? err.msg : "out of memory");
    goto done;
  }
  for (int i = 0; i < a.n_models; i++) {
    cli_model_opts mo = {.default_batch = 1};
    if (!(gs[i] = cli_load_model(a.models[i], &mo))) goto done;
    cli_rewrite_strip_weights(gs[i], NULL);
  }
  if (a.resume) {
    if (gopt_seq_policy_load(a.out, GOPT_REWRITE_RL_KIND, &p, &err)) { fprintf(stderr, "gopt train: %s\n", err.msg); goto done; }
    if (!gopt_seq_policy_trainset(p)[0]) { fprintf(stderr, "gopt train: %s: no training state to resume\n", a.out); goto done; }
  } else {
    gopt_seq_arch arch = gopt_rewrite_rl_arch();
    if (gopt_seq_policy_new(GOPT_REWRITE_RL_KIND, &arch, (uint64_t)a.seed, &p, &err)) { fprintf(stderr, "gopt train: %s\n", err.msg); goto done; }
  }
  gopt_rewrite_opts ro = {.cluster = c, .seed = (uint64_t)a.seed};
  gopt_seq_train_opts to = {.iters = a.iters, .stop_after = a.stop_after, .imitate_iters = a.imitate, .seed = (uint64_t)a.seed,
                            .episodes = (int)a.episodes, .max_steps = (int)a.steps, .rollout_groups = (int)a.groups,
                            .dist = cli_mpi_learn_dist(), .on_iter = trw_on_iter};
  gopt_learn_train_result tr;
  trw_tty = isatty(2);
  trw_total = a.iters;
  trw_t0 = trw_last = gopt_now();
  trw_names = a.models;
  cli_task_sigint(1); /* Ctrl-C: stop at the next iteration boundary, write the policy */
  int trc = gopt_rewrite_rl_train((const gopt_graph *const *)gs, a.models, (size_t)a.n_models, rs, &ro, p, &to, &tr, &err);
  cli_task_sigint(0);
  rc = cli_train_seq_finish(p, trc, &tr, cli_mpi_rank() == 0, a.out, a.iters, "rewrite agent", a.n_models,
                            "models", &err);
done:
  for (int i = 0; i < a.n_models; i++) gopt_graph_free(gs[i]);
  gopt_seq_policy_free(p);
  gopt_ruleset_free(rs);
  gopt_cluster_free(c);
  return rc;
}
