/* rewrite_rl.c: the X-RLflow-style rewrite agent: the rewriting MDP as a sequential-agent
 * environment (gopt_seq_env: state = current graph, candidates = (rule, location) matches with
 * their simulated cost change, reward = relative cost improvement per step, STOP), the "rl" search
 * method (the policy's greedy episode, then episodes sampled from it while the time limit allows;
 * the best graph seen by the cost model is the result) and training
 * (gopt_rewrite_rl_train). docs/REWRITE.md "## rl" describes it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/task.h"
#include "gopt/util.h"
#include "rewrite/rewrite_internal.h"

#define RL_CTX 2                          /* context columns after the env features */
#define RL_NF (GOPT_ENV_NFEAT + RL_CTX)
#define RL_RULE_BUCKETS 16
#define RL_CF (RL_RULE_BUCKETS + 4)
#define RL_SCAN_PER_CAND 4                /* matches tried per candidate slot */
#define RL_SAMPLES 64                     /* search: episodes sampled after the greedy one (default) */
#define RL_SECONDS 10.0                   /* search: default limit of all episodes together (eqsat's) */
#define RL_PATIENCE 10                    /* search: a sampled episode ends after this many steps
                                             without bettering its best graph */

typedef struct rl_cand {
  gopt_graph *g;
  double cost;
  int flags;
  int32_t rule, anchor;                   /* anchor: node id in the current graph */
} rl_cand;

struct gopt_rewrite_rl {
  const gopt_graph *const *graphs;
  size_t n_graphs;
  const gopt_ruleset *rs;
  const gopt_cluster *cl;
  gopt_cluster *own;
  gopt_rewrite_costs *costs;              /* measured op costs (o->costs) or NULL */
  int max_cand, max_steps;
  double growth, seconds, t0;
  /* episode */
  gopt_graph *cur, *best;
  double cost0, cost, best_cost;
  size_t limit;
  int step, have_cands, nc;
  rl_cand *cand;
  gopt_rewrite_step *hist, *best_steps;
  size_t nh, n_best;
  size_t generated, rejected;
  int search, interrupted;                /* search: gopt_rewrite_request_stop ends the episode */
  double deadline;                        /* search: every episode ends by then (0: none) */
  int patience, best_step;                /* end the episode patience steps after best_step (0: never) */
  void (*progress)(const gopt_rewrite_progress *p, void *user);
  void *progress_user;
  /* observation buffers */
  float *feat, *cf;
  int32_t *edges, *anchor;
  size_t cap_nodes, cap_edges;
};

static void rl_drop_cands(gopt_rewrite_rl *r) {
  for (int i = 0; i < r->nc; i++) gopt_graph_free(r->cand[i].g);
  r->nc = 0;
  r->have_cands = 0;
}

static void rl_episode_clear(gopt_rewrite_rl *r) {
  rl_drop_cands(r);
  gopt_graph_free(r->cur);
  gopt_graph_free(r->best);
  free(r->hist);
  free(r->best_steps);
  r->cur = r->best = NULL;
  r->hist = r->best_steps = NULL;
  r->nh = r->n_best = 0;
}

void gopt_rewrite_rl_free(gopt_rewrite_rl *r) {
  if (!r) return;
  rl_episode_clear(r);
  free(r->cand);
  free(r->feat);
  free(r->cf);
  free(r->edges);
  free(r->anchor);
  gopt_cluster_free(r->own);
  free(r);
}

