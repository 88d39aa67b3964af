/* pass_rl.c: the learned pass-ordering agent: the pass environment (pass_env.c) seen through the
 * learn module's sequential agent (gopt/learn_seq.h). State = the current graph's live entry nodes
 * (opcode class, size and degree features) and dataflow edges; candidates = every registered pass
 * (features: pass one-hot, times applied, last result, applied last, progress) plus STOP; reward
 * = the environment's normalised cost reduction. Training (gopt_pass_rl_train) and ordering one
 * module (gopt_pass_rl_order: the greedy episode, then sampled episodes while the budget lasts,
 * keeping the best prefix seen). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/learn_seq.h"
#include "gopt/passes.h"
#include "ops/ops_hlo.h"
#include "gopt/util.h"
#include "passes/pass_env_internal.h"
#include "search/search_internal.h"

#define RL_CLASSES 17
#define RL_NODE_FEAT (RL_CLASSES + 7)
#define RL_CAND_FEAT (GOPT_PASS_RL_MAX_PASSES + 4)

/* Opcode class of an HLO node (0 .. RL_CLASSES-1; the last is "other"). */
static int rl_class(const char *op) {
  static const char *const cls[RL_CLASSES - 1] = {
      "add subtract multiply divide maximum minimum power remainder and or xor atan2 ",
      "negate exponential log sqrt rsqrt tanh abs sign floor ceil cosine sine not exponential-minus-one log-plus-one ",
      "logistic ", "convert bitcast-convert ", "compare select clamp ", "broadcast ",
      "reshape bitcast copy ", "transpose ", "slice dynamic-slice dynamic-update-slice ",
      "concatenate pad ", "dot convolution ", "reduce reduce-window ", "tuple get-tuple-element ",
      "call fusion while conditional ", "batch-norm-training batch-norm-inference batch-norm-grad ",
      "custom-call iota rng rng-bit-generator gather scatter sort "};
  if (!op) return RL_CLASSES - 1;
  size_t n = strlen(op);
  for (int c = 0; c < RL_CLASSES - 1; c++)
    for (const char *s = strstr(cls[c], op); s; s = strstr(s + 1, op))
      if ((s == cls[c] || s[-1] == ' ') && s[n] == ' ') return c;
  return RL_CLASSES - 1;
}

typedef struct rl_env {
  gopt_pass_env **envs;     /* [n] one per training graph (or the one module) */
  size_t n, cur;
  int last_action, np;
  float *nf, *cf;
  int32_t *edges, *anchor, *idx;
  size_t cap_nodes, cap_edges;
  /* best prefix over all episodes (ordering one module) */
  int track;
  double best_c;
  int *best;
  size_t best_n;
} rl_env;

