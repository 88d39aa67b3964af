/* rewrite_exec.c: the rewriting module's uses of the executor: constant folding (one-node graphs
 * run by the executor), random weights for structure-only models, output comparison of two
 * graphs, and the numerical verification of pattern rules. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/exec.h"
#include "gopt/ops.h"
#include "gopt/util.h"
#include "rewrite/rewrite_internal.h"
#include "util/util_internal.h"

/* ---- constant folding ------------------------------------------------------------------------ */

int rw_copy_attrs(const gopt_graph *g, int32_t n, gopt_graph *m, int32_t mn) {
  const gopt_node *nd = &g->nodes.a[n];
  for (uint32_t i = 0; i < nd->n_attr; i++) {
    const gopt_attr *a = &g->attrs.a[nd->attr + i];
    const char *name = gopt_graph_str(g, a->name);
    int rc = 0;
    switch (a->kind) {
      case GOPT_ATTR_INT: rc = gopt_node_set_int(m, mn, name, a->v.i); break;
      case GOPT_ATTR_FLOAT: rc = gopt_node_set_float(m, mn, name, a->v.f); break;
      case GOPT_ATTR_STRING: rc = gopt_node_set_string(m, mn, name, gopt_graph_str(g, a->v.s)); break;
      case GOPT_ATTR_INTS: rc = gopt_node_set_ints(m, mn, name, g->ints.a + a->v.off, a->n); break;
      case GOPT_ATTR_FLOATS: rc = gopt_node_set_floats(m, mn, name, g->floats.a + a->v.off, a->n); break;
      default: return GOPT_EUNSUP;
    }
    if (rc) return rc;
  }
  return 0;
}

static int foldable_op(int op) {
  int c = gopt_op_class_of(op);
  return c == GOPT_OPC_ELEMWISE || c == GOPT_OPC_BROADCAST || c == GOPT_OPC_INJECTIVE ||
         c == GOPT_OPC_SHAPE;
}

/* Computes node n's outputs (all inputs constants with data) with the executor into g. The
 * one-node graph borrows g's input bytes (the executor reads constants in place; they are
 * detached before it is freed) and g adopts the outputs' buffers: a fold of a large weight
 * copies it only where the executor returns its output. */
static int fold_run(gopt_graph *g, int32_t n, gopt_error *err) {
  const gopt_node *nd = &g->nodes.a[n];
  gopt_graph *m = gopt_graph_new("fold");
  gopt_exec *x = NULL;
  int rc = GOPT_ENOMEM, n_lent = 0;
  int32_t in[RW_MAX_IN * 4], out[RW_MAX_OUT * 2];
  if (!m || nd->n_in > (int)(sizeof in / sizeof in[0]) || nd->n_out > (int)(sizeof out / sizeof out[0]))
    goto done;
  gopt_graph_set_opset(m, "", gopt_graph_opset(g, "", 13));
  for (int k = 0; k < nd->n_in; k++) {
    int32_t t = gopt_node_input(g, n, k);
    in[k] = -1;
    if (t < 0) continue;
    const gopt_tensor *tt = &g->tensors.a[t];
    in[k] = gopt_graph_add_tensor(m, NULL, tt->dtype, tt->rank, gopt_tensor_dims(g, t), err);
    if (in[k] < 0 || gopt_tensor_set_const(m, in[k], NULL, g->consts.a[tt->cdata].nbytes, err)) goto done;
    m->consts.a[m->tensors.a[in[k]].cdata].data = (void *)gopt_tensor_data(g, t); /* lent */
    n_lent = k + 1;
  }
  for (int k = 0; k < nd->n_out; k++)
    if ((out[k] = gopt_graph_add_tensor(m, NULL, GOPT_DT_FLOAT, -1, NULL, err)) < 0) goto done;
  int32_t mn = gopt_graph_add_node(m, gopt_node_type(g, n), "f", nd->n_in, in, nd->n_out, out, err);
  if (mn < 0 || (rc = rw_copy_attrs(g, n, m, mn))) goto done;
  for (int k = 0; k < nd->n_out; k++) gopt_graph_add_output(m, out[k]);
  gopt_infer_opts io = {0, 0};
  if ((rc = gopt_infer_shapes(m, &io, err))) goto done;
  if ((rc = gopt_exec_new(m, NULL, &x, NULL, err)) || (rc = gopt_exec_run(x, err))) goto done;
  int32_t outs[RW_MAX_OUT * 2];
  for (int k = 0; k < nd->n_out; k++) outs[k] = gopt_node_output(g, n, k);
  gopt_graph_remove_node(g, n);
  for (int k = 0; k < nd->n_out; k++) {
    gopt_host_tensor h = {0};
    if ((rc = gopt_exec_get_output(x, (size_t)k, &h, err))) goto done;
    rc = gopt_tensor_adopt_const(g, outs[k], h.data, h.nbytes, err);
    h.data = NULL; /* g's now (or freed on failure) */
    gopt_host_tensor_clear(&h);
    if (rc) goto done;
    g->tensors.a[outs[k]].flags |= GOPT_T_INIT;
  }
  rc = 0;
done:
  gopt_exec_free(x);
  for (int k = 0; k < n_lent; k++) /* the lent bytes stay g's */
    if (in[k] >= 0 && m->tensors.a[in[k]].cdata >= 0) m->consts.a[m->tensors.a[in[k]].cdata].data = NULL;
  gopt_graph_free(m);
  return rc;
}

