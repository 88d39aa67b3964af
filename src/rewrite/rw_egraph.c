/* rw_egraph.c: the e-graph of the eqsat rewrite method (see rw_egraph.h): seeding from an IR
 * graph, union-find, hash-consing, importing rewritten IR fragments, rebuilding (congruence
 * closure) and Tensat's cycle filtering. */
#include <stdlib.h>
#include <string.h>

#include "gopt/ops.h"
#include "rewrite/rw_egraph.h"

int32_t rw_eg_find(const rw_egraph *e, int32_t c) {
  if (c < 0) return -1;
  while (e->parent[c] != c) c = e->parent[c];
  return c;
}

int32_t rw_eg_tclass(const rw_egraph *e, int32_t t) {
  return t < 0 || (size_t)t >= e->tcap ? -1 : rw_eg_find(e, e->tcls[t]);
}

static int grow(void **p, size_t *cap, size_t need, size_t es, int fill) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap : 256;
  while (nc < need) nc *= 2;
  unsigned char *q = realloc(*p, nc * es);
  if (!q) return -1;
  memset(q + *cap * es, fill, (nc - *cap) * es);
  *p = q;
  *cap = nc;
  return 0;
}

/* Makes per-tensor and per-node arrays cover S. */
static int eg_fit(rw_egraph *e) {
  size_t tc = e->tcap, tc2 = e->tcap, nc = e->ncap, nc2 = e->ncap;
  if (grow((void **)&e->tcls, &tc, e->s->tensors.n, sizeof(int32_t), 0xff) ||
      grow((void **)&e->tapp, &tc2, e->s->tensors.n, sizeof(int32_t), 0xff))
    return -1;
  e->tcap = tc < tc2 ? tc : tc2;
  size_t lc = e->lcap, lc2 = e->lcap;
  if (grow((void **)&e->tlazy, &lc, e->s->tensors.n, sizeof(int32_t), 0xff) ||
      grow((void **)&e->tlazy_h, &lc2, e->s->tensors.n, sizeof(int32_t), 0xff))
    return -1;
  e->lcap = lc < lc2 ? lc : lc2;
  if (grow((void **)&e->state, &nc, e->s->nodes.n, 1, 0)) return -1;
  if (grow((void **)&e->napp, &nc2, e->s->nodes.n, sizeof(int32_t), 0xff)) return -1;
  e->ncap = nc < nc2 ? nc : nc2;
  return 0;
}

static int32_t eg_new_class(rw_egraph *e, int32_t t) {
  size_t c1 = e->ccap, c2 = e->ccap, c3 = e->ccap;
  if (grow((void **)&e->parent, &c1, e->nc + 1, sizeof(int32_t), 0) ||
      grow((void **)&e->crep, &c2, e->nc + 1, sizeof(int32_t), 0) ||
      grow((void **)&e->cleaf, &c3, e->nc + 1, sizeof(int32_t), 0))
    return -1;
  e->ccap = c1;
  int32_t c = (int32_t)e->nc++;
  e->parent[c] = c;
  e->crep[c] = t;
  const gopt_tensor *x = &e->s->tensors.a[t];
  e->cleaf[c] = x->producer < 0 ? t : -1;
  e->tcls[t] = c;
  return c;
}

int rw_eg_union(rw_egraph *e, int32_t a, int32_t b) {
  a = rw_eg_find(e, a);
  b = rw_eg_find(e, b);
  if (a == b || a < 0 || b < 0) return 0;
  if (b < a) {
    int32_t t = a;
    a = b;
    b = t;
  }
  e->parent[b] = a;
  e->unions++;
  /* a constant leaf is preferred (rules constrain variables to constants) */
  int32_t lb = e->cleaf[b];
  if (lb >= 0 && (e->cleaf[a] < 0 || ((e->s->tensors.a[lb].flags & GOPT_T_CONST) &&
                                      !(e->s->tensors.a[e->cleaf[a]].flags & GOPT_T_CONST))))
    e->cleaf[a] = lb;
  return 1;
}

/* ---- hash-consing ---------------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

static uint64_t attr_hash(const gopt_graph *g, int32_t n) {
  const gopt_node *nd = &g->nodes.a[n];
  uint64_t h = nd->n_attr;
  for (uint32_t i = 0; i < nd->n_attr; i++) {
    const gopt_attr *a = &g->attrs.a[nd->attr + i];
    uint64_t v = a->kind == GOPT_ATTR_INT ? (uint64_t)a->v.i : a->kind == GOPT_ATTR_STRING ? a->v.s : a->n;
    h += mix(a->name * 31u + a->kind, v); /* order-independent */
  }
  return h;
}

