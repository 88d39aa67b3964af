/* pass_expand.c: passes that add instructions: the call inliner (a call's computation copied into
 * the caller), the logistic expander (logistic(x) -> 1 / (1 + exp(-x))) and the batch-norm
 * expander (batch-norm-inference and -training as reduces and elementwise ops; batch-norm-grad is
 * kept). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes_internal.h"

/* Copies node sn's attributes of sub-graph s onto node dn of g (computations cloned). */
static int copy_attrs(pctx *p, const gopt_graph *s, int32_t sn, int32_t dn) {
  gopt_graph *g = p->g;
  const gopt_node *nd = &s->nodes.a[sn];
  int rc = 0;
  for (uint16_t i = 0; i < nd->n_attr && !rc; i++) {
    const gopt_attr *a = &s->attrs.a[nd->attr + i];
    const char *k = gopt_graph_str(s, a->name);
    switch (a->kind) {
    case GOPT_ATTR_INT: rc = gopt_node_set_int(g, dn, k, a->v.i); break;
    case GOPT_ATTR_FLOAT: rc = gopt_node_set_float(g, dn, k, a->v.f); break;
    case GOPT_ATTR_STRING: rc = gopt_node_set_string(g, dn, k, gopt_graph_str(s, a->v.s)); break;
    case GOPT_ATTR_INTS: {
      int64_t *v = malloc((a->n + 1) * sizeof *v);
      if (!v) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
      if (a->n) memcpy(v, s->ints.a + a->v.off, a->n * sizeof *v);
      rc = gopt_node_set_ints(g, dn, k, v, a->n);
      free(v);
      break;
    }
    case GOPT_ATTR_GRAPH: {
      gopt_graph *c = gopt_graph_clone(s->subgraphs.a[a->v.graph]);
      if (!c) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
      c->parent = g;
      rc = gopt_node_set_graph(g, dn, k, c);
      if (rc) gopt_graph_free(c);
      break;
    }
    default:
      return gopt_error_set(p->err, GOPT_EUNSUP, "call-inliner: attribute '%s' of kind %d not copied", k, a->kind);
    }
  }
  return rc ? gopt_error_set(p->err, GOPT_ENOMEM, "out of memory") : 0;
}

/* A tensor of g like s's tensor st, named PREFIX.NAME when that is free. */
static int32_t clone_tensor(pctx *p, const gopt_graph *s, int32_t st, const char *prefix) {
  gopt_graph *g = p->g;
  const gopt_tensor *x = &s->tensors.a[st];
  char name[300];
  snprintf(name, sizeof name, "%s.%s", prefix, gopt_graph_str(s, x->name));
  int64_t dims[GOPT_MAX_RANK];
  if (x->rank) memcpy(dims, gopt_tensor_dims(s, st), (size_t)x->rank * sizeof *dims);
  int32_t t = gopt_graph_add_tensor(g, gopt_graph_find_tensor(g, name) >= 0 ? NULL : name, x->dtype,
                                    (x->flags & GOPT_T_NOSHAPE) ? -1 : x->rank, dims, p->err);
  if (t >= 0 && (x->flags & GOPT_T_CONST)) {
    const gopt_const *k = &s->consts.a[x->cdata];
    if (gopt_tensor_set_const(g, t, k->data, k->nbytes, p->err)) return -1;
  }
  return t;
}