static int rl_grow(rl_env *r, size_t nodes, size_t edges, gopt_error *err) {
  if (nodes > r->cap_nodes) {
    free(r->nf);
    free(r->idx);
    r->nf = malloc(nodes * RL_NODE_FEAT * sizeof *r->nf);
    r->idx = malloc(nodes * sizeof *r->idx);
    r->cap_nodes = nodes;
  }
  if (edges > r->cap_edges) {
    free(r->edges);
    r->edges = malloc(2 * edges * sizeof *r->edges);
    r->cap_edges = edges;
  }
  if (!r->nf || !r->idx || !r->edges) {
    r->cap_nodes = r->cap_edges = 0;
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  return 0;
}

static int rl_observe(void *u, gopt_seq_obs *obs, gopt_error *err) {
  rl_env *r = u;
  gopt_pass_env *e = r->envs[r->cur];
  const gopt_graph *g = gopt_pass_env_graph(e);
  size_t nn = g->nodes.n, ne = gopt_graph_edge_count(g) + 1, live = 0, k = 0;
  if (rl_grow(r, nn + 1, ne, err)) return GOPT_ENOMEM;
  for (size_t i = 0; i < nn; i++) r->idx[i] = gopt_node_alive(g, (int32_t)i) ? (int32_t)live++ : -1;
  if (live == 0) { /* an empty module: one zero node */
    memset(r->nf, 0, RL_NODE_FEAT * sizeof *r->nf);
    live = 1;
  }
  for (size_t i = 0; i < nn; i++) {
    if (r->idx[i] < 0) continue;
    const gopt_node *nd = &g->nodes.a[i];
    float *f = r->nf + (size_t)r->idx[i] * RL_NODE_FEAT;
    memset(f, 0, RL_NODE_FEAT * sizeof *f);
    f[rl_class(ops_hlo_opcode(g, (int32_t)i))] = 1;
    int32_t t0 = nd->n_out ? gopt_node_output(g, (int32_t)i, 0) : -1;
    int64_t ne0 = t0 >= 0 ? gopt_tensor_numel(g, t0) : 0;
    f[RL_CLASSES] = (float)(log1p((double)(ne0 > 0 ? ne0 : 0)) / 20.0);
    f[RL_CLASSES + 1] = (float)nd->n_in / 4.0f;
    f[RL_CLASSES + 2] = t0 >= 0 ? (float)gopt_tensor_use_count(g, t0) / 4.0f : 0;
    for (int j = 0; j < nd->n_in; j++) {
      int32_t t = gopt_node_input(g, (int32_t)i, j);
      if (t < 0) continue;
      const gopt_tensor *ti = &g->tensors.a[t];
      if (ti->flags & GOPT_T_CONST) f[RL_CLASSES + 3] = 1;
      if (ti->flags & GOPT_T_INPUT) f[RL_CLASSES + 4] = 1;
      if (ti->producer >= 0 && r->idx[ti->producer] >= 0 && k < ne) {
        r->edges[2 * k] = r->idx[ti->producer];
        r->edges[2 * k + 1] = r->idx[i];
        k++;
      }
    }
    if (t0 >= 0) f[RL_CLASSES + 5] = (g->tensors.a[t0].flags & GOPT_T_OUTPUT) ? 1.0f : 0.0f;
    f[RL_CLASSES + 6] = (float)r->idx[i] / (float)live;
  }
  for (int p = 0; p < r->np; p++) {
    float *f = r->cf + (size_t)p * RL_CAND_FEAT;
    memset(f, 0, RL_CAND_FEAT * sizeof *f);
    f[p] = 1;
    f[GOPT_PASS_RL_MAX_PASSES] = (float)gopt_pass_env_applied(e, p) / 4.0f;
    f[GOPT_PASS_RL_MAX_PASSES + 1] = (float)fmax(-1.0, fmin(1.0, 10.0 * gopt_pass_env_last_delta(e, p)));
    f[GOPT_PASS_RL_MAX_PASSES + 2] = r->last_action == p;
    f[GOPT_PASS_RL_MAX_PASSES + 3] = (float)gopt_pass_env_history(e, NULL) / (float)gopt_pass_env_max_steps(e);
    r->anchor[p] = -1;
  }
  *obs = (gopt_seq_obs){(int64_t)live, r->nf, (int64_t)k, r->edges, r->np, r->cf, r->anchor};
  return 0;
}

static int rl_reset(void *u, size_t graph, gopt_error *err) {
  rl_env *r = u;
  if (graph >= r->n) return gopt_error_set(err, GOPT_EINVAL, "pass rl: no training graph #%zu", graph);
  r->cur = graph;
  r->last_action = -1;
  gopt_pass_env_reset(r->envs[graph]);
  return 0;
}

static int rl_step(void *u, int action, double *reward, int *done, gopt_error *err) {
  rl_env *r = u;
  gopt_pass_env *e = r->envs[r->cur];
  int rc = gopt_pass_env_step(e, action, reward, done, err);
  if (rc) return rc;
  r->last_action = action;
  if (r->track && action != GOPT_SEQ_STOP) {
    const int *h = NULL;
    size_t n = gopt_pass_env_history(e, &h);
    double c = gopt_pass_env_cost(e), eps = 1e-12 * (r->best_c > 0 ? r->best_c : 1);
    if (c < r->best_c - eps || (c <= r->best_c + eps && n < r->best_n)) {
      memcpy(r->best, h, n * sizeof *h);
      r->best_n = n;
      r->best_c = c;
    }
  }
  return 0;
}

static void rl_env_clear(rl_env *r) {
  free(r->nf);
  free(r->cf);
  free(r->edges);
  free(r->anchor);
  free(r->idx);
  free(r->best);
}

static int rl_env_init(rl_env *r, gopt_pass_env **envs, size_t n, gopt_seq_env *se, gopt_error *err) {
  memset(r, 0, sizeof *r);
  r->envs = envs;
  r->n = n;
  r->np = gopt_pass_count();
  if (r->np > GOPT_PASS_RL_MAX_PASSES)
    return gopt_error_set(err, GOPT_EUNSUP, "pass rl: %d passes registered, the policy takes at most %d", r->np,
                          GOPT_PASS_RL_MAX_PASSES);
  r->cf = malloc((size_t)r->np * RL_CAND_FEAT * sizeof *r->cf);
  r->anchor = malloc((size_t)r->np * sizeof *r->anchor);
  r->best = malloc((n ? (size_t)gopt_pass_env_max_steps(envs[0]) : 1) * sizeof *r->best);
  if (!r->cf || !r->anchor || !r->best) {
    rl_env_clear(r);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  *se = (gopt_seq_env){rl_reset, rl_observe, rl_step, r, NULL};
  return 0;
}

int gopt_pass_rl_policy_new(uint64_t seed, gopt_seq_policy **out, gopt_error *err) {
  gopt_seq_arch a = {RL_NODE_FEAT, RL_CAND_FEAT, 32, 2, 64};
  return gopt_seq_policy_new("passes", &a, seed, out, err);
}

int gopt_pass_rl_policy_load(const char *path, gopt_seq_policy **out, gopt_error *err) {
  int rc = gopt_seq_policy_load(path, "passes", out, err);
  if (rc) return rc;
  gopt_seq_arch a = gopt_seq_policy_arch(*out);
  if (a.node_feat != RL_NODE_FEAT || a.cand_feat != RL_CAND_FEAT) {
    gopt_seq_policy_free(*out);
    *out = NULL;
    return gopt_error_set(err, GOPT_EPARSE, "%s: pass policy has %d node / %d candidate features, this gopt uses %d / %d",
                          path, a.node_feat, a.cand_feat, RL_NODE_FEAT, RL_CAND_FEAT);
  }
  return 0;
}

int gopt_pass_rl_train(gopt_seq_policy *p, gopt_pass_env **envs, const char *const *names, size_t n,
                       const gopt_seq_train_opts *o, gopt_learn_train_result *res, gopt_error *err) {
  if (!n) return gopt_error_set(err, GOPT_EINVAL, "pass rl: no training modules");
  rl_env r;
  gopt_seq_env se;
  int rc = rl_env_init(&r, envs, n, &se, err);
  if (rc) return rc;
  gopt_seq_train_opts to = *o;
  to.max_steps = gopt_pass_env_max_steps(envs[0]);
  rc = gopt_seq_train(p, &se, names, n, &to, res, err);
  rl_env_clear(&r);
  return rc;
}

int gopt_pass_rl_order(gopt_seq_policy *p, gopt_pass_env *e, uint64_t budget, uint64_t seed,
                       gopt_pass_search_result *res, gopt_error *err) {
  memset(res, 0, sizeof *res);
  rl_env r;
  gopt_seq_env se;
  int rc = rl_env_init(&r, &e, 1, &se, err);
  if (rc) return rc;
  r.track = 1;
  r.best_c = gopt_pass_env_initial_cost(e);
  uint64_t ev0 = gopt_pass_env_evals(e);
  double t0 = gopt_now();
  int steps = gopt_pass_env_max_steps(e);
  rc = gopt_seq_run(p, &se, 0, 1, seed, steps, NULL, NULL, err);
  for (uint64_t k = 1; !rc && gopt_pass_env_evals(e) - ev0 + (uint64_t)steps <= budget; k++) {
    if (search_stop_requested()) {
      res->interrupted = 1;
      break;
    }
    rc = gopt_seq_run(p, &se, 0, 0, seed * 1000003u + k, steps, NULL, NULL, err);
  }
  if (!rc) {
    res->seq = r.best;
    r.best = NULL;
    res->n = r.best_n;
    res->cost = r.best_c;
    res->evals = gopt_pass_env_evals(e) - ev0;
    res->seconds = gopt_now() - t0;
  }
  rl_env_clear(&r);
  return rc;
}