static const gopt_attr *attr_named(const gopt_graph *g, int32_t n, uint32_t name) {
  const gopt_node *nd = &g->nodes.a[n];
  for (uint32_t i = 0; i < nd->n_attr; i++)
    if (g->attrs.a[nd->attr + i].name == name) return &g->attrs.a[nd->attr + i];
  return NULL;
}

static int attrs_equal(const gopt_graph *g, int32_t x, int32_t y) {
  const gopt_node *nx = &g->nodes.a[x];
  if (nx->n_attr != g->nodes.a[y].n_attr) return 0;
  for (uint32_t i = 0; i < nx->n_attr; i++) {
    const gopt_attr *a = &g->attrs.a[nx->attr + i], *b = attr_named(g, y, a->name);
    if (!b || a->kind != b->kind || a->n != b->n) return 0;
    switch (a->kind) {
      case GOPT_ATTR_INT: if (a->v.i != b->v.i) return 0; break;
      case GOPT_ATTR_FLOAT: if (a->v.f != b->v.f) return 0; break;
      case GOPT_ATTR_STRING: if (a->v.s != b->v.s) return 0; break;
      case GOPT_ATTR_INTS:
        if (a->n && memcmp(g->ints.a + a->v.off, g->ints.a + b->v.off, a->n * sizeof(int64_t))) return 0;
        break;
      case GOPT_ATTR_FLOATS:
        if (a->n && memcmp(g->floats.a + a->v.off, g->floats.a + b->v.off, a->n * sizeof(float))) return 0;
        break;
      case GOPT_ATTR_STRINGS:
        if (a->n && memcmp(g->strids.a + a->v.off, g->strids.a + b->v.off, a->n * sizeof(uint32_t))) return 0;
        break;
      default: return 0; /* tensors and sub-graphs: never merged */
    }
  }
  return 1;
}

static uint64_t node_key(const rw_egraph *e, int32_t n) {
  const gopt_node *nd = &e->s->nodes.a[n];
  uint64_t h = mix(nd->type, ((uint64_t)nd->n_in << 16) | nd->n_out);
  for (int k = 0; k < nd->n_in; k++) h = mix(h, (uint64_t)(int64_t)rw_eg_tclass(e, gopt_node_input(e->s, n, k)));
  return mix(h, attr_hash(e->s, n)) | 1;
}

static int node_equal(const rw_egraph *e, int32_t x, int32_t y) {
  const gopt_node *a = &e->s->nodes.a[x], *b = &e->s->nodes.a[y];
  if (a->type != b->type || a->n_in != b->n_in || a->n_out != b->n_out) return 0;
  for (int k = 0; k < a->n_in; k++)
    if (rw_eg_tclass(e, gopt_node_input(e->s, x, k)) != rw_eg_tclass(e, gopt_node_input(e->s, y, k)))
      return 0;
  return attrs_equal(e->s, x, y);
}

/* Looks n up; inserts it when absent. Returns the canonical node (n itself when new) or -2. */
static int32_t ht_intern(rw_egraph *e, int32_t n) {
  if ((e->live + 1) * 2 > e->htcap) {
    size_t nc = e->htcap ? e->htcap * 2 : 1024;
    int32_t *na = malloc(nc * sizeof *na);
    if (!na) return -2;
    memset(na, 0xff, nc * sizeof *na);
    for (size_t i = 0; i < e->htcap; i++)
      if (e->ht[i] >= 0) {
        size_t j = node_key(e, e->ht[i]) & (nc - 1);
        while (na[j] >= 0) j = (j + 1) & (nc - 1);
        na[j] = e->ht[i];
      }
    free(e->ht);
    e->ht = na;
    e->htcap = nc;
  }
  size_t j = node_key(e, n) & (e->htcap - 1);
  while (e->ht[j] >= 0) {
    if (e->ht[j] != n && node_equal(e, e->ht[j], n)) return e->ht[j];
    j = (j + 1) & (e->htcap - 1);
  }
  e->ht[j] = n;
  return n;
}

