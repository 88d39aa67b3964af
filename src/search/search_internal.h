/* search_internal.h: what the search methods (src/search/search_*.c) share: a small seeded PRNG
 * (splitmix64 seeding xoshiro256**), the per-run context that counts evaluations, enforces the
 * budgets and the stop flag, tracks the best point (calling on_sample / on_improve) and prints the
 * progress line, deterministic batch evaluation over a pool of per-thread workspaces, BRKGA's
 * decoder, and the graph model the exact methods build (topological positions, activations,
 * consumers, resident bytes) mirroring the simulator's memory accounting. */
#ifndef GOPT_SEARCH_INTERNAL_H
#define GOPT_SEARCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/search.h"
#include "util/util_internal.h"

/* ---- PRNG ----------------------------------------------------------------------------------- */
typedef struct search_rng {
  uint64_t s[4];
} search_rng;

/* Seeds from (seed, stream): different streams give independent sequences for one seed. */
static inline void search_rng_seed(search_rng *r, uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL);
  for (int i = 0; i < 4; i++) r->s[i] = gopt_splitmix64(&x);
}
static inline uint64_t search_rng_next(search_rng *r) {
  uint64_t *s = r->s;
  uint64_t x = s[1] * 5, res = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = (s[3] << 45) | (s[3] >> 19);
  return res;
}
/* Uniform in [0, 1) with 53 random bits. */
static inline double search_rng_uniform(search_rng *r) {
  return (double)(search_rng_next(r) >> 11) * 0x1.0p-53;
}
/* Uniform integer in [0, n) (n >= 1). */
static inline uint32_t search_rng_below(search_rng *r, uint32_t n) {
  uint32_t k = (uint32_t)(search_rng_uniform(r) * (double)n);
  return k < n ? k : n - 1;
}

/* ---- per-run context ------------------------------------------------------------------------ */
typedef struct search_ctx {
  gopt_env *e;
  const gopt_search_opts *o;
  const char *method;
  size_t nv;
  const gopt_env_var *vars;
  int threads;
  gopt_env_ws **ws;          /* [threads] */
  double t0;
  uint64_t evals;            /* evaluations this run issued */
  double *best_x;            /* [nv] */
  gopt_env_result best;
  double start_obj;          /* objective of the start point (> 0 used as a scale) */
  double last_progress;
  int progress_lines;    /* plain progress lines printed (progress mode 2) */
  int interrupted;
  int optimal;
  gopt_error *err;
  const struct gopt_learn_dist *dist; /* distributed batch evaluation (size > 1), else NULL */
  int dist_stop, dist_timeup;         /* agreed at the last exchange (search_done reads these) */
} search_ctx;

/* Whether gopt_search_request_stop() was called (and not cleared). */
int search_stop_requested(void);
/* Remaining evaluations (UINT64_MAX when unlimited). */
uint64_t search_evals_left(const search_ctx *c);
/* 1 when the run must end now: stop flag (sets interrupted), seconds or evaluations used up. */
int search_done(search_ctx *c);
/* Seconds since the run started. */
double search_elapsed(const search_ctx *c);
/* Records an evaluated point: on_sample, best update (strictly better in the ranking of
 * gopt_env_result_cmp: fitting in memory first, then the lower objective) with on_improve,
 * progress. */
void search_offer(search_ctx *c, const double *x, const gopt_env_result *r);
/* Full evaluation of x on workspace w (counted, offered). */
int search_eval(search_ctx *c, gopt_env_ws *w, const double *x, gopt_env_result *r);
/* Incremental evaluation (gopt_env_evaluate_delta: idx[0..k) changed since w's last x). */
int search_eval_delta(search_ctx *c, gopt_env_ws *w, const double *x, const size_t *idx, size_t k,
                      gopt_env_result *r);
/* Evaluates n points (row-major n x nv) over the thread pool; out[i] is independent of the
 * thread count; offers them in index order. Errors: the lowest failing index's. */
int search_eval_batch(search_ctx *c, const double *xs, size_t n, gopt_env_result *out);
/* The same without offering (counted; the caller offers). */
int search_eval_batch_raw(search_ctx *c, const double *xs, size_t n, gopt_env_result *out);
/* Checks that x is a valid decision vector (integers in range for discrete kinds, [0,1] for
 * priorities); the error names the variable. */
