/* search_khop.c: the local-advantage seed's progressive search over k-hop neighbourhoods. Each
 * step picks a node (one with a movable variable), mutates its k-hop neighbourhood (the nodes
 * within `hops` dataflow edges, either direction), and keeps the mutation when it is strictly
 * better (gopt_env_result_cmp). "khop" (the paper's "random search") picks the node uniformly;
 * "guided" picks it uniformly among the first alpha % of the nodes in score order that were not
 * picked since the last accepted mutation (all again once every node was), a node's score being
 * the largest opts->guide score of its movable variables (the local advantage model's predicted
 * gain of moving it), recomputed after every accepted mutation. The mutation changes one movable
 * variable of the picked node to a different value (a DEVICE/FUSE value chosen uniformly among
 * the others, a PRIORITY uniform in [0, 1)) and sets every other movable variable of the
 * neighbourhood to a uniformly random value. Moves are evaluated incrementally on one workspace;
 * sequential, so the result does not depend on threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"

#define KHOP_ALPHA 10.0 /* percent */
#define KHOP_HOPS 1

typedef struct khop_state {
  size_t nn;                  /* graph nodes */
  int32_t *adj_off, *adj;     /* CSR [nn + 1]: undirected dataflow neighbours */
  int32_t *var_off, *var;     /* CSR [nn + 1]: movable variables of each node */
  int32_t *cand;              /* nodes with a movable variable */
  size_t ncand;
  int32_t *queue, *depth;     /* BFS scratch [nn]; depth -1 = unvisited */
  size_t *changed, *pend, *idx; /* [nv] changed, pending (rejected) variables; [2 nv] index list */
  uint8_t *mark;              /* [nv] */
  double *score, *nscore;     /* guided: [nv] variable scores, [nn] node scores */
  uint8_t *tried;             /* guided: [nn] picked since the last accepted mutation ... */
  size_t first;               /* ... and the count of cand's leading entries that all were */
} khop_state;

static void khop_free(khop_state *s) {
  free(s->adj_off);
  free(s->adj);
  free(s->var_off);
  free(s->var);
  free(s->cand);
  free(s->queue);
  free(s->depth);
  free(s->changed);
  free(s->pend);
  free(s->idx);
  free(s->mark);
  free(s->score);
  free(s->nscore);
  free(s->tried);
}

/* Builds the node adjacency and the node -> movable variable lists. */
static int khop_init(search_ctx *c, khop_state *s) {
  const gopt_graph *g = gopt_env_graph(c->e);
  size_t nn = g->nodes.n, nv = c->nv;
  s->nn = nn;
  s->adj_off = calloc(nn + 1, sizeof *s->adj_off);
  s->var_off = calloc(nn + 1, sizeof *s->var_off);
  s->cand = malloc((nn + 1) * sizeof *s->cand);
  s->queue = malloc((nn + 1) * sizeof *s->queue);
  s->depth = malloc((nn + 1) * sizeof *s->depth);
  s->changed = malloc((nv + 1) * sizeof *s->changed);
  s->pend = malloc((nv + 1) * sizeof *s->pend);
  s->idx = malloc((2 * nv + 1) * sizeof *s->idx);
  s->mark = calloc(nv + 1, 1);
  s->score = malloc((nv + 1) * sizeof *s->score);
  s->nscore = malloc((nn + 1) * sizeof *s->nscore);
  s->tried = calloc(nn + 1, 1);
  size_t *mv = malloc((nv + 1) * sizeof *mv);
  int32_t *fill = malloc((nn + 1) * sizeof *fill);
  int rc = 0;
  if (!s->adj_off || !s->var_off || !s->cand || !s->queue || !s->depth || !s->changed || !s->pend || !s->idx ||
      !s->mark || !s->score || !s->nscore || !s->tried || !mv || !fill)
    goto oom;
  for (int pass = 0; pass < 2; pass++) { /* pass 0 counts, pass 1 fills */
    for (size_t v = 0; v < nn; v++) {
      if (!gopt_node_alive(g, (int32_t)v)) continue;
      const gopt_node *nd = &g->nodes.a[v];
      for (int k = 0; k < nd->n_in; k++) {
        int32_t t = g->slots.a[nd->in + (uint32_t)k].tensor;
        int32_t u = t >= 0 ? g->tensors.a[t].producer : -1;
        if (u < 0 || u == (int32_t)v || !gopt_node_alive(g, u)) continue;
        if (!pass) {
          s->adj_off[v + 1]++;
          s->adj_off[u + 1]++;
        } else {
          s->adj[fill[v]++] = u;
          s->adj[fill[u]++] = (int32_t)v;
        }
      }
    }
    if (pass) break;
    for (size_t v = 0; v < nn; v++) s->adj_off[v + 1] += s->adj_off[v];
    if (!(s->adj = malloc(((size_t)s->adj_off[nn] + 1) * sizeof *s->adj))) goto oom;
    memcpy(fill, s->adj_off, nn * sizeof *fill);
  }
  size_t nm = search_movable_vars(c, mv);
  for (size_t j = 0; j < nm; j++) s->var_off[c->vars[mv[j]].node + 1]++;
  for (size_t v = 0; v < nn; v++) s->var_off[v + 1] += s->var_off[v];
  if (!(s->var = malloc((nm + 1) * sizeof *s->var))) goto oom;
  memcpy(fill, s->var_off, nn * sizeof *fill);
  for (size_t j = 0; j < nm; j++) s->var[fill[c->vars[mv[j]].node]++] = (int32_t)mv[j];
  for (size_t v = 0; v < nn; v++) {
    s->depth[v] = -1;
    if (s->var_off[v + 1] > s->var_off[v]) s->cand[s->ncand++] = (int32_t)v;
  }
  goto done;
oom:
  rc = gopt_error_set(c->err, GOPT_ENOMEM, "search %s: out of memory", c->method);
done:
  free(mv);
  free(fill);
  return rc;
}