/* Hash-conses S node n (its inputs have classes): a duplicate's outputs join the existing
 * e-node's classes, a new e-node's outputs get new classes. Returns 1 new, 0 duplicate, <0. */
static int eg_add_node(rw_egraph *e, int32_t n, int32_t app) {
  if (eg_fit(e)) return -1;
  e->napp[n] = app;
  int32_t c = ht_intern(e, n);
  if (c == -2) return -1;
  const gopt_node *nd = &e->s->nodes.a[n];
  for (int k = 0; k < nd->n_out; k++) {
    int32_t t = gopt_node_output(e->s, n, k);
    if (c != n) {
      int32_t ct = rw_eg_tclass(e, gopt_node_output(e->s, c, k));
      if (e->tcls[t] < 0) e->tcls[t] = ct;
      else if (rw_eg_union(e, e->tcls[t], ct) < 0) return -1;
    } else if (e->tcls[t] < 0 && eg_new_class(e, t) < 0) {
      return -1;
    }
  }
  e->state[n] = c == n ? EG_LIVE : EG_DUP;
  if (c == n) e->live++;
  return c == n;
}

/* ---- seeding, import ------------------------------------------------------------------------- */

static int eg_leaves(rw_egraph *e) {
  if (eg_fit(e)) return -1;
  for (size_t t = 0; t < e->s->tensors.n; t++)
    if (e->tcls[t] < 0 && e->s->tensors.a[t].producer < 0 && eg_new_class(e, (int32_t)t) < 0) return -1;
  return 0;
}

int rw_eg_init(rw_egraph *e, const gopt_graph *g, gopt_error *err) {
  memset(e, 0, sizeof *e);
  int32_t *order = NULL;
  int rc = GOPT_ENOMEM;
  e->src = g;
  e->n_src_t = g->tensors.n;
  if (!(e->s = gopt_graph_clone_lean(g, RW_EG_LEAN)) || eg_leaves(e)) goto fail;
  e->n_orig = e->s->nodes.n;
  if (!(order = malloc((g->nodes.n + 1) * sizeof *order))) goto fail;
  int64_t n = gopt_graph_topo(e->s, order, err);
  if (n < 0) {
    rc = (int)n;
    goto fail_err;
  }
  for (int64_t i = 0; i < n; i++)
    if (eg_add_node(e, order[i], -1) < 0) goto fail;
  if (!(e->roots = malloc((g->outputs.n + 1) * sizeof *e->roots))) goto fail;
  for (size_t i = 0; i < g->outputs.n; i++) e->roots[e->n_roots++] = rw_eg_tclass(e, g->outputs.a[i]);
  free(order);
  return rw_eg_rebuild(e, err) < 0 ? GOPT_ENOMEM : 0;
fail:
  gopt_error_set(err, GOPT_ENOMEM, "out of memory");
fail_err:
  free(order);
  rw_eg_clear(e);
  return rc;
}

void rw_eg_clear(rw_egraph *e) {
  if (!e) return;
  gopt_graph_free(e->s);
  free(e->tcls);
  free(e->tapp);
  free(e->parent);
  free(e->crep);
  free(e->cleaf);
  free(e->state);
  free(e->napp);
  free(e->ht);
  free(e->mstart);
  free(e->mnode);
  free(e->mk);
  free(e->roots);
  for (size_t i = 0; i < e->n_lazy; i++) {
    gopt_graph_free(e->lazy[i].l);
    free(e->lazy[i].in_l);
  }
  free(e->lazy);
  free(e->tlazy);
  free(e->tlazy_h);
  memset(e, 0, sizeof *e);
}

/* A copy of h's tensor t in S (shape, dtype, constant bytes). A graph input of h that the caller
 * did not map to an S tensor is refused: in S it would be a tensor nothing produces. */
