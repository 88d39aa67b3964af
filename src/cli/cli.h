/* cli.h: shared pieces of the gopt command's subcommands (model loading, option parsing, the
 * task commands' flags, environment and method runs). */
#ifndef GOPT_CLI_H
#define GOPT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/graph.h"
#include "gopt/search.h"
#include "gopt/task.h"

/* A subcommand: argc/argv start at the subcommand's own name. Returns the process exit code. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

int cli_info(int argc, char **argv);
/* gopt calibrate --gpu (cmd_calibrate_gpu.c), reached through cli_calibrate. */
int cli_calibrate_gpu(int argc, char **argv);
int cli_zoo(int argc, char **argv);
int cli_dot(int argc, char **argv);
int cli_convert(int argc, char **argv);

/* Per op type: count and FLOPs (cmd_info.c). */
typedef struct cli_op_row {
  const char *type;
  size_t count;
  double flops;
} cli_op_row;
/* The live nodes' op types, most frequent first (then by name), into *rows (malloc'd; NULL and 0
 * on out of memory); returns the row count. */
size_t cli_info_ops(const gopt_graph *g, cli_op_row **rows);

/* Options common to commands that load a model. */
typedef struct cli_model_opts {
  long batch;      /* > 0: bind the symbolic batch dim (an error when the model has none) */
  long default_batch; /* > 0 and batch unset: bind the symbolic batch dim when there is one */
  int training;    /* build the training step */
  int no_fold;     /* keep shape subgraphs as ops */
} cli_model_opts;

/* Parses a model-loading flag at argv[*i] (--batch N, --training, --no-fold), advancing *i past
 * its value. Returns 1 when it was one, 0 when it is some other argument, -1 after printing a
 * usage error. */
int cli_model_flag(const char *cmd, int argc, char **argv, int *i, cli_model_opts *o);

/* Parses the arguments of a command that takes MODEL, -o FILE and the model-loading flags
 * (convert, dot): --help prints help; MODEL is required, -o is optional (*out stays NULL).
 * Returns -1 when the command should go on, else its exit code (0 after --help, 2 after printing
 * a usage error). */
int cli_model_out_args(const char *cmd, const char *help, int argc, char **argv, const char **model,
                       const char **out, cli_model_opts *mo);

/* Loads MODEL (a .onnx path or a zoo spec), applies --batch/--training, infers shapes.
 * On failure prints one error line to stderr and returns NULL. */
gopt_graph *cli_load_model(const char *model, const cli_model_opts *o);

/* Prints "gopt CMD: MESSAGE" to stderr; returns 2 (usage errors) for convenience. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Parses a positive integer flag value; returns 0 and sets *out, or prints an error. */
int cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out);

/* ---- the task commands (optimize, compare; cli_task.c) ---- */

/* One method's result: the fresh evaluation of its decisions, evaluations and time. */
typedef struct cli_task_run {
  gopt_env_result r;
  uint64_t evals;
  double seconds;
  size_t repaired;
  int interrupted, optimal;
} cli_task_run;

/* The flags both task commands take. */
typedef struct cli_task_flags {
  const char *model, *task, *cluster, *out;
  long budget, threads, seed;
  int has_budget;
  double seconds;
  int json;
  int no_history;      /* --no-history: do not record the run (gopt/history.h) */
  const char *start;   /* --start: default, best (NULL: best), a baseline or a decisions file */
  const char *policy;  /* --policy: the learned method's .gpol (NULL: the shipped one) */
  long samples;        /* --samples K: the learned method's samples besides greedy */
  int has_samples;
  long finetune;       /* --finetune N: PPO fine-tuning evaluations (0: zero-shot) */
  int raw_decodes;     /* --raw-decodes: go's placement decodes without their post-process */
  int mpi_islands;     /* --mpi-search islands (else eval: one search, batches spread over ranks) */
  int mpi_search_set;  /* --mpi-search given (compare/report: run every method on all ranks) */
  double ga[4];        /* --brkga P,E,M,B: population, elite/mutant fractions, elite bias (0: defaults) */
  double alpha;        /* --alpha A: guided's top percentage of nodes (0: the default) */
  long hops;           /* --hops K: khop/guided neighbourhood radius (0: the default) */
  cli_model_opts mo;
} cli_task_flags;

/* Where the search methods of a command start (--start), resolved once per command. */
typedef struct cli_task_start {
  double *x0;                   /* [nvars] */
  gopt_search_start_info info;  /* name, evaluations spent choosing it */
} cli_task_start;

/* A command's own flag taking a value (e.g. --method): *value receives it. */
typedef struct cli_task_extra {
  const char *flag;
  const char **value;
} cli_task_extra;

/* Method kinds: CLI_METHOD_BASELINE, _SEARCH, _LEARNED ("go") or _GUIDED ("regal": a search
 * guided by a learned policy, started and budgeted like a search), 0 when unknown. */