/* A different value than cur for variable v. */
static double khop_other_value(search_rng *r, const gopt_env_var *v, double cur) {
  if (v->kind == GOPT_VAR_PRIORITY || v->card <= 1) return search_random_value(r, v);
  uint32_t k = search_rng_below(r, (uint32_t)(v->card - 1));
  return (double)k >= cur ? (double)(k + 1) : (double)k;
}

/* Mutates the hops-neighbourhood of node `root` in x; the changed variables go to s->changed
 * (returns their count). */
static size_t khop_mutate(search_ctx *c, khop_state *s, search_rng *r, int32_t root, int hops, double *x) {
  size_t head = 0, tail = 0, nch = 0;
  s->queue[tail++] = root;
  s->depth[root] = 0;
  while (head < tail) {
    int32_t v = s->queue[head++];
    if (s->depth[v] >= hops) continue;
    for (int32_t j = s->adj_off[v]; j < s->adj_off[v + 1]; j++) {
      int32_t u = s->adj[j];
      if (s->depth[u] >= 0) continue;
      s->depth[u] = s->depth[v] + 1;
      s->queue[tail++] = u;
    }
  }
  int32_t nvr = s->var_off[root + 1] - s->var_off[root];
  int32_t forced = s->var[s->var_off[root] + (int32_t)search_rng_below(r, (uint32_t)nvr)];
  for (size_t q = 0; q < tail; q++) {
    int32_t v = s->queue[q];
    s->depth[v] = -1;
    for (int32_t j = s->var_off[v]; j < s->var_off[v + 1]; j++) {
      int32_t i = s->var[j];
      double nvl = i == forced ? khop_other_value(r, &c->vars[i], x[i]) : search_random_value(r, &c->vars[i]);
      if (nvl != x[i]) {
        x[i] = nvl;
        s->changed[nch++] = (size_t)i;
      }
    }
  }
  return nch;
}

/* Whether node u ranks before node v: higher score first, then lower id. */
static int khop_before(const double *sc, int32_t u, int32_t v) {
  return sc[u] != sc[v] ? sc[u] > sc[v] : u < v;
}

/* Merge sort of nodes a[0..n) by khop_before (qsort has no context argument in C11). */
static void khop_sort(int32_t *a, size_t n, const double *sc, int32_t *tmp) {
  if (n < 2) return;
  size_t h = n / 2;
  khop_sort(a, h, sc, tmp);
  khop_sort(a + h, n - h, sc, tmp);
  size_t i = 0, j = h, k = 0;
  while (i < h && j < n) tmp[k++] = khop_before(sc, a[j], a[i]) ? a[j++] : a[i++];
  while (i < h) tmp[k++] = a[i++];
  while (j < n) tmp[k++] = a[j++];
  memcpy(a, tmp, n * sizeof *a);
}