int rw_foldable(const gopt_graph *g, int32_t n) {
  if (!gopt_node_alive(g, n) || !foldable_op(g->nodes.a[n].op) || g->nodes.a[n].n_out > RW_MAX_OUT * 2)
    return 0;
  for (int k = 0; k < g->nodes.a[n].n_in; k++) {
    int32_t t = gopt_node_input(g, n, k);
    if (t >= 0 && !(g->tensors.a[t].flags & GOPT_T_CONST)) return 0;
  }
  return 1;
}

int rw_fold_node(gopt_graph *g, int32_t n, size_t *nodata, gopt_error *err) {
  int missing = 0;
  for (int k = 0; k < g->nodes.a[n].n_in; k++) {
    int32_t t = gopt_node_input(g, n, k);
    if (t >= 0 && !gopt_tensor_data(g, t)) missing = 1;
  }
  if (!missing) return fold_run(g, n, err);
  int nout = g->nodes.a[n].n_out;
  int32_t outs[RW_MAX_OUT * 2];
  for (int k = 0; k < nout; k++) outs[k] = gopt_node_output(g, n, k);
  gopt_graph_remove_node(g, n);
  for (int k = 0; k < nout; k++) {
    size_t nb = (size_t)gopt_tensor_numel(g, outs[k]) * gopt_dtype_size(g->tensors.a[outs[k]].dtype);
    int rc = gopt_tensor_set_const(g, outs[k], NULL, nb, err);
    if (rc) return rc;
    g->consts.a[g->tensors.a[outs[k]].cdata].nbytes = nb;
    g->tensors.a[outs[k]].flags |= GOPT_T_INIT;
  }
  if (nodata) (*nodata)++;
  return 0;
}

int rw_fold(gopt_graph *g, size_t first, size_t *nodata, gopt_error *err) {
  int folded = 0;
  /* new nodes of a rule are created in dataflow order, so one pass in id order folds chains */
  for (size_t i = first; i < g->nodes.n; i++) {
    if (!rw_foldable(g, (int32_t)i)) continue;
    int rc = rw_fold_node(g, (int32_t)i, nodata, err);
    if (rc) return rc;
    folded++;
  }
  return folded;
}

int gopt_rewrite_fold_constants(gopt_graph *g, size_t *nodata, gopt_error *err) {
  if (nodata) *nodata = 0;
  int total = 0, k;
  /* repeat until nothing changes (storage order need not be dataflow order) */
  while ((k = rw_fold(g, 0, nodata, err)) > 0) total += k;
  if (k < 0) return k;
  rw_dce(g);
  return total;
}

/* ---- random weights -------------------------------------------------------------------------- */

static int positive_input(const gopt_graph *g, int32_t t) {
  for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
    int32_t n = g->slots.a[s].node;
    int i = s - (int32_t)g->nodes.a[n].in;
    if (g->nodes.a[n].op == GOPT_OP_BATCH_NORM && (i == 1 || i == 4)) return 1;
    if (g->nodes.a[n].op == GOPT_OP_LAYER_NORM && i == 1) return 1;
  }
  return 0;
}

