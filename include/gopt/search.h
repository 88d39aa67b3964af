/* gopt/search.h: search methods over a task environment (task.h): random search, local search,
 * simulated annealing, Gibbs sampling, BRKGA, and exact methods for small graphs (ILP via GLPK,
 * dynamic programming over partial schedules for peak memory).
 *
 * Every method is bounded (evaluations and seconds), reproducible (same seed and thread count give
 * the same result), never returns worse than its start, stops early with the best so far when
 * gopt_search_request_stop() is called (the CLI does it on Ctrl-C), and reports progress on stderr
 * when asked. */
#ifndef GOPT_SEARCH_H
#define GOPT_SEARCH_H

#include <stdint.h>

#include "gopt/task.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called whenever the best objective improves (for best-vs-evaluations curves). */
typedef void (*gopt_search_trace_fn)(uint64_t evals, double seconds, double best, void *user);
/* Called for every evaluated configuration (Gibbs sampling's data collection for the local
 * advantage model): x has nvars values. */
typedef void (*gopt_search_sample_fn)(const double *x, const gopt_env_result *r, void *user);

typedef struct gopt_search_opts {
  uint64_t budget_evals;     /* 0 = no limit (then budget_seconds must be > 0) */
  double budget_seconds;     /* 0 = no limit */
  uint64_t seed;
  int threads;               /* <= 0: all */
  int progress;              /* 1: progress line on stderr (the CLI sets it when stderr is a tty) */
  const double *x0;          /* start point (NULL: the environment's default) */
  /* method parameters (0 = the method's default; docs/SEARCH.md lists them) */
  double temperature;        /* SA initial temperature / Gibbs tau */
  int population;            /* BRKGA */
  double elite_frac, mutant_frac, elite_bias;
  gopt_search_trace_fn on_improve;
  gopt_search_sample_fn on_sample;
  void *user;
} gopt_search_opts;

typedef struct gopt_search_result {
  gopt_env_result best;      /* evaluation of x_best */
  uint64_t evals;            /* evaluations used */
  double seconds;
  int interrupted;           /* stopped by gopt_search_request_stop */
  int optimal;               /* exact methods: proven optimal */
} gopt_search_result;

/* Method names: "random", "local", "anneal", "gibbs", "brkga", "ilp", "dp". */
size_t gopt_search_method_count(void);
const char *gopt_search_method_name(size_t i);
/* Whether method m applies to the environment's task (e.g. "dp" only to memory scheduling on one
 * device, exact methods only to small graphs); when not, *why says why. */
int gopt_search_applicable(const char *method, const gopt_env *e, const char **why);

/* Runs a method; x_best (nvars doubles) receives the best decision vector found. */
int gopt_search_run(const char *method, gopt_env *e, const gopt_search_opts *o, double *x_best,
                    gopt_search_result *res, gopt_error *err);

/* Asks running searches to stop and return their best so far (async-signal-safe). */
void gopt_search_request_stop(void);
void gopt_search_clear_stop(void);

#ifdef __cplusplus
}
#endif
#endif