static int32_t import_tensor(rw_egraph *e, const gopt_graph *h, int32_t t, int32_t app, gopt_error *err) {
  const gopt_tensor *x = &h->tensors.a[t];
  if (x->producer < 0 && !(x->flags & GOPT_T_CONST)) {
    gopt_error_set(err, GOPT_EGRAPH, "rewritten fragment's input '%s' stands for no e-graph tensor",
                   gopt_graph_str(h, x->name));
    return -1;
  }
  int32_t s = gopt_graph_add_tensor(e->s, NULL, x->dtype, x->flags & GOPT_T_NOSHAPE ? -1 : x->rank,
                                    gopt_tensor_dims(h, t), err);
  if (s < 0) return -1;
  if (eg_fit(e)) {
    gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    return -1;
  }
  e->tapp[s] = app;
  if (!(x->flags & GOPT_T_CONST)) return s;
  const gopt_const *cd = &h->consts.a[x->cdata];
  if (gopt_tensor_set_const(e->s, s, cd->data, cd->nbytes, err)) return -1; /* small, or lazy (no bytes) */
  e->s->consts.a[e->s->tensors.a[s].cdata].nbytes = cd->nbytes;
  e->s->tensors.a[s].flags |= x->flags & (GOPT_T_INIT | GOPT_T_PARAM);
  return s;
}

int rw_eg_import(rw_egraph *e, const gopt_graph *h, const int32_t *map_h, const int32_t *map_t, int n_map,
                 const int32_t *out_cls, int n_out, int32_t app, int32_t *out_t, int32_t *tm_out,
                 gopt_error *err) {
  int32_t *tm = tm_out ? tm_out : malloc((h->tensors.n + 1) * sizeof *tm);
  int32_t *order = malloc((h->nodes.n + 1) * sizeof *order);
  int rc = 0, made = 0;
  if (!tm || !order) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (size_t t = 0; t < h->tensors.n; t++) tm[t] = -1;
  for (int i = 0; i < n_map; i++)
    if (map_h[i] >= 0 && (size_t)map_h[i] < h->tensors.n) tm[map_h[i]] = map_t[i];
  for (size_t i = 0; i < h->inputs.n; i++) /* checked before anything is imported */
    if (!(h->tensors.a[h->inputs.a[i]].flags & GOPT_T_CONST) && tm[h->inputs.a[i]] < 0) {
      rc = gopt_error_set(err, GOPT_EGRAPH, "rewritten fragment's input '%s' stands for no e-graph tensor",
                          gopt_graph_str(h, h->tensors.a[h->inputs.a[i]].name));
      goto done;
    }
  int64_t n = gopt_graph_topo(h, order, err);
  if (n < 0) {
    rc = (int)n;
    goto done;
  }
  for (int64_t i = 0; i < n && !rc; i++) {
    int32_t hn = order[i], in[RW_MAX_IN * 4], out[RW_MAX_OUT * 2];
    const gopt_node *nd = &h->nodes.a[hn];
    if (nd->n_in > RW_MAX_IN * 4 || nd->n_out > RW_MAX_OUT * 2) {
      rc = gopt_error_set(err, GOPT_EUNSUP, "node '%s' has too many inputs", gopt_node_name(h, hn));
      break;
    }
    for (int k = 0; k < nd->n_in; k++) {
      int32_t t = gopt_node_input(h, hn, k);
      if (t >= 0 && tm[t] < 0 && (tm[t] = import_tensor(e, h, t, app, err)) < 0) rc = err->code;
      in[k] = t < 0 ? -1 : tm[t];
    }
    for (int k = 0; k < nd->n_out && !rc; k++)
      if ((out[k] = tm[gopt_node_output(h, hn, k)] = import_tensor(e, h, gopt_node_output(h, hn, k), app, err)) < 0)
        rc = err->code;
    if (rc) break;
    char name[48];
    snprintf(name, sizeof name, "eq__%u", e->s->n_unnamed++);
    int32_t sn = gopt_graph_add_node(e->s, gopt_node_type(h, hn), name, nd->n_in, in, nd->n_out, out, err);
    if (sn < 0 || (rc = rw_copy_attrs(h, hn, e->s, sn))) {
      rc = rc ? gopt_error_set(err, rc, "cannot copy the attributes of '%s'", gopt_node_name(h, hn)) : err->code;
      break;
    }
    int r = eg_leaves(e) ? -1 : eg_add_node(e, sn, app); /* new constants are leaves */
    if (r < 0) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    made += r > 0;
  }
  if (!rc && eg_leaves(e)) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int i = 0; i < n_out && !rc; i++) {
    /* by position: rw_replace swapped names when an output became one of h's inputs */
    int32_t t = (size_t)i < h->outputs.n ? h->outputs.a[i] : -1;
    /* an output folded into a constant is read by no imported node: a new leaf */
    if (t >= 0 && tm[t] < 0 && (tm[t] = import_tensor(e, h, t, app, err)) >= 0 && eg_leaves(e)) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      break;
    }
    if (t < 0 || tm[t] < 0) {
      rc = gopt_error_set(err, GOPT_EINVAL, "rewritten fragment lost output %d", i);
      break;
    }
    if (rw_eg_union(e, rw_eg_tclass(e, tm[t]), out_cls[i]) < 0) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    if (i == 0 && out_t) *out_t = tm[t];
  }
