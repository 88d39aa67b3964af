/* rewrite_search.c: the rewrite search front end (a method table, so eqsat and rl can be added
 * beside greedy), the simulated cost, TASO's cost-ordered backtracking search ("greedy": priority
 * queue by cost, alpha, a budget of dequeued graphs, the op-count limit, dedupe by structural
 * hash), and the replay check that names the first rewrite whose outputs differ. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/ops.h"
#include "gopt/sim.h"
#include "gopt/util.h"
#include "rewrite/rewrite_internal.h"
#include "rewrite/rw_egraph.h"

/* A Split whose input has only size-1 dims before the axis cuts it into contiguous blocks: its
 * outputs are views (offsets into the input), no kernel runs. TASO and Tensat cost it as free
 * likewise (their Split only sets pointer offsets). */
int rw_split_is_view(const gopt_graph *g, int32_t n) {
  if (g->nodes.a[n].op != GOPT_OP_SPLIT) return 0;
  int32_t x = gopt_node_input(g, n, 0);
  int r = g->tensors.a[x].rank;
  int64_t axis = gopt_node_get_int(g, n, "axis", 0);
  if (axis < 0) axis += r;
  const int64_t *d = gopt_tensor_dims(g, x);
  for (int64_t i = 0; i < axis && i < r; i++)
    if (d[i] != 1) return 0;
  return 1;
}

/* Kernel time the simulator charged the view Splits on device 0 (what a one-device step time
 * over-counts: one stream, kernels back to back). */
static double view_split_time(const gopt_graph *g, const gopt_cluster *c) {
  double t = 0;
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t n = (int32_t)i;
    if (!gopt_node_alive(g, n) || !rw_split_is_view(g, n)) continue;
    gopt_cost co = {0};
    gopt_node_cost(g, n, &co);
    int32_t y = gopt_node_output(g, n, 0);
    t += gopt_device_kernel_time(&c->devices[0], gopt_op_class_of(GOPT_OP_SPLIT),
                                 g->tensors.a[y].dtype, co.flops, co.bytes_read + co.bytes_written);
  }
  return t;
}

int gopt_rewrite_cost(const gopt_graph *g, const gopt_cluster *c, double *seconds, gopt_error *err) {
  return gopt_rewrite_cost_measured(g, c, NULL, seconds, err);
}

int gopt_rewrite_cost_measured(const gopt_graph *g, const gopt_cluster *c, gopt_rewrite_costs *m,
                               double *seconds, gopt_error *err) {
  gopt_cluster *own = NULL;
  gopt_sim *s = NULL;
  gopt_sim_state *st = NULL;
  int rc;
  if (!c) {
    if ((rc = gopt_cluster_parse("V100", &own, err))) return rc;
    c = own;
  }
  gopt_sim_opts so = {GOPT_SIM_COSTS_ANALYTICAL, NULL, NULL, NULL};
  if (m && (rc = rw_costs_prepare(m, g, c, &so, err))) goto done;
  if ((rc = gopt_sim_new(g, c, &so, &s, err))) goto done;
  if (!(st = gopt_sim_state_new(s))) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  gopt_sim_result r;
  if ((rc = gopt_sim_evaluate(st, &r, err))) goto done;
  *seconds = r.step_time;
  if (!so.costdb && c->n_devices == 1 && r.transfer_bytes == 0) *seconds -= view_split_time(g, c);
done:
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  gopt_cluster_free(own);
  return rc;
}

/* The cost of g under the search options (measured op costs when o has them). */
int rw_cost(const gopt_graph *g, const gopt_rewrite_opts *o, double *seconds, gopt_error *err) {
  return gopt_rewrite_cost_measured(g, o ? o->cluster : NULL, o ? o->costs : NULL, seconds, err);
}

void gopt_rewrite_result_clear(gopt_rewrite_result *r) {
  if (!r) return;
  gopt_graph_free(r->graph);
  free(r->steps);
  memset(r, 0, sizeof *r);
}