/* Node scores from the guide at x; sorts s->cand by score, highest first (ties: node id). */
static int khop_rank(search_ctx *c, khop_state *s, const double *x) {
  int rc = c->o->guide(x, s->score, c->o->guide_user, c->err);
  if (rc) return rc;
  for (size_t q = 0; q < s->ncand; q++) {
    int32_t v = s->cand[q];
    double best = -INFINITY;
    for (int32_t j = s->var_off[v]; j < s->var_off[v + 1]; j++) {
      double sc = s->score[s->var[j]];
      if (isfinite(sc) && sc > best) best = sc;
    }
    s->nscore[v] = best;
  }
  khop_sort(s->cand, s->ncand, s->nscore, s->queue); /* queue is free between mutations */
  return 0;
}

/* Every node untried again (after an accepted mutation: the ranking is new). */
static void khop_untry(khop_state *s) {
  memset(s->tried, 0, s->nn);
  s->first = 0;
}

/* Guided's root: uniformly among the first `top` candidates in score order not yet tried since
 * the last accepted mutation (a rejected node steps aside, so the ranking is walked down instead
 * of re-drawing the same top nodes); when every candidate was tried, the first `top` again. */
static int32_t khop_pick_untried(khop_state *s, search_rng *r, size_t top) {
  size_t n = 0;
  while (s->first < s->ncand && s->tried[s->cand[s->first]]) s->first++; /* the tried prefix */
  for (size_t q = s->first; q < s->ncand && n < top; q++)
    if (!s->tried[s->cand[q]]) s->queue[n++] = s->cand[q]; /* queue is free between mutations */
  if (!n) {
    khop_untry(s);
    for (; n < top; n++) s->queue[n] = s->cand[n];
  }
  int32_t v = s->queue[search_rng_below(r, (uint32_t)n)];
  s->tried[v] = 1;
  return v;
}

/* The common loop; guided ranks the candidates by the guide's scores. */
static int khop_run(search_ctx *c, int guided) {
  khop_state s;
  memset(&s, 0, sizeof s);
  search_rng rng;
  search_rng_seed(&rng, c->o->seed, guided ? 7 : 6);
  double *x = malloc((c->nv + 1) * sizeof *x);
  int rc = x ? khop_init(c, &s) : gopt_error_set(c->err, GOPT_ENOMEM, "search %s: out of memory", c->method);
  if (rc || s.ncand == 0) goto done;
  const int hops = c->o->hops > 0 ? c->o->hops : KHOP_HOPS;
  const double alpha = c->o->alpha > 0 ? c->o->alpha : KHOP_ALPHA;
  size_t top = guided ? (size_t)ceil(alpha / 100.0 * (double)s.ncand) : s.ncand;
  if (top < 1) top = 1;
  if (top > s.ncand) top = s.ncand;
  memcpy(x, c->best_x, c->nv * sizeof *x);
  gopt_env_result cur = c->best, r;
  gopt_env_ws *w = c->ws[0]; /* its last point is the start */
  /* the current point is always the best (only strictly better mutations are kept), so c->best_x
   * holds it; w's last point differs from x in the pending variables (a rejected mutation's) */
  size_t npend = 0;
  int rerank = guided;
  while (!search_done(c)) {
    if (rerank && (rc = khop_rank(c, &s, x))) goto done;
    rerank = 0;
    int32_t root = guided ? khop_pick_untried(&s, &rng, top) : s.cand[search_rng_below(&rng, (uint32_t)top)];
    size_t nch = khop_mutate(c, &s, &rng, root, hops, x), ni = 0;
    for (size_t q = 0; q < nch + npend; q++) { /* changed variables, then the pending ones */
      size_t i = q < nch ? s.changed[q] : s.pend[q - nch];
      if (!s.mark[i]) {
        s.mark[i] = 1;
        s.idx[ni++] = i;
      }
    }
    for (size_t q = 0; q < ni; q++) s.mark[s.idx[q]] = 0;
    if ((rc = search_eval_delta(c, w, x, s.idx, ni, &r))) goto done;
    if (gopt_env_result_better(&r, &cur)) {
      cur = r;
      npend = 0;
      rerank = guided;
      khop_untry(&s);
    } else {
      for (size_t q = 0; q < nch; q++) x[s.changed[q]] = c->best_x[s.changed[q]];
      memcpy(s.pend, s.changed, nch * sizeof *s.pend);
      npend = nch;
    }
  }
done:
  khop_free(&s);
  free(x);
  return rc;
}

int search_khop(search_ctx *c) { return khop_run(c, 0); }
int search_guided(search_ctx *c) { return khop_run(c, 1); }