int gopt_rewrite_rl_new(const gopt_graph *const *graphs, size_t n, const gopt_ruleset *rs,
                        const gopt_rewrite_opts *o, int max_steps, gopt_rewrite_rl **out, gopt_error *err) {
  *out = NULL;
  gopt_rewrite_rl *r = calloc(1, sizeof *r);
  if (!r) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  r->graphs = graphs;
  r->n_graphs = n;
  r->rs = rs;
  r->cl = o ? o->cluster : NULL;
  r->costs = o ? o->costs : NULL;
  r->max_cand = GOPT_REWRITE_RL_CANDIDATES;
  r->max_steps = max_steps > 0 ? max_steps : 32;
  r->growth = o && o->max_growth > 0 ? o->max_growth : 2.0;
  r->seconds = o ? o->seconds : 0;
  r->progress = o ? o->progress : NULL;
  r->progress_user = o ? o->progress_user : NULL;
  r->cand = calloc((size_t)r->max_cand, sizeof *r->cand);
  r->cf = malloc((size_t)r->max_cand * RL_CF * sizeof *r->cf);
  r->anchor = malloc((size_t)r->max_cand * sizeof *r->anchor);
  int rc = !r->cand || !r->cf || !r->anchor ? gopt_error_set(err, GOPT_ENOMEM, "out of memory") : 0;
  if (!rc && !r->cl && !(rc = gopt_cluster_parse("V100", &r->own, err))) r->cl = r->own;
  if (rc) { gopt_rewrite_rl_free(r); return rc; }
  *out = r;
  return 0;
}

/* Reports where the episode is to the progress callback (rate-limited by the callee). */
static void rl_progress(const gopt_rewrite_rl *r) {
  if (!r->progress) return;
  gopt_rewrite_progress p = {"rl", "episode", (size_t)r->step, (size_t)r->max_steps, r->generated,
                             (size_t)r->step, r->cost0, r->best_cost, gopt_now() - r->t0,
                             r->seconds > 0 ? r->seconds : 0};
  r->progress(&p, r->progress_user);
}

/* Candidates of the current graph: the matches (in gopt_rewrite_find's order, at most
 * RL_SCAN_PER_CAND x max_cand tried) whose application succeeds, changes the graph, is new among
 * the candidates and keeps the op count under the limit; the max_cand cheapest are kept (ties in
 * match order). */
static int rl_candidates(gopt_rewrite_rl *r, gopt_error *err) {
  gopt_rewrite_match *ms = NULL;
  size_t nm = 0;
  int rc = gopt_rewrite_find(r->cur, r->rs, -1, &ms, &nm, err);
  if (rc) return rc;
  size_t scan = (size_t)r->max_cand * RL_SCAN_PER_CAND, tried = 0;
  uint64_t h0 = gopt_graph_hash(r->cur), *hs = malloc(((size_t)r->max_cand + 1) * sizeof *hs);
  if (!hs) { free(ms); return gopt_error_set(err, GOPT_ENOMEM, "out of memory"); }
  for (size_t i = 0; i < nm && tried < scan && !rc; i++, tried++) {
    rl_progress(r);
    if (r->search && rw_stop_requested()) break; /* rl_observe then offers STOP only */
    gopt_graph *h = NULL;
    int fl = 0;
    double cost = 0;
    gopt_error e2 = {0};
    if (gopt_rewrite_apply(r->cur, r->rs, &ms[i], &h, &fl, &e2)) { r->rejected++; continue; }
    uint64_t hh = gopt_graph_hash(h);
    int dup = hh == h0 || gopt_graph_node_count(h) >= r->limit;
    for (int k = 0; k < r->nc && !dup; k++) dup = hs[k] == hh;
    if (dup || gopt_rewrite_cost_measured(h, r->cl, r->costs, &cost, &e2)) { gopt_graph_free(h); continue; }
    r->generated++;
    int at = r->nc;
    if (r->nc == r->max_cand) {
      if (cost >= r->cand[r->nc - 1].cost) { gopt_graph_free(h); continue; }
      gopt_graph_free(r->cand[--r->nc].g);
      at = r->nc;
    }
    while (at > 0 && r->cand[at - 1].cost > cost) { r->cand[at] = r->cand[at - 1]; hs[at] = hs[at - 1]; at--; }
    r->cand[at] = (rl_cand){h, cost, fl, ms[i].rule, ms[i].nodes[0]};
    hs[at] = hh;
    r->nc++;
  }
  free(hs);
  free(ms);
  r->have_cands = 1;
  return rc;
}