int64_t gopt_rewrite_materialize(gopt_graph *g, uint64_t seed, gopt_error *err) {
  int64_t count = 0;
  for (size_t t = 0; t < g->tensors.n; t++) {
    gopt_tensor *x = &g->tensors.a[t];
    if (!(x->flags & GOPT_T_CONST) || gopt_tensor_data(g, (int32_t)t)) continue;
    if (x->dtype == GOPT_DT_BOOL) { /* masks: random bits (both graphs get the same ones) */
      int64_t n = gopt_tensor_numel(g, (int32_t)t);
      uint8_t *b;
      if (GOPT_ALLOC(b, n)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      const char *name = gopt_graph_str(g, x->name);
      uint64_t s = gopt_hash_bytes(name, strlen(name), seed ^ 0x6d61736bULL);
      for (int64_t i = 0; i < n; i++) b[i] = (uint8_t)(gopt_splitmix64(&s) & 1);
      int rc = gopt_tensor_set_const(g, (int32_t)t, b, (size_t)n, err);
      free(b);
      if (rc) return rc;
      count++;
      continue;
    }
    if (x->dtype != GOPT_DT_FLOAT)
      return gopt_error_set(err, GOPT_EUNSUP, "constant '%s' (%s) has no data: cannot make up values",
                            gopt_graph_str(g, x->name), gopt_dtype_name(x->dtype));
    int64_t n = gopt_tensor_numel(g, (int32_t)t);
    float *f;
    if (GOPT_ALLOC(f, n)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    const char *name = gopt_graph_str(g, x->name);
    uint64_t s = gopt_hash_bytes(name, strlen(name), seed ^ 0x72770000ULL);
    int pos = positive_input(g, (int32_t)t);
    double fan = x->rank >= 2 && gopt_tensor_dims(g, (int32_t)t)[0] > 0
                     ? (double)n / (double)gopt_tensor_dims(g, (int32_t)t)[0] : 10.0;
    double hi = pos ? 1.5 : sqrt(3.0 / fan), lo = pos ? 0.5 : -hi;
    for (int64_t i = 0; i < n; i++)
      f[i] = (float)(lo + (hi - lo) * (double)(gopt_splitmix64(&s) >> 11) * (1.0 / 9007199254740992.0));
    int rc = gopt_tensor_set_const(g, (int32_t)t, f, (size_t)n * sizeof(float), err);
    free(f);
    if (rc) return rc;
    count++;
  }
  return count;
}

/* ---- output comparison ----------------------------------------------------------------------- */

int gopt_rewrite_compare(const gopt_graph *a, const gopt_graph *b, uint64_t seed, double rtol,
                         double atol, double *max_diff, gopt_error *err) {
  gopt_exec *xa = NULL, *xb = NULL;
  gopt_exec_opts eo = {1, seed, NULL, 0, NULL, 0};
  int rc;
  double worst = 0;
  if (max_diff) *max_diff = 0;
  /* a graph that reads a tensor nothing produces would make the executor read a missing buffer */
  if ((rc = gopt_graph_validate(a, err))) {
    gopt_error_prefix(err, "first graph: ");
    goto done;
  }
  if ((rc = gopt_graph_validate(b, err))) {
    gopt_error_prefix(err, "second graph: ");
    goto done;
  }
  if ((rc = gopt_exec_new(a, &eo, &xa, NULL, err))) goto done;
  if ((rc = gopt_exec_new(b, &eo, &xb, NULL, err))) goto done;
  if (gopt_exec_n_outputs(xa) != gopt_exec_n_outputs(xb) || gopt_exec_n_inputs(xa) != gopt_exec_n_inputs(xb)) {
    rc = gopt_error_set(err, GOPT_EINVAL, "the graphs have different numbers of inputs or outputs");
    goto done;
  }
  if ((rc = gopt_exec_random_inputs(xa, seed, err)) || (rc = gopt_exec_random_inputs(xb, seed, err)))
    goto done;
  if ((rc = gopt_exec_run(xa, err)) || (rc = gopt_exec_run(xb, err))) goto done;
  for (size_t i = 0; i < gopt_exec_n_outputs(xa) && !rc; i++) {
    gopt_host_tensor ta = {0}, tb = {0};
    if ((rc = gopt_exec_get_output(xa, i, &ta, err)) || (rc = gopt_exec_get_output(xb, i, &tb, err))) {
      gopt_host_tensor_clear(&ta);
      gopt_host_tensor_clear(&tb);
      break;
    }
    const char *name = gopt_graph_str(a, a->tensors.a[gopt_exec_output_tensor(xa, i)].name);
    if (ta.nbytes != tb.nbytes || ta.dtype != tb.dtype) {
      rc = gopt_error_set(err, GOPT_EINVAL, "output %zu ('%s'): shapes or dtypes differ", i, name);
    } else if (ta.dtype == GOPT_DT_FLOAT) {
      const float *p = ta.data, *q = tb.data;
      int64_t n = gopt_host_tensor_numel(&ta);
      double scale = 0;
      for (int64_t j = 0; j < n; j++) scale = fmax(scale, fabs(p[j]));
      for (int64_t j = 0; j < n && !rc; j++) {
        double d = fabs((double)p[j] - (double)q[j]);
        if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
        /* relative to the element and to the output's scale (sums reassociate) */
        if (!(d <= atol + rtol * fmax(fabs(p[j]), 0.01 * scale)))
          rc = gopt_error_set(err, GOPT_EINVAL,
                              "output %zu ('%s') differs at element %lld: %.6g vs %.6g", i, name,
                              (long long)j, (double)p[j], (double)q[j]);
      }
    } else if (memcmp(ta.data, tb.data, ta.nbytes)) {
      rc = gopt_error_set(err, GOPT_EINVAL, "output %zu ('%s') differs", i, name);
    }
    gopt_host_tensor_clear(&ta);
    gopt_host_tensor_clear(&tb);
  }
  if (max_diff) *max_diff = worst;
done:
  gopt_exec_free(xa);
  gopt_exec_free(xb);
  return rc;
}

/* ---- numerical verification of pattern rules ------------------------------------------------- */

/* Builds one side of rule r as a graph whose variable v has rank rank[v] and dims dims[v]; a
 * constant variable with an entry in `values` (NULL: none) gets those int64 values. */
static int side_graph_dims(const rw_rule *r, const rw_pattern *p, const int *rank,
                           int64_t (*dims)[GOPT_MAX_RANK], json_t *values, gopt_graph **out,
                           gopt_error *err) {
  gopt_graph *g = gopt_graph_new("rule");
  int32_t vars[RW_MAX_VARS], outs[RW_MAX_OUT];
  int rc = GOPT_ENOMEM;
  if (!g) goto fail;
  gopt_graph_set_opset(g, "", 17);
  for (int v = 0; v < r->n_vars; v++) {
    char key[16];
    snprintf(key, sizeof key, "x%d", v);
    json_t *vals = r->var_const[v] && values ? json_object_get(values, key) : NULL;
    if ((vars[v] = rw_rule_var_tensor_dims(g, r, v, rank[v], dims[v], vals, err)) < 0) {
      rc = err && err->code ? err->code : GOPT_EINVAL;
      goto fail;
    }
  }
  if ((rc = rw_pattern_build(g, p, vars, outs, err))) goto fail;
  for (int k = 0; k < p->n_out; k++) gopt_graph_add_output(g, outs[k]);
  gopt_infer_opts io = {0, 0};
  if ((rc = gopt_infer_shapes(g, &io, err))) goto fail;
  *out = g;
  return 0;
fail:
  gopt_graph_free(g);
  return rc;
}

/* Builds one side of rule r on the shapes in `shape` (scaled by mul; a constant's listed int64
 * values and their shape are not scaled) as a graph. */
static int side_graph(const rw_rule *r, const rw_pattern *p, json_t *shape, int mul, gopt_graph **out,
                      gopt_error *err) {
  int rank[RW_MAX_VARS];
  int64_t dims[RW_MAX_VARS][GOPT_MAX_RANK];
  json_t *values = json_object_get(shape, "values");
  for (int v = 0; v < r->n_vars; v++) {
    char key[16];
    snprintf(key, sizeof key, "x%d", v);
    json_t *d = json_object_get(shape, key);
    rank[v] = (int)json_array_size(d);
    if (!json_is_array(d) || rank[v] > GOPT_MAX_RANK)
      return gopt_error_set(err, GOPT_EINVAL, "rule '%s': test shape lacks %s", r->name, key);
    int m = r->var_const[v] && values && json_object_get(values, key) ? 1 : mul;
    for (int k = 0; k < rank[v]; k++) dims[v][k] = json_integer_value(json_array_get(d, (size_t)k)) * m;
  }
  return side_graph_dims(r, p, rank, dims, values, out, err);
}

/* ---- rule instances -------------------------------------------------------------------------- */

void rw_icache_free(rw_icache *c) {
  if (!c) return;
  free(c->key);
  free(c->ok);
  free(c);
}

static int has_split(const rw_pattern *p) {
  for (int i = 0; i < p->n_ops; i++)
    if (p->ops[i].op == GOPT_OP_SPLIT) return 1;
  return 0;
}

/* *at: the cache slot of key (found or empty); -1 when the table cannot grow. */
static int icache_slot(rw_icache *c, uint64_t key, size_t *at) {
  if ((c->n + 1) * 2 > c->cap) {
    size_t nc = c->cap ? c->cap * 2 : 256;
    uint64_t *nk = calloc(nc, sizeof *nk);
    uint8_t *no = calloc(nc, 1);
    if (!nk || !no) {
      free(nk);
      free(no);
      return -1;
    }
    for (size_t i = 0; i < c->cap; i++)
      if (c->key[i]) {
        size_t j = c->key[i] & (nc - 1);
        while (nk[j]) j = (j + 1) & (nc - 1);
        nk[j] = c->key[i];
        no[j] = c->ok[i];
      }
    free(c->key);
    free(c->ok);
    c->key = nk;
    c->ok = no;
    c->cap = nc;
  }
  size_t j = key & (c->cap - 1);
  while (c->key[j] && c->key[j] != key) j = (j + 1) & (c->cap - 1);
  *at = j;
  return 0;
}

/* The dims of an instance shrunk for a cheap run: values up to 8 (kernels, small counts) stay,
 * larger distinct values map in increasing order to small ones of the same parity, so equal dims
 * stay equal, unequal ones unequal and halves stay whole. */
static void shrink_dims(const rw_rule *r, const int *rank, int64_t (*dims)[GOPT_MAX_RANK],
                        int64_t (*out)[GOPT_MAX_RANK]) {
  int64_t vals[RW_MAX_VARS * GOPT_MAX_RANK];
  int nv = 0;
  for (int v = 0; v < r->n_vars; v++)
    for (int k = 0; k < rank[v]; k++) {
      int dup = 0;
      for (int j = 0; j < nv && !dup; j++) dup = vals[j] == dims[v][k];
      if (!dup && dims[v][k] > 8) vals[nv++] = dims[v][k];
    }
  for (int a = 1; a < nv; a++) /* insertion sort: a handful of values */
    for (int b = a; b > 0 && vals[b - 1] > vals[b]; b--) {
      int64_t t = vals[b];
      vals[b] = vals[b - 1];
      vals[b - 1] = t;
    }
  int64_t map[RW_MAX_VARS * GOPT_MAX_RANK], prev = 8;
  for (int j = 0; j < nv; j++) {
    map[j] = prev + 1 + ((prev + 1 - vals[j]) & 1);
    prev = map[j];
  }
  for (int v = 0; v < r->n_vars; v++)
    for (int k = 0; k < rank[v]; k++) {
      out[v][k] = dims[v][k];
      for (int j = 0; j < nv; j++)
        if (vals[j] == dims[v][k]) out[v][k] = map[j];
    }
}

/* Runs both sides of rule r at the given variable shapes (shrunk when large and the shrunk
 * shapes build) on random values; 0 when they agree. */
static int instance_run(const rw_rule *r, size_t i, const int *rank, int64_t (*dims)[GOPT_MAX_RANK],
                        gopt_error *err) {
  int64_t small[RW_MAX_VARS][GOPT_MAX_RANK], total = 0;
  for (int v = 0; v < r->n_vars; v++) {
    int64_t e = 1;
    for (int k = 0; k < rank[v]; k++) e *= dims[v][k];
    total += e;
  }
  int rc = GOPT_EINVAL;
  for (int pass = total > 65536 ? 0 : 1; pass < 2 && rc; pass++) {
    gopt_graph *a = NULL, *b = NULL;
    if (!pass) shrink_dims(r, rank, dims, small);
    rc = side_graph_dims(r, &r->src, rank, pass ? dims : small, NULL, &a, err);
    if (!rc) rc = side_graph_dims(r, &r->dst, rank, pass ? dims : small, NULL, &b, err);
    int built = !rc;
    if (!rc) rc = gopt_rewrite_compare(a, b, 0x5eedULL + i, 1e-4, 1e-5, NULL, err);
    gopt_graph_free(a);
    gopt_graph_free(b);
    if (built || rc == GOPT_ENOMEM) break; /* the shrunk shapes decide when they build */
  }
  return rc;
}

int rw_instance_ok(const gopt_ruleset *rs, size_t i, const gopt_graph *h, const int32_t *vars,
                   char *why, size_t n) {
  const rw_rule *r = &rs->r[i];
  if (r->builtin >= 0 || (!has_split(&r->src) && !has_split(&r->dst))) return 1;
  /* a constant with listed int64 values (a Reshape target) is the matched graph's own constant,
   * which this check does not rebuild: shape inference and the output verification decide */
  json_t *values = json_object_get(json_array_get(r->shapes, 0), "values");
  for (int v = 0; v < r->n_vars; v++) {
    char key[16];
    snprintf(key, sizeof key, "x%d", v);
    if (r->var_const[v] && values && json_object_get(values, key)) return 1;
  }
  int rank[RW_MAX_VARS];
  int64_t dims[RW_MAX_VARS][GOPT_MAX_RANK];
  uint64_t key = 0x9e3779b97f4a7c15ULL ^ (uint64_t)i;
  for (int v = 0; v < r->n_vars; v++) {
    rank[v] = h->tensors.a[vars[v]].rank;
    if (h->tensors.a[vars[v]].flags & GOPT_T_NOSHAPE) return 1; /* shape inference decides */
    memcpy(dims[v], gopt_tensor_dims(h, vars[v]), (size_t)rank[v] * sizeof(int64_t));
    key = gopt_hash_bytes(&rank[v], sizeof rank[v], key);
    key = gopt_hash_bytes(dims[v], (size_t)rank[v] * sizeof(int64_t), key);
  }
  key |= 1;
  /* the cache lives in the (const) set: a memo of a pure function of the rule and the shapes */
  gopt_ruleset *mrs = (gopt_ruleset *)rs;
  if (!mrs->icache && !(mrs->icache = calloc(1, sizeof *mrs->icache))) return GOPT_ENOMEM;
  size_t at;
  if (icache_slot(mrs->icache, key, &at)) return GOPT_ENOMEM;
  rw_icache *c = mrs->icache;
  if (c->key[at] == key) {
    if (!c->ok[at]) snprintf(why, n, "rule '%s' does not hold at the match's shapes", r->name);
    return c->ok[at];
  }
  gopt_error e2 = {0};
  int rc = instance_run(r, i, rank, dims, &e2);
  if (rc == GOPT_ENOMEM) return rc;
  c->key[at] = key;
  c->ok[at] = rc == 0;
  c->n++;
  if (rc) snprintf(why, n, "rule '%s' does not hold at the match's shapes: %.160s", r->name, e2.msg);
  return rc == 0;
}

/* Pattern p has a Conv (whose kernel_shape does not scale with its weights). */
static int has_conv(const rw_pattern *p) {
  for (int i = 0; i < p->n_ops; i++)
    if (p->ops[i].op == GOPT_OP_CONV) return 1;
  return 0;
}

int gopt_rule_verify(const gopt_ruleset *rs, size_t i, uint64_t seed, gopt_error *err) {
  const rw_rule *r = &rs->r[i];
  if (r->builtin >= 0) return 0;
  size_t ns = json_array_size(r->shapes);
  if (ns == 0) return gopt_error_set(err, GOPT_EINVAL, "rule '%s': no test shapes", r->name);
  int muls = has_conv(&r->src) || has_conv(&r->dst) ? 1 : 2; /* conv rules: the listed shapes only */
  for (size_t s = 0; s < ns; s++)
    for (int mul = 1; mul <= muls; mul++) {
      gopt_graph *a = NULL, *b = NULL;
      gopt_error e2 = {0};
      int rc = side_graph(r, &r->src, json_array_get(r->shapes, s), mul, &a, &e2);
      if (!rc) rc = side_graph(r, &r->dst, json_array_get(r->shapes, s), mul, &b, &e2);
      if (rc && mul == 2) { /* a shape that does not scale: only the listed one counts */
        gopt_graph_free(a);
        gopt_graph_free(b);
        continue;
      }
      for (int t = 0; t < 3 && !rc; t++)
        rc = gopt_rewrite_compare(a, b, seed + (uint64_t)t * 7919 + s, 1e-4, 1e-5, NULL, &e2);
      gopt_graph_free(a);
      gopt_graph_free(b);
      if (rc)
        return gopt_error_set(err, GOPT_EINVAL, "rule '%s' fails on test shape %zu (x%d): %s",
                              r->name, s, mul, e2.msg);
    }
  return 0;
}

int gopt_ruleset_verify(gopt_ruleset *rs, uint64_t seed, gopt_error *err) {
  (void)err;
  int dropped = 0;
  for (size_t i = 0; i < rs->n; i++) {
    rw_rule *r = &rs->r[i];
    if (!r->enabled || r->builtin >= 0) continue;
    gopt_error e2 = {0};
    if (gopt_rule_verify(rs, i, seed, &e2)) {
      r->enabled = 0;
      snprintf(r->reason, sizeof r->reason, "numeric verification failed: %.200s", e2.msg);
      dropped++;
    }
  }
  return dropped;
}