int search_check_x(const gopt_env_var *vars, size_t nv, const double *x, gopt_error *err);
/* Indices of the variables a move can change (PRIORITY, or card > 1) into idx; returns count. */
size_t search_movable_vars(const search_ctx *c, size_t *idx);
/* Fisher-Yates shuffle of a[0..n) from r. */
void search_shuffle(search_rng *r, size_t *a, size_t n);
/* A uniformly random value for variable v (DEVICE/FUSE: integer below card; PRIORITY: [0,1)). */
double search_random_value(search_rng *r, const gopt_env_var *v);
/* Relative cost difference (b - a) / scale, scale = |start objective| (1 when 0). */
double search_rel(const search_ctx *c, double a, double b);
/* Progress line on stderr when opts->progress (rate-limited; force for the final line). */
void search_progress(search_ctx *c, int force);

/* Methods: each runs from c->best_x / c->best (the evaluated start point; c->ws[0]'s last
 * evaluated point is that start point, so a method may continue from it with deltas). */
int search_random(search_ctx *c);
int search_local(search_ctx *c);
int search_anneal(search_ctx *c);
int search_gibbs(search_ctx *c);
int search_brkga(search_ctx *c);
int search_brkga_regal(search_ctx *c); /* REGAL's chromosome, opts->sample_keys when set */
int search_brkga_tuned(search_ctx *c); /* REGAL's chromosome, uniform, tuned parameters */
int search_khop(search_ctx *c);
int search_guided(search_ctx *c);
int search_ilp(search_ctx *c);
int search_dp(search_ctx *c);
/* Exact methods' applicability (why set when not). */
int search_ilp_applicable(const gopt_env *e, const char **why);
int search_dp_applicable(const gopt_env *e, const char **why);

/* ---- BRKGA decoding ------------------------------------------------------------------------- */
/* Decodes a random-key chromosome keys[nv] in [0,1] into x[nv]: DEVICE = floor(key * card)
 * (clamped to card - 1), FUSE = key > 0.5, PRIORITY = key. A pure function of keys. */
void search_brkga_decode(const gopt_env_var *vars, size_t nv, const double *keys, double *x);
/* A chromosome that decodes to x (DEVICE d -> (d + 0.5) / card, FUSE -> 0.25 / 0.75,
 * PRIORITY -> x). */
void search_brkga_encode(const gopt_env_var *vars, size_t nv, const double *x, double *keys);

/* REGAL's chromosome (search_regal.c, layout in search.h): its length, decoder (a pure function
 * of the genes) and an encoder whose chromosome decodes to x (the chosen device's gene 0.75, the
 * others 0.25; PRIORITY -> x; FUSE -> 0.25 / 0.75). */
size_t search_regal_len(const gopt_env_var *vars, size_t nv);
void search_regal_decode(const gopt_env_var *vars, size_t nv, const double *genes, double *x);
void search_regal_encode(const gopt_env_var *vars, size_t nv, const double *x, double *genes);

/* Priority grid Gibbs and local search use for PRIORITY variables: (k + 0.5) / GRID. */
#define SEARCH_PRIO_GRID 8

/* ---- graph model for the exact methods ------------------------------------------------------ */
typedef struct search_model {
  int32_t n;                 /* live nodes, by topological position */
  int32_t *node;             /* [n] position -> node id */
  int32_t *pos;              /* [g->nodes.n] node id -> position, -1 dead */
  int32_t n_act;
  double *act_bytes;         /* [n_act] */
  int32_t *act_prod;         /* [n_act] producing position */
  uint8_t *act_out;          /* [n_act] graph output */
  int32_t *out_off, *out_act;   /* CSR [n + 1]: distinct acts a position produces */
  int32_t *in_off, *in_act;     /* CSR [n + 1]: distinct acts a position reads */
  int32_t *cons_off, *cons;     /* CSR [n_act + 1]: distinct consumer positions of each act */
  int32_t n_res;
  double *res_bytes;         /* [n_res] constants and graph inputs read by live nodes */
  int32_t *res_off, *res_cons;  /* CSR [n_res + 1]: distinct consumer positions */
  int32_t *pred_off, *pred;     /* CSR [n + 1]: distinct producer positions feeding a position */
} search_model;

int search_model_build(const gopt_graph *g, search_model *m, gopt_error *err);
void search_model_free(search_model *m); /* accepts a zeroed struct */
/* Index of the variable of `kind` for each position into idx[n] (-1 when the node has none). */
void search_model_var_index(const search_model *m, const gopt_env *e, int kind, int32_t *idx);
/* Integer knob from the environment variable `name` (> 0), else dflt. */
long search_env_knob(const char *name, long dflt);

#endif