/* ---- stop request ---------------------------------------------------------------------------- */

static volatile sig_atomic_t g_stop = 0;
void gopt_rewrite_request_stop(void) { g_stop = 1; }
void gopt_rewrite_clear_stop(void) { g_stop = 0; }
int rw_stop_requested(void) { return g_stop != 0; }

/* ---- greedy (TASO) --------------------------------------------------------------------------- */

typedef struct qentry {
  gopt_graph *g;
  double cost;
  gopt_rewrite_step *steps;
  size_t n_steps;
} qentry;

typedef struct hset {
  uint64_t *a;
  size_t cap, n;
} hset;

/* Inserts h; returns 1 when new, 0 when present, -1 out of memory. */
static int hset_add(hset *s, uint64_t h) {
  if (h == 0) h = 1;
  if ((s->n + 1) * 2 > s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 1024;
    uint64_t *na = calloc(nc, sizeof *na);
    if (!na) return -1;
    for (size_t i = 0; i < s->cap; i++)
      if (s->a[i]) {
        size_t j = s->a[i] & (nc - 1);
        while (na[j]) j = (j + 1) & (nc - 1);
        na[j] = s->a[i];
      }
    free(s->a);
    s->a = na;
    s->cap = nc;
  }
  size_t j = h & (s->cap - 1);
  while (s->a[j]) {
    if (s->a[j] == h) return 0;
    j = (j + 1) & (s->cap - 1);
  }
  s->a[j] = h;
  s->n++;
  return 1;
}

#define QUEUE_CAP 512
/* The queue holds whole graphs: at most this many bytes of them (gnmt's 13k nodes are ~3 MB a
 * copy, so 512 copies took 1.5 GB), and never fewer than QUEUE_MIN graphs. */
#define QUEUE_BYTES ((size_t)256 << 20)
#define QUEUE_MIN 16

/* The queue is kept sorted by cost (ascending); when it holds cap entries the worst is dropped. */
static int queue_push(qentry *q, size_t *n, size_t cap, qentry e) {
  size_t i = *n;
  if (*n == cap) {
    if (e.cost >= q[*n - 1].cost) return 0;
    gopt_graph_free(q[*n - 1].g);
    free(q[*n - 1].steps);
    i = --*n;
  }
  while (i > 0 && q[i - 1].cost > e.cost) {
    q[i] = q[i - 1];
    i--;
  }
  q[i] = e;
  ++*n;
  return 1;
}

/* 1 when greedy must stop: --seconds spent, or a stop request (r->interrupted set). */
static int greedy_stop(const gopt_rewrite_opts *o, double t0, gopt_rewrite_result *r) {
  if (rw_stop_requested()) r->interrupted = 1;
  return r->interrupted || (o->seconds > 0 && gopt_now() - t0 > o->seconds);
}

static void greedy_progress(const gopt_rewrite_opts *o, const gopt_rewrite_result *r, long budget,
                            double best, double t0) {
  if (!o->progress) return;
  gopt_rewrite_progress p = {"greedy", "search", r->dequeued, (size_t)budget, r->generated, 0,
                             r->cost_before, best, gopt_now() - t0, o->seconds > 0 ? o->seconds : 0};
  o->progress(&p, o->progress_user);
}