done:
  if (tm != tm_out) free(tm);
  free(order);
  return rc ? (rc < 0 ? rc : -rc) : made;
}

/* ---- rebuild, cycle filtering ---------------------------------------------------------------- */

static int eg_members(rw_egraph *e) {
  free(e->mstart);
  free(e->mnode);
  free(e->mk);
  size_t total = 0;
  for (size_t n = 0; n < e->s->nodes.n; n++)
    if (n < e->ncap && e->state[n] == EG_LIVE) total += e->s->nodes.a[n].n_out;
  e->mstart = calloc(e->nc + 2, sizeof *e->mstart);
  e->mnode = malloc((total + 1) * sizeof *e->mnode);
  e->mk = malloc(total + 1);
  if (!e->mstart || !e->mnode || !e->mk) return -1;
  for (int pass = 0; pass < 2; pass++) {
    int32_t *fill = pass ? calloc(e->nc + 1, sizeof *fill) : NULL;
    if (pass && !fill) return -1;
    for (size_t n = 0; n < e->s->nodes.n && n < e->ncap; n++) {
      if (e->state[n] != EG_LIVE) continue;
      for (int k = 0; k < e->s->nodes.a[n].n_out; k++) {
        int32_t c = rw_eg_tclass(e, gopt_node_output(e->s, (int32_t)n, k));
        if (!pass) {
          e->mstart[c + 1]++;
        } else {
          int32_t at = e->mstart[c] + fill[c]++;
          e->mnode[at] = (int32_t)n;
          e->mk[at] = (uint8_t)k;
        }
      }
    }
    if (!pass)
      for (size_t c = 0; c < e->nc; c++) e->mstart[c + 1] += e->mstart[c];
    free(fill);
  }
  return 0;
}

