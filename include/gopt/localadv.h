/* gopt/localadv.h: local advantage functions (the local-advantage seed; docs/LEARNED.md "Local
 * advantage"): the dataset Gibbs sampling collects (`gopt collect`), the advantage model (a .gpol
 * of the learn module: its encoder with the current configuration as extra input, its per-choice
 * heads read as scores), its supervised training (`gopt train --method localadv`) and the scores
 * that steer the "guided" search (search.h).
 *
 * Advantage. For a discrete variable v (FUSE or DEVICE) in a configuration y, the advantage of
 * choice k is f(y_v = k | rest) = cost(y_v = k, rest) - cost(y_v = d_v, rest), d_v the
 * environment's default value of v (gopt_env_default). The model predicts it per variable and
 * choice as s[v][k] - s[v][d_v] from the head's scores s, in the transformed unit
 * sign(a) log(1 + |a| / sigma), sigma the graph's median |a|.
 *
 * Dataset file (little-endian, checksummed, written atomically):
 *   "GOPTLAD1" | u32 version | u32 task | u32 n_graphs | per graph: u32 len + model spec, u32 len +
 *   cluster spec, u64 gopt_graph_hash, u32 nvars, u8 card[nvars], u8 default[nvars], u64 n_records,
 *   records {u32 variable, u8 config[nvars], f64 cost[card[variable]]} | u64 FNV-1a-64 of all bytes
 *   before it. */
#ifndef GOPT_LOCALADV_H
#define GOPT_LOCALADV_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/learn.h"
#include "gopt/search.h"
#include "gopt/task.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GOPT_LADATA_VERSION 1

/* ---- dataset ----------------------------------------------------------------------------- */
typedef struct gopt_ladata gopt_ladata;

/* An empty dataset for task (fusion or placement: tasks whose variables are all discrete). */
int gopt_ladata_new(int task, gopt_ladata **out, gopt_error *err);
void gopt_ladata_free(gopt_ladata *d); /* accepts NULL */
/* Runs Gibbs sampling ("gibbs", search.h) on e under o (budget, seed, temperature; o->x0 and
 * o->on_sample are the collector's own) and adds every variable visit whose choices were all
 * evaluated as one record of graph `model` on `cluster` (the specs the trainer rebuilds the
 * environment from). *n_records (may be NULL) receives the records added. */
int gopt_ladata_collect(gopt_ladata *d, gopt_env *e, const char *model, const char *cluster,
                        const gopt_search_opts *o, size_t *n_records, gopt_error *err);
int gopt_ladata_save(const gopt_ladata *d, const char *path, gopt_error *err);
/* Reads a dataset; a file with another magic or version, truncated, corrupted (checksum) or
 * inconsistent gets one line naming the file. */
int gopt_ladata_load(const char *path, gopt_ladata **out, gopt_error *err);
/* Appends src's graphs to d (same task). */
int gopt_ladata_append(gopt_ladata *d, const gopt_ladata *src, gopt_error *err);
int gopt_ladata_task(const gopt_ladata *d);
size_t gopt_ladata_graphs(const gopt_ladata *d);
const char *gopt_ladata_model(const gopt_ladata *d, size_t g);
const char *gopt_ladata_cluster(const gopt_ladata *d, size_t g);
size_t gopt_ladata_records(const gopt_ladata *d, size_t g);
/* Whether e is the environment graph g was collected on (task, variables, defaults, graph hash);
 * when not, err says what differs. */
int gopt_ladata_check_env(const gopt_ladata *d, size_t g, const gopt_env *e, gopt_error *err);

/* ---- labels -------------------------------------------------------------------------------- */
/* sign(a) * log(1 + |a| / sigma) (sigma > 0). */
double gopt_localadv_label(double a, double sigma);
/* sigma of one graph: the median of |a[0..n)|; when that is 0 (most choices change nothing), the
 * median of the nonzero |a|; 1 when all are 0 or n == 0. */