static int rl_grow(gopt_rewrite_rl *r, size_t nodes, size_t edges, gopt_error *err) {
  if (nodes > r->cap_nodes) {
    float *f = realloc(r->feat, nodes * RL_NF * sizeof *f);
    if (!f) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    r->feat = f;
    r->cap_nodes = nodes;
  }
  if (edges > r->cap_edges) {
    int32_t *e = realloc(r->edges, edges * 2 * sizeof *e);
    if (!e) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    r->edges = e;
    r->cap_edges = edges;
  }
  return 0;
}

/* Node features (the learn module's env features + cost ratio to the original and the candidate
 * count as a fraction of the maximum; the same at any episode length) and dataflow
 * edges of the current graph over its live nodes in topological order; pos maps id -> row. */
static int rl_encode(gopt_rewrite_rl *r, int32_t *pos, int64_t *n_out, int64_t *ne_out, gopt_error *err) {
  const gopt_graph *g = r->cur;
  size_t N = g->nodes.n;
  int32_t *order = malloc((N + 1) * sizeof *order);
  float *ef = malloc((N * GOPT_ENV_NFEAT + 1) * sizeof *ef);
  gopt_env *e = NULL;
  gopt_env_opts eo = {.task = GOPT_TASK_FUSION, .threads = 1};
  int rc = !order || !ef ? gopt_error_set(err, GOPT_ENOMEM, "out of memory") : 0;
  int64_t n = rc ? 0 : gopt_graph_topo(g, order, err), ne = 0;
  if (n < 0) rc = (int)n;
  rc = rc ? rc : gopt_env_new(g, r->cl, &eo, &e, err);
  rc = rc ? rc : gopt_env_node_features(e, ef, err);
  size_t edges = 0;
  for (size_t v = 0; !rc && v < N; v++) edges += (size_t)g->nodes.a[v].n_in;
  rc = rc ? rc : rl_grow(r, (size_t)n + 1, edges + 1, err);
  if (!rc) {
    for (size_t v = 0; v < N; v++) pos[v] = -1;
    for (int64_t i = 0; i < n; i++) pos[order[i]] = (int32_t)i;
    for (int64_t i = 0; i < n; i++) {
      float *row = r->feat + i * RL_NF;
      memcpy(row, ef + (size_t)order[i] * GOPT_ENV_NFEAT, GOPT_ENV_NFEAT * sizeof *row);
      row[GOPT_ENV_NFEAT] = (float)(r->cost / r->cost0);
      row[GOPT_ENV_NFEAT + 1] = (float)r->nc / (float)r->max_cand;
    }
    for (int64_t i = 0; i < n; i++) {
      const gopt_node *nd = &g->nodes.a[order[i]];
      for (int k = 0; k < nd->n_in; k++) {
        int32_t t = g->slots.a[nd->in + (uint32_t)k].tensor, u = t >= 0 ? g->tensors.a[t].producer : -1;
        if (u < 0 || pos[u] < 0) continue;
        r->edges[2 * ne] = pos[u];
        r->edges[2 * ne + 1] = (int32_t)i;
        ne++;
      }
    }
  }
  gopt_env_free(e);
  free(order);
  free(ef);
  *n_out = n;
  *ne_out = ne;
  return rc;
}

/* Candidate features: hashed rule one-hot, rule size, relative cost change (x10, clipped), op
 * count change, weight-changing flag. */