static int inline_one(pctx *p, int32_t n, const gopt_graph *s, int32_t *map, int32_t *buf) {
  gopt_graph *g = p->g;
  char prefix[200];
  snprintf(prefix, sizeof prefix, "%s", gopt_node_name(g, n));
  for (size_t i = 0; i < s->inputs.n; i++) map[s->inputs.a[i]] = gopt_node_input(g, n, (int)i);
  for (size_t t = 0; t < s->tensors.n; t++) {
    const gopt_tensor *x = &s->tensors.a[t];
    if ((x->flags & GOPT_T_CONST) && !(x->flags & (GOPT_T_ATTR | GOPT_T_INPUT)) && x->producer < 0 &&
        (map[t] = clone_tensor(p, s, (int32_t)t, prefix)) < 0)
      return p->err->code ? p->err->code : GOPT_ENOMEM;
  }
  int32_t *order = malloc((s->nodes.n + 1) * sizeof *order);
  if (!order) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
  int64_t cnt = gopt_graph_topo(s, order, p->err);
  int rc = cnt < 0 ? (int)cnt : 0;
  for (int64_t k = 0; k < cnt && !rc; k++) {
    int32_t m = order[k];
    const gopt_node *sn = &s->nodes.a[m];
    int32_t *in = buf, *out = buf + sn->n_in;
    for (int i = 0; i < sn->n_in; i++) {
      int32_t t = gopt_node_input(s, m, i);
      in[i] = t >= 0 ? map[t] : -1;
      if (t >= 0 && in[i] < 0) rc = gopt_error_set(p->err, GOPT_EGRAPH, "call-inliner: '%s' reads an undefined tensor", gopt_node_name(s, m));
    }
    for (int i = 0; i < sn->n_out && !rc; i++)
      if ((out[i] = map[gopt_node_output(s, m, i)] = clone_tensor(p, s, gopt_node_output(s, m, i), prefix)) < 0)
        rc = p->err->code ? p->err->code : GOPT_ENOMEM;
    if (rc) break;
    char name[300];
    snprintf(name, sizeof name, "%s.%s", prefix, gopt_node_name(s, m));
    int32_t d = gopt_graph_add_node(g, gopt_node_type(s, m), name, sn->n_in, in, sn->n_out, out, p->err);
    if (d < 0) { rc = p->err->code ? p->err->code : GOPT_EGRAPH; break; }
    rc = copy_attrs(p, s, m, d);
    g->nodes.a[d].op = s->nodes.a[m].op;
    g->nodes.a[d].flags = s->nodes.a[m].flags;
    p->st->added++;
  }
  free(order);
  if (rc) return rc;
  for (size_t i = 0; i < s->outputs.n; i++) buf[i] = map[s->outputs.a[i]];
  pass_replace(p, n, buf);
  return 0;
}

int pass_call_inliner(pctx *p) {
  gopt_graph *g = p->g;
  for (size_t n = 0; n < g->nodes.n; n++) { /* inlined calls of calls are reached as they are added */
    if (!gopt_node_alive(g, (int32_t)n) || !pass_is(g, (int32_t)n, "call")) continue;
    const gopt_attr *a = gopt_node_attr(g, (int32_t)n, "to_apply");
    if (!a || a->kind != GOPT_ATTR_GRAPH) continue;
    gopt_graph *s = gopt_graph_clone(g->subgraphs.a[a->v.graph]); /* g's arrays grow while inlining */
    if (!s) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
    int rc = 0;
    if (s->inputs.n == g->nodes.a[n].n_in && s->outputs.n == g->nodes.a[n].n_out) {
      int32_t *map = malloc((s->tensors.n + 1) * sizeof *map), *buf = malloc(2 * (UINT16_MAX + 1) * sizeof *buf);
      if (!map || !buf) rc = gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
      for (size_t t = 0; map && t < s->tensors.n; t++) map[t] = -1;
      if (!rc) rc = inline_one(p, (int32_t)n, s, map, buf);
      free(map);
      free(buf);
    }
    gopt_graph_free(s);
    if (rc) return rc;
  }
  return 0;
}

int pass_logistic_expander(pctx *p) {
  gopt_graph *g = p->g;
  size_t nn = g->nodes.n;
  for (size_t n = 0; n < nn; n++) {
    if (!gopt_node_alive(g, (int32_t)n) || !pass_is(g, (int32_t)n, "logistic") || g->nodes.a[n].n_in != 1) continue;
    int32_t x = gopt_node_input(g, (int32_t)n, 0), y = gopt_node_output(g, (int32_t)n, 0);
    int dt = g->tensors.a[y].dtype, r = g->tensors.a[y].rank;
    if ((dt != GOPT_DT_FLOAT && dt != GOPT_DT_DOUBLE) || !pass_same_type(g, x, y)) continue;
    int64_t dims[GOPT_MAX_RANK];
    if (r) memcpy(dims, gopt_tensor_dims(g, y), (size_t)r * sizeof *dims);
    int32_t one = pass_splat(p, dt, 1.0, r, dims);
    int32_t neg = one >= 0 ? pass_add_hlo(p, "negate", "negate", 1, &x, dt, r, dims) : -1;
    int32_t ex = neg >= 0 ? pass_add_hlo(p, "exponential", "exponential", 1, &neg, dt, r, dims) : -1;
    int32_t in2[2] = {one, ex};
    int32_t den = ex >= 0 ? pass_add_hlo(p, "add", "add", 2, in2, dt, r, dims) : -1;
    int32_t in3[2] = {one, den};
    int32_t res = den >= 0 ? pass_add_hlo(p, "divide", "divide", 2, in3, dt, r, dims) : -1;
    if (res < 0) return p->err->code ? p->err->code : GOPT_ENOMEM;
    pass_replace(p, (int32_t)n, &res);
  }
  return 0;
}

