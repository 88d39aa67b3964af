/* search_dp.c: exact peak-memory scheduling on one device by dynamic programming over partial
 * schedules ("dp", SERENITY). A state is the set S of scheduled nodes (a 64-bit mask over
 * topological positions); its value is the least peak over the orders of S. The memory model is
 * the simulator's on one device: weights and graph inputs resident all step (R); a node's outputs
 * are allocated when it starts and an activation is freed when its last consumer finishes (graph
 * outputs stay; an output nobody reads is freed when its producer finishes). So the live bytes
 * after S, L(S), depend on S only, scheduling v next peaks at R + L(S) + out(v), and
 * value(S + v) = min over v of max(value(S), R + L(S) + out(v)). States are expanded layer by
 * layer (|S| = k), deduplicated in a hash table, and pruned above the start point's peak. The
 * optimal order becomes priorities (higher first), which the simulator follows exactly on one
 * device; the reported result is the environment's evaluation of it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"

#define DP_MAX_NODES 40
#define DP_MAX_STATES 2000000L

int search_dp_applicable(const gopt_env *e, const char **why) {
  if (gopt_env_task(e) != GOPT_TASK_MEMORY) {
    *why = "dp solves peak-memory scheduling (task memory) only";
    return 0;
  }
  if (gopt_env_cluster(e)->n_devices != 1) {
    *why = "dp schedules one device; with several devices the memory task also chooses placement";
    return 0;
  }
  long lim = search_env_knob("GOPT_SEARCH_DP_MAX_NODES", DP_MAX_NODES);
  if (lim > 64) lim = 64;
  if ((long)gopt_graph_node_count(gopt_env_graph(e)) > lim) {
    *why = "graph too large for dp (more nodes than GOPT_SEARCH_DP_MAX_NODES, default 40, at most 64)";
    return 0;
  }
  return 1;
}

typedef struct dp_state {
  uint64_t mask;
  double peak, live;
  uint32_t parent;  /* index of the state it extends */
  int32_t node;     /* position scheduled last */
} dp_state;

static inline uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