static void rl_cand_feats(gopt_rewrite_rl *r, const int32_t *pos) {
  size_t n0 = gopt_graph_node_count(r->cur);
  for (int i = 0; i < r->nc; i++) {
    const rl_cand *c = &r->cand[i];
    float *f = r->cf + (size_t)i * RL_CF;
    memset(f, 0, RL_CF * sizeof *f);
    const char *name = gopt_ruleset_rule_name(r->rs, (size_t)c->rule);
    f[gopt_hash_bytes(name, strlen(name), 0) % RL_RULE_BUCKETS] = 1;
    f[RL_RULE_BUCKETS] = (float)gopt_ruleset_rule_size(r->rs, (size_t)c->rule) / 4.0f;
    double d = 10.0 * (r->cost - c->cost) / r->cost;
    f[RL_RULE_BUCKETS + 1] = (float)(d > 3 ? 3 : (d < -3 ? -3 : d));
    double dn = ((double)gopt_graph_node_count(c->g) - (double)n0) / 8.0;
    f[RL_RULE_BUCKETS + 2] = (float)(dn > 3 ? 3 : (dn < -3 ? -3 : dn));
    f[RL_RULE_BUCKETS + 3] = (c->flags & GOPT_RW_WEIGHTS) ? 1.0f : 0.0f;
    r->anchor[i] = c->anchor >= 0 && (size_t)c->anchor < r->cur->nodes.n ? pos[c->anchor] : -1;
  }
}

static int rl_observe(void *u, gopt_seq_obs *o, gopt_error *err) {
  gopt_rewrite_rl *r = u;
  if (!r->cur) return gopt_error_set(err, GOPT_EINVAL, "rewrite rl: observe before reset");
  int rc = r->have_cands ? 0 : rl_candidates(r, err); /* before rl_encode: it reads r->nc */
  if (!rc && r->search && rw_stop_requested()) { /* a search's Ctrl-C: STOP is the only action */
    r->interrupted = 1;
    for (int i = 0; i < r->nc; i++) gopt_graph_free(r->cand[i].g);
    r->nc = 0;
  }
  int32_t *pos = rc ? NULL : malloc((r->cur->nodes.n + 1) * sizeof *pos);
  int64_t n = 0, ne = 0;
  if (!rc && !pos) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  rc = rc ? rc : rl_encode(r, pos, &n, &ne, err);
  if (!rc) rl_cand_feats(r, pos);
  free(pos);
  if (rc) return rc;
  *o = (gopt_seq_obs){n, r->feat, ne, r->edges, r->nc, r->cf, r->anchor};
  return 0;
}

static int rl_reset(void *u, size_t i, gopt_error *err) {
  gopt_rewrite_rl *r = u;
  if (i >= r->n_graphs) return gopt_error_set(err, GOPT_EINVAL, "rewrite rl: graph %zu of %zu", i, r->n_graphs);
  rl_episode_clear(r);
  r->step = r->best_step = 0;
  r->t0 = gopt_now();
  r->cur = gopt_graph_clone(r->graphs[i]);
  r->best = gopt_graph_clone(r->graphs[i]);
  if (!r->cur || !r->best) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  r->limit = (size_t)(r->growth * (double)gopt_graph_node_count(r->cur));
  int rc = gopt_rewrite_cost_measured(r->cur, r->cl, r->costs, &r->cost0, err);
  if (!rc && !(r->cost0 > 0)) rc = gopt_error_set(err, GOPT_EINVAL, "rewrite rl: graph %zu has no cost", i);
  r->cost = r->best_cost = r->cost0;
  return rc;
}