enum { CLI_METHOD_BASELINE = 1, CLI_METHOD_SEARCH = 2, CLI_METHOD_LEARNED = 3, CLI_METHOD_GUIDED = 4 };
/* Kinds that run a search from --start under --budget (SEARCH, GUIDED). */
/* The help lines `optimize` and `compare` share: the guided search's and go's options. */
#define CLI_HELP_GUIDED_GO                                                                                   \
  "  --hops K       khop, guided: radius of the mutated neighbourhood (default 1)\n"                        \
  "  --alpha A      guided: pick the node among the top A % untried by predicted gain (default 10)\n"       \
  "  --samples K    go: K + 1 decisions, the first greedy, the rest samples (default 16; a list-order\n"    \
  "                 placement policy decodes greedily at its clusters, single nodes, a quarter, a\n"        \
  "                 sixteenth and a 64th of its clusters, on a training step each also with the\n"          \
  "                 gradients on their forward ops' devices, elsewhere at METIS's D and 2 D parts\n"      \
  "                 for D devices; then under a load cap (the balanced decode) its clusters and,\n"      \
  "                 on a training step, the parts; then samples at the variant whose greedy\n"          \
  "                 decision is best; a placement decode's constant subexpressions then move to\n"      \
  "                 their readers' device)\n"                                                            \
  "  --raw-decodes  go: placement decodes without those moves (the policy's own decisions)\n"

#define CLI_METHOD_SEARCHES(kind) ((kind) == CLI_METHOD_SEARCH || (kind) == CLI_METHOD_GUIDED)
int cli_task_method_kind(const char *name);
const char *cli_task_methods_text(int task, char *buf, size_t n);
int cli_task_applicable(const char *method, const gopt_env *e, const char **why);
/* A learned method's ("go", "regal") policy file for f and task into buf: --policy, else the
 * shipped one (gopt_learn_find_policy_kind). Returns 0, or an error in err saying where it looked. */
int cli_task_policy_path(const cli_task_flags *f, int task, const char *method, char *buf, size_t n,
                         gopt_error *err);
/* Runs a method: a baseline is one evaluation of its vector; a search method runs under so from
 * st (NULL: the default vector) with the evaluation budget left after the start
 * (gopt_search_budget_after_start), and out->evals counts the start's evaluations too; the
 * learned method ("go") loads its policy (f's --policy or the shipped one) and decides zero-shot
 * (greedy + --samples) or fine-tunes (--finetune), its curve through so->on_improve; "regal" runs
 * brkga-regal like a search with its policy's sampling (islands under mpirun). x receives
 * the decision vector. Returns 0 or an error in err. */
int cli_task_run_method(const char *method, gopt_env *e, const cli_task_flags *f,
                        const gopt_search_opts *so, const cli_task_start *st, double *x,
                        cli_task_run *out, gopt_error *err);
/* Resolves f->start (default "best") into s for e. Returns 0, or 2 after printing
 * "gopt CMD: --start: ..." (one line). */
int cli_task_start_resolve(const char *cmd, const cli_task_flags *f, gopt_env *e, cli_task_start *s);
void cli_task_start_free(cli_task_start *s); /* accepts a zeroed struct */
void cli_task_sigint(int install);
int cli_task_interrupted(void);
/* Under mpirun, when every rank runs the same sequence of methods: 1 on every rank when any
 * rank was interrupted (an all-gather of the flags, which then marks all interrupted), so all
 * stop before the same method; alone, cli_task_interrupted(). An MPI failure counts as a stop. */
int cli_task_interrupted_agreed(void);
const char *cli_task_fmt(int task, double v, char *buf, size_t n);
int cli_task_flag(const char *cmd, int argc, char **argv, int *i, cli_task_flags *f);

/* Parses a task command's arguments into f: --help, the shared flags (cli_task_flag), the
 * command's own value flags (extra), one MODEL; then requires MODEL, a known --task (*task
 * receives it) and --cluster. Returns -1 when the command should go on, else its exit code (0
 * after --help, 2 after printing a usage error). */
int cli_task_args(const char *cmd, const char *help, int argc, char **argv, const cli_task_extra *extra,
                  size_t n_extra, cli_task_flags *f, int *task);

/* Parses the cluster, loads the model and makes the task environment into *c, *g, *e (the caller
 * frees whatever was made). Returns 0, or 1 after printing "gopt CMD: ..." to stderr. */
int cli_task_env(const char *cmd, const cli_task_flags *f, int task, gopt_cluster **c, gopt_graph **g,
                 gopt_env **e);

/* Prints that method does not apply to the task (why may be NULL); returns 2. */
int cli_task_not_applicable(const char *cmd, const char *method, const char *task, const char *why);

/* Evaluates the default decisions (into x) with w into *rd. Returns 0, or 1 after printing. */
int cli_task_default(const char *cmd, gopt_env *e, gopt_env_ws *w, double *x, gopt_env_result *rd);

/* Evaluations per search method: --budget, else 1000 unless --seconds is given (then 0). */
uint64_t cli_task_budget(const cli_task_flags *f);

/* Search options from the flags (budget, seconds, seed, threads) and progress (non-zero: stderr is a
 * terminal, a bar with ETA; zero: a plain line every 2 s; GOPT_PROGRESS=0: none); the rest zero. */