/* ---- batch-norm expander ------------------------------------------------------------------------ */

/* broadcast of [C] vector v along dimension f to x's shape. */
static int32_t bcast_feature(pctx *p, int32_t v, int32_t x, int64_t f) {
  gopt_graph *g = p->g;
  int64_t dims[GOPT_MAX_RANK];
  int r = g->tensors.a[x].rank;
  memcpy(dims, gopt_tensor_dims(g, x), (size_t)r * sizeof *dims);
  int32_t b = pass_add_hlo(p, "broadcast", "broadcast", 1, &v, g->tensors.a[x].dtype, r, dims);
  if (b >= 0 && gopt_node_set_ints(g, g->tensors.a[b].producer, "dimensions", &f, 1))
    return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory"), -1;
  return b;
}

static int32_t bin(pctx *p, const char *op, int32_t a, int32_t b) {
  gopt_graph *g = p->g;
  int32_t in[2] = {a, b};
  int64_t dims[GOPT_MAX_RANK];
  int r = g->tensors.a[a].rank;
  if (r) memcpy(dims, gopt_tensor_dims(g, a), (size_t)r * sizeof *dims);
  return a < 0 || b < 0 ? -1 : pass_add_hlo(p, op, op, 2, in, g->tensors.a[a].dtype, r, dims);
}

/* A scalar add computation for reduce. */
static gopt_graph *add_computation(pctx *p, int dt) {
  gopt_graph *s = gopt_graph_new("add.gopt");
  if (!s) return NULL;
  int32_t a = gopt_graph_add_tensor(s, "a", dt, 0, NULL, p->err);
  int32_t b = gopt_graph_add_tensor(s, "b", dt, 0, NULL, p->err);
  int32_t c = gopt_graph_add_tensor(s, "sum", dt, 0, NULL, p->err);
  int32_t in[2] = {a, b}, n = -1;
  if (a >= 0 && b >= 0 && c >= 0 && !gopt_graph_add_input(s, a) && !gopt_graph_add_input(s, b))
    n = gopt_graph_add_node(s, "hlo::add", "sum", 2, in, 1, &c, p->err);
  if (n < 0 || gopt_graph_add_output(s, c)) {
    gopt_graph_free(s);
    return NULL;
  }
  s->parent = p->g;
  return s;
}

/* Per-feature sum of x (all dimensions but f) as a reduce with an add computation. */
static int32_t feature_sum(pctx *p, int32_t x, int64_t f, int32_t zero, int64_t c) {
  gopt_graph *g = p->g;
  int r = g->tensors.a[x].rank, dt = g->tensors.a[x].dtype;
  int64_t dims[GOPT_MAX_RANK];
  int k = 0;
  for (int i = 0; i < r; i++)
    if (i != f) dims[k++] = i;
  int32_t in[2] = {x, zero};
  int32_t s = pass_add_hlo(p, "reduce", "reduce", 2, in, dt, 1, &c);
  gopt_graph *sub = s >= 0 ? add_computation(p, dt) : NULL;
  int32_t n = s >= 0 ? g->tensors.a[s].producer : -1;
  if (!sub || gopt_node_set_ints(g, n, "dimensions", dims, (size_t)k) || gopt_node_set_graph(g, n, "to_apply", sub)) {
    gopt_graph_free(sub);
    return p->err->code ? -1 : (gopt_error_set(p->err, GOPT_ENOMEM, "out of memory"), -1);
  }
  return s;
}