int rw_eg_rebuild(rw_egraph *e, gopt_error *err) {
  int merges = 0;
  for (;;) {
    int pass = 0;
    memset(e->ht, 0xff, e->htcap * sizeof *e->ht);
    e->live = 0;
    for (size_t n = 0; n < e->s->nodes.n && n < e->ncap; n++) {
      if (e->state[n] != EG_LIVE) continue;
      int32_t c = ht_intern(e, (int32_t)n);
      if (c == -2) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      if (c == (int32_t)n) {
        e->live++;
        continue;
      }
      e->state[n] = EG_DUP;
      for (int k = 0; k < e->s->nodes.a[n].n_out; k++)
        pass += rw_eg_union(e, rw_eg_tclass(e, gopt_node_output(e->s, (int32_t)n, k)),
                            rw_eg_tclass(e, gopt_node_output(e->s, c, k)));
    }
    merges += pass;
    if (!pass) break;
  }
  if (eg_members(e)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  return merges;
}

void rw_eg_wire_constants(rw_egraph *e) {
  for (size_t n = 0; n < e->s->nodes.n && n < e->ncap; n++) {
    if (e->state[n] != EG_LIVE) continue;
    for (int k = 0; k < e->s->nodes.a[n].n_in; k++) {
      int32_t t = gopt_node_input(e->s, (int32_t)n, k), c = rw_eg_tclass(e, t);
      int32_t leaf = c >= 0 ? e->cleaf[c] : -1;
      if (leaf >= 0 && leaf != t && (e->s->tensors.a[leaf].flags & GOPT_T_CONST) &&
          e->s->tensors.a[t].producer >= 0)
        gopt_node_set_input(e->s, (int32_t)n, k, leaf);
    }
  }
}

/* DFS state of the cycle filter: the classes on the stack and, for each, the e-node through which
 * the DFS entered it. */
typedef struct filt {
  rw_egraph *e;
  uint8_t *color;       /* per class: 0 unvisited, 1 on the stack, 2 done */
  int32_t *pos;         /* per class on the stack: its depth */
  int32_t *via;         /* per depth: the e-node whose child class is the class at that depth */
  int prefer_new;       /* filter an e-node a rewrite made rather than one of the input graph */
} filt;

static int is_new(const rw_egraph *e, int32_t n) { return (size_t)n >= e->n_orig; }

static void filter_node(rw_egraph *e, int32_t n, size_t *nf) {
  if (e->state[n] != EG_LIVE) return;
  e->state[n] = EG_FILTERED;
  e->filtered++;
  ++*nf;
}

/* A live Split a rewrite made on the cycle closed by e-node n (n, or the e-nodes via[from..to]
 * on the stack), else n. Such a Split gives the pieces of a merged op (a conv or MatMul merge):
 * it closes a cycle when the Concat of those pieces is in the merged op's class (concat_of_split),
 * and filtering the Split keeps both ways of computing the merged op's class (the merged op, or
 * the unmerged ops and their Concat, which the extraction needs where the merge does not pay);
 * filtering the Concat left only the merge (SqueezeNet's and Inception-v3's sunk Relus). */
static int32_t cycle_split(const filt *f, int32_t n, int32_t from, int32_t to) {
  const rw_egraph *e = f->e;
  if (is_new(e, n) && e->s->nodes.a[n].op == GOPT_OP_SPLIT) return n;
  for (int32_t j = from; j <= to; j++) {
    int32_t v = f->via[j];
    if (is_new(e, v) && e->state[v] == EG_LIVE && e->s->nodes.a[v].op == GOPT_OP_SPLIT) return v;
  }
  return n;
}

/* Visits class c at depth d. A child class on the stack closes a cycle: a Split a rewrite made
 * on the cycle is filtered when prefer_new (cycle_split); else the e-node reading it is,
 * unless prefer_new and it is one of the input graph's while an e-node a rewrite made
 * lies on the stack between that class and c: then the lowest such one is (the cycle then runs
 * through the new e-node, as when a merge reads a result of one of the merged ops; the input
 * graph's own e-nodes stay, so its extraction stays possible). */
static void filter_visit(filt *f, int32_t c, int32_t d, size_t *nf) {
  rw_egraph *e = f->e;
  f->color[c] = 1;
  f->pos[c] = d;
  for (int32_t i = e->mstart[c]; i < e->mstart[c + 1]; i++) {
    int32_t n = e->mnode[i];
    for (int k = 0; e->state[n] == EG_LIVE && k < e->s->nodes.a[n].n_in; k++) {
      int32_t cc = rw_eg_tclass(e, gopt_node_input(e->s, n, k));
      if (cc < 0) continue;
      if (f->color[cc] == 1) {
        int32_t victim = f->prefer_new ? cycle_split(f, n, f->pos[cc] + 1, d) : n;
        for (int32_t j = f->pos[cc] + 1; f->prefer_new && victim == n && !is_new(e, n) && j <= d; j++)
          if (is_new(e, f->via[j]) && e->state[f->via[j]] == EG_LIVE) {
            victim = f->via[j];
            break;
          }
        filter_node(e, victim, nf);
      } else if (!f->color[cc]) {
        f->via[d + 1] = n;
        filter_visit(f, cc, d + 1, nf);
      }
    }
  }
  f->color[c] = 2;
}

size_t rw_eg_filter_cycles(rw_egraph *e) {
  filt f = {e, calloc(e->nc + 1, 1), malloc((e->nc + 1) * sizeof(int32_t)),
            malloc((e->nc + 2) * sizeof(int32_t)), 1};
  size_t nf = 0;
  /* Passes preferring new e-nodes run until one filters nothing: that DFS found no cycle, so
   * what is left is acyclic. A filtered e-node on the stack need not lie on the cycle it was
   * chosen for, and filtering changes later DFS paths, so one pass is not enough. A last plain
   * pass (filter the e-node that closes a cycle: back edges removed, acyclic in one pass) is the
   * backstop when they do not settle. */
  for (int pass = 0; pass < 65 && f.color && f.pos && f.via; pass++) {
    size_t before = nf;
    f.prefer_new = pass < 64;
    memset(f.color, 0, e->nc + 1);
    for (size_t i = 0; i < e->n_roots; i++) {
      int32_t r = rw_eg_find(e, e->roots[i]);
      if (!f.color[r]) filter_visit(&f, r, 0, &nf);
    }
    if (nf == before) break;
  }
  free(f.color);
  free(f.pos);
  free(f.via);
  return nf;
}
