/* rw_lazy.c: the weights of the eqsat e-graph (see rw_egraph.h): S holds no bytes of the input's
 * large constants (they are read from the input graph) and none of the weights that rewrites
 * derive from them ("lazily folded" constants: folded Transposes, concatenated or scaled
 * weights). Each such constant keeps the application's source fragment as its recipe; the
 * extracted graph's constants get their bytes here, copied once from where they are, or
 * computed by running their recipes again with the weights they need. */
#include <stdlib.h>
#include <string.h>

#include "gopt/util.h"
#include "rewrite/rw_egraph.h"

const void *rw_eg_data(const rw_egraph *e, int32_t t) {
  const void *d = gopt_tensor_data(e->s, t);
  if (!d && (size_t)t < e->n_src_t && e->src && (e->src->tensors.a[t].flags & GOPT_T_CONST))
    d = gopt_tensor_data(e->src, t);
  return d;
}

int rw_eg_add_lazy(rw_egraph *e, const gopt_ruleset *rs, gopt_graph *l, const gopt_rewrite_match *m,
                   const int32_t *in_l, const int32_t *in_s, int n_in, const gopt_graph *h, const int32_t *tm,
                   size_t first_t, gopt_error *err) {
  if (e->n_lazy == e->cap_lazy) {
    size_t nc = e->cap_lazy ? e->cap_lazy * 2 : 64;
    rw_lazy *q = realloc(e->lazy, nc * sizeof *q);
    if (!q) goto oom;
    e->lazy = q;
    e->cap_lazy = nc;
  }
  rw_lazy *z = &e->lazy[e->n_lazy];
  memset(z, 0, sizeof *z);
  if (!(z->in_l = malloc(2 * (size_t)n_in * sizeof *z->in_l + 1))) goto oom;
  z->in_s = z->in_l + n_in;
  memcpy(z->in_l, in_l, (size_t)n_in * sizeof *in_l);
  memcpy(z->in_s, in_s, (size_t)n_in * sizeof *in_s);
  z->n_in = n_in;
  z->l = l;
  z->m = *m;
  e->rs = rs;
  int any = 0;
  for (size_t t = 0; t < h->tensors.n; t++) {
    int32_t st = tm[t];
    if (st < 0 || (size_t)st < first_t || (size_t)st >= e->lcap || !(e->s->tensors.a[st].flags & GOPT_T_CONST) ||
        gopt_tensor_data(e->s, st))
      continue;
    e->tlazy[st] = (int32_t)e->n_lazy;
    e->tlazy_h[st] = (int32_t)t;
    any = 1;
  }
  if (!any) { /* nothing derived from what was left out: no recipe */
    free(z->in_l);
    gopt_graph_free(l);
    return 0;
  }
  e->n_lazy++;
  return 0;
oom:
  gopt_graph_free(l);
  return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
}

/* ---- materialization ------------------------------------------------------------------------- */

typedef struct lz_ctx {
  const rw_egraph *e;
  gopt_graph *g;        /* the graph being filled (bytes already moved there) */
  gopt_graph **res;     /* per recipe: its fragment rewritten with the weights (NULL: not yet) */
  uint8_t *state;       /* per recipe: 0 not run, 1 running, 2 done */
} lz_ctx;

static int lz_run(lz_ctx *z, int32_t r, gopt_error *err);

/* The bytes of S tensor t, running t's recipe when t is lazily folded (*rc set on failure); NULL
 * when it has none. */
static const void *lz_data(lz_ctx *z, int32_t t, int *rc, gopt_error *err) {
  const rw_egraph *e = z->e;
  const void *d = rw_eg_data(e, t);
  if (d || (size_t)t >= e->lcap || e->tlazy[t] < 0) return d;
  if ((*rc = lz_run(z, e->tlazy[t], err))) return NULL;
  d = gopt_tensor_data(z->res[e->tlazy[t]], e->tlazy_h[t]);
  return d || (size_t)t >= z->g->tensors.n ? d : gopt_tensor_data(z->g, t); /* moved to g already */
}

/* Runs recipe r: its fragment's left-out constants are lent their bytes (the rewrite works on a
 * copy; one without bytes anywhere stays so), and the rewrite is applied again. */