/* Applies candidate a (or STOP): reward = (previous cost - new cost) / original cost. */
static int rl_step(void *u, int a, double *reward, int *done, gopt_error *err) {
  gopt_rewrite_rl *r = u;
  *reward = 0;
  *done = 1;
  if (a == GOPT_SEQ_STOP) return 0;
  if (!r->have_cands || a < 0 || a >= r->nc) return gopt_error_set(err, GOPT_EINVAL, "rewrite rl: action %d of %d candidates", a, r->nc);
  rl_cand c = r->cand[a];
  gopt_rewrite_step *h = realloc(r->hist, (r->nh + 1) * sizeof *h);
  if (!h) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  r->hist = h;
  gopt_rewrite_step *s = &h[r->nh++];
  memset(s, 0, sizeof *s);
  s->rule = c.rule;
  s->flags = c.flags;
  snprintf(s->where, sizeof s->where, "%s", gopt_node_name(r->cur, c.anchor));
  r->cand[a].g = NULL;
  rl_drop_cands(r);
  gopt_graph_free(r->cur);
  r->cur = c.g;
  *reward = (r->cost - c.cost) / r->cost0;
  r->cost = c.cost;
  r->step++;
  if (c.cost < r->best_cost) {
    gopt_graph *b = gopt_graph_clone(r->cur);
    gopt_rewrite_step *bs = malloc(r->nh * sizeof *bs);
    if (!b || !bs) { gopt_graph_free(b); free(bs); return gopt_error_set(err, GOPT_ENOMEM, "out of memory"); }
    memcpy(bs, r->hist, r->nh * sizeof *bs);
    gopt_graph_free(r->best);
    free(r->best_steps);
    r->best = b;
    r->best_steps = bs;
    r->n_best = r->nh;
    r->best_cost = c.cost;
    r->best_step = r->step;
  }
  *done = r->step >= r->max_steps || (r->seconds > 0 && gopt_now() - r->t0 > r->seconds) ||
          (r->deadline > 0 && gopt_now() > r->deadline) ||
          (r->patience > 0 && r->step - r->best_step >= r->patience);
  return 0;
}

/* The expert that `--imitate` trains towards: steepest descent over the observed candidates: the
 * cheapest (rl_candidates keeps them in cost order), and every candidate as cheap, while it costs
 * less than the current graph; else STOP. */
static int rl_expert(void *u, unsigned char *ok, gopt_error *err) {
  gopt_rewrite_rl *r = u;
  if (!r->have_cands) return gopt_error_set(err, GOPT_EINVAL, "rewrite rl: expert before observe");
  int go = r->nc > 0 && r->cand[0].cost < r->cost;
  for (int i = 0; i < r->nc; i++) ok[i] = go && r->cand[i].cost <= r->cand[0].cost;
  ok[r->nc] = !go;
  return 0;
}

gopt_seq_env gopt_rewrite_rl_env(gopt_rewrite_rl *r) {
  return (gopt_seq_env){rl_reset, rl_observe, rl_step, r, rl_expert};
}

gopt_seq_arch gopt_rewrite_rl_arch(void) {
  gopt_seq_arch a = {.node_feat = RL_NF, .cand_feat = RL_CF};
  return a;
}

/* Moves the episode's best graph and its history into res. */
static int rl_take(gopt_rewrite_rl *r, gopt_rewrite_result *res) {
  if (!r->best) return GOPT_EINVAL;
  res->graph = r->best;
  res->cost_before = r->cost0;
  res->cost_after = r->best_cost;
  res->steps = r->best_steps;
  res->n_steps = r->n_best;
  res->generated = r->generated;
  res->rejected = r->rejected;
  res->dequeued = (size_t)r->step;
  res->interrupted = r->interrupted;
  for (size_t i = 0; i < res->n_steps; i++) res->flags |= res->steps[i].flags;
  r->best = NULL;
  r->best_steps = NULL;
  r->n_best = 0;
  return 0;
}

/* The policy's greedy (argmax) episode, then up to n episodes sampled from it (seeds seed + 1,
 * seed + 2, ...) while r's deadline allows and no stop is requested (GO's inference: the best of
 * several rollouts of one policy); res receives the best graph any episode saw by the cost model
 * (ties: the earliest episode). */