static int search_greedy(const gopt_graph *g0, const gopt_ruleset *rs, const gopt_rewrite_opts *o,
                         gopt_rewrite_result *r, gopt_error *err) {
  double alpha = o->alpha > 0 ? o->alpha : 1.05;
  long budget = o->budget > 0 ? o->budget : 100;
  double growth = o->max_growth > 0 ? o->max_growth : 2.0;
  size_t limit = (size_t)(growth * (double)gopt_graph_node_count(g0));
  double t0 = gopt_now();
  size_t qcap = QUEUE_BYTES / (gopt_graph_memory(g0, 1) + 1);
  qcap = qcap > QUEUE_CAP ? QUEUE_CAP : qcap < QUEUE_MIN ? QUEUE_MIN : qcap;
  qentry *q = calloc(QUEUE_CAP + 1, sizeof *q);
  hset seen = {0};
  gopt_rewrite_match *ms = NULL;
  int rc = 0;
  qentry best = {0};
  if (!q) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  best.g = gopt_graph_clone(g0);
  if (!best.g) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  if ((rc = rw_cost(g0, o, &best.cost, err))) goto done;
  r->cost_before = best.cost;
  qentry first = {gopt_graph_clone(g0), best.cost, NULL, 0};
  if (!first.g || hset_add(&seen, gopt_graph_hash(g0)) < 0) {
    gopt_graph_free(first.g);
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  size_t nq = 0;
  queue_push(q, &nq, qcap, first);
  while (nq > 0 && (long)r->dequeued < budget) {
    greedy_progress(o, r, budget, best.cost, t0);
    if (greedy_stop(o, t0, r)) break;
    qentry cur = q[0];
    memmove(q, q + 1, (nq - 1) * sizeof *q);
    nq--;
    memset(&q[nq], 0, sizeof q[nq]);
    r->dequeued++;
    size_t nm = 0;
    free(ms);
    ms = NULL;
    if ((rc = gopt_rewrite_find(cur.g, rs, -1, &ms, &nm, err))) {
      gopt_graph_free(cur.g);
      free(cur.steps);
      goto done;
    }
    for (size_t i = 0; i < nm; i++) {
      if (greedy_stop(o, t0, r)) break;
      gopt_graph *h = NULL;
      int fl = 0;
      gopt_error e2 = {0};
      if (gopt_rewrite_apply(cur.g, rs, &ms[i], &h, &fl, &e2)) {
        r->rejected++;
        continue;
      }
      int isnew = hset_add(&seen, gopt_graph_hash(h));
      double cost = 0;
      if (isnew <= 0 || gopt_graph_node_count(h) >= limit || rw_cost(h, o, &cost, &e2)) {
        gopt_graph_free(h);
        if (isnew < 0) {
          rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
          break;
        }
        continue;
      }
      r->generated++;
      qentry e = {h, cost, calloc(cur.n_steps + 1, sizeof(gopt_rewrite_step)), cur.n_steps + 1};
      if (!e.steps) {
        gopt_graph_free(h);
        rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
        break;
      }
      if (cur.n_steps) memcpy(e.steps, cur.steps, cur.n_steps * sizeof *e.steps);
      gopt_rewrite_step *st = &e.steps[cur.n_steps];
      st->rule = ms[i].rule;
      st->flags = fl;
      snprintf(st->where, sizeof st->where, "%s", gopt_node_name(cur.g, ms[i].nodes[0]));
      if (cost < best.cost) {
        gopt_graph *copy = gopt_graph_clone(h);
        gopt_rewrite_step *sc = malloc(e.n_steps * sizeof *sc);
        if (!copy || !sc) {
          gopt_graph_free(copy);
          free(sc);
          gopt_graph_free(h);
          free(e.steps);
          rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
          break;
        }
        memcpy(sc, e.steps, e.n_steps * sizeof *sc);
        gopt_graph_free(best.g);
        free(best.steps);
        best = (qentry){copy, cost, sc, e.n_steps};
      }
      if (cost < alpha * best.cost) {
        if (!queue_push(q, &nq, qcap, e)) {
          gopt_graph_free(h);
          free(e.steps);
        }
      } else {
        gopt_graph_free(h);
        free(e.steps);
      }
    }
    gopt_graph_free(cur.g);
    free(cur.steps);
    if (rc) goto done;
  }
done:
  for (size_t i = 0; q && i < QUEUE_CAP + 1; i++) {
    gopt_graph_free(q[i].g);
    free(q[i].steps);
  }
  free(q);
  free(seen.a);
  free(ms);
  if (rc) {
    gopt_graph_free(best.g);
    free(best.steps);
    return rc;
  }
  r->graph = best.g;
  r->cost_after = best.cost;
  r->steps = best.steps;
  r->n_steps = best.n_steps;
  for (size_t i = 0; i < r->n_steps; i++) r->flags |= r->steps[i].flags;
  return 0;
}

typedef struct method_entry {
  const char *name;
  int (*run)(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_opts *o,
             gopt_rewrite_result *r, gopt_error *err);
} method_entry;

/* eqsat (Tensat) is rw_eqsat.c, rl (X-RLflow) rewrite_rl.c. */
static const method_entry k_methods[] = {{"greedy", search_greedy}, {"eqsat", rw_search_eqsat}, {"rl", rw_search_rl}};
#define N_METHODS (sizeof k_methods / sizeof k_methods[0])

size_t gopt_rewrite_method_count(void) { return N_METHODS; }
const char *gopt_rewrite_method_name(size_t i) { return i < N_METHODS ? k_methods[i].name : NULL; }

int gopt_rewrite_search(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_opts *o,
                        gopt_rewrite_result *r, gopt_error *err) {
  memset(r, 0, sizeof *r);
  gopt_rewrite_opts dflt = {0};
  if (!o) o = &dflt;
  const char *name = o->method ? o->method : "greedy";
  for (size_t i = 0; i < N_METHODS; i++)
    if (!strcmp(k_methods[i].name, name)) {
      double t0 = gopt_now();
      int rc = k_methods[i].run(g, rs, o, r, err);
      r->search_seconds = gopt_now() - t0;
      return rc;
    }
  return gopt_error_set(err, GOPT_EINVAL, "--method: unknown rewrite method '%s' (greedy, eqsat, rl)", name);
}

/* ---- replay ---------------------------------------------------------------------------------- */

/* Applies step s to *g in place (a model's weights are not copied per step). */
static int replay_step(gopt_graph **g, const gopt_ruleset *rs, const gopt_rewrite_step *s, gopt_error *err) {
  gopt_rewrite_match *ms = NULL;
  size_t nm = 0;
  int rc = gopt_rewrite_find(*g, rs, s->rule, &ms, &nm, err);
  if (rc) return rc;
  rc = gopt_error_set(err, GOPT_EINVAL, "rule '%s' at '%s': the match is gone on replay",
                      gopt_ruleset_rule_name(rs, (size_t)s->rule), s->where);
  for (size_t i = 0; i < nm; i++) {
    if (strcmp(gopt_node_name(*g, ms[i].nodes[0]), s->where)) continue;
    rc = rw_apply_inplace(*g, rs, &ms[i], NULL, err); /* on failure the caller drops *g */
    break;
  }
  free(ms);
  return rc;
}

int gopt_rewrite_replay(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_result *r,
                        int check, uint64_t seed, gopt_graph **out, gopt_error *err) {
  *out = NULL;
  gopt_graph *cur = gopt_graph_clone(g);
  if (!cur) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (size_t i = 0; i < r->n_steps; i++) {
    int rc = replay_step(&cur, rs, &r->steps[i], err);
    gopt_error e2 = {0};
    if (!rc && check && gopt_rewrite_compare(g, cur, seed, 1e-3, 1e-4, NULL, &e2))
      rc = gopt_error_set(err, GOPT_EINVAL,
                          "verification failed after rule '%s' at '%s' (step %zu of %zu): %s",
                          gopt_ruleset_rule_name(rs, (size_t)r->steps[i].rule), r->steps[i].where,
                          i + 1, r->n_steps, e2.msg);
    if (rc) {
      gopt_graph_free(cur);
      return rc;
    }
  }
  *out = cur;
  return 0;
}

int gopt_rewrite_replay_check(const gopt_graph *g, const gopt_ruleset *rs,
                              const gopt_rewrite_result *r, uint64_t seed, gopt_error *err) {
  gopt_graph *h = NULL;
  int rc = gopt_rewrite_replay(g, rs, r, 1, seed, &h, err);
  gopt_graph_free(h);
  return rc;
}
