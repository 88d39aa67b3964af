/* gopt/search.h: search methods over a task environment (task.h): random search, local search,
 * simulated annealing, Gibbs sampling, BRKGA, and exact methods for small graphs (ILP via GLPK,
 * dynamic programming over partial schedules for peak memory).
 *
 * Every method is bounded (evaluations and seconds), reproducible (same seed and thread count give
 * the same result), never returns worse than its start (in the ranking of gopt_env_result_cmp:
 * a result that fits in memory beats every over-memory one), stops early with the best so far when
 * gopt_search_request_stop() is called (the CLI does it on Ctrl-C), and reports progress on stderr
 * when asked. */
#ifndef GOPT_SEARCH_H
#define GOPT_SEARCH_H

#include <stdint.h>

#include "gopt/task.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called whenever the best improves in the ranking of gopt_env_result_cmp (for best-vs-evaluations
 * curves; best is the new best's objective, which can rise where the best first fits in memory). */
typedef void (*gopt_search_trace_fn)(uint64_t evals, double seconds, double best, void *user);
/* Called for every evaluated configuration (Gibbs sampling's data collection for the local
 * advantage model): x has nvars values. */
typedef void (*gopt_search_sample_fn)(const double *x, const gopt_env_result *r, void *user);
struct gopt_learn_dist; /* learn.h: the exchange hook of a distributed run (the CLI's MPI) */
/* REGAL's learned sampling: fills keys (n rows x genes, row-major) with fresh chromosomes of
 * REGAL's layout (gopt_search_regal_genes) drawn from the generator seeded by seed (a pure function
 * of seed and n); returns 0 or an error code. "brkga-regal" calls it for generation 0's fresh
 * chromosomes and for every generation's mutants instead of drawing uniform keys. */
typedef int (*gopt_search_keys_fn)(double *keys, size_t n, size_t genes, uint64_t seed, void *user);
/* The guided search's scores: for configuration x (nvars values) writes score[nvars], the
 * predicted |advantage| of changing each variable (the local advantage model, localadv.h).
 * Returns 0 or an error in err. */
typedef int (*gopt_search_guide_fn)(const double *x, double *score, void *user, gopt_error *err);

typedef struct gopt_search_opts {
  uint64_t budget_evals;     /* 0 = no limit (then budget_seconds must be > 0) */
  double budget_seconds;     /* 0 = no limit */
  uint64_t seed;
  int threads;               /* <= 0: all */
  int progress;              /* stderr progress: 0 none, 1 a bar with ETA redrawn (a terminal), 2 a
                                plain line every 2 s (a log; the CLI picks 1 or 2) */
  const double *x0;          /* start point (NULL: the environment's default) */
  /* method parameters (0 = the method's default; docs/SEARCH.md lists them) */
  double temperature;        /* SA initial temperature / Gibbs tau */
  int population;            /* BRKGA */
  double elite_frac, mutant_frac, elite_bias;
  double alpha;              /* guided: pick the node among the top alpha % by score (default 10) */
  int hops;                  /* khop/guided: radius k of the mutated neighbourhood (default 1) */
  gopt_search_guide_fn guide; /* guided: the scores (required); guide_user is passed to it */
  void *guide_user;
  gopt_search_trace_fn on_improve;
  gopt_search_sample_fn on_sample;
  void *user;
  gopt_search_keys_fn sample_keys; /* "brkga-regal" only (NULL: uniform keys); learn.h's REGAL */
  void *keys_user;
  /* Distributed evaluation (`gopt optimize` under mpirun, docs/SCALING.md): NULL or size 1 for one
   * process. Every rank runs the same search with the same options (one logical search); each
   * batch a method evaluates is split into size contiguous slices, rank r evaluates slice r and the
   * results are all-gathered in rank order, so every rank holds the results one process would
   * compute and the search is bitwise the one-process search (same x_best, result, evaluation
   * count). The stop request and the seconds budget are agreed on at those exchanges (any rank's
   * counts for all), so every rank stops at the same batch. Methods that evaluate one point at a
   * time (local, anneal, gibbs, khop, guided) and the exact ones ignore dist: they run whole on
   * every rank. */
  const struct gopt_learn_dist *dist;
} gopt_search_opts;