static int rl_episodes(gopt_seq_policy *p, gopt_rewrite_rl *r, uint64_t seed, long n, gopt_rewrite_result *res,
                       gopt_error *err) {
  gopt_seq_env env = gopt_rewrite_rl_env(r);
  long ran = 0, best_at = -1, steps = 0;
  for (long i = 0; i <= n; i++) {
    if (i > 0 && (gopt_now() > r->deadline || rw_stop_requested())) break;
    r->patience = i > 0 ? RL_PATIENCE : 0; /* the greedy episode runs to STOP or the step limit */
    int rc = gopt_seq_run(p, &env, 0, i == 0, seed + (uint64_t)i, r->max_steps, NULL, NULL, err);
    if (rc) return rc;
    ran++;
    steps += r->step;
    if (best_at >= 0 && !(r->best_cost < res->cost_after)) continue;
    gopt_rewrite_result_clear(res);
    if (rl_take(r, res)) return gopt_error_set(err, GOPT_EINVAL, "rewrite rl: no graph");
    best_at = i;
  }
  res->generated = r->generated;
  res->rejected = r->rejected;
  res->dequeued = (size_t)steps;
  res->interrupted = r->interrupted;
  char best[64] = "the greedy episode";
  if (best_at > 0)
    snprintf(best, sizeof best, "sample %ld (seed %llu)", best_at, (unsigned long long)(seed + (uint64_t)best_at));
  snprintf(res->note, sizeof res->note, "rl: %ld episodes (the greedy one and %ld sampled), %ld steps; best: %s", ran,
           ran - 1, steps, best);
  return 0;
}

/* The "rl" search method: the policy's (o->policy, else the shipped rewrite.gpol) greedy episode
 * and up to o->samples sampled ones (0: RL_SAMPLES, < 0: none), each of at most o->budget steps
 * (default 100), all within o->seconds (default RL_SECONDS); the best graph seen is the result. */
int rw_search_rl(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_opts *o,
                 gopt_rewrite_result *res, gopt_error *err) {
  char path[1200];
  gopt_seq_policy *p = NULL;
  gopt_rewrite_rl *r = NULL;
  int rc = 0;
  if (o->policy) snprintf(path, sizeof path, "%s", o->policy);
  else rc = gopt_seq_find_policy(GOPT_REWRITE_RL_KIND, NULL, path, sizeof path, err);
  rc = rc ? rc : gopt_seq_policy_load(path, GOPT_REWRITE_RL_KIND, &p, err);
  gopt_seq_arch want = gopt_rewrite_rl_arch(), got = p ? gopt_seq_policy_arch(p) : want;
  if (!rc && (got.node_feat != want.node_feat || got.cand_feat != want.cand_feat))
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s: policy has %d node and %d candidate features, this build uses %d and %d (retrain it)",
                        path, got.node_feat, got.cand_feat, want.node_feat, want.cand_feat);
  rc = rc ? rc : gopt_rewrite_rl_new(&g, 1, rs, o, (int)(o->budget > 0 ? o->budget : 100), &r, err);
  if (r) {
    r->search = 1;
    r->deadline = gopt_now() + (o->seconds > 0 ? o->seconds : RL_SECONDS);
  }
  long n = o->samples == 0 ? RL_SAMPLES : o->samples < 0 ? 0 : o->samples;
  rc = rc ? rc : rl_episodes(p, r, o->seed, n, res, err);
  gopt_rewrite_rl_free(r);
  gopt_seq_policy_free(p);
  return rc;
}

int gopt_rewrite_rl_train(const gopt_graph *const *graphs, const char *const *names, size_t n,
                          const gopt_ruleset *rs, const gopt_rewrite_opts *o, gopt_seq_policy *p,
                          const gopt_seq_train_opts *to, gopt_learn_train_result *res, gopt_error *err) {
  gopt_rewrite_rl *r = NULL;
  int rc = gopt_rewrite_rl_new(graphs, n, rs, o, to->max_steps > 0 ? to->max_steps : 16, &r, err);
  if (rc) return rc;
  gopt_seq_env env = gopt_rewrite_rl_env(r);
  gopt_seq_train_opts t = *to;
  t.max_steps = r->max_steps;
  rc = gopt_seq_train(p, &env, names, n, &t, res, err);
  gopt_rewrite_rl_free(r);
  return rc;
}