double gopt_localadv_sigma(const double *a, size_t n);

/* ---- model and training ------------------------------------------------------------------ */
/* A fresh advantage model for task (a gopt_policy whose file says "model localadv"). */
int gopt_localadv_new(int task, const gopt_learn_arch *arch, uint64_t seed, gopt_policy **out,
                      gopt_error *err);
/* Whether p is an advantage model (else a GO policy). */
int gopt_policy_is_localadv(const gopt_policy *p);
/* Loads an advantage model (refuses a GO policy and a model for another task, one line naming
 * the file). */
int gopt_localadv_load(const char *path, int task, gopt_policy **out, gopt_error *err);

typedef struct gopt_localadv_train_opts {
  int64_t steps;           /* minibatch steps of the run (a resumed run gives the same value) */
  int64_t stop_after;      /* > 0: return after this many total steps (as an interrupt) */
  uint64_t seed;           /* minibatch sampling */
  int batch;               /* labels per minibatch (default 16) */
  float lr;                /* Adam (default 3e-3; warmup + cosine) */
  double top_frac;         /* prioritised sampling: the top fraction of |label| per graph (default 0.1) */
  double top_prob;         /* ... drawn from with this probability (default 0.9) */
  void (*on_step)(int64_t step, int64_t steps, double loss, void *user);
  void *user;
} gopt_localadv_train_opts;

/* Trains p (an advantage model) by regression on the dataset's labels, one environment per
 * dataset graph in envs (built from gopt_ladata_model / _cluster and checked with
 * gopt_ladata_check_env). A model with trainer state (an interrupted run's file) continues
 * exactly where it stopped. Returns 0 (res->interrupted when stopped by gopt_learn_request_stop
 * or stop_after) or an error. */
int gopt_localadv_train(gopt_policy *p, const gopt_ladata *d, gopt_env *const *envs,
                        const gopt_localadv_train_opts *o, gopt_learn_train_result *res,
                        gopt_error *err);

/* Predicted |advantage| of each variable in configuration x (nvars values) on e, in the
 * transformed unit: adv[i] = max over choices k != d_i of |s[i][k] - s[i][d_i]| (how much the
 * decision matters; the guided search ranks by the signed gain, gopt_localadv_guide_fn); 0 for
 * variables the model does not score. One forward pass. */
int gopt_localadv_predict(gopt_policy *p, const gopt_env *e, const double *x, double *adv,
                          gopt_error *err);

/* The held-out ranking quality of m on a dataset (envs as for training): per graph, Kendall tau-b
 * (gopt_sim_kendall_tau) of
 * the predicted against the true advantages of every label into tau[g], and of their absolute
 * values (what the guided search ranked by until 29 Nov) into tau_abs[g]. */
int gopt_localadv_evaluate(gopt_policy *m, const gopt_ladata *d, gopt_env *const *envs, double *tau,
                           double *tau_abs, gopt_error *err);

/* A gopt_search_guide_fn for the "guided" search: user is a gopt_localadv_guide whose model and
 * env are set and state is NULL (the encoding is prepared on the first call and kept in state;
 * release it with gopt_localadv_guide_free). score[i] is the predicted gain of moving variable i
 * from its value c in x: max over choices k != c of s[i][c] - s[i][k] (negative when every move is
 * predicted to cost more), what the guided search ranks by; -inf for variables the model does not
 * score. */
typedef struct gopt_localadv_guide {
  gopt_policy *model;
  const gopt_env *env;
  void *state;
} gopt_localadv_guide;
int gopt_localadv_guide_fn(const double *x, double *score, void *user, gopt_error *err);
void gopt_localadv_guide_free(gopt_localadv_guide *g); /* frees state; accepts NULL */

/* Finds the shipped advantage model <task>_localadv.gpol where gopt_learn_find_policy looks. */
int gopt_localadv_find(int task, const char *exe, char *buf, size_t n, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