typedef struct gopt_search_result {
  gopt_env_result best;      /* evaluation of x_best */
  uint64_t evals;            /* evaluations used */
  double seconds;
  int interrupted;           /* stopped by gopt_search_request_stop */
  int optimal;               /* exact methods: proven optimal */
} gopt_search_result;

/* Method names: "random", "local", "anneal", "gibbs", "brkga", "brkga-regal", "brkga-tuned", "khop",
 * "guided", "ilp", "dp". brkga-tuned is brkga-regal (uniform keys) with the population and fractions
 * of a grid search on REGAL's training graphs (docs/LEARNED.md). "guided" needs opts->guide (the CLI
 * makes it from a local advantage model, localadv.h). */
size_t gopt_search_method_count(void);
const char *gopt_search_method_name(size_t i);
/* Whether method m applies to the environment's task (e.g. "dp" only to memory scheduling on one
 * device, exact methods only to small graphs); when not, *why says why. */
int gopt_search_applicable(const char *method, const gopt_env *e, const char **why);

/* Runs a method; x_best (nvars doubles) receives the best decision vector found. */
int gopt_search_run(const char *method, gopt_env *e, const gopt_search_opts *o, double *x_best,
                    gopt_search_result *res, gopt_error *err);

/* ---- REGAL's chromosome ("brkga-regal") ---------------------------------------------------
 * Genes in variable order: a DEVICE variable has card genes (its device affinities; the device is
 * the argmax, ties to the lower device), a PRIORITY variable one gene (the priority itself: the
 * simulator list-schedules ready nodes in decreasing priority), a FUSE variable one gene (> 0.5
 * fuses). Genes outside [0, 1] (NaN included) are clamped. docs/SEARCH.md compares it with
 * "brkga"'s one key per variable. */
size_t gopt_search_regal_genes(const gopt_env *e);
/* Decodes genes (gopt_search_regal_genes doubles) into x (nvars doubles); a pure function. */
void gopt_search_regal_decode(const gopt_env *e, const double *genes, double *x);

/* ---- start points ---------------------------------------------------------------------------
 * A start spec names where a search begins (opts->x0):
 *   NULL, "" or "default"  the environment's default vector (gopt_env_default)
 *   "best"                 the best of the default vector and every standard baseline of the task
 *                          that applies (gopt_baseline_task_name), each evaluated once and ranked
 *                          with gopt_env_result_cmp (fitting in memory first); ties keep the
 *                          earlier candidate (the default, then the baselines in their order). A
 *                          baseline that fails to run (other than out of memory) is left out.
 *   "history"              the best decisions the run history (history.h) holds for this graph
 *                          (structural hash), cluster name and task; an error when it holds none
 *   a baseline name        that baseline (possibly composite, "metis+mem_greedy"); it must apply
 *   anything else          a decisions file (decisions.h, docs/DECISIONS.md) read onto the
 *                          default vector with gopt_env_from_decisions
 * info->evals counts the evaluations spent choosing the start: 1 + the baselines run for "best",
 * 0 otherwise (a single start point is evaluated by the search itself, as its first evaluation).
 * A caller with an evaluation budget B gives the search gopt_search_budget_after_start(B, info)
 * so that start and search together use exactly B (docs/SEARCH.md). */
typedef struct gopt_search_start_info {
  char name[128];           /* "default", the chosen baseline's name, or the file path */
  uint64_t evals;           /* evaluations spent choosing the start */
  int evaluated;            /* result holds the start's evaluation (spec "best") */
  gopt_env_result result;
} gopt_search_start_info;

/* Resolves spec into x0 (nvars doubles) and info. Errors (one line, naming the start): unknown
 * name / unreadable or invalid decisions file (GOPT_EINVAL / GOPT_EIO / GOPT_EPARSE), a baseline
 * that does not apply to the task, a start with out-of-range values, out of memory. */
int gopt_search_start(gopt_env *e, const char *spec, double *x0, gopt_search_start_info *info,
                      gopt_error *err);
/* The evaluation budget left to the search after its start: budget - info->evals, at least 1
 * (the search's own evaluation of the start); 0 (no evaluation limit) stays 0. */
uint64_t gopt_search_budget_after_start(uint64_t budget, const gopt_search_start_info *info);

/* Asks running searches to stop and return their best so far (async-signal-safe). */
void gopt_search_request_stop(void);
void gopt_search_clear_stop(void);

#ifdef __cplusplus
}
#endif
#endif