static int lz_run(lz_ctx *z, int32_t r, gopt_error *err) {
  const rw_egraph *e = z->e;
  const rw_lazy *q = &e->lazy[r];
  if (z->state[r] == 2) return z->res[r] ? 0 : GOPT_EGRAPH;
  if (z->state[r] == 1) return gopt_error_set(err, GOPT_EGRAPH, "lazily folded constants form a cycle");
  z->state[r] = 1;
  int rc = 0, lent = 0;
  for (; lent < q->n_in && !rc; lent++)
    q->l->consts.a[q->l->tensors.a[q->in_l[lent]].cdata].data = (void *)lz_data(z, q->in_s[lent], &rc, err);
  int flags = 0;
  if (!rc) rc = gopt_rewrite_apply(q->l, e->rs, &q->m, &z->res[r], &flags, err);
  for (int i = 0; i < lent; i++) q->l->consts.a[q->l->tensors.a[q->in_l[i]].cdata].data = NULL;
  if (rc) gopt_error_prefix(err, "rule '%s' run again with the weights: ",
                            gopt_ruleset_rule_name(e->rs, (size_t)q->m.rule));
  z->state[r] = 2;
  return rc;
}

/* Moves the bytes of lazily folded S tensor t (its recipe run) into g's tensor t. */
static int lz_move(lz_ctx *z, gopt_graph *g, int32_t t, gopt_error *err) {
  const rw_egraph *e = z->e;
  int32_t r = e->tlazy[t], ht = e->tlazy_h[t];
  if (lz_run(z, r, err)) return err->code ? err->code : GOPT_EGRAPH;
  gopt_graph *h = z->res[r];
  const gopt_tensor *a = &e->s->tensors.a[t], *b = ht < (int32_t)h->tensors.n ? &h->tensors.a[ht] : NULL;
  if (!b || !(b->flags & GOPT_T_CONST) || b->dtype != a->dtype || b->rank != a->rank ||
      h->consts.a[b->cdata].nbytes != e->s->consts.a[a->cdata].nbytes ||
      memcmp(gopt_tensor_dims(h, ht), gopt_tensor_dims(e->s, t), a->rank * sizeof(int64_t)))
    return gopt_error_set(err, GOPT_EGRAPH, "rule '%s': its rewrite run again with the weights did not give "
                          "the lazily folded constant", gopt_ruleset_rule_name(e->rs, (size_t)e->lazy[r].m.rule));
  gopt_const *k = &h->consts.a[b->cdata];
  void *d = k->data;
  if (!d) return 0; /* computed from weights without bytes: none either */
  k->data = NULL;   /* g's now */
  return gopt_tensor_adopt_const(g, t, d, k->nbytes, err);
}

static int is_output(const gopt_graph *g, int32_t t) {
  for (size_t i = 0; i < g->outputs.n; i++)
    if (g->outputs.a[i] == t) return 1;
  return 0;
}

int rw_eg_fill_data(const rw_egraph *e, gopt_graph *g, gopt_error *err) {
  lz_ctx z = {e, g, calloc(e->n_lazy + 1, sizeof *z.res), calloc(e->n_lazy + 1, 1)};
  int rc = z.res && z.state ? 0 : gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  size_t n = g->tensors.n < e->s->tensors.n ? g->tensors.n : e->s->tensors.n;
  for (size_t t = 0; t < n && !rc; t++) {
    const gopt_tensor *x = &g->tensors.a[t];
    if (!(x->flags & GOPT_T_CONST) || gopt_tensor_data(g, (int32_t)t) ||
        (!gopt_tensor_use_count(g, (int32_t)t) && !is_output(g, (int32_t)t)))
      continue;
    const void *d = rw_eg_data(e, (int32_t)t);
    if (d) rc = gopt_tensor_set_const(g, (int32_t)t, d, e->s->consts.a[e->s->tensors.a[t].cdata].nbytes, err);
    else if (t < e->lcap && e->tlazy[t] >= 0) rc = lz_move(&z, g, (int32_t)t, err);
  }
  for (size_t r = 0; z.res && r < e->n_lazy; r++) gopt_graph_free(z.res[r]);
  free(z.res);
  free(z.state);
  return rc;
}