int search_dp(search_ctx *c) {
  const gopt_env *e = c->e;
  int rc = 0;
  search_model m;
  dp_state *st = NULL;
  int32_t *tab = NULL, *pidx = NULL, *order = NULL;
  uint64_t *predm = NULL, *consm = NULL;
  double *outb = NULL, *x = NULL;
  size_t nst = 0, cap = 0, tsize = 0;
  if (search_done(c)) return 0; /* no evaluation left for a solution */
  if ((rc = search_model_build(gopt_env_graph(e), &m, c->err))) return rc;
  const int32_t n = m.n;
  if (n > 64) goto done;
  if (!(pidx = malloc(((size_t)n + 1) * sizeof *pidx)) || !(predm = calloc((size_t)n + 1, sizeof *predm)) ||
      !(consm = calloc((size_t)m.n_act + 1, sizeof *consm)) || !(outb = calloc((size_t)n + 1, sizeof *outb)) ||
      !(order = malloc(((size_t)n + 1) * sizeof *order)) || !(x = malloc(c->nv * sizeof *x)))
    goto oom;
  search_model_var_index(&m, e, GOPT_VAR_PRIORITY, pidx);
  for (int32_t p = 0; p < n; p++)
    if (pidx[p] < 0) {
      rc = gopt_error_set(c->err, GOPT_EINVAL, "search dp: node '%s' has no priority variable",
                          gopt_node_name(gopt_env_graph(e), m.node[p]));
      goto done;
    }
  double R = 0;
  for (int32_t r = 0; r < m.n_res; r++) R += m.res_bytes[r];
  for (int32_t p = 0; p < n; p++) {
    for (int32_t j = m.pred_off[p]; j < m.pred_off[p + 1]; j++) predm[p] |= 1ULL << m.pred[j];
    for (int32_t j = m.out_off[p]; j < m.out_off[p + 1]; j++) outb[p] += m.act_bytes[m.out_act[j]];
  }
  for (int32_t a = 0; a < m.n_act; a++)
    for (int32_t j = m.cons_off[a]; j < m.cons_off[a + 1]; j++) consm[a] |= 1ULL << m.cons[j];
  const double ub = c->best.peak_mem; /* the start order's peak: no optimum lies above it */
  const long max_states = search_env_knob("GOPT_SEARCH_DP_MAX_STATES", DP_MAX_STATES);
  cap = 1024;
  if (!(st = malloc(cap * sizeof *st))) goto oom;
  st[0] = (dp_state){0, R, 0, 0, -1};
  nst = 1;
  size_t lo = 0, hi = 1; /* current layer [lo, hi) */
  int aborted = 0;
  for (int32_t k = 0; k < n && !aborted; k++) {
    /* fresh hash table sized for the layer */
    size_t expect = (hi - lo) * (size_t)(n - k), want = 64;
    if (expect > (size_t)max_states) expect = (size_t)max_states;
    while (want < 2 * expect + 64) want <<= 1;
    if (want > tsize) {
      free(tab);
      if (!(tab = malloc(want * sizeof *tab))) goto oom;
      tsize = want;
    }
    size_t mask_t = tsize - 1, used = 0;
    for (size_t i = 0; i < tsize; i++) tab[i] = -1;
    for (size_t s = lo; s < hi; s++) {
      if (((s - lo) & 1023) == 0 && search_done(c)) {
        aborted = 1;
        break;
      }
      uint64_t S = st[s].mask;
      for (int32_t v = 0; v < n; v++) {
        if ((S >> v) & 1 || (predm[v] & ~S)) continue;
        double cand = R + st[s].live + outb[v];
        if (cand < st[s].peak) cand = st[s].peak;
        if (cand > ub) continue;
        uint64_t T = S | (1ULL << v);
        double live = st[s].live;
        for (int32_t j = m.out_off[v]; j < m.out_off[v + 1]; j++) {
          int32_t a = m.out_act[j];
          if (m.act_out[a] || consm[a]) live += m.act_bytes[a];
        }
        for (int32_t j = m.in_off[v]; j < m.in_off[v + 1]; j++) {
          int32_t a = m.in_act[j];
          if (!m.act_out[a] && (consm[a] & ~T) == 0) live -= m.act_bytes[a];
        }
        size_t h = (size_t)mix(T) & mask_t;
        while (tab[h] >= 0 && st[tab[h]].mask != T) h = (h + 1) & mask_t;
        if (tab[h] >= 0) {
          dp_state *q = &st[tab[h]];
          if (cand < q->peak) {
            q->peak = cand;
            q->parent = (uint32_t)s;
            q->node = v;
          }
          continue;
        }
        if (nst >= (size_t)max_states || used * 2 >= tsize) { /* state cap or table full */
          aborted = 1;
          break;
        }
        if (nst == cap) {
          dp_state *ns = realloc(st, 2 * cap * sizeof *st);
          if (!ns) goto oom;
          st = ns;
          cap *= 2;
        }
        st[nst] = (dp_state){T, cand, live, (uint32_t)s, v};
        tab[h] = (int32_t)nst++;
        used++;
      }
      if (aborted) break;
    }
    lo = hi;
    hi = nst;
    if (lo == hi) break; /* everything pruned (cannot happen: the start order survives) */
  }
  if (aborted || hi - lo != 1 || st[lo].mask != (n == 64 ? ~0ULL : (1ULL << n) - 1)) goto done;
  /* reconstruct the order and turn it into priorities */
  size_t s = lo;
  for (int32_t r = n - 1; r >= 0; r--) {
    order[r] = st[s].node;
    s = st[s].parent;
  }
  double dp_peak = st[lo].peak;
  memcpy(x, c->best_x, c->nv * sizeof *x);
  for (size_t i = 0; i < c->nv; i++)
    if (c->vars[i].kind == GOPT_VAR_DEVICE) x[i] = 0;
  for (int32_t r = 0; r < n; r++) x[pidx[order[r]]] = 1.0 - (r + 0.5) / n;
  if (search_evals_left(c) == 0) goto done;
  gopt_env_result res;
  if ((rc = search_eval(c, c->ws[0], x, &res))) goto done;
  /* the model is the simulator's: the evaluation reproduces the DP value */
  if (res.peak_mem == dp_peak) c->optimal = 1;
  else
    gopt_warn("search dp: simulated peak %.17g differs from the dp value %.17g", res.peak_mem,
              dp_peak);
  goto done;
oom:
  rc = gopt_error_set(c->err, GOPT_ENOMEM, "search dp: out of memory");
done:
  search_model_free(&m);
  free(st);
  free(tab);
  free(pidx);
  free(order);
  free(predm);
  free(consm);
  free(outb);
  free(x);
  return rc;
}