/* y = (x - mean) * scale * rsqrt(var + eps) + offset, per feature f. */
static int32_t bn_apply(pctx *p, int32_t x, int32_t scale, int32_t offset, int32_t mean, int32_t var,
                        double eps, int64_t f) {
  gopt_graph *g = p->g;
  int64_t c = gopt_tensor_dims(g, scale)[0];
  int dt = g->tensors.a[x].dtype;
  int32_t e = pass_splat(p, dt, eps, 1, &c);
  int32_t ve = bin(p, "add", var, e);
  int32_t rs = ve >= 0 ? pass_add_hlo(p, "rsqrt", "rsqrt", 1, &ve, dt, 1, &c) : -1;
  int32_t k = bin(p, "multiply", scale, rs);
  int32_t bk = k >= 0 ? bcast_feature(p, k, x, f) : -1;
  int32_t bm = bk >= 0 ? bcast_feature(p, mean, x, f) : -1;
  int32_t xc = bin(p, "subtract", x, bm);
  int32_t xs = bin(p, "multiply", xc, bk);
  int32_t bo = xs >= 0 ? bcast_feature(p, offset, x, f) : -1;
  return bin(p, "add", xs, bo);
}

int pass_batchnorm_expander(pctx *p) {
  gopt_graph *g = p->g;
  size_t nn = g->nodes.n;
  for (size_t n = 0; n < nn; n++) {
    if (!gopt_node_alive(g, (int32_t)n)) continue;
    int inf = pass_is(g, (int32_t)n, "batch-norm-inference"), tr = pass_is(g, (int32_t)n, "batch-norm-training");
    const gopt_node *nd = &g->nodes.a[n];
    if (!(inf && nd->n_in == 5 && nd->n_out == 1) && !(tr && nd->n_in == 3 && nd->n_out == 3)) continue;
    int32_t x = gopt_node_input(g, (int32_t)n, 0), scale = gopt_node_input(g, (int32_t)n, 1);
    int32_t offset = gopt_node_input(g, (int32_t)n, 2);
    int dt = g->tensors.a[x].dtype;
    int64_t f = gopt_node_get_int(g, (int32_t)n, "feature_index", -1);
    double eps = gopt_node_get_float(g, (int32_t)n, "epsilon", 1e-3);
    if ((dt != GOPT_DT_FLOAT && dt != GOPT_DT_DOUBLE) || f < 0 || f >= g->tensors.a[x].rank ||
        !gopt_tensor_is_static(g, x) || g->tensors.a[scale].rank != 1)
      continue;
    int64_t c = gopt_tensor_dims(g, x)[f];
    int32_t to[3];
    if (inf) {
      to[0] = bn_apply(p, x, scale, offset, gopt_node_input(g, (int32_t)n, 3), gopt_node_input(g, (int32_t)n, 4), eps, f);
    } else {
      double cnt = (double)gopt_tensor_numel(g, x) / (double)(c ? c : 1);
      int32_t zero = pass_splat(p, dt, 0.0, 0, NULL);
      int32_t sum = zero >= 0 ? feature_sum(p, x, f, zero, c) : -1;
      int32_t sq = bin(p, "multiply", x, x);
      int32_t sumsq = sq >= 0 ? feature_sum(p, sq, f, zero, c) : -1;
      int32_t inv = sumsq >= 0 ? pass_splat(p, dt, 1.0 / (cnt > 0 ? cnt : 1), 1, &c) : -1;
      int32_t mean = bin(p, "multiply", sum, inv), msq = bin(p, "multiply", sumsq, inv);
      int32_t var = msq >= 0 ? bin(p, "subtract", msq, bin(p, "multiply", mean, mean)) : -1;
      to[0] = var >= 0 ? bn_apply(p, x, scale, offset, mean, var, eps, f) : -1;
      to[1] = mean;
      to[2] = var;
    }
    if (to[0] < 0) return p->err->code ? p->err->code : GOPT_ENOMEM;
    pass_replace(p, (int32_t)n, to);
  }
  /* the get-tuple-elements of the expanded results now read plain values: fold them */
  return pass_tuple_simplifier(p);
}