void cli_task_search_opts(const cli_task_flags *f, int progress, gopt_search_opts *so);
/* cmd_localadv.c: the guided search's advantage model path (--policy, else the shipped
 * <task>_localadv.gpol) into buf; 0 or an error in err. */
int cli_localadv_model_path(const cli_task_flags *f, int task, char *buf, size_t n, gopt_error *err);
/* Runs "guided" (search.h) with the advantage model of f on e under o. */
int cli_localadv_guided(gopt_env *e, const cli_task_flags *f, const gopt_search_opts *o, double *x,
                        gopt_search_result *res, gopt_error *err);

/* A new JSON object holding model, nodes, task and cluster (in that order). */
struct json_t *cli_task_json_head(const cli_task_flags *f, const gopt_graph *g, const gopt_cluster *c);

/* Records one method's run (x: its decision vector, may be NULL) in the run history unless
 * --no-history or GOPT_HISTORY=0; a failure prints a warning and the command goes on. */
void cli_history_record(const char *cmd, const cli_task_flags *f, const gopt_env *e, const char *method,
                        const double *x, const cli_task_run *run);

/* `gopt train --method passes MODULE|DIR... -o P.gpol` (cmd_train_passes.c). */
int cli_train_passes(int argc, char **argv);

/* Hooks into modules that may be absent in a build (training). */
int cli_make_training(const char *model, gopt_graph *g, gopt_error *err);

/* ---- rewriting (cmd_rewrite.c) and its training (cmd_train_rewrite.c) ---- */
/* The shipped rules.json ($GOPT_RULES, else rules/rules.json where gopt_find_shipped looks) into buf;
 * returns 1 when found, else 0 with buf "". */
int cli_rewrite_find_rules(char *buf, size_t n);
/* Drops the data of float constants (all when keep is NULL and they hold more than 64 values,
 * else those with keep[t] == 0): the search works on structure. */
void cli_rewrite_strip_weights(gopt_graph *g, const uint8_t *keep);
/* `gopt train --method rewrite MODELS... -o P.gpol`. */
int cli_train_rewrite(int argc, char **argv);
/* gopt rewrite's progress line (cli_rewrite_progress.c): mode 1 redraws one line (stderr is a
 * terminal), 2 prints a plain line every 2 s (GOPT_PROGRESS=1 when not a terminal), 0 nothing
 * (not a terminal, or GOPT_PROGRESS=0). */
typedef struct cli_rewrite_progress_state {
  int mode;
  size_t lines;
  double last;
} cli_rewrite_progress_state;
int cli_rewrite_progress_mode(void);
struct gopt_rewrite_progress;
/* A gopt_rewrite_opts.progress callback; user is a cli_rewrite_progress_state. */
void cli_rewrite_progress(const struct gopt_rewrite_progress *p, void *user);
/* Ends a redrawn line (mode 1). */
void cli_rewrite_progress_end(cli_rewrite_progress_state *s);
/* Installs (1) or removes (0) the Ctrl-C handler: the first Ctrl-C asks the search to stop with
 * its best graph so far (gopt_rewrite_request_stop), a second ends the process. */
void cli_rewrite_sigint(int install);

/* ---- MPI (cli_mpi.c, docs/SCALING.md): rank 0 of 1 unless started by mpirun with GOPT_MPI ---- */
#include "gopt/learn.h"
void cli_mpi_init(int *argc, char ***argv);
void cli_mpi_finalize(void);
int cli_mpi_rank(void);
int cli_mpi_size(void);
/* gopt_learn_allgather_fn over MPI_COMM_WORLD (statuses first, so a failing rank never hangs the
 * others: every rank returns its error line). */
int cli_mpi_allgather(void *buf, size_t bytes, int rc, void *user, gopt_error *err);
/* The distributed-training hook for gopt_learn_train_opts.dist; NULL with one process. */
const gopt_learn_dist *cli_mpi_learn_dist(void);
/* MPI_Bcast of bytes from root (nothing with one process); 0 or GOPT_EIO. */
int cli_mpi_bcast(void *buf, size_t bytes, int root);
/* 1 (default): a search method under mpirun is distributed (cli_task_run_method: one logical
 * search whose batches the ranks evaluate, or islands with --mpi-search islands); `gopt compare`
 * sets 0 and spreads its methods over the ranks instead. */
extern int cli_mpi_search;
/* Island model (--mpi-search islands): every rank runs method with its own seed stream on its share
 * of o->budget_evals (the global budget), in rounds; after each round all continue from the best of
 * all ranks (migration). x_best/res: the best over all ranks, res->evals the sum over ranks. */
int cli_mpi_island_search(const char *method, gopt_env *e, const gopt_search_opts *o, double *x_best,
                          gopt_search_result *res, gopt_error *err);

#include "gopt/learn_seq.h"
/* cli_common.c: the end of gopt train --method rewrite|passes (error, write, interrupted, summary). */
int cli_train_seq_finish(gopt_seq_policy *p, int trc, const gopt_learn_train_result *tr, int save,
                         const char *out, long iters, const char *what, int n, const char *unit,
                         gopt_error *err);

#endif
